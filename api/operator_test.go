package api_test

import (
	"net/http"
	"testing"

	"refundd/internal/reservation"
	"refundd/internal/simprovider"
)

func TestOperator_ResolveAbnormalAndReconcile(t *testing.T) {
	abnormal := func(op, _ string, _ int) (simprovider.Injected, bool) {
		if op == "submit" {
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeAbnormal, Code: "USER_ACCOUNT_ABNORMAL"}}, true
		}
		return simprovider.Injected{}, false
	}
	e := newEnv(t, envOptions{fault: abnormal})
	e.register(t, "r1", 10000)
	rf := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1"}`), http.StatusAccepted)
	waitFor(t, "ABNORMAL", func() bool { return e.refundState(t, "r1", rf.RefundNo) == "ABNORMAL" })
	base := "/v1/reservations/r1/refunds/" + rf.RefundNo

	wantError(t, e.do(t, http.MethodPost, base+"/resolve", `{}`), http.StatusBadRequest, "invalid_argument", "reason")
	wantError(t, e.do(t, http.MethodPost, base+"/abandon", ``), http.StatusConflict, "invalid_state", "")

	// Reconcile journals a query; the provider has no such refund (the
	// fault answered without applying), which changes nothing for ABNORMAL.
	got := decodeRefund(t, e.do(t, http.MethodPost, base+"/reconcile", ``), http.StatusOK)
	if got.State != "ABNORMAL" {
		t.Fatalf("reconcile changed the state to %s", got.State)
	}

	got = decodeRefund(t, e.do(t, http.MethodPost, base+"/resolve", `{"reason":"paid to the user's balance by hand"}`), http.StatusOK)
	if got.State != "SUCCEEDED" || got.Code != "RESOLVED_BY_OPERATOR" {
		t.Fatalf("after resolve: %+v", got)
	}
	if res := e.get(t, "r1"); res.Status != "CANCELED" || res.Refunded != 10000 {
		t.Fatalf("reservation after resolving the whole amount: %+v", res)
	}
	wantError(t, e.do(t, http.MethodPost, base+"/resolve", `{"reason":"again"}`), http.StatusConflict, "invalid_state", "")
}
