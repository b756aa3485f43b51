package reservation

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"
)

// Retries of a submission whose answer was unknown: the same refund number
// and bytes, exponential backoff with equal jitter, a bounded number of
// attempts, then UNKNOWN for the reconciler.

func TestRetryDelay_Schedule(t *testing.T) {
	cases := []struct {
		name   string
		policy Policy
		// want[i] is the delay after attempt i+1 at jitter 0 and 0.999.
		min, max []time.Duration
	}{
		{"default 1s doubling to 1m", Policy{},
			[]time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second},
			[]time.Duration{999500 * time.Microsecond, 1999 * time.Millisecond, 3998 * time.Millisecond, 7996 * time.Millisecond,
				15992 * time.Millisecond, 31984 * time.Millisecond, 59970 * time.Millisecond}},
		{"custom 3s capped at 20s", Policy{RetryBackoff: 3 * time.Second, RetryBackoffMax: 20 * time.Second},
			[]time.Duration{1500 * time.Millisecond, 3 * time.Second, 6 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second},
			[]time.Duration{2998500 * time.Microsecond, 5997 * time.Millisecond, 11994 * time.Millisecond, 19990 * time.Millisecond,
				19990 * time.Millisecond, 19990 * time.Millisecond, 19990 * time.Millisecond}},
		{"base above the cap", Policy{RetryBackoff: time.Hour, RetryBackoffMax: 10 * time.Second},
			[]time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second},
			[]time.Duration{9995 * time.Millisecond, 9995 * time.Millisecond, 9995 * time.Millisecond, 9995 * time.Millisecond,
				9995 * time.Millisecond, 9995 * time.Millisecond, 9995 * time.Millisecond}},
		{"only the cap set", Policy{RetryBackoffMax: 3 * time.Second},
			[]time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond},
			[]time.Duration{999500 * time.Microsecond, 1999 * time.Millisecond, 2998500 * time.Microsecond, 2998500 * time.Microsecond,
				2998500 * time.Microsecond, 2998500 * time.Microsecond, 2998500 * time.Microsecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.min {
				n := i + 1
				if got := tc.policy.retryDelay(n, 0); got != tc.min[i] {
					t.Errorf("retryDelay(%d, 0) = %v, want %v", n, got, tc.min[i])
				}
				if got := tc.policy.retryDelay(n, 0.999); got != tc.max[i] {
					t.Errorf("retryDelay(%d, 0.999) = %v, want %v", n, got, tc.max[i])
				}
			}
			// The cap holds however many attempts came before (no overflow).
			capped := tc.min[len(tc.min)-1]
			for _, n := range []int{8, 50, 1000, math.MaxInt32} {
				if got := tc.policy.retryDelay(n, 0); got != capped {
					t.Errorf("retryDelay(%d, 0) = %v, want the cap's half %v", n, got, capped)
				}
			}
		})
	}
}

// Equal jitter: half the step is fixed, so a delay is never below half of
// it nor reaches all of it, and later attempts never wait less.
func TestRetryDelay_Bounds(t *testing.T) {
	p := Policy{}
	for _, jitter := range []float64{0, 0.001, 0.25, 0.5, 0.75, 0.999, math.Nextafter(1, 0)} {
		prev := time.Duration(0)
		for n := 1; n <= 10; n++ {
			step := min(time.Second<<(n-1), time.Minute)
			got := p.retryDelay(n, jitter)
			if got < step/2 || got >= step {
				t.Fatalf("retryDelay(%d, %v) = %v, outside [%v, %v)", n, jitter, got, step/2, step)
			}
			if got < prev {
				t.Fatalf("retryDelay(%d, %v) = %v, less than attempt %d's %v", n, jitter, got, n-1, prev)
			}
			prev = got
		}
	}
}

