package reservation

import (
	"slices"
	"testing"
	"time"
)

// timedOutTwice drives the reported scenario: with one attempt allowed, the
// first submission and its resubmission both time out and two queries find
// nothing. It returns the state, the refund number, the policy and the time
// of the last query's answer.
func timedOutTwice(t *testing.T) (*State, string, Policy, time.Time) {
	t.Helper()
	policy := Policy{MaxAttempts: 1}
	s := registered(t)
	no := newRefund(t, s, "k1", nil)
	now := t0
	env := func() Env { return Env{Now: now, By: "provider:wechatpay", Policy: policy} }
	for attempt := 1; attempt <= 2; attempt++ {
		now = now.Add(10 * time.Second)
		run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: attempt, Outcome: Outcome{Kind: OutcomeUnknown, Code: "TIMEOUT"}}, env())
		if r := s.Refund(no); r.State != Unknown {
			t.Fatalf("after attempt %d timed out: %s", attempt, r.State)
		}
		now = s.Refund(no).DueAt
		assertTypes(t, run(t, s, FireTimer{RefundNo: no, DueAt: now}, env()), TypeQueryStarted)
		want := TypeSubmissionStarted
		if attempt == 2 {
			want = TypeProviderResult
		}
		assertTypes(t, run(t, s, outcome(no, SourceQuery, OutcomeNotFound), env()), want)
	}
	if r := s.Refund(no); r.State != Rejected || r.Attempts != 2 {
		t.Fatalf("after two timeouts and two empty queries: %+v", *r)
	}
	return s, no, policy, now
}

// "Not found" proves nothing while an attempt with an unknown outcome may
// still land: the refund stops being resent (REJECTED), but keeps a due
// time and is queried until the settle horizon has passed.
func TestNotFound_KeepsQueryingUntilTheHorizon(t *testing.T) {
	s, no, policy, now := timedOutTwice(t)
	r := s.Refund(no)
	if r.DueAt.IsZero() {
		t.Fatalf("REJECTED with an unknown attempt %v old has no due time: nothing will ever ask WeChat again", now.Sub(r.UnsettledAt))
	}
	if !slices.Contains(r.Attention(), string(Rejected)) {
		t.Fatalf("attention %v, want it listed as REJECTED", r.Attention())
	}
	horizon := policy.settleHorizon()
	// Queried on the reconcile schedule while the horizon lasts.
	for r.DueAt.Before(r.UnsettledAt.Add(horizon)) {
		now = r.DueAt
		ev := run(t, s, FireTimer{RefundNo: no, DueAt: now}, Env{Now: now, By: "engine", Policy: policy})
		if ev[len(ev)-1].Data.EventType() != TypeQueryStarted {
			t.Fatalf("timer of a settling REJECTED refund: %v", types(ev))
		}
		mustNoop(t, s, outcome(no, SourceQuery, OutcomeNotFound), Env{Now: now, By: "provider", Policy: policy})
		if r = s.Refund(no); r.DueAt.IsZero() || r.State != Rejected {
			t.Fatalf("not found within the horizon: %+v", *r)
		}
	}
	// Past the horizon, "not found" is final: the due time goes.
	now = r.DueAt
	run(t, s, FireTimer{RefundNo: no, DueAt: now}, Env{Now: now, By: "engine", Policy: policy})
	ev := run(t, s, outcome(no, SourceQuery, OutcomeNotFound), Env{Now: now, By: "provider", Policy: policy})
	assertTypes(t, ev, TypeProviderResult)
	if r = s.Refund(no); r.State != Rejected || !r.DueAt.IsZero() {
		t.Fatalf("not found past the horizon: %+v", *r)
	}
	mustNoop(t, s, outcome(no, SourceQuery, OutcomeNotFound), Env{Now: now, By: "provider", Policy: policy})
}

