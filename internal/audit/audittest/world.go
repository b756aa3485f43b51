// Package audittest builds journals with the real engine for the audit
// tests: reservations and refunds made through actors.Engine, journaled by
// eventstore, submitted with the WeChat Pay client to an in-process
// sandbox, with switches that make the books of the two sides disagree the
// ways reconciliation must notice.
package audittest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
	"github.com/refundd/refundd/journal"
)

// Options configures New.
type Options struct {
	// Path is the journal file; empty means refundd.db in t.TempDir().
	Path string
	// Prefix is the refund-number prefix; empty means "T".
	Prefix string
	// Now is the engine's clock; nil means time.Now. The sandbox always
	// runs on real time (its bills are dated by it).
	Now func() time.Time
	// Journal are extra journal options (NoSync is always set).
	Journal journal.Options
	// Sandbox, if set, is reused instead of starting a new one (a
	// restored service talks to the same WeChat Pay).
	Sandbox *Sandbox
}

// Sandbox is an in-process WeChat Pay sandbox and a merchant client for it.
type Sandbox struct {
	Server *sandbox.Server
	HTTP   *httptest.Server
	Keys   sandbox.Keys
	Client *wechatpay.Client
}

// NewSandbox starts a sandbox that lives until the test ends.
func NewSandbox(t testing.TB) *Sandbox {
	t.Helper()
	keys, err := sandbox.GenerateKeys("1900000109")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(keys.Config())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sb)
	t.Cleanup(func() { srv.Close(); sb.Close() })
	v, err := keys.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	client, err := wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: srv.URL, MchID: keys.MchID, Signer: keys.Signer(), Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	return &Sandbox{Server: sb, HTTP: srv, Keys: keys, Client: client}
}

// World is the engine on a journal, talking to a sandbox.
type World struct {
	t       testing.TB
	Path    string
	DB      *journal.DB
	Engine  *actors.Engine
	Sandbox *Sandbox
	p       *provider
	closed  bool
}