// Env.Jitter should be in [0, 1); anything else must not push a retry into
// the past or far into the future.
func TestRetryDelay_JitterOutOfRange(t *testing.T) {
	p := Policy{}
	for _, jitter := range []float64{-0.5, -1e-300, 1, 1.5, 1e300, math.Inf(1), math.Inf(-1), math.NaN()} {
		for n := 1; n <= 7; n++ {
			if got, want := p.retryDelay(n, jitter), p.retryDelay(n, 0); got != want {
				t.Errorf("retryDelay(%d, %v) = %v, want %v (as jitter 0)", n, jitter, got, want)
			}
		}
	}
	// And through Decide: the retry is due after the answer, never before.
	for _, jitter := range []float64{math.NaN(), math.Inf(1), -2} {
		s, no := refundIn(t, Processing)
		env := Env{Now: providerEnv.Now, By: "provider:wechatpay", Jitter: jitter}
		ev := run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeUnknown}}, env)
		if d := ev[0].Data.(ProviderResult); !d.DueAt.Equal(env.Now.Add(500 * time.Millisecond)) {
			t.Errorf("jitter %v: retry due at %v, want %v", jitter, d.DueAt, env.Now.Add(500*time.Millisecond))
		}
	}
}

// TestRecordOutcome_UnknownRetries follows one refund through the whole
// retry schedule: every answer and every attempt is journaled, each retry
// resends the first bytes under the same number, and after MaxAttempts the
// refund is UNKNOWN and only queried.
func TestRecordOutcome_UnknownRetries(t *testing.T) {
	for _, jitter := range []float64{0, 0.25} {
		t.Run(fmt.Sprintf("jitter %v", jitter), func(t *testing.T) {
			s, no := refundIn(t, Processing)
			r0 := *s.Refund(no)
			// Steps of 1s, 2s, 4s, 8s; equal jitter gives d/2 + d/2*jitter.
			factor := 0.5 + jitter/2
			now := providerEnv.Now
			for attempt := 1; attempt <= 5; attempt++ {
				env := Env{Now: now, By: "provider:wechatpay", Jitter: jitter}
				answer := RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: attempt,
					Outcome: Outcome{Kind: OutcomeUnknown, Code: "SYSTEM_ERROR", Message: "try again"}}
				ev := run(t, s, answer, env)
				assertTypes(t, ev, TypeProviderResult)
				d := ev[0].Data.(ProviderResult)
				r := s.Refund(no)
				if attempt == 5 {
					want := ProviderResult{RefundNo: no, Source: SourceResponse, Attempt: 5, Outcome: OutcomeUnknown,
						Code: "SYSTEM_ERROR", Message: "try again", From: Processing, To: Unknown}
					if !reflect.DeepEqual(d, want) {
						t.Fatalf("last answer: %+v\nwant %+v", d, want)
					}
					// The check set by the fifth submission stays: the
					// reconciler queries from now on.
					if r.State != Unknown || r.Retry || !r.DueAt.Equal(now.Add(30*time.Second)) || r.Attempts != 5 {
						t.Fatalf("refund after the last attempt: %+v", *r)
					}
					ev = run(t, s, FireTimer{RefundNo: no, DueAt: r.DueAt}, testEnv(r.DueAt, "engine"))
					if assertTypes(t, ev, TypeQueryStarted); ev[0].Data.(QueryStarted).Query != 1 || s.Refund(no).Attempts != 5 {
						t.Fatalf("timer after UNKNOWN: %+v, refund %+v", ev[0].Data, *s.Refund(no))
					}
					return
				}
				wait := time.Duration(float64(time.Second<<(attempt-1)) * factor)
				want := ProviderResult{RefundNo: no, Source: SourceResponse, Attempt: attempt, Outcome: OutcomeUnknown,
					Code: "SYSTEM_ERROR", Message: "try again", From: Processing, To: Processing, DueAt: now.Add(wait), Retry: true}
				if !reflect.DeepEqual(d, want) {
					t.Fatalf("answer to attempt %d: %+v\nwant %+v", attempt, d, want)
				}
				if r.State != Processing || !r.Retry || !r.DueAt.Equal(want.DueAt) || r.Attempts != attempt || r.Code != "SYSTEM_ERROR" ||
					!s.NextDue().Equal(want.DueAt) {
					t.Fatalf("refund after attempt %d: %+v", attempt, *r)
				}
				// Not before it is due: an earlier timer is stale.
				mustNoop(t, s, FireTimer{RefundNo: no, DueAt: r0.DueAt}, testEnv(now, "engine"))
				now = r.DueAt
				ev = run(t, s, FireTimer{RefundNo: no, DueAt: r.DueAt}, testEnv(now, "engine"))
				assertTypes(t, ev, TypeSubmissionStarted)
				if got := ev[0].Data.(SubmissionStarted); !reflect.DeepEqual(got, SubmissionStarted{RefundNo: no, Attempt: attempt + 1, DueAt: now.Add(30 * time.Second)}) {
					t.Fatalf("retry %d: %+v (a retry carries no new bytes)", attempt+1, got)
				}
				r = s.Refund(no)
				if r.Attempts != attempt+1 || r.Retry || string(r.Request) != string(r0.Request) || r.No != r0.No ||
					!r.SubmittedAt.Equal(r0.SubmittedAt) || r.State != Processing {
					t.Fatalf("refund after retry %d: %+v", attempt+1, *r)
				}
				// The retry timer fires once.
				mustNoop(t, s, FireTimer{RefundNo: no, DueAt: now}, testEnv(now, "engine"))
			}
		})
	}
}

