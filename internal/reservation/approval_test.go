package reservation

import (
	"testing"
	"time"
)

func approvalEnv(now time.Time, by string, p Policy) Env {
	return Env{Now: now, By: by, Policy: p, Encode: func(r RefundRequest) ([]byte, error) {
		return []byte(`{"out_refund_no":"` + r.RefundNo + `"}`), nil
	}}
}

func TestRequestRefund_ApprovalRules(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		amount int64
		by     string
		rule   string // "" = sent at once
	}{
		{"no rules", Policy{}, testPaid, "operator:alice", ""},
		{"all", Policy{ApproveAll: true}, 1, "service:booking", RuleAll},
		{"above amount", Policy{ApproveAbove: 5000}, 5001, "service:booking", RuleAmount},
		{"at amount", Policy{ApproveAbove: 5000}, 5000, "service:booking", ""},
		{"above share", Policy{ApproveAbovePercent: 50}, testPaid/2 + 1, "service:booking", RuleShare},
		{"at share", Policy{ApproveAbovePercent: 50}, testPaid / 2, "service:booking", ""},
		{"operator requests", Policy{ApproveNonService: true}, 1, "operator:alice", RuleRequester},
		{"service requests", Policy{ApproveNonService: true}, 1, "service:booking", ""},
		{"first rule named", Policy{ApproveAbove: 1, ApproveNonService: true}, 2, "operator:alice", RuleAmount},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := registered(t)
			env := approvalEnv(t0, tc.by, tc.policy)
			events := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k1", Amount: ptr(tc.amount)}, env)
			r := s.Refunds[0]
			if tc.rule == "" {
				assertTypes(t, events, TypeRefundRequested, TypeSubmissionStarted)
				if r.State != Processing || r.ApprovalRequired {
					t.Fatalf("refund %+v, want PROCESSING without approval", *r)
				}
				return
			}
			assertTypes(t, events, TypeRefundRequested, TypeApprovalRequested)
			a := events[1].Data.(ApprovalRequested)
			if a.Rule != tc.rule || !a.DueAt.Equal(t0.Add(DefaultApprovalTimeout)) || string(a.Request) != `{"out_refund_no":"`+r.No+`"}` {
				t.Fatalf("ApprovalRequested %+v, want rule %q", a, tc.rule)
			}
			if r.State != PendingApproval || r.Attempts != 0 || !r.DueAt.Equal(a.DueAt) || s.InFlight() != tc.amount {
				t.Fatalf("refund %+v in flight %d: want PENDING_APPROVAL holding %d, never sent", *r, s.InFlight(), tc.amount)
			}
		})
	}
}

// pendingRefund is a registered reservation with one refund of 4000
// requested by operator:alice and waiting for approval.
func pendingRefund(t *testing.T, p Policy) (*State, string) {
	t.Helper()
	s := registered(t)
	run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k1", Amount: ptr(4000)}, approvalEnv(t0, "operator:alice", p))
	return s, s.Refunds[0].No
}

func TestApprove(t *testing.T) {
	p := Policy{ApproveAll: true, ApprovalTimeout: time.Hour}
	t.Run("by another person submits", func(t *testing.T) {
		s, no := pendingRefund(t, p)
		events := run(t, s, Approve{RefundNo: no}, approvalEnv(t0.Add(time.Minute), "approver:carol", p))
		assertTypes(t, events, TypeApproved, TypeSubmissionStarted)
		r := s.Refund(no)
		if d := events[0].Data.(Approved); d.RequestedBy != "operator:alice" {
			t.Fatalf("Approved %+v does not journal the requester", d)
		}
		if r.State != Processing || r.Attempts != 1 || r.ApprovedBy != "approver:carol" || r.RequestedBy != "operator:alice" {
			t.Fatalf("refund %+v", *r)
		}
		// A duplicate answers the current state.
		mustNoop(t, s, Approve{RefundNo: no}, approvalEnv(t0.Add(2*time.Minute), "approver:carol", p))
		mustNoop(t, s, Approve{RefundNo: no}, approvalEnv(t0.Add(2*time.Minute), "approver:dave", p))
		mustFail(t, s, Reject{RefundNo: no, Reason: "late"}, approvalEnv(t0.Add(2*time.Minute), "approver:carol", p), ErrInvalidState)
	})
	t.Run("by the requester is refused, whatever the role", func(t *testing.T) {
		s, no := pendingRefund(t, p)
		for _, by := range []string{"operator:alice", "approver:alice"} {
			mustFail(t, s, Approve{RefundNo: no}, approvalEnv(t0, by, p), ErrSelfApproval)
		}
	})
	t.Run("within the spacing is scheduled", func(t *testing.T) {
		sp := p
		sp.RefundSpacing = time.Minute
		s := registered(t)
		run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k0", Amount: ptr(100)}, approvalEnv(t0, "service:booking", Policy{RefundSpacing: time.Minute}))
		run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k1", Amount: ptr(100)}, approvalEnv(t0, "service:booking", sp))
		no := s.Refunds[1].No
		events := run(t, s, Approve{RefundNo: no}, approvalEnv(t0.Add(10*time.Second), "approver:carol", sp))
		assertTypes(t, events, TypeApproved, TypeSubmissionWaits)
		if d := events[1].Data.(SubmissionScheduled); !d.DueAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("scheduled %+v, want due when the spacing ends", d)
		}
	})
	t.Run("after the window is refused", func(t *testing.T) {
		s, no := pendingRefund(t, p)
		mustFail(t, s, Approve{RefundNo: no}, approvalEnv(t0.Add(time.Hour), "approver:carol", p), ErrInvalidState)
	})
	t.Run("a refund that needs none is refused", func(t *testing.T) {
		s := registered(t)
		run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k1", Amount: ptr(1)}, approvalEnv(t0, "service:booking", Policy{}))
		mustFail(t, s, Approve{RefundNo: s.Refunds[0].No}, approvalEnv(t0, "approver:carol", Policy{}), ErrInvalidState)
		mustFail(t, s, Reject{RefundNo: s.Refunds[0].No, Reason: "no"}, approvalEnv(t0, "approver:carol", Policy{}), ErrInvalidState)
	})
	t.Run("unknown refund", func(t *testing.T) {
		s, _ := pendingRefund(t, p)
		mustFail(t, s, Approve{RefundNo: "R-nope-1"}, approvalEnv(t0, "approver:carol", p), ErrNotFound)
	})
}

