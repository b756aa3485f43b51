package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/refundd/refundd/client"
	"github.com/refundd/refundd/internal/webhook"
)

// consume runs a consumer until it has handled n events (then cancels its
// context) and returns them.
func consume(t *testing.T, c *client.Client, cur client.CursorStore, types []string, n int) []client.Event {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := errors.New("enough")
	stop := time.AfterFunc(20*time.Second, func() { cancel(errors.New("timed out")) })
	defer stop.Stop()
	var got []client.Event
	err := (&client.Consumer{Client: c, Cursor: cur, Types: types, Wait: 2 * time.Second,
		Handle: func(_ context.Context, ev client.Event) error {
			got = append(got, ev)
			if len(got) == n {
				cancel(done)
			}
			return nil
		}}).Run(ctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(context.Cause(ctx), done) {
		t.Fatalf("consumer stopped with %v (%v) after %d events, want %d", err, context.Cause(ctx), len(got), n)
	}
	return got
}

// A consumer resumes from its stored cursor: what it handled is not
// handled again, and it long-polls for what comes next.
func TestConsumer_ResumesFromTheStoredCursor(t *testing.T) {
	r := newRefundd(t, refunddOptions{})
	ctx := context.Background()
	svc := newClient(t, r.URL, serviceToken)
	cur := client.FileCursor{Path: filepath.Join(t.TempDir(), "cursor")}
	types := []string{client.EventRefundSucceeded}
	register(t, svc, "c1", 1000)
	for i := range 2 {
		if _, err := svc.RequestRefund(ctx, "c1", client.RefundRequest{UserID: "u-c1", Amount: amount(100), Wait: 2 * time.Second,
			IdempotencyKey: "c1-" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	first := consume(t, svc, cur, types, 2)
	stored, err := cur.Load(ctx)
	if err != nil || stored != strconv.FormatUint(first[1].Global, 10) {
		t.Fatalf("stored cursor %q (%v), want the second event's %d", stored, err, first[1].Global)
	}
	// The next refund lands while the consumer is long-polling.
	go func() {
		_, _ = svc.RequestRefund(context.Background(), "c1", client.RefundRequest{UserID: "u-c1", Amount: amount(100), IdempotencyKey: "c1-2"})
	}()
	next := consume(t, svc, cur, types, 1)
	if next[0].ID == first[0].ID || next[0].ID == first[1].ID || next[0].Global <= first[1].Global || next[0].Type != client.EventRefundSucceeded {
		t.Fatalf("after resuming: %+v, want the third refund's success (first two %s %s)", next[0], first[0].ID, first[1].ID)
	}
}

// A cursor the journal never gave out is an operator's decision, not a
// retry.
func TestConsumer_StopsOnACursorBeyondTheJournal(t *testing.T) {
	r := newRefundd(t, refunddOptions{})
	cur := &client.MemoryCursor{}
	if err := cur.Save(context.Background(), "999999"); err != nil {
		t.Fatal(err)
	}
	err := (&client.Consumer{Client: newClient(t, r.URL, readerToken), Cursor: cur,
		Handle: func(context.Context, client.Event) error { return nil }}).Run(context.Background())
	if client.ErrorCode(err) != client.CodeInvalid {
		t.Fatalf("Run = %v, want invalid_argument", err)
	}
}

// Deliveries of the real dispatcher verify, and a tampered or stale one
// does not.
func TestWebhook_VerifiesRefunddsDeliveries(t *testing.T) {
	secret := []byte("whsec_0123456789abcdef")
	got := make(chan *client.Event, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := client.ReadWebhook(r, secret, 0)
		if err != nil {
			t.Errorf("delivery refused: %v", err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		got <- ev
	}))
	defer recv.Close()
	r := newRefundd(t, refunddOptions{webhookURL: recv.URL, webhookSecret: secret})
	svc := newClient(t, r.URL, serviceToken)
	register(t, svc, "w1", 1000)
	rf, err := svc.RequestRefund(context.Background(), "w1", client.RefundRequest{UserID: "u-w1", Amount: amount(250)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{client.EventRefundRequested, client.EventRefundSucceeded} {
		select {
		case ev := <-got:
			if ev.Type != want || ev.RefundNo != rf.RefundNo || ev.Amount != 250 {
				t.Fatalf("delivery %+v, want %s of %s", ev, want, rf.RefundNo)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s delivery", want)
		}
	}
	eps, err := newClient(t, r.URL, operatorToken).Webhooks(context.Background())
	if err != nil || len(eps) != 1 || eps[0].Name != "orders" {
		t.Fatalf("webhooks: %+v %v", eps, err)
	}
	if parked, err := newClient(t, r.URL, operatorToken).ParkedEvents(context.Background(), "orders"); err != nil || len(parked) != 0 {
		t.Fatalf("parked: %+v %v", parked, err)
	}
	if n, err := newClient(t, r.URL, operatorToken).ReplayAllParked(context.Background(), "orders"); err != nil || n != 0 {
		t.Fatalf("replay all: %d %v", n, err)
	}
}

func TestVerifyWebhook(t *testing.T) {
	secret := []byte("whsec_0123456789abcdef")
	other := []byte("whsec_fedcba9876543210")
	body := []byte(`{"id":"evt_00000000000000000001","type":"refund.succeeded"}`)
	sent := time.Unix(1767225600, 0)
	sig := webhook.Sign(secret, sent.Unix(), body) // refundd's own signer
	header := func(ts, sig string) http.Header {
		return http.Header{client.HeaderTimestamp: {ts}, client.HeaderSignature: {sig}}
	}
	tests := []struct {
		name string
		h    http.Header
		body []byte
		now  time.Time
		want error
	}{
		{"valid", header("1767225600", sig), body, sent.Add(time.Second), nil},
		{"rotating secrets", header("1767225600", webhook.Sign(other, sent.Unix(), body)+", "+sig), body, sent, nil},
		{"tampered body", header("1767225600", sig), []byte(`{"id":"evt_00000000000000000001","type":"refund.failed"}`), sent, client.ErrBadSignature},
		{"other secret", header("1767225600", webhook.Sign(other, sent.Unix(), body)), body, sent, client.ErrBadSignature},
		{"other timestamp", header("1767225601", sig), body, sent, client.ErrBadSignature},
		{"no v1", header("1767225600", "v0=abc"), body, sent, client.ErrBadSignature},
		{"stale", header("1767225600", sig), body, sent.Add(6 * time.Minute), client.ErrBadTimestamp},
		{"from the future", header("1767225600", sig), body, sent.Add(-6 * time.Minute), client.ErrBadTimestamp},
		{"no timestamp", header("", sig), body, sent, client.ErrBadTimestamp},
		{"signed timestamp", header("+1767225600", sig), body, sent, client.ErrBadTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := client.VerifyWebhook(secret, tt.h, tt.body, 0, tt.now)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("VerifyWebhook = %v, want %v", err, tt.want)
			}
		})
	}
}
