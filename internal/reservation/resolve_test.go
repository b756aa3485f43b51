package reservation

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// ABNORMAL refunds: reconciled by queries until WeChat or an operator
// settles them; Resolve is the operator's way to say it was settled.

func TestResolve_States(t *testing.T) {
	for _, from := range allFromStates {
		t.Run(string(from), func(t *testing.T) {
			s, no := refundIn(t, from)
			env := Env{Now: t0.Add(3 * time.Hour), By: "operator:alice"}
			cmd := Resolve{RefundNo: no, Reason: "refunded by bank transfer, ticket 42"}
			if from != Abnormal {
				mustFail(t, s, cmd, env, ErrInvalidState)
				return
			}
			r0 := *s.Refund(no)
			ev := run(t, s, cmd, env)
			if assertTypes(t, ev, TypeResolved); ev[0].Data != (Resolved{RefundNo: no, Reason: cmd.Reason}) {
				t.Fatalf("event %+v", ev[0].Data)
			}
			r := s.Refund(no)
			if r.State != Succeeded || r.Code != "RESOLVED_BY_OPERATOR" || r.Message != cmd.Reason || !r.SucceededAt.Equal(env.Now) ||
				!r.UpdatedAt.Equal(env.Now) || !r.DueAt.IsZero() || r.Retry || r.Attempts != r0.Attempts || r.ProviderID != r0.ProviderID {
				t.Fatalf("refund %+v", *r)
			}
			if s.Refunded() != 4000 || s.InFlight() != 0 || s.Refundable() != testPaid-4000 || s.Status != StatusAccepted || !s.NextDue().IsZero() {
				t.Fatalf("state %s", dump(s))
			}
			// SUCCEEDED is never left.
			mustFail(t, s, cmd, env, ErrInvalidState)
			mustFail(t, s, Resubmit{RefundNo: no}, env, ErrInvalidState)
			mustFail(t, s, Abandon{RefundNo: no}, env, ErrInvalidState)
			mustNoop(t, s, FireTimer{RefundNo: no, DueAt: r0.DueAt}, testEnv(r0.DueAt, "engine"))
			mustNoop(t, s, CheckProvider{RefundNo: no}, env)
			mustNoop(t, s, outcome(no, SourceQuery, OutcomeSucceeded), providerEnv)
			assertTypes(t, run(t, s, outcome(no, SourceQuery, OutcomeAbnormal), providerEnv), TypeConflict)
			assertTypes(t, run(t, s, outcome(no, SourceQuery, OutcomeFailed), providerEnv), TypeConflict)
			if s.Refund(no).State != Succeeded {
				t.Fatal("a contradiction moved the resolved refund")
			}
		})
	}
	t.Run("waiting states", func(t *testing.T) {
		s, no := refundIn(t, Processing)
		run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeUnknown}}, providerEnv)
		mustFail(t, s, Resolve{RefundNo: no, Reason: "x"}, providerEnv, ErrInvalidState) // retry pending
		s, no, env := deferredRefund(t)
		mustFail(t, s, Resolve{RefundNo: no, Reason: "x"}, env, ErrInvalidState) // never sent
	})
	t.Run("after reconciliation queries", func(t *testing.T) {
		s, no := refundIn(t, Abnormal)
		for range 3 {
			due := s.Refund(no).DueAt
			run(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
		}
		run(t, s, Resolve{RefundNo: no, Reason: "settled"}, testEnv(t0.Add(time.Hour), "operator:alice"))
		if r := s.Refund(no); r.State != Succeeded || r.Queries != 3 || !r.DueAt.IsZero() {
			t.Fatalf("refund %+v", *r)
		}
	})
}

