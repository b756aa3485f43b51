package api_test

import (
	"context"
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