func TestRecordOutcome_MaxAttempts(t *testing.T) {
	cases := []struct {
		name string
		max  int
		want int // attempts made before UNKNOWN
	}{
		{"default", 0, 5},
		{"one attempt only", 1, 1},
		{"two", 2, 2},
		{"three", 3, 3},
		{"ten", 10, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			policy := Policy{MaxAttempts: tc.max}
			s, no := refundIn(t, Processing)
			now := providerEnv.Now
			for attempt := 1; attempt <= tc.want; attempt++ {
				env := Env{Now: now, By: "provider:wechatpay", Policy: policy}
				ev := run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: attempt, Outcome: Outcome{Kind: OutcomeUnknown}}, env)
				d := ev[0].Data.(ProviderResult)
				last := attempt == tc.want
				if last && (d.To != Unknown || d.Retry) || !last && (d.To != Processing || !d.Retry) {
					t.Fatalf("answer to attempt %d of %d: %+v", attempt, tc.want, d)
				}
				if !last {
					now = d.DueAt
					run(t, s, FireTimer{RefundNo: no, DueAt: d.DueAt}, Env{Now: now, By: "engine", Policy: policy})
				}
			}
			if r := s.Refund(no); r.State != Unknown || r.Attempts != tc.want {
				t.Fatalf("refund %+v, want UNKNOWN after %d attempts", *r, tc.want)
			}
			// A "not found" query (or an operator's resubmission) goes past
			// the limit: its unknown answer is UNKNOWN at once.
			for _, again := range []Command{outcome(no, SourceQuery, OutcomeNotFound), Resubmit{RefundNo: no}} {
				n := s.Refund(no).Attempts + 1
				assertTypes(t, run(t, s, again, Env{Now: now, By: "operator:alice", Policy: policy}), TypeSubmissionStarted)
				ev := run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: n, Outcome: Outcome{Kind: OutcomeUnknown}},
					Env{Now: now, By: "provider:wechatpay", Policy: policy})
				if d := ev[0].Data.(ProviderResult); d.From != Processing || d.To != Unknown || d.Retry || s.Refund(no).Attempts != n {
					t.Fatalf("%T: answer to attempt %d: %+v", again, n, d)
				}
			}
			// Resent until twice the limit and still unknown to the
			// provider: REJECTED, for an operator, not resent for ever.
			for s.Refund(no).Attempts < 2*tc.want {
				n := s.Refund(no).Attempts + 1
				assertTypes(t, run(t, s, outcome(no, SourceQuery, OutcomeNotFound), Env{Now: now, By: "provider:wechatpay", Policy: policy}), TypeSubmissionStarted)
				run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: n, Outcome: Outcome{Kind: OutcomeUnknown}},
					Env{Now: now, By: "provider:wechatpay", Policy: policy})
			}
			// Its attempts timed out moments ago and may still land: it
			// is still queried, until the settle horizon has passed.
			ev := run(t, s, outcome(no, SourceQuery, OutcomeNotFound), Env{Now: now, By: "provider:wechatpay", Policy: policy})
			if d := ev[0].Data.(ProviderResult); d.From != Unknown || d.To != Rejected || d.DueAt.IsZero() {
				t.Fatalf("not found after %d attempts: %+v, want UNKNOWN -> REJECTED, still queried", s.Refund(no).Attempts, d)
			}
			if r := s.Refund(no); r.State != Rejected || r.DueAt.IsZero() || r.Retry {
				t.Fatalf("refund %+v", *r)
			}
			mustFail(t, s, abandon(no, "", now), Env{Now: now, By: "operator:alice", Policy: policy}, ErrRefundSettling)
			later := s.Refund(no).UnsettledAt.Add(policy.settleHorizon())
			assertTypes(t, run(t, s, abandon(no, "", later), Env{Now: later, By: "operator:alice", Policy: policy}),
				TypeProviderResult, TypeAbandoned)
		})
	}
	t.Run("the limit is read when the answer comes", func(t *testing.T) {
		// Three attempts were made under a limit of 5; a restart with a
		// limit of 3 leaves the refund to the reconciler on the next answer.
		s, no := refundIn(t, Processing)
		now := providerEnv.Now
		for attempt := 1; attempt <= 2; attempt++ {
			d := run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: attempt, Outcome: Outcome{Kind: OutcomeUnknown}}, testEnv(now, "p"))[0].Data.(ProviderResult)
			now = d.DueAt
			run(t, s, FireTimer{RefundNo: no, DueAt: d.DueAt}, testEnv(now, "engine"))
		}
		ev := run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 3, Outcome: Outcome{Kind: OutcomeUnknown}},
			Env{Now: now, By: "p", Policy: Policy{MaxAttempts: 3}})
		if d := ev[0].Data.(ProviderResult); d.To != Unknown {
			t.Fatalf("answer %+v, want UNKNOWN", d)
		}
	})
}

