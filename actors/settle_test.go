package actors_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

// The reported scenario through the engine: the create times out twice
// (WeChat holds it), queries find nothing, the refund stops as REJECTED.
// Abandon is refused until the settle horizon has passed, the refund is
// queried meanwhile, and when WeChat applies the create after all (here
// past the horizon, the worst case) its SUCCESS is counted on the FAILED
// refund: refunded, not refundable, CANCELED, listed as a conflict.
func TestEngine_NotFoundReleasesNothingWhileACreateMayLand(t *testing.T) {
	var delayed atomic.Bool
	delayed.Store(true)
	horizon := 3 * time.Hour
	h := newHarness(t, harnessOpts{
		policy: &reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute, MaxAttempts: 1,
			QueryBackoff: []time.Duration{time.Minute, time.Hour}, SettleHorizon: horizon},
		sim: simprovider.Options{Fault: func(op, _ string, _ int) (simprovider.Injected, bool) {
			if op == "submit" && delayed.Load() {
				return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "TIMEOUT"}}, true
			}
			return simprovider.Injected{}, false
		}},
	})
	ctx := context.Background()
	h.register("r1", 10000)
	st, _, err := h.refund("r1", "k1", 0)
	if err != nil {
		t.Fatal(err)
	}
	no := st.RefundByKey("k1").No
	refund := func() *reservation.Refund {
		st, err := h.engine.Get(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		return st.Refund(no)
	}
	fire := func() {
		t.Helper()
		h.clock.Advance(refund().DueAt.Sub(h.clock.Now()))
		if _, err := h.engine.FireDue(ctx, h.clock.Now(), 100); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "UNKNOWN", func() bool { return refund().State == reservation.Unknown })
	fire() // query: not found, resent; times out again
	waitFor(t, "the resubmission to time out", func() bool { r := refund(); return r.Attempts == 2 && r.State == reservation.Unknown })
	fire() // query: not found; REJECTED, still queried
	waitFor(t, "REJECTED", func() bool { return refund().State == reservation.Rejected })
	unsettled := refund().UnsettledAt

	abandon := reservation.Abandon{RefundNo: no, Reason: "WeChat does not have it"}
	if _, _, err := h.engine.Abandon(ctx, "r1", "operator", abandon); reservation.CodeOf(err) != reservation.CodeRefundSettling {
		t.Fatalf("abandon within the horizon: %v, want %s", err, reservation.CodeRefundSettling)
	}
	refs, err := h.engine.Attention(ctx, string(reservation.Rejected), "", 10)
	if err != nil || len(refs) != 1 {
		t.Fatalf("REJECTED attention list %v, %v: the settling refund must be listed", refs, err)
	}
	// Queried on the schedule until the horizon has passed; then "not
	// found" is final and the due time goes.
	for refund().DueAt.Sub(unsettled) < horizon {
		fire()
	}
	fire()
	waitFor(t, "the last query to end the queries", func() bool { return refund().DueAt.IsZero() })
	if r := refund(); r.State != reservation.Rejected || r.Attempts != 2 {
		t.Fatalf("after the horizon: %s after %d attempts, want REJECTED, never resent", r.State, r.Attempts)
	}
	st, _, err = h.engine.Abandon(ctx, "r1", "operator", abandon)
	if err != nil {
		t.Fatalf("abandon past the horizon with WeChat not having it: %v", err)
	}
	if st.Refundable() != 10000 || st.Refund(no).State != reservation.Failed {
		t.Fatalf("after abandon: refundable %d, %s", st.Refundable(), st.Refund(no).State)
	}

	// WeChat applies the create after all, and notifies SUCCESS.
	delayed.Store(false)
	o := h.provider.Submit(ctx, no, refund().Request, 1)
	if o.Kind != reservation.OutcomeSucceeded {
		t.Fatalf("the delayed create: %+v", o)
	}
	st, _, err = h.engine.Execute(ctx, "r1", "provider", reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceNotification, Outcome: o})
	if err != nil {
		t.Fatal(err)
	}
	r := st.Refund(no)
	if r.State != reservation.Succeeded || st.Refunded() != 10000 || st.Refundable() != 0 || st.Status != reservation.StatusCanceled {
		t.Fatalf("after WeChat paid the FAILED refund: %s, refunded %d, refundable %d, %s", r.State, st.Refunded(), st.Refundable(), st.Status)
	}
	checkInvariants(t, st)
	if !slices.Contains(r.Attention(), reservation.AttentionConflict) {
		t.Fatalf("attention %v, want it listed as a conflict", r.Attention())
	}
	refs, err = h.engine.Attention(ctx, reservation.AttentionConflict, "", 10)
	if err != nil || len(refs) != 1 {
		t.Fatalf("conflict attention list %v, %v", refs, err)
	}
	if _, _, err := h.refund("r1", "k2", 0); reservation.CodeOf(err) != reservation.CodeCanceled {
		t.Fatalf("a new refund of the paid amount: %v, want %s", err, reservation.CodeCanceled)
	}
}
