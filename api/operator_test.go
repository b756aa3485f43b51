package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
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

func TestOperator_AttentionListFollowsState(t *testing.T) {
	reject := func(op, _ string, _ int) (simprovider.Injected, bool) {
		if op == "submit" {
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "NOT_ENOUGH"}}, true
		}
		return simprovider.Injected{}, false
	}
	e := newEnv(t, envOptions{fault: reject})
	for _, id := range []string{"a1", "a2"} {
		e.register(t, id, 1000)
		rf := decodeRefund(t, e.refund(t, id, "k", `{"user_id":"u-`+id+`"}`), http.StatusAccepted)
		waitFor(t, "REJECTED", func() bool { return e.refundState(t, id, rf.RefundNo) == "REJECTED" })
	}
	list := func(q string) []string {
		r := e.do(t, http.MethodGet, "/v1/refunds?"+q, "")
		if r.status != http.StatusOK {
			t.Fatalf("GET /v1/refunds?%s: %d %s", q, r.status, r.body)
		}
		var out struct {
			Refunds []refundJSON `json:"refunds"`
			Next    string       `json:"next"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatal(err)
		}
		var nos []string
		for _, rf := range out.Refunds {
			nos = append(nos, rf.RefundNo+"@"+rf.State)
		}
		return append(nos, "next="+out.Next)
	}
	if got := strings.Join(list("state=REJECTED"), " "); got != "T-a1-1@REJECTED T-a2-1@REJECTED next=" {
		t.Fatalf("REJECTED list: %s", got)
	}
	if got := strings.Join(list("state=REJECTED&limit=1"), " "); got != "T-a1-1@REJECTED next=a1/T-a1-1" {
		t.Fatalf("first page: %s", got)
	}
	if got := strings.Join(list("state=REJECTED&limit=1&after=a1/T-a1-1"), " "); got != "T-a2-1@REJECTED next=a2/T-a2-1" {
		t.Fatalf("second page: %s", got)
	}
	decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/a1/refunds/T-a1-1/abandon", `{"reason":"customer paid in cash"}`), http.StatusOK)
	if got := strings.Join(list("state=REJECTED"), " "); got != "T-a2-1@REJECTED next=" {
		t.Fatalf("after abandoning a1: %s", got)
	}
	// The refusal names every list there is, conflict included.
	d := wantError(t, e.do(t, http.MethodGet, "/v1/refunds?attention=FAILED", ""), http.StatusBadRequest, "invalid_argument", "attention")
	for _, kind := range reservation.AttentionKinds {
		if !strings.Contains(d.Message, kind) {
			t.Errorf("attention=FAILED refused with %q, which does not name %s", d.Message, kind)
		}
	}
	// attention=KIND is the same list as the older state=KIND.
	if got := strings.Join(list("attention=REJECTED"), " "); got != "T-a2-1@REJECTED next=" {
		t.Fatalf("attention=REJECTED: %s", got)
	}
	wantError(t, e.do(t, http.MethodGet, "/v1/refunds?state=stuck&limit=0", ""), http.StatusBadRequest, "invalid_argument", "limit")
}

func TestReadyz_FollowsTheProbe(t *testing.T) {
	var broken atomic.Bool
	e := newEnv(t, envOptions{api: api.Options{Ready: func(context.Context) error {
		if broken.Load() {
			return errors.New("no space left on device")
		}
		return nil
	}}})
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.status != http.StatusOK {
		t.Fatalf("ready: %d %s", r.status, r.body)
	}
	broken.Store(true)
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.status != http.StatusServiceUnavailable {
		t.Fatalf("journal broken: %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, "/healthz", ""); r.status != http.StatusOK {
		t.Fatalf("healthz must stay up: %d", r.status)
	}
	broken.Store(false)
	if r := e.do(t, http.MethodGet, "/readyz", ""); r.status != http.StatusOK {
		t.Fatalf("recovered: %d %s", r.status, r.body)
	}
}

// Ids that look like paths are refused like any unknown id; nothing is
// cleaned into another reservation's path and nothing is journaled.
func TestHostile_PathLikeIDs(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.register(t, "victim", 1000)
	for _, p := range []string{
		"/v1/reservations/x/../victim",
		"/v1/reservations/..%2fvictim",
		"/v1/reservations/%2e%2e",
		"/v1/reservations/victim%00",
		"/v1/reservations/" + strings.Repeat("a", 41),
	} {
		r := e.do(t, http.MethodGet, p, "")
		if r.status != http.StatusNotFound || !strings.Contains(string(r.body), `"error"`) {
			t.Errorf("GET %s: %d %s, want a JSON 404", p, r.status, r.body)
		}
	}
	r := e.do(t, http.MethodPost, "/v1/reservations/x/../victim/refunds", `{"user_id":"u-victim"}`, "Idempotency-Key", "k")
	if r.status != http.StatusNotFound {
		t.Fatalf("refund through a path trick: %d %s", r.status, r.body)
	}
	if got := e.get(t, "victim"); len(got.Refunds) != 0 {
		t.Fatalf("a refund was journaled through a path trick: %+v", got.Refunds)
	}
}

// The reported scenario: the create timed out twice (WeChat applies it
// later), two queries found nothing and the refund stopped as REJECTED.
// Abandon must not release the amount while the timed-out attempts may
// still land; when WeChat then pays, the money is counted and the
// reservation CANCELED.
func TestOperator_AbandonRefusedWhileATimedOutCreateMayLand(t *testing.T) {
	var delayed atomic.Bool // the create is held at WeChat, not applied yet
	delayed.Store(true)
	timeout := func(op, _ string, _ int) (simprovider.Injected, bool) {
		if op == "submit" && delayed.Load() {
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "TIMEOUT"}}, true
		}
		return simprovider.Injected{}, false
	}
	e := newEnv(t, envOptions{fault: timeout, policy: &reservation.Policy{RefundNoPrefix: "T", MaxAttempts: 1}})
	e.register(t, "r1", 10000)
	rf := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1"}`), http.StatusAccepted)
	base := "/v1/reservations/r1/refunds/" + rf.RefundNo
	attempts := func() int {
		for _, r := range e.get(t, "r1").Refunds {
			if r.RefundNo == rf.RefundNo {
				return r.Attempts
			}
		}
		return 0
	}
	waitFor(t, "UNKNOWN after the first timeout", func() bool { return e.refundState(t, "r1", rf.RefundNo) == "UNKNOWN" })
	// Reconcile: not found, so the same bytes are sent again; they time out too.
	decodeRefund(t, e.do(t, http.MethodPost, base+"/reconcile", ``), http.StatusOK)
	waitFor(t, "the resubmission to time out", func() bool {
		return attempts() == 2 && e.refundState(t, "r1", rf.RefundNo) == "UNKNOWN"
	})
	// Not found again: no more resending, REJECTED.
	decodeRefund(t, e.do(t, http.MethodPost, base+"/reconcile", ``), http.StatusOK)
	waitFor(t, "REJECTED", func() bool { return e.refundState(t, "r1", rf.RefundNo) == "REJECTED" })

	wantError(t, e.do(t, http.MethodPost, base+"/abandon", `{"reason":"WeChat does not have it"}`), http.StatusConflict, "refund_settling", "")
	if res := e.get(t, "r1"); res.Refundable != 0 || res.InFlight != 10000 {
		t.Fatalf("after the refused abandon: %+v", res)
	}
	if st, err := e.engine.Get(t.Context(), "r1"); err != nil || st.Refund(rf.RefundNo).DueAt.IsZero() {
		t.Fatalf("the settling refund has no due time (err %v): nothing would ask WeChat again", err)
	}

	// WeChat applies the delayed create and pays; the next query finds it.
	delayed.Store(false)
	body := func() []byte {
		st, err := e.engine.Get(t.Context(), "r1")
		if err != nil {
			t.Fatal(err)
		}
		return st.Refund(rf.RefundNo).Request
	}()
	if o := e.sim.Submit(t.Context(), rf.RefundNo, body, 1); o.Kind != reservation.OutcomeSucceeded {
		t.Fatalf("the delayed create: %+v", o)
	}
	decodeRefund(t, e.do(t, http.MethodPost, base+"/reconcile", ``), http.StatusOK)
	waitFor(t, "SUCCEEDED", func() bool { return e.refundState(t, "r1", rf.RefundNo) == "SUCCEEDED" })
	if res := e.get(t, "r1"); res.Status != "CANCELED" || res.Refunded != 10000 || res.Refundable != 0 {
		t.Fatalf("after WeChat paid: %+v", res)
	}
}
