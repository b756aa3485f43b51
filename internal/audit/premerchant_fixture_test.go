package audit_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal"
)

var writePremerchant = flag.Bool("write-premerchant-fixture", false,
	"write testdata/premerchant.db: a journal of the release before reservations had merchants")

// TestWritePremerchantFixture writes the journal that later releases must
// keep opening unchanged: the scripted day of runScenario, written by the
// engine of the release before reservations belonged to a merchant. It is
// committed once, from that release's code; this build can no longer write
// it, so it is not to be rerun.
func TestWritePremerchantFixture(t *testing.T) {
	if !*writePremerchant {
		t.Skip("run with -write-premerchant-fixture, on the release before merchants only")
	}
	path := filepath.Join("testdata", "premerchant.db")
	_ = os.Remove(path)
	moments := runScenario(t, path)
	writeGolden(t, filepath.Join("testdata", "premerchant.moments.json"), moments)
}

// TestWritePremerchantOpenFixture writes testdata/premerchant-open.db: a
// journal of the same release whose refunds are left open, as a crash or
// an upgrade finds them: REJECTED, ABNORMAL and UNKNOWN refunds waiting in
// the attention lists, beside a succeeded one.
func TestWritePremerchantOpenFixture(t *testing.T) {
	if !*writePremerchant {
		t.Skip("run with -write-premerchant-fixture, on the release before merchants only")
	}
	path := filepath.Join("testdata", "premerchant-open.db")
	_ = os.Remove(path)
	ctx := context.Background()
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fixedClock{}
	clock.ns.Store(scenarioStart.UnixNano())
	faults := map[string]reservation.Outcome{
		"T-o1-2": {Kind: reservation.OutcomeRejected, Code: "NOT_ENOUGH", Message: "balance"},
		"T-o2-1": {Kind: reservation.OutcomeAbnormal, Code: "USER_ACCOUNT_ABNORMAL"},
		"T-o3-1": {Kind: reservation.OutcomeUnknown, Code: "TIMEOUT"},
	}
	sim := simprovider.New(simprovider.Options{Now: clock.Now, Fault: func(op, no string, attempt int) (simprovider.Injected, bool) {
		if o, ok := faults[no]; ok && op == "submit" {
			return simprovider.Injected{Outcome: o, Apply: o.Kind == reservation.OutcomeAbnormal}, true
		}
		return simprovider.Injected{}, false
	}})
	engine, err := actors.New(actors.Config{
		Store: eventstore.New(db), Provider: sim, Encode: simprovider.Encode, Now: clock.Now,
		Policy: reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Hour, MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	refund := func(id, key string, amount int64, want reservation.RefundState) {
		t.Helper()
		st, _, err := engine.Execute(ctx, id, "api", reservation.RequestRefund{UserID: "u-" + id, IdempotencyKey: key, Amount: &amount, Reason: "open"})
		if err != nil {
			t.Fatal(err)
		}
		no := st.RefundByKey(key).No
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := engine.Await(actx, id, func(s *reservation.State) bool {
			r := s.Refund(no)
			return r != nil && r.Attempts > 0 && r.State == want
		}); err != nil {
			t.Fatalf("await %s %s: %v", no, want, err)
		}
		clock.Advance(time.Minute)
	}
	for _, id := range []string{"o1", "o2", "o3"} {
		if _, _, err := engine.Execute(ctx, id, "booking", reservation.Register{ReservationID: id, UserID: "u-" + id,
			OutTradeNo: "ORD-" + id, Amount: 6000, Currency: "CNY", PaidAt: clock.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	refund("o1", "k1", 1000, reservation.Succeeded)
	refund("o1", "k2", 2000, reservation.Rejected)
	refund("o2", "k1", 3000, reservation.Abnormal)
	refund("o3", "k1", 4000, reservation.Unknown)
	if err := engine.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
