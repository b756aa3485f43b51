package reservation

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// nextCase is a refund driven into some state through Decide, and the
// time NextOf is asked at.
type nextCase struct {
	name   string
	policy Policy
	build  func(t *testing.T, p Policy) (*State, string, time.Time)
	kind   NextKind
	// at is the wanted NextStep.At relative to the refund's DueAt: true
	// wants DueAt, false wants zero.
	atDue        bool
	attemptsLeft int
	abandonFrom  bool
	actions      []string
	why          []string // fragments the sentence must hold
}

func nextCases() []nextCase {
	approval := Policy{ApproveAll: true, ApprovalTimeout: time.Hour}
	spaced := Policy{RefundSpacing: time.Minute}
	pending := func(t *testing.T, p Policy) (*State, string) {
		s := registered(t)
		ev := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(4000)}, Env{Now: t0, By: "service:booking", Policy: p})
		return s, ev[0].Data.(RefundRequested).RefundNo
	}
	in := func(st RefundState) func(t *testing.T, _ Policy) (*State, string, time.Time) {
		return func(t *testing.T, _ Policy) (*State, string, time.Time) {
			s, no := refundIn(t, st)
			return s, no, t0.Add(2 * time.Hour)
		}
	}
	return []nextCase{
		{name: "sent, no answer yet", build: func(t *testing.T, _ Policy) (*State, string, time.Time) {
			s := registered(t)
			return s, newRefund(t, s, "k", ptr(4000)), t0.Add(time.Second)
		}, kind: NextRecheckAt, atDue: true, attemptsLeft: 4, actions: []string{ActionReconcile}, why: []string{"Attempt 1 was sent to WeChat and has no answer yet"}},
		{name: "accepted by WeChat", build: func(t *testing.T, _ Policy) (*State, string, time.Time) {
			s := registered(t)
			no := newRefund(t, s, "k", ptr(4000))
			run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeProcessing, ProviderID: "50300001"}}, providerEnv)
			return s, no, t0.Add(2 * time.Minute)
		}, kind: NextWaitForWeChat, atDue: true, attemptsLeft: 4, actions: []string{ActionReconcile}, why: []string{"WeChat accepted it", "notification"}},
		{name: "unknown answer, retry", build: func(t *testing.T, _ Policy) (*State, string, time.Time) {
			s := registered(t)
			no := newRefund(t, s, "k", ptr(4000))
			run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeUnknown, Code: "SYSTEM_ERROR"}}, providerEnv)
			return s, no, t0.Add(time.Minute)
		}, kind: NextRetryAt, atDue: true, attemptsLeft: 4, actions: []string{ActionReconcile}, why: []string{"Attempt 1 did not settle it (code SYSTEM_ERROR)", "4 attempts left"}},
		{name: "unknown after every attempt", build: in(Unknown), kind: NextRecheckAt, atDue: true, attemptsLeft: 5,
			actions: []string{ActionReconcile, ActionResubmit}, why: []string{"answers to its 5 attempts did not say", "only WeChat can tell", "0 queries so far", "may reconcile"}},
		{name: "unknown and stuck", build: func(t *testing.T, _ Policy) (*State, string, time.Time) {
			s, no := refundIn(t, Unknown)
			r := s.Refund(no)
			now := t0.Add(48 * time.Hour)
			run(t, s, FireTimer{RefundNo: no, DueAt: r.DueAt}, Env{Now: now, By: "engine"})
			return s, no, now
		}, kind: NextRecheckAt, atDue: true, attemptsLeft: 5, actions: []string{ActionReconcile, ActionResubmit},
			why: []string{"1 query so far", "flagged stuck"}},
		{name: "rejected", build: in(Rejected), kind: NextOperatorMustAct, atDue: false,
			actions: []string{ActionReconcile, ActionResubmit, ActionAbandon}, why: []string{"WeChat refused attempt 1 (code C_REJECTED)", "resubmit", "abandon"}},
		{name: "rejected while an earlier attempt may land", build: func(t *testing.T, _ Policy) (*State, string, time.Time) {
			s, no, _, now := timedOutTwice(t)
			return s, no, now
		}, kind: NextOperatorMustAct, atDue: true, abandonFrom: true,
			actions: []string{ActionReconcile, ActionResubmit}, why: []string{"cannot be abandoned before the time shown"}},
		{name: "abnormal", build: in(Abnormal), kind: NextOperatorMustAct, atDue: true,
			actions: []string{ActionReconcile, ActionResolve, ActionApplyAbnormal}, why: []string{"could not return the money", "resolve"}},
		{name: "succeeded", build: in(Succeeded), kind: NextNone, why: []string{"WeChat refunded the money", "Nothing more happens"}},
		{name: "closed by WeChat", build: in(Failed), kind: NextNone, why: []string{"WeChat closed the refund (code C_FAILED)"}},
		{name: "abandoned", build: in(failedAbandoned), kind: NextNone, why: []string{"An operator abandoned it"}},
		{name: "awaiting approval", policy: approval, build: func(t *testing.T, p Policy) (*State, string, time.Time) {
			s, no := pending(t, p)
			return s, no, t0.Add(time.Minute)
		}, kind: NextApproverMustAct, atDue: true, attemptsLeft: 5, actions: []string{ActionApprove, ActionReject},
			why: []string{"approver other than its requester (service:booking)", "nothing was sent to WeChat"}},
		{name: "approval window closed", policy: approval, build: func(t *testing.T, p Policy) (*State, string, time.Time) {
			s, no := pending(t, p)
			return s, no, t0.Add(time.Hour)
		}, kind: NextApproverMustAct, atDue: true, attemptsLeft: 5, actions: []string{ActionReject}, why: []string{"can no longer be approved"}},
		{name: "rejected by an approver", policy: approval, build: func(t *testing.T, p Policy) (*State, string, time.Time) {
			s, no := pending(t, p)
			run(t, s, Reject{RefundNo: no, Reason: "no"}, Env{Now: t0.Add(time.Minute), By: "approver:bob", Policy: p})
			return s, no, t0.Add(time.Minute)
		}, kind: NextNone, why: []string{"An approver (approver:bob) rejected it"}},
		{name: "held back by spacing", policy: spaced, build: func(t *testing.T, p Policy) (*State, string, time.Time) {
			s := registered(t)
			enc := func(RefundRequest) ([]byte, error) { return []byte("{}"), nil }
			run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "a", Amount: ptr(1000)}, Env{Now: t0, By: "service:booking", Policy: p, Encode: enc})
			ev := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "b", Amount: ptr(1000)}, Env{Now: t0.Add(time.Second), By: "service:booking", Policy: p, Encode: enc})
			return s, ev[0].Data.(RefundRequested).RefundNo, t0.Add(time.Second)
		}, kind: NextSubmitAt, atDue: true, attemptsLeft: 5, why: []string{"waits for WeChat's spacing"}},
	}
}