// A refund the provider keeps answering about is taken out of REJECTED
// while it settles, as before.
func TestNotFound_SettlingRefundTakesTheProvidersState(t *testing.T) {
	s, no, policy, now := timedOutTwice(t)
	ev := run(t, s, RecordOutcome{RefundNo: no, Source: SourceNotification, Outcome: Outcome{Kind: OutcomeSucceeded, ProviderID: "wx-1"}},
		Env{Now: now.Add(time.Hour), By: "provider", Policy: policy})
	assertTypes(t, ev, TypeProviderResult, TypeCanceled)
	if s.Refunded() != testPaid || s.Refundable() != 0 || s.Status != StatusCanceled {
		t.Fatalf("state %s", dump(s))
	}
}

// abandon is an operator's abandon with the fresh "not found" the
// adapter's query gives it.
func abandon(no, reason string, at time.Time) Abandon {
	return Abandon{RefundNo: no, Reason: reason, Check: freshCheck(OutcomeNotFound, at)}
}

func freshCheck(kind OutcomeKind, at time.Time) *ProviderCheck {
	return &ProviderCheck{Outcome: Outcome{Kind: kind, Code: "C_" + string(kind)}, At: at}
}

// Releasing an amount needs a fresh "not found", journaled with the
// release, and no attempt that may still land.
func TestAbandon_NeedsAFreshNotFoundAndASettledRefund(t *testing.T) {
	s, no, policy, now := timedOutTwice(t)
	r := s.Refund(no)
	past := r.UnsettledAt.Add(policy.settleHorizon())
	op := func(at time.Time) Env { return Env{Now: at, By: "operator:alice", Policy: policy} }
	cases := []struct {
		name  string
		at    time.Time
		check *ProviderCheck
		want  Code
	}{
		{"within the horizon, fresh not found", now, freshCheck(OutcomeNotFound, now), CodeRefundSettling},
		{"just before the horizon", past.Add(-time.Second), freshCheck(OutcomeNotFound, past.Add(-time.Second)), CodeRefundSettling},
		{"no query", past, nil, CodeReleaseUnconfirmed},
		{"query failed", past, freshCheck(OutcomeUnknown, past), CodeReleaseUnconfirmed},
		{"stale query", past.Add(time.Hour), freshCheck(OutcomeNotFound, past), CodeReleaseUnconfirmed},
		{"query from the future", past, freshCheck(OutcomeNotFound, past.Add(time.Hour)), CodeReleaseUnconfirmed},
		{"provider has it", past, freshCheck(OutcomeProcessing, past), CodeProviderHasRefund},
		{"provider paid it", past, freshCheck(OutcomeSucceeded, past), CodeProviderHasRefund},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Clone()
			_, err := Decide(s, Abandon{RefundNo: no, Reason: "gave up", Check: tc.check}, op(tc.at))
			if CodeOf(err) != tc.want {
				t.Fatalf("Abandon error %v (code %q), want %q", err, CodeOf(err), tc.want)
			}
			assertSameState(t, before, s)
		})
	}
	refundable := s.Refundable()
	ev := run(t, s, Abandon{RefundNo: no, Reason: "gave up", Check: freshCheck(OutcomeNotFound, past)}, op(past.Add(time.Second)))
	assertTypes(t, ev, TypeProviderResult, TypeAbandoned)
	if d := ev[0].Data.(ProviderResult); d.Source != SourceQuery || d.Outcome != OutcomeNotFound || d.From != Rejected || d.To != Rejected {
		t.Fatalf("journaled query %+v", d)
	}
	if s.Refundable() != refundable+testPaid || s.Refund(no).State != Failed {
		t.Fatalf("after abandon: %s", dump(s))
	}
}

// A refusal of the refund's only attempt settles it: abandoning needs only
// the fresh query, not the horizon.
func TestAbandon_RefusedAtOnceNeedsNoHorizon(t *testing.T) {
	s, no := refundIn(t, Rejected)
	now := t0.Add(time.Hour)
	mustFail(t, s, Abandon{RefundNo: no}, testEnv(now, "op"), ErrReleaseUnconfirmed)
	assertTypes(t, run(t, s, Abandon{RefundNo: no, Check: freshCheck(OutcomeNotFound, now)}, testEnv(now, "op")),
		TypeProviderResult, TypeAbandoned)
}