// TestRecordOutcome_StaleUnknown: only the answer to the refund's latest
// submission can make it unknown or retry it. A failed query or an unknown
// notification says nothing, and an answer to another attempt is stale: it
// is journaled (every answered attempt is) but changes nothing else.
func TestRecordOutcome_StaleUnknown(t *testing.T) {
	// retryPending: attempt 2 is due to be sent.
	retryPending := func(t *testing.T) (*State, string) {
		s, no := refundIn(t, Processing)
		run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeUnknown}}, providerEnv)
		return s, no
	}
	// secondAttempt: attempt 2 was sent and is waiting for its answer.
	secondAttempt := func(t *testing.T) (*State, string) {
		s, no := retryPending(t)
		due := s.Refund(no).DueAt
		run(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
		return s, no
	}
	inState := func(st RefundState) func(t *testing.T) (*State, string) {
		return func(t *testing.T) (*State, string) { return refundIn(t, st) }
	}
	cases := []struct {
		name    string
		setup   func(t *testing.T) (*State, string)
		src     Source
		attempt func(r *Refund) int
		// recorded: a ProviderResult with From == To is journaled;
		// otherwise no events at all.
		recorded bool
	}{
		{"older attempt", secondAttempt, SourceResponse, func(r *Refund) int { return r.Attempts - 1 }, true},
		{"attempt not made yet", secondAttempt, SourceResponse, func(r *Refund) int { return r.Attempts + 1 }, true},
		{"attempt 0", secondAttempt, SourceResponse, func(*Refund) int { return 0 }, true},
		{"attempt 0 while a retry is pending", retryPending, SourceResponse, func(*Refund) int { return 0 }, true},
		{"older attempt while a retry is pending", func(t *testing.T) (*State, string) {
			s, no := secondAttempt(t)
			run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 2, Outcome: Outcome{Kind: OutcomeUnknown}}, providerEnv)
			return s, no
		}, SourceResponse, func(*Refund) int { return 1 }, true},
		{"query while waiting", secondAttempt, SourceQuery, func(*Refund) int { return 0 }, false},
		{"notification while waiting", secondAttempt, SourceNotification, func(*Refund) int { return 0 }, false},
		{"query while a retry is pending", retryPending, SourceQuery, func(*Refund) int { return 0 }, false},
		{"query of an UNKNOWN refund", inState(Unknown), SourceQuery, func(*Refund) int { return 0 }, false},
		{"notification of an UNKNOWN refund", inState(Unknown), SourceNotification, func(*Refund) int { return 0 }, false},
		{"latest attempt of an UNKNOWN refund", inState(Unknown), SourceResponse, func(r *Refund) int { return r.Attempts }, true},
		{"older attempt of an UNKNOWN refund", inState(Unknown), SourceResponse, func(r *Refund) int { return 1 }, true},
		{"REJECTED", inState(Rejected), SourceResponse, func(r *Refund) int { return r.Attempts }, true},
		{"REJECTED by query", inState(Rejected), SourceQuery, func(*Refund) int { return 0 }, false},
		{"ABNORMAL", inState(Abnormal), SourceResponse, func(r *Refund) int { return r.Attempts }, true},
		{"ABNORMAL by query", inState(Abnormal), SourceQuery, func(*Refund) int { return 0 }, false},
		{"ABNORMAL by notification", inState(Abnormal), SourceNotification, func(*Refund) int { return 0 }, false},
		{"SUCCEEDED", inState(Succeeded), SourceResponse, func(r *Refund) int { return r.Attempts }, false},
		{"FAILED", inState(Failed), SourceResponse, func(r *Refund) int { return r.Attempts }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, no := tc.setup(t)
			before := s.Clone()
			r0 := *before.Refund(no)
			env := Env{Now: t0.Add(time.Hour), By: "provider:wechatpay", Jitter: 0.5}
			cmd := RecordOutcome{RefundNo: no, Source: tc.src, Attempt: tc.attempt(&r0), Outcome: Outcome{Kind: OutcomeUnknown, Code: "SYSTEM_ERROR"}}
			if !tc.recorded {
				mustNoop(t, s, cmd, env)
				return
			}
			ev := run(t, s, cmd, env)
			assertTypes(t, ev, TypeProviderResult)
			want := ProviderResult{RefundNo: no, Source: tc.src, Attempt: cmd.Attempt, Outcome: OutcomeUnknown, Code: "SYSTEM_ERROR",
				From: r0.State, To: r0.State}
			if got := ev[0].Data.(ProviderResult); !reflect.DeepEqual(got, want) {
				t.Fatalf("event %+v\nwant  %+v", got, want)
			}
			r := s.Refund(no)
			if r.State != r0.State || r.Attempts != r0.Attempts || r.Retry != r0.Retry || !r.DueAt.Equal(r0.DueAt) || r.Queries != r0.Queries {
				t.Fatalf("a stale answer changed the refund:\nbefore %+v\nafter  %+v", r0, *r)
			}
		})
	}
}

