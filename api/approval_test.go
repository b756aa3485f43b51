package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/reservation"
)

const (
	tokApprover        = "approver-token-00000000001"
	tokSelfApprover    = "approver-token-00000000002" // the service's own name
	tokOperatorApprove = "operator-token-00000000002"
)

// approvalEnv is authEnv with every refund held for approval, an approver
// (carol), an approver who shares the service's name, and an operator
// whose token line makes it an approver too (oscar).
func approvalEnv(t *testing.T) *testEnv {
	var ts auth.Tokens
	if err := auth.ParseEnv("service:"+tokService+",reader:"+tokReader+",auditor:"+tokAuditor+",operator:"+tokOperator, &ts); err != nil {
		t.Fatal(err)
	}
	file := "approver " + auth.HashHex(tokApprover) + " carol\n" +
		"approver " + auth.HashHex(tokSelfApprover) + " service-1\n" +
		"operator " + auth.HashHex(tokOperatorApprove) + " oscar approver\n"
	if err := auth.ParseFile(strings.NewReader(file), &ts); err != nil {
		t.Fatal(err)
	}
	return newEnv(t, envOptions{delay: 3600e9, api: api.Options{Auth: &ts},
		policy: &reservation.Policy{RefundNoPrefix: "T", ApproveAll: true}})
}

func TestApproval_API(t *testing.T) {
	e := approvalEnv(t)
	if r := e.do(t, http.MethodPost, "/v1/reservations", registerBody("a1", 1000), bearer(tokService)...); r.status != http.StatusCreated {
		t.Fatalf("register: %s", r)
	}
	request := func(key string, amount int64) refundJSON {
		t.Helper()
		body := `{"user_id":"u-a1","amount":` + strconv.FormatInt(amount, 10) + `}`
		return decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/a1/refunds", body, append(bearer(tokService), "Idempotency-Key", key)...), http.StatusAccepted)
	}
	rf := request("k1", 600)
	if rf.State != "PENDING_APPROVAL" || rf.Attempts != 0 || rf.NextCheckAt.IsZero() {
		t.Fatalf("requested %+v, want PENDING_APPROVAL with its expiry", rf)
	}
	// Held: the rest cannot be overspent, and nothing reached WeChat.
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations/a1/refunds", `{"user_id":"u-a1","amount":401}`,
		append(bearer(tokService), "Idempotency-Key", "k-over")...), http.StatusConflict, "insufficient_refundable", "")
	if n := e.sim.Submissions(); n != 0 {
		t.Fatalf("%d submissions before approval", n)
	}
	// Listed for approvers.
	r := e.do(t, http.MethodGet, "/v1/refunds?state=PENDING_APPROVAL", "", bearer(tokReader)...)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), rf.RefundNo) {
		t.Fatalf("pending list: %s", r)
	}

	base := "/v1/reservations/a1/refunds/" + rf.RefundNo
	// Only approvers: not the reader, the service, a plain operator or the auditor.
	for _, tok := range []string{tokReader, tokService, tokOperator, tokAuditor} {
		wantError(t, e.do(t, http.MethodPost, base+"/approve", "", bearer(tok)...), http.StatusForbidden, "forbidden", "")
		wantError(t, e.do(t, http.MethodPost, base+"/reject", `{"reason":"no"}`, bearer(tok)...), http.StatusForbidden, "forbidden", "")
	}
	// The requester's own name cannot approve, even with an approver token.
	wantError(t, e.do(t, http.MethodPost, base+"/approve", "", bearer(tokSelfApprover)...), http.StatusForbidden, "self_approval", "")
	wantError(t, e.do(t, http.MethodPost, base+"/reject", "", bearer(tokApprover)...), http.StatusBadRequest, "invalid_argument", "reason")
	wantError(t, e.do(t, http.MethodPost, base+"/approve", `{"reason":"ok"}`, bearer(tokApprover)...), http.StatusBadRequest, "invalid_argument", "reason")
	if n := e.sim.Submissions(); n != 0 {
		t.Fatalf("%d submissions after refused approvals", n)
	}

	approved := decodeRefund(t, e.do(t, http.MethodPost, base+"/approve", "", bearer(tokApprover)...), http.StatusOK)
	if approved.State != "PROCESSING" || approved.Attempts != 1 {
		t.Fatalf("approved: %+v", approved)
	}
	st, err := e.engine.Await(t.Context(), "a1", func(s *reservation.State) bool { return s.Refund(rf.RefundNo).ProviderID != "" })
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Refund(rf.RefundNo); r.ApprovedBy != "approver:carol" || r.RequestedBy != "service:service-1" {
		t.Fatalf("journaled approver %q requester %q", r.ApprovedBy, r.RequestedBy)
	}
	// A duplicate answers the current state and sends nothing again.
	again := decodeRefund(t, e.do(t, http.MethodPost, base+"/approve", "", bearer(tokApprover)...), http.StatusOK)
	if again.State != "PROCESSING" || e.sim.Submissions() != 1 {
		t.Fatalf("duplicate approve: %+v, %d submissions", again, e.sim.Submissions())
	}
	if r := e.do(t, http.MethodGet, base, "", bearer(tokReader)...); !strings.Contains(string(r.body), `"approved_by":"approver:carol"`) ||
		!strings.Contains(string(r.body), `"requested_by":"service:service-1"`) {
		t.Fatalf("read: %s", r)
	}

	// An operator whose token says approver rejects the next one.
	rf2 := request("k2", 400)
	rej := decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/a1/refunds/"+rf2.RefundNo+"/reject", `{"reason":"not justified"}`,
		bearer(tokOperatorApprove)...), http.StatusOK)
	if rej.State != "FAILED" || rej.Code != "APPROVAL_REJECTED" {
		t.Fatalf("rejected: %+v", rej)
	}
	if r := e.do(t, http.MethodGet, "/v1/refunds?state=PENDING_APPROVAL", "", bearer(tokReader)...); strings.Contains(string(r.body), "T-a1") {
		t.Fatalf("still listed: %s", r)
	}
	if st, _ := e.engine.Get(t.Context(), "a1"); st.Refundable() != 400 || e.sim.Submissions() != 1 {
		t.Fatalf("refundable %d after the rejection (want 400), %d submissions", st.Refundable(), e.sim.Submissions())
	}
	// whoami tells the console who may approve.
	for tok, want := range map[string]bool{tokApprover: true, tokOperatorApprove: true, tokOperator: false} {
		r := e.do(t, http.MethodGet, "/v1/whoami", "", bearer(tok)...)
		if strings.Contains(string(r.body), `"approve"`) != want {
			t.Errorf("whoami %s: %s", tok, r)
		}
	}
}