func TestResolve_Reason(t *testing.T) {
	cases := []struct {
		reason string
		ok     bool
	}{
		{"", false},
		{strings.Repeat("r", 81), false},
		{strings.Repeat("退", 27), false}, // 81 bytes
		{"line\nbreak", false},
		{"tab\there", false},
		{"\x7f", false},
		{"\xff", false},
		{"x", true},
		{strings.Repeat("r", 80), true},
		{strings.Repeat("退", 26) + "ab", true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%q", tc.reason), func(t *testing.T) {
			s, no := refundIn(t, Abnormal)
			cmd := Resolve{RefundNo: no, Reason: tc.reason}
			if tc.ok {
				run(t, s, cmd, testEnv(t0, "operator:alice"))
				if s.Refund(no).Message != tc.reason {
					t.Fatalf("message %q", s.Refund(no).Message)
				}
				return
			}
			err := mustFail(t, s, cmd, testEnv(t0, "operator:alice"), ErrInvalid)
			if err.(*Error).Field != "reason" {
				t.Fatalf("field %q", err.(*Error).Field)
			}
		})
	}
}

func TestResolve_NotFound(t *testing.T) {
	mustFail(t, registered(t), Resolve{RefundNo: "R-resv-1-1", Reason: "x"}, testEnv(t0, "op"), ErrNotFound)
	mustFail(t, &State{}, Resolve{RefundNo: "R-resv-1-1", Reason: "x"}, testEnv(t0, "op"), ErrNotFound)
	s, _ := refundIn(t, Abnormal)
	mustFail(t, s, Resolve{RefundNo: "R-resv-1-2", Reason: "x"}, testEnv(t0, "op"), ErrNotFound)
}

func TestResolve_Cancels(t *testing.T) {
	cases := []struct {
		name string
		// other is a second refund of the rest (6000), driven to this
		// outcome first; "" means no second refund.
		abnormal int64 // the resolved refund's amount; nil = everything
		other    OutcomeKind
		cancels  bool
	}{
		{name: "the whole amount", abnormal: testPaid, cancels: true},
		{name: "the rest after a success", abnormal: 4000, other: OutcomeSucceeded, cancels: true},
		{name: "part, the rest never claimed", abnormal: 4000},
		{name: "part, the rest in flight", abnormal: 4000, other: OutcomeProcessing},
		{name: "part, the rest failed", abnormal: 4000, other: OutcomeFailed},
		{name: "part, the rest abnormal too", abnormal: 4000, other: OutcomeAbnormal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := registered(t)
			no := newRefund(t, s, "key-1", ptr(tc.abnormal))
			if tc.other != "" {
				other := newRefund(t, s, "key-2", ptr(testPaid-tc.abnormal))
				run(t, s, RecordOutcome{RefundNo: other, Source: SourceQuery, Outcome: Outcome{Kind: tc.other, ProviderID: "503-2"}}, providerEnv)
			}
			run(t, s, outcome(no, SourceNotification, OutcomeAbnormal), providerEnv)
			env := testEnv(t0.Add(2*time.Hour), "operator:alice")
			ev := run(t, s, Resolve{RefundNo: no, Reason: "settled"}, env)
			if !tc.cancels {
				assertTypes(t, ev, TypeResolved)
				if s.Status != StatusAccepted {
					t.Fatalf("canceled with refunded %d of %d", s.Refunded(), s.Amount)
				}
				return
			}
			assertTypes(t, ev, TypeResolved, TypeCanceled)
			if got := ev[1].Data.(Canceled); got.Refunded != testPaid {
				t.Fatalf("Canceled %+v", got)
			}
			if s.Status != StatusCanceled || s.Refunded() != testPaid || s.Refundable() != 0 {
				t.Fatalf("state %s", dump(s))
			}
			mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-3", Amount: ptr(1)}, env, ErrCanceled)
		})
	}
}