// A pending retry is replaced by whatever settles or supersedes it.
func TestFireTimer_RetryPending(t *testing.T) {
	pending := func(t *testing.T) (*State, string, time.Time) {
		s, no := refundIn(t, Processing)
		run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeUnknown}}, providerEnv)
		return s, no, s.Refund(no).DueAt
	}
	t.Run("stale timers", func(t *testing.T) {
		s, no, due := pending(t)
		for _, at := range []time.Time{{}, due.Add(-time.Nanosecond), due.Add(time.Nanosecond), t0.Add(30 * time.Second)} {
			mustNoop(t, s, FireTimer{RefundNo: no, DueAt: at}, testEnv(due, "engine"))
		}
	})
	t.Run("a query replaces the retry", func(t *testing.T) {
		s, no, due := pending(t)
		ev := run(t, s, CheckProvider{RefundNo: no}, testEnv(providerEnv.Now, "op"))
		assertTypes(t, ev, TypeQueryStarted)
		if r := s.Refund(no); r.Retry || r.Attempts != 1 || !r.DueAt.Equal(providerEnv.Now.Add(time.Minute)) {
			t.Fatalf("refund %+v", *r)
		}
		mustNoop(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
		// The query's own timer queries again rather than resubmitting.
		assertTypes(t, run(t, s, FireTimer{RefundNo: no, DueAt: s.Refund(no).DueAt}, testEnv(s.Refund(no).DueAt, "engine")), TypeQueryStarted)
		// "Not found" resends: that is attempt 2.
		ev = run(t, s, outcome(no, SourceQuery, OutcomeNotFound), providerEnv)
		if d := ev[0].Data.(SubmissionStarted); d.Attempt != 2 {
			t.Fatalf("resend %+v", d)
		}
	})
	for _, kind := range []OutcomeKind{OutcomeSucceeded, OutcomeFailed, OutcomeRejected} {
		t.Run("settled by "+string(kind), func(t *testing.T) {
			s, no, due := pending(t)
			cmd := outcome(no, SourceNotification, kind)
			if kind == OutcomeRejected {
				cmd = rejection(s, no) // only a submission's answer refuses
			}
			run(t, s, cmd, providerEnv)
			if r := s.Refund(no); r.Retry || !r.DueAt.IsZero() || r.State != kind.target() {
				t.Fatalf("refund %+v", *r)
			}
			mustNoop(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
		})
	}
	t.Run("ABNORMAL replaces the retry with reconciliation", func(t *testing.T) {
		s, no, due := pending(t)
		run(t, s, outcome(no, SourceNotification, OutcomeAbnormal), providerEnv)
		r := s.Refund(no)
		if r.Retry || !r.DueAt.Equal(providerEnv.Now.Add(time.Minute)) || r.State != Abnormal {
			t.Fatalf("refund %+v", *r)
		}
		mustNoop(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
		assertTypes(t, run(t, s, FireTimer{RefundNo: no, DueAt: r.DueAt}, testEnv(r.DueAt, "engine")), TypeQueryStarted)
	})
	t.Run("PROCESSING cancels the retry", func(t *testing.T) {
		// The provider has the refund after all: stop resending and wait
		// for its outcome, checking back after RecheckAfter.
		s, no, due := pending(t)
		assertTypes(t, run(t, s, RecordOutcome{RefundNo: no, Source: SourceNotification,
			Outcome: Outcome{Kind: OutcomeProcessing, ProviderID: "503"}}, providerEnv), TypeProviderResult)
		r := s.Refund(no)
		if r.Retry || r.DueAt.Equal(due) || !r.DueAt.Equal(providerEnv.Now.Add(providerEnv.Policy.recheckAfter())) || r.ProviderID != "503" {
			t.Fatalf("refund %+v", *r)
		}
		assertTypes(t, run(t, s, FireTimer{RefundNo: no, DueAt: r.DueAt}, testEnv(r.DueAt, "engine")), TypeQueryStarted)
	})
	t.Run("the same answer twice plans one retry", func(t *testing.T) {
		// Whatever a repeated answer does to the due time, exactly one
		// timer is live and it sends exactly one more attempt.
		s, no, first := pending(t)
		later := Env{Now: providerEnv.Now.Add(time.Second), By: "provider:wechatpay", Jitter: 0.5}
		run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeUnknown}}, later)
		r := s.Refund(no)
		if r.Attempts != 1 || !r.Retry || r.State != Processing || !s.NextDue().Equal(r.DueAt) {
			t.Fatalf("refund %+v", *r)
		}
		due := r.DueAt
		if !due.Equal(first) {
			mustNoop(t, s, FireTimer{RefundNo: no, DueAt: first}, testEnv(first, "engine"))
		}
		ev := run(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
		if assertTypes(t, ev, TypeSubmissionStarted); ev[0].Data.(SubmissionStarted).Attempt != 2 {
			t.Fatalf("event %+v", ev[0].Data)
		}
		mustNoop(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
		mustNoop(t, s, FireTimer{RefundNo: no, DueAt: first}, testEnv(due, "engine"))
	})
}