func TestReject(t *testing.T) {
	p := Policy{ApproveAll: true}
	s, no := pendingRefund(t, p)
	env := approvalEnv(t0.Add(time.Minute), "approver:carol", p)
	mustFail(t, s, Reject{RefundNo: no}, env, ErrInvalid)
	events := run(t, s, Reject{RefundNo: no, Reason: "not justified"}, env)
	assertTypes(t, events, TypeApprovalRejected)
	r := s.Refund(no)
	if r.State != Failed || r.Code != CodeApprovalRejected || r.Message != "not justified" || r.RejectedBy != "approver:carol" ||
		!r.DueAt.IsZero() || s.InFlight() != 0 || s.Refundable() != testPaid {
		t.Fatalf("refund %+v refundable %d: want FAILED and released", *r, s.Refundable())
	}
	mustNoop(t, s, Reject{RefundNo: no, Reason: "again"}, env)
	mustFail(t, s, Approve{RefundNo: no}, env, ErrInvalidState)
}

func TestApproval_Expiry(t *testing.T) {
	p := Policy{ApproveAll: true, ApprovalTimeout: time.Hour}
	s, no := pendingRefund(t, p)
	due := s.Refund(no).DueAt
	if !due.Equal(t0.Add(time.Hour)) {
		t.Fatalf("due %v", due)
	}
	mustNoop(t, s, FireTimer{RefundNo: no, DueAt: due.Add(-time.Second)}, approvalEnv(due, "engine", p)) // stale
	events := run(t, s, FireTimer{RefundNo: no, DueAt: due}, approvalEnv(due, "engine", p))
	assertTypes(t, events, TypeApprovalExpired)
	if r := s.Refund(no); r.State != Failed || r.Code != CodeApprovalExpired || s.Refundable() != testPaid || r.Attempts != 0 {
		t.Fatalf("refund %+v: want FAILED, released, never sent", *r)
	}
	mustNoop(t, s, FireTimer{RefundNo: no, DueAt: due}, approvalEnv(due, "engine", p))
}

// Money held for approval cannot be claimed twice.
func TestApproval_HoldsAmount(t *testing.T) {
	p := Policy{ApproveAll: true}
	s, _ := pendingRefund(t, p)
	mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k2", Amount: ptr(testPaid - 3999)},
		approvalEnv(t0, "service:booking", p), ErrInsufficientRefundable)
}

// A provider outcome naming a refund that was never approved, so never
// sent, is not applied: a final one is a conflict for operators.
func TestApproval_OutcomeOfUnsentRefund(t *testing.T) {
	p := Policy{ApproveAll: true}
	s, no := pendingRefund(t, p)
	ok := outcome(no, SourceNotification, OutcomeSucceeded)
	events := run(t, s, ok, approvalEnv(t0, "provider:wechatpay", p))
	assertTypes(t, events, TypeConflict)
	if r := s.Refund(no); r.State != PendingApproval || s.Refunded() != 0 {
		t.Fatalf("refund %+v", *r)
	}
	mustNoop(t, s, outcome(no, SourceQuery, OutcomeProcessing), approvalEnv(t0, "provider:wechatpay", p))
}

func TestPolicy_ValidateApproval(t *testing.T) {
	for _, p := range []Policy{{ApproveAbove: -1}, {ApproveAbovePercent: 101}, {ApproveAbovePercent: -1}, {ApprovalTimeout: -time.Second}} {
		if err := p.Validate(); CodeOf(err) != CodeInvalid {
			t.Errorf("Validate(%+v) = %v", p, err)
		}
	}
	if err := (Policy{ApproveAbove: 1, ApproveAbovePercent: 100, ApprovalTimeout: time.Hour}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestSamePerson(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"operator:alice", "approver:alice", true},
		{"operator:alice", "operator:alice", true},
		{"operator:alice", "approver:carol", false},
		{"alice", "approver:alice", true},
	} {
		if got := SamePerson(tc.a, tc.b); got != tc.same {
			t.Errorf("SamePerson(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}