// A refusal of a resubmission does not settle the earlier attempt that
// timed out: it may still land.
func TestAbandon_RefusedResubmissionAfterATimeoutSettles(t *testing.T) {
	s, no := refundIn(t, Processing)
	run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeUnknown}}, providerEnv)
	first := s.Refund(no).UnsettledAt
	due := s.Refund(no).DueAt
	assertTypes(t, run(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine")), TypeSubmissionStarted)
	ev := run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 2, Outcome: Outcome{Kind: OutcomeRejected, Code: "NOT_ENOUGH"}}, testEnv(due, "provider"))
	if d := ev[0].Data.(ProviderResult); d.To != Rejected || d.DueAt.IsZero() {
		t.Fatalf("refusal after a timeout: %+v, want REJECTED still queried", d)
	}
	if got := s.Refund(no).UnsettledAt; !got.Equal(first) {
		t.Fatalf("unsettled since %v, want the first attempt's %v", got, first)
	}
	now := due.Add(time.Minute)
	mustFail(t, s, Abandon{RefundNo: no, Check: freshCheck(OutcomeNotFound, now)}, testEnv(now, "op"), ErrRefundSettling)
}

// WeChat paid a refund refundd had closed as FAILED: the money is counted
// where it is, and operators see the conflict.
func TestSuccessAfterFailed_IsCounted(t *testing.T) {
	for _, from := range []RefundState{Failed, failedAbandoned} {
		for _, src := range []Source{SourceNotification, SourceQuery} {
			t.Run(string(from)+"/"+string(src), func(t *testing.T) {
				s := registered(t)
				no := newRefund(t, s, "k1", nil)
				switch from {
				case Failed:
					run(t, s, outcome(no, SourceNotification, OutcomeFailed), providerEnv)
				default:
					run(t, s, rejection(s, no), providerEnv)
					now := providerEnv.Now
					run(t, s, Abandon{RefundNo: no, Reason: "gave up", Check: freshCheck(OutcomeNotFound, now)}, testEnv(now, "op"))
				}
				if s.Refundable() != testPaid {
					t.Fatalf("refundable %d after the refund failed", s.Refundable())
				}
				late := providerEnv.Now.Add(48 * time.Hour)
				ev := run(t, s, RecordOutcome{RefundNo: no, Source: src, Outcome: Outcome{Kind: OutcomeSucceeded, SuccessTime: late}},
					testEnv(late, "provider"))
				assertTypes(t, ev, TypeProviderResult, TypeCanceled)
				r := s.Refund(no)
				if r.State != Succeeded || s.Refunded() != testPaid || s.Refundable() != 0 || s.Status != StatusCanceled {
					t.Fatalf("after WeChat's SUCCESS: %s", dump(s))
				}
				if !slices.Contains(r.Attention(), AttentionConflict) || r.Conflicts != 1 {
					t.Fatalf("attention %v conflicts %d: operators must see it", r.Attention(), r.Conflicts)
				}
				mustNoop(t, s, RecordOutcome{RefundNo: no, Source: src, Outcome: Outcome{Kind: OutcomeSucceeded}}, testEnv(late, "provider"))
			})
		}
	}
	t.Run("another refund holds the amount", func(t *testing.T) {
		// The books cannot take it (refunded + in flight would pass the
		// paid amount): it stays a conflict, as before.
		s, no := refundIn(t, Failed)
		newRefund(t, s, "k2", nil)
		assertTypes(t, run(t, s, outcome(no, SourceNotification, OutcomeSucceeded), providerEnv), TypeConflict)
		if s.Refund(no).State != Failed || s.Refunded()+s.InFlight() > s.Amount {
			t.Fatalf("state %s", dump(s))
		}
	})
}
