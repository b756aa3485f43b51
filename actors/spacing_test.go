package actors_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

// TestEngine_SpacingHoldsForRetries is issue 17 item 3 through the engine,
// its due index and the scheduler: refund 1's first attempt gets an unknown
// answer (an HTTP 500), refund 2 of the same order is requested 4 s later,
// and the scheduler keeps firing. WeChat Pay refuses any create request of
// the order within the spacing after the previous one (FREQUENCY_LIMITED),
// so every call the provider sees, of either refund, must be a spacing
// after the one before.
func TestEngine_SpacingHoldsForRetries(t *testing.T) {
	const spacing = time.Minute
	type call struct {
		No      string
		Attempt int
		At      time.Duration // since the first refund was requested
	}
	var (
		mu    sync.Mutex
		calls []call
		h     *harness
	)
	var start time.Time
	since := func() time.Duration { return h.clock.Now().Sub(start) }
	h = newHarness(t, harnessOpts{
		policy: &reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Hour, RefundSpacing: spacing},
		sim: simprovider.Options{Fault: func(op, no string, attempt int) (simprovider.Injected, bool) {
			if op != "submit" {
				return simprovider.Injected{}, false
			}
			mu.Lock()
			calls = append(calls, call{no, attempt, since()})
			mu.Unlock()
			if no == "T-r1-1" && attempt == 1 {
				return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "SYSTEM_ERROR"}}, true
			}
			return simprovider.Injected{}, false
		}},
	})
	made := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) >= n }
	}
	ctx := context.Background()
	start = h.clock.Now()
	h.register("r1", 10000)
	if _, _, err := h.refund("r1", "k1", 3000); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "refund 1's retry to be scheduled", func() bool {
		st, _ := h.engine.Get(ctx, "r1")
		r := st.Refund("T-r1-1")
		return r.Retry && r.Attempts == 1
	})
	h.clock.Advance(4 * time.Second)
	if _, _, err := h.refund("r1", "k2", 3000); err != nil {
		t.Fatal(err)
	}
	// The scheduler every second for four minutes: each due timer fires as
	// soon as it may.
	for range 240 {
		h.clock.Advance(time.Second)
		fired, err := h.engine.FireDue(ctx, h.clock.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if fired > 0 {
			// A fired timer either waits again or starts a call; let the
			// call, if any, reach the provider before the clock moves on.
			st, _ := h.engine.Get(ctx, "r1")
			sent := 0
			for _, r := range st.Refunds {
				sent += r.Attempts
			}
			waitFor(t, "the provider call", made(sent))
		}
	}
	waitFor(t, "both refunds to succeed", func() bool {
		return h.refundState("r1", "T-r1-1") == reservation.Succeeded && h.refundState("r1", "T-r1-2") == reservation.Succeeded
	})
	st, err := h.engine.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if r1, r2 := st.Refund("T-r1-1"), st.Refund("T-r1-2"); r1.Attempts != 2 || r2.Attempts != 1 {
		t.Fatalf("refunds %+v %+v, want refund 1 on its second attempt, refund 2 on its first", *r1, *r2)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("provider calls %+v, want 3", calls)
	}
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].At - calls[i-1].At; gap < spacing {
			t.Fatalf("%s attempt %d reached WeChat Pay %v after %s attempt %d: within the spacing (calls %+v)",
				calls[i].No, calls[i].Attempt, gap, calls[i-1].No, calls[i-1].Attempt, calls)
		}
	}
	h.assertLiveDues("after both refunds", "r1")
}
