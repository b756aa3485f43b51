package api_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal"
)

// archivedEnv serves, on a journal whose engine clock reads now, the
// reservations run wrote before, after archiving the streams given.
func archivedEnv(t *testing.T, now func() time.Time, run func(*actors.Engine), archive []string) *testEnv {
	t.Helper()
	path := filepath.Join(t.TempDir(), "refundd.db")
	start := func() (*journal.DB, *actors.Engine) {
		db, err := journal.Open(path, &journal.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		engine, err := actors.New(actors.Config{Store: eventstore.New(db), Provider: simprovider.New(simprovider.Options{}),
			Encode: simprovider.Encode, Logger: quietLogger(), Now: now, Policy: reservation.Policy{RefundNoPrefix: "T"}})
		if err != nil {
			t.Fatal(err)
		}
		return db, engine
	}
	db, engine := start()
	run(engine)
	if err := engine.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.ArchiveStreams(context.Background(), path, journal.ArchiveDir(path), journal.ArchivePlan{Streams: archive, Cutoff: now()}); err != nil {
		t.Fatal(err)
	}
	db, engine = start()
	t.Cleanup(func() {
		_ = engine.Close(context.Background())
		_ = db.Close()
	})
	return &testEnv{handler: api.New(engine, api.Options{Logger: quietLogger(), Search: eventstore.Reader{DB: db}, List: eventstore.Reader{DB: db}}), engine: engine}
}

func TestArchived_ReadButNeverChanged(t *testing.T) {
	paid := time.Date(2025, 1, 10, 2, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(paid.Add(time.Hour).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	ctx := context.Background()
	e := archivedEnv(t, now, func(engine *actors.Engine) {
		for _, id := range []string{"r1", "r2"} {
			_, _, err := engine.Execute(ctx, id, "booking", reservation.Register{ReservationID: id, UserID: "u-" + id,
				OutTradeNo: "ORD-" + id, Amount: 1000, Currency: "CNY", PaidAt: paid})
			if err != nil {
				t.Fatal(err)
			}
		}
		amount := int64(300)
		if _, _, err := engine.Execute(ctx, "r1", "api", reservation.RequestRefund{UserID: "u-r1", IdempotencyKey: "k1", Amount: &amount}); err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Await(ctx, "r1", func(s *reservation.State) bool { return s.Refunds[0].State == reservation.Succeeded }); err != nil {
			t.Fatal(err)
		}
		clock.Add(int64(500 * 24 * time.Hour))
	}, []string{"r1"})

	v := e.get(t, "r1")
	if v.Refunded != 300 || v.Amount != 1000 || len(v.Refunds) != 1 || v.Refunds[0].State != "SUCCEEDED" {
		t.Fatalf("archived reservation read: %+v", v)
	}
	wantError(t, e.refund(t, "r1", "k2", `{"user_id":"u-r1","amount":100}`), http.StatusConflict, "archived", "")
	// The one left hot answers as before: its refund window has closed.
	wantError(t, e.refund(t, "r2", "k1", `{"user_id":"u-r2","amount":100}`), http.StatusConflict, "refund_window_closed", "")
	if got := e.get(t, "r2"); got.Refunded != 0 || len(got.Refunds) != 0 {
		t.Fatalf("hot reservation: %+v", got)
	}
}

// WeChat re-sends a notification until it is acknowledged, also after the
// reservation was archived (a late retry, a restored backup's redelivery):
// one that matches the archived refund is acknowledged, one that differs
// is a mismatch, and one that would change the sealed records (a
// contradiction of its terminal state) is refused, kept and retried for
// operators; none changes the reservation, and a repeated refund request
// answers the refund's state.
func TestArchived_NotificationsAreComparedAndAcknowledged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refundd.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	paid := time.Date(2025, 1, 10, 2, 0, 0, 0, time.UTC)
	e := newNtEnvOn(t, db, paid)
	no := e.refund("r1")
	good := ntNotice{no: no, outTradeNo: "ORD-r1", status: "SUCCESS", refund: 4000, total: 10000}
	if code, body := e.postV3(good); code != http.StatusNoContent {
		t.Fatalf("notification before archival: %d %s", code, body)
	}
	later := paid.Add(500 * 24 * time.Hour)
	if err := e.engine.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := journal.ArchiveStreams(context.Background(), path, journal.ArchiveDir(path), journal.ArchivePlan{Streams: []string{"r1"}, Cutoff: later})
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest.Streams != 1 {
		t.Fatalf("archived %d streams, want 1", res.Manifest.Streams)
	}
	if db, err = journal.Open(path, &journal.Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	e = newNtEnvOn(t, db, later)

	closed := good
	closed.status = "CLOSED"
	differs := good
	differs.refund = 4001
	cases := []struct {
		name    string
		n       ntNotice
		status  int
		outcome string
	}{
		{"the same success", good, http.StatusNoContent, "duplicate"},
		{"refund amount differs", differs, http.StatusBadRequest, "mismatch"},
		{"contradicts the terminal state", closed, http.StatusConflict, "mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.counts()[tc.outcome]
			keptBefore, _, _ := e.q.Stats()
			code, body := e.postV3(tc.n)
			if code != tc.status {
				t.Fatalf("answer %d %s, want %d", code, body, tc.status)
			}
			if got := e.counts()[tc.outcome]; got != before+1 {
				t.Fatalf("%s count %d, want %d", tc.outcome, got, before+1)
			}
			kept, _, _ := e.q.Stats()
			if wantKept := tc.status != http.StatusNoContent; (kept > keptBefore) != wantKept {
				t.Fatalf("quarantined %v, want %v", kept > keptBefore, wantKept)
			}
			if r := e.state("r1", no); r.State != reservation.Succeeded || r.Conflicts != 0 {
				t.Fatalf("refund after the notification: %s with %d conflicts", r.State, r.Conflicts)
			}
		})
	}

	// A repeated request names the refund: its state, not an error.
	amount := int64(4000)
	st, _, err := e.engine.Execute(context.Background(), "r1", "test", reservation.RequestRefund{UserID: "u", IdempotencyKey: "k", Amount: &amount})
	if err != nil || st.RefundByKey("k").State != reservation.Succeeded {
		t.Fatalf("repeated request on the archived reservation: %v", err)
	}
	other := int64(100)
	if _, _, err := e.engine.Execute(context.Background(), "r1", "test", reservation.RequestRefund{UserID: "u", IdempotencyKey: "k2", Amount: &other}); !errors.Is(err, reservation.ErrArchived) {
		t.Fatalf("new refund on the archived reservation: %v, want ErrArchived", err)
	}
}