// New opens the journal and starts the engine. Close it (or let the test
// end) before reading the file with another DB.
func New(t testing.TB, opts Options) *World {
	t.Helper()
	if opts.Path == "" {
		opts.Path = filepath.Join(t.TempDir(), "refundd.db")
	}
	if opts.Prefix == "" {
		opts.Prefix = "T"
	}
	if opts.Sandbox == nil {
		opts.Sandbox = NewSandbox(t)
	}
	jo := opts.Journal
	jo.NoSync = true
	db, err := journal.Open(opts.Path, &jo)
	if err != nil {
		t.Fatal(err)
	}
	w := &World{t: t, Path: opts.Path, DB: db, Sandbox: opts.Sandbox,
		p: &provider{Client: opts.Sandbox.Client, lie: map[string]bool{}, shave: map[string]int64{}}}
	w.Engine, err = actors.New(actors.Config{
		Store: eventstore.New(db), Provider: w.p, Encode: w.p.RequestBody, Now: opts.Now,
		Policy: reservation.Policy{RefundNoPrefix: opts.Prefix, RecheckAfter: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// Close stops the engine and closes the journal. It is idempotent.
func (w *World) Close() {
	if w.closed {
		return
	}
	w.closed = true
	if err := w.Engine.Close(context.Background()); err != nil {
		w.t.Errorf("audittest: engine close: %v", err)
	}
	if err := w.DB.Close(); err != nil {
		w.t.Errorf("audittest: journal close: %v", err)
	}
}

// Register registers a paid reservation with order ORD-id, in the journal
// and at the sandbox.
func (w *World) Register(id string, amount int64) {
	w.t.Helper()
	_, _, err := w.Engine.Execute(context.Background(), id, "booking", reservation.Register{ReservationID: id, UserID: "u-" + id,
		OutTradeNo: "ORD-" + id, Amount: amount, Currency: "CNY"})
	if err != nil {
		w.t.Fatalf("audittest: register %s: %v", id, err)
	}
	if err := w.Sandbox.Server.CreateOrder("ORD-"+id, "", amount); err != nil {
		w.t.Fatalf("audittest: sandbox order %s: %v", id, err)
	}
}

// Refund requests a refund and waits for its first submission's answer.
// It returns the refund number.
func (w *World) Refund(id string, amount int64) string {
	w.t.Helper()
	ctx := context.Background()
	st, err := w.Engine.Get(ctx, id)
	if err != nil {
		w.t.Fatalf("audittest: refund %s: %v", id, err)
	}
	st, _, err = w.Engine.Execute(ctx, id, "api", reservation.RequestRefund{UserID: "u-" + id,
		IdempotencyKey: id + "-" + strconv.Itoa(len(st.Refunds)+1), Amount: &amount})
	if err != nil {
		w.t.Fatalf("audittest: refund %s: %v", id, err)
	}
	no := st.Refunds[len(st.Refunds)-1].No
	// The first answer gives the refund WeChat Pay's id, or another state.
	w.await(id, func(r *reservation.Refund) bool { return r.ProviderID != "" || r.State != reservation.Processing })
	return no
}

// Settle queries the provider about a refund and applies the answer, as
// a reconciliation does, and returns the refund's state after it.
func (w *World) Settle(id, no string) reservation.RefundState {
	w.t.Helper()
	ctx := context.Background()
	o := w.p.Query(ctx, no)
	st, _, err := w.Engine.Execute(ctx, id, "reconcile", reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceQuery, Outcome: o})
	if err != nil {
		w.t.Fatalf("audittest: settle %s: %v", no, err)
	}
	return st.Refund(no).State
}

func (w *World) await(id string, done func(*reservation.Refund) bool) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := w.Engine.Await(ctx, id, func(s *reservation.State) bool {
		return len(s.Refunds) > 0 && done(s.Refunds[len(s.Refunds)-1])
	})
	if err != nil {
		w.t.Fatalf("audittest: await %s: %v", id, err)
	}
}

// Lie makes the provider answer SUCCEEDED for refund number no without
// sending it to the sandbox: the journal will hold a refund WeChat Pay
// never saw.
func (w *World) Lie(no string) { w.p.mu.Lock(); w.p.lie[no] = true; w.p.mu.Unlock() }

// Shave makes the provider send refund number no to the sandbox for fen
// less than the journal says, and hide it in the answers (a buggy adapter):
// the two sides then disagree on the amount.
func (w *World) Shave(no string, fen int64) { w.p.mu.Lock(); w.p.shave[no] = fen; w.p.mu.Unlock() }

// PlatformRefund refunds at the sandbox directly, as the merchant
// platform would: the journal never hears of it.
func (w *World) PlatformRefund(outTradeNo, no string, amount, total int64) {
	w.t.Helper()
	c := w.Sandbox.Client
	body, err := c.RequestBody(reservation.RefundRequest{RefundNo: no, OutTradeNo: outTradeNo, Amount: amount, Total: total})
	if err != nil {
		w.t.Fatal(err)
	}
	if o := c.Submit(context.Background(), no, body, 1); o.Kind != reservation.OutcomeProcessing && o.Kind != reservation.OutcomeSucceeded {
		w.t.Fatalf("audittest: platform refund %s: %+v", no, o)
	}
}

// Bill downloads today's REFUND bill from the sandbox.
func (w *World) Bill() (date string, raw []byte) {
	w.t.Helper()
	date = time.Now().In(time.FixedZone("CST", 8*3600)).Format(time.DateOnly)
	raw, err := w.Sandbox.Client.DownloadBill(context.Background(), wechatpay.BillRequest{Date: date, Type: wechatpay.BillTypeRefund})
	if err != nil {
		w.t.Fatalf("audittest: bill: %v", err)
	}
	return date, raw
}

// provider is the WeChat Pay client with the switches above.
type provider struct {
	*wechatpay.Client
	mu    sync.Mutex
	lie   map[string]bool
	shave map[string]int64
}

func (p *provider) Submit(ctx context.Context, no string, body []byte, attempt int) reservation.Outcome {
	p.mu.Lock()
	lie, shave := p.lie[no], p.shave[no]
	p.mu.Unlock()
	if lie {
		return reservation.Outcome{Kind: reservation.OutcomeSucceeded, ProviderID: "LIE-" + no, SuccessTime: time.Now().UTC()}
	}
	if shave != 0 {
		var b map[string]any
		if err := json.Unmarshal(body, &b); err == nil {
			amt := b["amount"].(map[string]any)
			amt["refund"] = amt["refund"].(float64) - float64(shave)
			var buf bytes.Buffer
			_ = json.NewEncoder(&buf).Encode(b)
			body = bytes.TrimSpace(buf.Bytes())
		}
	}
	o := p.Client.Submit(ctx, no, body, attempt)
	if shave != 0 && o.RefundAmount != 0 {
		o.RefundAmount += shave
	}
	return o
}

func (p *provider) Query(ctx context.Context, no string) reservation.Outcome {
	p.mu.Lock()
	lie, shave := p.lie[no], p.shave[no]
	p.mu.Unlock()
	if lie {
		return reservation.Outcome{Kind: reservation.OutcomeSucceeded, ProviderID: "LIE-" + no}
	}
	o := p.Client.Query(ctx, no)
	if shave != 0 && o.RefundAmount != 0 {
		o.RefundAmount += shave
	}
	return o
}

var _ actors.Provider = (*provider)(nil)

// String describes the world for failure messages.
func (w *World) String() string { return fmt.Sprintf("world(%s)", w.Path) }