// TestFireTimer_AbnormalReconciled: entering ABNORMAL schedules the next
// query on the refund's query schedule, and its timer keeps querying, like
// PROCESSING and UNKNOWN, until the refund is settled.
func TestFireTimer_AbnormalReconciled(t *testing.T) {
	custom := []time.Duration{2 * time.Minute, 20 * time.Minute, 3 * time.Hour}
	cases := []struct {
		name    string
		backoff []time.Duration
		from    RefundState
		queries int  // queries made before ABNORMAL
		retry   bool // a retry was pending
		wantDue time.Duration
	}{
		{name: "from PROCESSING", from: Processing, wantDue: time.Minute},
		{name: "from UNKNOWN", from: Unknown, wantDue: time.Minute},
		{name: "from REJECTED (no due time)", from: Rejected, wantDue: time.Minute},
		{name: "after two queries", from: Processing, queries: 2, wantDue: 10 * time.Minute},
		{name: "past the schedule's end", from: Processing, queries: 9, wantDue: time.Hour},
		{name: "custom schedule", backoff: custom, from: Processing, wantDue: 2 * time.Minute},
		{name: "custom schedule after a query", backoff: custom, from: Unknown, queries: 1, wantDue: 20 * time.Minute},
		{name: "instead of a pending retry", from: Processing, retry: true, wantDue: time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			policy := Policy{QueryBackoff: tc.backoff}
			s, no := refundIn(t, tc.from)
			for range tc.queries {
				run(t, s, CheckProvider{RefundNo: no, Operator: true}, Env{Now: providerEnv.Now, By: "op", Policy: policy})
			}
			if tc.retry {
				run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: s.Refund(no).Attempts, Outcome: Outcome{Kind: OutcomeUnknown}}, providerEnv)
				if !s.Refund(no).Retry {
					t.Fatal("no retry pending")
				}
			}
			now := t0.Add(5 * time.Hour)
			ev := run(t, s, RecordOutcome{RefundNo: no, Source: SourceNotification, Outcome: Outcome{Kind: OutcomeAbnormal, Code: "ABNORMAL"}},
				Env{Now: now, By: "provider:wechatpay", Policy: policy})
			due := now.Add(tc.wantDue)
			if d := ev[0].Data.(ProviderResult); d.To != Abnormal || !d.DueAt.Equal(due) || d.Retry {
				t.Fatalf("event %+v, want ABNORMAL due at %v", d, due)
			}
			r := s.Refund(no)
			if r.State != Abnormal || !r.DueAt.Equal(due) || r.Retry || r.Queries != tc.queries || !s.NextDue().Equal(due) {
				t.Fatalf("refund %+v", *r)
			}
			// The timer queries, on the same schedule.
			ev = run(t, s, FireTimer{RefundNo: no, DueAt: due}, Env{Now: due, By: "engine", Policy: policy})
			want := QueryStarted{RefundNo: no, Query: tc.queries + 1, DueAt: due.Add(tc.wantDue)}
			if assertTypes(t, ev, TypeQueryStarted); ev[0].Data != want {
				t.Fatalf("event %+v, want %+v", ev[0].Data, want)
			}
			if r := s.Refund(no); r.State != Abnormal || r.Queries != tc.queries+1 || !r.DueAt.Equal(want.DueAt) {
				t.Fatalf("refund %+v", *r)
			}
		})
	}
}

