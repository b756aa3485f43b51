package reservation

import (
	"testing"
	"time"
)

// A merchant taken out of the configuration: nothing new starts for it,
// and what is in flight is still decided, so its refunds settle.
func TestUnconfiguredMerchant(t *testing.T) {
	gone := func(e Env) Env { e.Unconfigured = true; return e }
	userEnv := testEnv(t0, "user:"+testUser)

	t.Run("register", func(t *testing.T) {
		mustFail(t, &State{}, validRegister(), gone(userEnv), ErrMerchantNotConfigured)
		// The duplicate of an existing registration still answers its state.
		mustNoop(t, registered(t), validRegister(), gone(userEnv))
	})
	t.Run("new refund", func(t *testing.T) {
		mustFail(t, registered(t), RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(100)}, gone(userEnv), ErrMerchantNotConfigured)
	})
	t.Run("duplicate refund answers its state", func(t *testing.T) {
		s := registered(t)
		newRefund(t, s, "k", ptr(100))
		mustNoop(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(100)}, gone(userEnv))
	})
	t.Run("resubmit", func(t *testing.T) {
		s, no := refundIn(t, Rejected)
		mustFail(t, s, Resubmit{RefundNo: no}, gone(testEnv(t0.Add(2*time.Hour), "operator:alice")), ErrMerchantNotConfigured)
	})
	t.Run("in-flight refund settles", func(t *testing.T) {
		s := registered(t)
		no := newRefund(t, s, "k", ptr(4000))
		ev := run(t, s, FireTimer{RefundNo: no, DueAt: s.Refund(no).DueAt}, gone(testEnv(s.Refund(no).DueAt, "engine")))
		assertTypes(t, ev, "refund.query_started")
		run(t, s, outcome(no, SourceQuery, OutcomeSucceeded), gone(providerEnv))
		if r := s.Refund(no); r.State != Succeeded || s.Refunded() != 4000 {
			t.Fatalf("after the query: %s, refunded %d; want SUCCEEDED, 4000", r.State, s.Refunded())
		}
	})
}