func TestNextOf_States(t *testing.T) {
	for _, tc := range nextCases() {
		t.Run(tc.name, func(t *testing.T) {
			s, no, now := tc.build(t, tc.policy)
			r := s.Refund(no)
			before := *r
			got := NextOf(r, tc.policy, now)
			if !reflect.DeepEqual(before, *r) {
				t.Fatal("NextOf changed the refund")
			}
			if got.Kind != tc.kind {
				t.Errorf("kind %s, want %s (%s)", got.Kind, tc.kind, got.Why)
			}
			wantAt := time.Time{}
			if tc.atDue {
				wantAt = r.DueAt
				if wantAt.IsZero() {
					t.Fatalf("case wants At = DueAt but the refund has no due time")
				}
			}
			if !got.At.Equal(wantAt) {
				t.Errorf("At %v, want %v", got.At, wantAt)
			}
			if got.AttemptsLeft != tc.attemptsLeft {
				t.Errorf("attempts left %d, want %d", got.AttemptsLeft, tc.attemptsLeft)
			}
			if tc.abandonFrom != !got.AbandonFrom.IsZero() {
				t.Errorf("abandon from %v, want set: %v", got.AbandonFrom, tc.abandonFrom)
			}
			if tc.abandonFrom && !got.AbandonFrom.After(now) {
				t.Errorf("abandon from %v is not after now %v", got.AbandonFrom, now)
			}
			if !slices.Equal(got.Actions, tc.actions) {
				t.Errorf("actions %v, want %v", got.Actions, tc.actions)
			}
			for _, w := range tc.why {
				if !strings.Contains(got.Why, w) {
					t.Errorf("why %q lacks %q", got.Why, w)
				}
			}
			// Deterministic: asked again, the same answer.
			if again := NextOf(r, tc.policy, now); !reflect.DeepEqual(again, got) {
				t.Errorf("a second call answered %+v, first %+v", again, got)
			}
		})
	}
}

// TestNextOf_ActionsAgreeWithDecide: an action is listed exactly when
// Decide, asked by a principal allowed to take it, would journal
// something for it; the console offers only listed ones.
func TestNextOf_ActionsAgreeWithDecide(t *testing.T) {
	commands := map[string]func(no string, now time.Time) Command{
		ActionReconcile: func(no string, _ time.Time) Command { return CheckProvider{RefundNo: no, Operator: true} },
		ActionResubmit:  func(no string, _ time.Time) Command { return Resubmit{RefundNo: no} },
		ActionAbandon:   func(no string, now time.Time) Command { return abandon(no, "gave up", now) },
		ActionResolve:   func(no string, _ time.Time) Command { return Resolve{RefundNo: no, Reason: "settled at WeChat"} },
		ActionApplyAbnormal: func(no string, _ time.Time) Command {
			return ApplyAbnormal{RefundNo: no, Type: AbnormalMerchantBankCard}
		},
		ActionApprove: func(no string, _ time.Time) Command { return Approve{RefundNo: no} },
		ActionReject:  func(no string, _ time.Time) Command { return Reject{RefundNo: no, Reason: "no"} },
	}
	for _, tc := range nextCases() {
		t.Run(tc.name, func(t *testing.T) {
			s, no, now := tc.build(t, tc.policy)
			listed := NextOf(s.Refund(no), tc.policy, now).Actions
			for _, action := range []string{ActionReconcile, ActionResubmit, ActionAbandon, ActionResolve, ActionApplyAbnormal, ActionApprove, ActionReject} {
				events, err := Decide(s, commands[action](no, now), Env{Now: now, By: "approver:zoe", Policy: tc.policy})
				decided := err == nil && len(events) > 0
				if decided != slices.Contains(listed, action) {
					t.Errorf("%s: listed %v, Decide gives %d events, error %v", action, slices.Contains(listed, action), len(events), err)
				}
			}
		})
	}
}
