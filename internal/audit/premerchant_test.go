package audit_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal"
)

// testdata/premerchant.db and premerchant-open.db were written by the
// engine of the release before reservations had merchants (commit "audit:
// commit journals written by the release before merchants", with the
// generators that commit holds). This build must open them unchanged, and
// every reservation in them belongs to the default merchant.

// TestPremerchantFixture_DefaultMerchant: replayed by this build, the old
// journal verifies (its out_trade_no claims are the keys the default
// merchant's orders take now), and the default merchant shows in the
// states, the tools' views, the refund facts, the export and the feed.
func TestPremerchantFixture_DefaultMerchant(t *testing.T) {
	for _, f := range []struct {
		name                  string
		reservations, refunds int
		moments               bool // a moments file beside it
	}{{"premerchant", 5, 7, true}, {"premerchant-open", 3, 4, false}} {
		t.Run(f.name, func(t *testing.T) { checkPremerchant(t, f.name, f.reservations, f.refunds, f.moments) })
	}
}

func checkPremerchant(t *testing.T, name string, reservations, refunds int, moments bool) {
	t.Helper()
	path := copyFile(t, filepath.Join("testdata", name+".db"))
	before := sum(t, path)
	db := openRO(t, path)
	rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Reservations != reservations || rep.Refunds != refunds {
		t.Fatalf("Verify: reservations %d refunds %d, journal problems %v, problems %v", rep.Reservations, rep.Refunds, rep.Journal.Problems, rep.Problems)
	}
	if moments {
		checkMoments(t, db, readMoments(t, filepath.Join("testdata", name+".moments.json")))
	}
	states, undecoded, err := audit.Replay(bg, db, nil)
	if err != nil || undecoded != 0 || len(states) != reservations {
		t.Fatalf("Replay: %d states, %d undecoded, %v", len(states), undecoded, err)
	}
	for id, st := range states {
		if st.Merchant != reservation.DefaultMerchant {
			t.Fatalf("%s: state merchant %q", id, st.Merchant)
		}
		if v := audit.View(st); v.Merchant != reservation.DefaultMerchant {
			t.Fatalf("%s: view merchant %q", id, v.Merchant)
		}
	}
	for _, f := range audit.Facts(states) {
		if f.Merchant != reservation.DefaultMerchant {
			t.Fatalf("refund %s: fact merchant %q", f.RefundNo, f.Merchant)
		}
	}
	rows := 0
	err = audit.Export(bg, db, audit.ExportOptions{}, func(r audit.Row) error {
		rows++
		if r.Merchant != reservation.DefaultMerchant {
			t.Errorf("export row %d (%s of %s): merchant %q", r.Global, r.Type, r.Reservation, r.Merchant)
		}
		return nil
	})
	if err != nil || rows == 0 {
		t.Fatalf("Export: %d rows, %v", rows, err)
	}
	// The consumer feed (and the webhooks it drives).
	events, _, err := feed.Read(bg, db, 0, 0, nil)
	if err != nil || len(events) == 0 {
		t.Fatalf("feed: %d events, %v", len(events), err)
	}
	for _, e := range events {
		if e.Merchant != reservation.DefaultMerchant {
			t.Errorf("feed event %s (%s of %s): merchant %q", e.ID, e.Type, e.ReservationID, e.Merchant)
		}
	}
	db.Close()
	if sum(t, path) != before {
		t.Fatal("reading the fixture changed it")
	}
}

// TestPremerchantFixture_ClaimsHold: this build's engine, running on the
// old journal, finds the old reservations under the default merchant, and
// their order numbers still taken for it (the claims the old release
// wrote are the default merchant's keys) but free for another merchant;
// the journal it leaves verifies.
func TestPremerchantFixture_ClaimsHold(t *testing.T) {
	ctx := context.Background()
	path := copyFile(t, filepath.Join("testdata", "premerchant.db"))
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clock := &fixedClock{}
	clock.ns.Store(scenarioStart.Add(24 * time.Hour).UnixNano())
	engine, err := actors.New(actors.Config{
		Store: eventstore.New(db), Provider: simprovider.New(simprovider.Options{Now: clock.Now}), Encode: simprovider.Encode,
		Now: clock.Now, Policy: reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute, MaxAttempts: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := engine.Get(ctx, "r1")
	if err != nil || st.Merchant != reservation.DefaultMerchant || st.OutTradeNo != "ORD-r1" {
		t.Fatalf("r1: %+v, %v", st, err)
	}
	// The old registration repeated, with or without the default's name,
	// is the same registration; for another merchant it is a conflict.
	old := reservation.Register{ReservationID: "r1", UserID: "u-r1", OutTradeNo: "ORD-r1", Amount: 10000,
		Currency: "CNY", PaidAt: st.PaidAt}
	for _, merchant := range []string{"", reservation.DefaultMerchant, "hotel-sh"} {
		c := old
		c.Merchant = merchant
		_, events, err := engine.Execute(ctx, "r1", "booking", c)
		if merchant == "hotel-sh" {
			if !errors.Is(err, reservation.ErrConflict) {
				t.Fatalf("r1 repeated for %q: %v", merchant, err)
			}
			continue
		}
		if err != nil || len(events) != 0 {
			t.Fatalf("r1 repeated for %q: %d events, %v", merchant, len(events), err)
		}
	}
	tests := []struct {
		id, merchant string
		taken        bool
	}{
		{"n-default", "", true},
		{"n-default-named", reservation.DefaultMerchant, true},
		{"n-sh", "hotel-sh", false},
	}
	for _, tt := range tests {
		_, _, err := engine.Execute(ctx, tt.id, "booking", reservation.Register{ReservationID: tt.id, UserID: "u",
			OutTradeNo: "ORD-r1", Amount: 100, Currency: "CNY", Merchant: tt.merchant})
		if tt.taken != errors.Is(err, reservation.ErrOutTradeNoTaken) || !tt.taken && err != nil {
			t.Fatalf("%s on ORD-r1 for merchant %q: %v, want taken %v", tt.id, tt.merchant, err, tt.taken)
		}
	}
	if err := engine.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(ctx, db, audit.VerifyOptions{})
	if err != nil || !rep.OK() || rep.Reservations != 6 {
		t.Fatalf("Verify after this build wrote: %d reservations, %+v, %v", rep.Reservations, rep.Problems, err)
	}
	states, _, err := audit.Replay(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for id, st := range states {
		got[id] = st.Merchant
	}
	want := map[string]string{"r1": "default", "r2": "default", "r3": "default", "r4": "default", "r5": "default", "n-sh": "hotel-sh"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merchants %v, want %v", got, want)
	}
}