func TestRecordOutcome_AbnormalAnswers(t *testing.T) {
	setup := func(t *testing.T) (*State, string, time.Time) {
		s, no := refundIn(t, Abnormal)
		return s, no, s.Refund(no).DueAt
	}
	t.Run("repeated ABNORMAL keeps the schedule", func(t *testing.T) {
		s, no, due := setup(t)
		for _, src := range allSources {
			mustNoop(t, s, RecordOutcome{RefundNo: no, Source: src, Attempt: 1, Outcome: Outcome{Kind: OutcomeAbnormal}}, testEnv(t0.Add(time.Hour), "p"))
		}
		if !s.Refund(no).DueAt.Equal(due) {
			t.Fatalf("due moved %v -> %v", due, s.Refund(no).DueAt)
		}
	})
	t.Run("PROCESSING is older news", func(t *testing.T) {
		s, no, due := setup(t)
		mustNoop(t, s, outcome(no, SourceQuery, OutcomeProcessing), testEnv(t0.Add(time.Hour), "p"))
		if r := s.Refund(no); r.State != Abnormal || !r.DueAt.Equal(due) {
			t.Fatalf("refund %+v", *r)
		}
	})
	for _, kind := range []OutcomeKind{OutcomeSucceeded, OutcomeFailed} {
		t.Run(string(kind)+" ends reconciliation", func(t *testing.T) {
			s, no, due := setup(t)
			run(t, s, outcome(no, SourceQuery, kind), testEnv(due, "p"))
			if r := s.Refund(no); r.State != kind.target() || !r.DueAt.IsZero() || !s.NextDue().IsZero() {
				t.Fatalf("refund %+v", *r)
			}
			mustNoop(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
		})
	}
	t.Run("flagged stuck like any unresolved refund", func(t *testing.T) {
		s, no, due := setup(t)
		policy := Policy{StuckAfter: 2 * time.Hour}
		assertTypes(t, run(t, s, FireTimer{RefundNo: no, DueAt: due}, Env{Now: due, By: "engine", Policy: policy}), TypeQueryStarted)
		due = s.Refund(no).DueAt
		late := s.Refund(no).CreatedAt.Add(2 * time.Hour)
		ev := run(t, s, FireTimer{RefundNo: no, DueAt: due}, Env{Now: late, By: "engine", Policy: policy})
		assertTypes(t, ev, TypeFlaggedStuck, TypeQueryStarted)
		if r := s.Refund(no); !r.Stuck || r.State != Abnormal {
			t.Fatalf("refund %+v", *r)
		}
	})
}

// TestApply_DueAtCleared: a provider result clears the due time and the
// retry only when nothing is left to wait for (SUCCEEDED, FAILED) or when
// an operator must act (REJECTED without a due time of its own: one with
// it is still queried while an attempt may land); waiting states keep their
// timer.
func TestApply_DueAtCleared(t *testing.T) {
	due := t0.Add(time.Hour)
	for _, to := range []RefundState{Processing, Unknown, Abnormal, Rejected, Succeeded, Failed} {
		for _, withDue := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/event due %v", to, withDue), func(t *testing.T) {
				s, no := refundIn(t, Processing)
				r := s.Refund(no)
				r.DueAt, r.Retry = due, true // as if a retry were pending
				e := ProviderResult{RefundNo: no, Source: SourceQuery, Outcome: OutcomeSucceeded, From: Processing, To: to}
				if withDue {
					e.DueAt = due.Add(time.Minute)
				}
				Apply(s, Event{At: t0.Add(time.Minute), By: "p", Data: e})
				clears := to == Rejected && !withDue || to.Terminal()
				switch {
				case clears:
					if !r.DueAt.IsZero() || r.Retry {
						t.Fatalf("%s kept DueAt %v retry %v", to, r.DueAt, r.Retry)
					}
				case withDue:
					if !r.DueAt.Equal(e.DueAt) || r.Retry { // the event's due time and retry flag replace both
						t.Fatalf("%s: DueAt %v retry %v, want %v and false", to, r.DueAt, r.Retry, e.DueAt)
					}
				default:
					if !r.DueAt.Equal(due) || !r.Retry {
						t.Fatalf("%s dropped DueAt %v retry %v", to, r.DueAt, r.Retry)
					}
				}
			})
		}
	}
	t.Run("events of other refunds or unknown ones", func(t *testing.T) {
		s, no := refundIn(t, Processing)
		before := *s.Refund(no)
		for _, d := range []EventData{
			SubmissionScheduled{RefundNo: "R-resv-1-9", Request: []byte("x"), DueAt: due},
			Resolved{RefundNo: "R-resv-1-9", Reason: "x"},
			ProviderResult{RefundNo: "R-resv-1-9", To: Succeeded},
		} {
			Apply(s, Event{At: due, Data: d})
		}
		if r := s.Refund(no); !reflect.DeepEqual(*r, before) {
			t.Fatalf("refund changed: %+v", *r)
		}
	})
}
