package actors_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

func registerFor(t *testing.T, h *harness, merchant, id string, amount int64) error {
	t.Helper()
	_, _, err := h.engine.Execute(context.Background(), id, "test", reservation.Register{
		ReservationID: id, UserID: "u-" + id, OutTradeNo: "ORD-" + id, Amount: amount, Currency: "CNY", Merchant: merchant,
	})
	return err
}

// Each reservation is decided under its merchant's policy: its prefix and
// its limits; a Register under the merchant it names.
func TestEngine_PolicyPerMerchant(t *testing.T) {
	base := reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute}
	a, b := base, base
	a.RefundNoPrefix = "A"
	b.RefundNoPrefix, b.MaxRefunds = "B", 1
	h := newHarness(t, harnessOpts{policy: &base, policies: map[string]reservation.Policy{"a": a, "b": b}})
	for _, c := range []struct{ merchant, id string }{{"a", "ra"}, {"b", "rb"}} {
		if err := registerFor(t, h, c.merchant, c.id, 1000); err != nil {
			t.Fatalf("register %s under %s: %v", c.id, c.merchant, err)
		}
	}
	for _, c := range []struct {
		id, prefix string
		second     reservation.Code // the second refund's answer
	}{{"ra", "A-", ""}, {"rb", "B-", reservation.CodeRefundLimit}} {
		st, _, err := h.refund(c.id, "k1", 100)
		if err != nil {
			t.Fatal(err)
		}
		if no := st.RefundByKey("k1").No; !strings.HasPrefix(no, c.prefix) {
			t.Errorf("%s's refund number %s, want prefix %s", c.id, no, c.prefix)
		}
		if _, _, err := h.refund(c.id, "k2", 100); reservation.CodeOf(err) != c.second {
			t.Errorf("%s's second refund: %v, want code %q", c.id, err, c.second)
		}
	}
	// Neither the default merchant nor an unknown one is configured here.
	for _, m := range []string{"", "c"} {
		if err := registerFor(t, h, m, "r-"+m, 1000); reservation.CodeOf(err) != reservation.CodeMerchantNotConfigured {
			t.Errorf("register under %q: %v, want %s", m, err, reservation.CodeMerchantNotConfigured)
		}
	}
}

// A merchant taken out of the configuration: its reservations are still
// read, a duplicate still answers, a new refund and a resubmission are
// refused with merchant_not_configured, and the refund in flight is
// queried on its schedule and settles.
func TestEngine_UnconfiguredMerchantSettlesButRefundsNothingNew(t *testing.T) {
	base := reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute}
	a, b := base, base
	a.RefundNoPrefix, b.RefundNoPrefix = "A", "B"
	clk := newClock()
	h := newHarness(t, harnessOpts{policy: &base, policies: map[string]reservation.Policy{"a": a, "b": b},
		sim: simprovider.Options{Delay: time.Hour, Now: clk.Now}})
	h.clock = clk
	h.engine.Close(context.Background())
	h.start(0, base) // on the shared clock
	ctx := context.Background()
	if err := registerFor(t, h, "a", "ra", 1000); err != nil {
		t.Fatal(err)
	}
	st, _, err := h.refund("ra", "k1", 400)
	if err != nil {
		t.Fatal(err)
	}
	no := st.RefundByKey("k1").No
	waitFor(t, "the submission's PROCESSING", func() bool {
		st, err := h.engine.Get(ctx, "ra")
		return err == nil && st.Refund(no).ProviderID != ""
	})

	// Restart without merchant a.
	if err := h.engine.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.policies = map[string]reservation.Policy{"b": b}
	h.start(0, base)
	if _, _, err := h.refund("ra", "k1", 400); err != nil {
		t.Fatalf("a duplicate of the refund in flight: %v, want its state", err)
	}
	if _, _, err := h.refund("ra", "k2", 100); reservation.CodeOf(err) != reservation.CodeMerchantNotConfigured {
		t.Fatalf("a new refund: %v, want %s", err, reservation.CodeMerchantNotConfigured)
	}
	if _, _, err := h.engine.Execute(ctx, "ra", "operator", reservation.Resubmit{RefundNo: no}); reservation.CodeOf(err) == "" {
		t.Fatal("a resubmission was accepted")
	}

	h.clock.Advance(2 * time.Hour)
	if _, err := h.engine.FireDue(ctx, h.clock.Now(), 100); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refund of the unconfigured merchant to settle", func() bool { return h.refundState("ra", no) == reservation.Succeeded })
	st, err = h.engine.Get(ctx, "ra")
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, st)
	if st.Refunded() != 400 || st.Merchant != "a" {
		t.Fatalf("refunded %d of merchant %q, want 400 of a", st.Refunded(), st.Merchant)
	}
}
