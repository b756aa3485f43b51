package reservation

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// WeChat Pay's rules for one order: create requests (first submissions,
// retries and resubmissions of any of its refunds) at least RefundSpacing
// apart, and no refund a year after payment.

var spacedPolicy = Policy{RefundSpacing: time.Minute}

// deferredRefund returns a reservation whose first refund (4000 fen) was
// submitted at t0 and whose second (1000 fen), requested at t0+10s under a
// 60s spacing, waits until t0+60s. env is the second request's.
func deferredRefund(t testing.TB) (*State, string, Env) {
	t.Helper()
	s := registered(t)
	newRefund(t, s, "key-1", ptr(4000))
	env := Env{Now: t0.Add(10 * time.Second), By: "user:" + testUser, Policy: spacedPolicy}
	no := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-2", Amount: ptr(1000)}, env)[0].Data.(RefundRequested).RefundNo
	ev := run(t, s, StartSubmission{RefundNo: no, Request: body(no)}, env)
	assertTypes(t, ev, TypeSubmissionWaits)
	if r := s.Refund(no); r.Attempts != 0 || !r.Retry || !r.DueAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("deferred refund %+v", *r)
	}
	return s, no, env
}

func body(no string) []byte { return []byte(`{"out_refund_no":"` + no + `"}`) }

// submitAt requests a refund of amount and starts its submission at now
// under policy p; it returns the refund's number and the events.
func submitAt(t testing.TB, s *State, key string, amount int64, now time.Time, p Policy) (string, []Event) {
	t.Helper()
	env := Env{Now: now, By: "user:" + testUser, Policy: p}
	no := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: key, Amount: ptr(amount)}, env)[0].Data.(RefundRequested).RefundNo
	return no, run(t, s, StartSubmission{RefundNo: no, Request: body(no)}, env)
}

func TestStartSubmission_Spacing(t *testing.T) {
	cases := []struct {
		name    string
		spacing time.Duration
		// before submits earlier refunds (their first submissions) at these
		// offsets from t0, without spacing; resubmit sends another attempt of
		// the last one at that offset.
		before   []time.Duration
		resubmit time.Duration
		failed   bool // the earlier refund then FAILED
		now      time.Duration
		wantDue  time.Duration // 0: submitted now
	}{
		{name: "first refund of the order", spacing: time.Minute, now: 0},
		{name: "zero spacing", spacing: 0, before: []time.Duration{0}, now: time.Nanosecond},
		{name: "same instant", spacing: time.Minute, before: []time.Duration{0}, now: 0, wantDue: time.Minute},
		{name: "within the spacing", spacing: time.Minute, before: []time.Duration{0}, now: 10 * time.Second, wantDue: time.Minute},
		{name: "1ns before it ends", spacing: time.Minute, before: []time.Duration{0}, now: time.Minute - time.Nanosecond, wantDue: time.Minute},
		{name: "exactly when it ends", spacing: time.Minute, before: []time.Duration{0}, now: time.Minute},
		{name: "after it ended", spacing: time.Minute, before: []time.Duration{0}, now: 2 * time.Hour},
		{name: "the latest create request counts", spacing: time.Minute, before: []time.Duration{0, 30 * time.Second}, now: 70 * time.Second, wantDue: 90 * time.Second},
		{name: "a resubmission counts too", spacing: time.Minute, before: []time.Duration{0}, resubmit: 50 * time.Second, now: 61 * time.Second, wantDue: 110 * time.Second},
		{name: "a failed refund was still submitted", spacing: time.Minute, before: []time.Duration{0}, failed: true, now: 10 * time.Second, wantDue: time.Minute},
		{name: "custom spacing", spacing: 5 * time.Second, before: []time.Duration{0}, now: 2 * time.Second, wantDue: 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := registered(t)
			var last string
			for i, at := range tc.before {
				last, _ = submitAt(t, s, fmt.Sprintf("pre-%d", i), 100, t0.Add(at), Policy{})
			}
			if tc.resubmit != 0 {
				run(t, s, rejection(s, last), testEnv(t0.Add(tc.resubmit), "p"))
				run(t, s, Resubmit{RefundNo: last}, testEnv(t0.Add(tc.resubmit), "operator:alice"))
				if r := s.Refund(last); r.Attempts != 2 || !r.SubmittedAt.Equal(t0.Add(tc.before[len(tc.before)-1])) {
					t.Fatalf("resubmitted refund %+v: SubmittedAt must stay the first submission's", *r)
				}
			}
			if tc.failed {
				run(t, s, outcome(last, SourceNotification, OutcomeFailed), testEnv(t0.Add(tc.now), "p"))
			}
			now := t0.Add(tc.now)
			no, ev := submitAt(t, s, "key", 1000, now, Policy{RefundSpacing: tc.spacing})
			r := s.Refund(no)
			if tc.wantDue == 0 {
				want := SubmissionStarted{RefundNo: no, Attempt: 1, Request: body(no), DueAt: now.Add(30 * time.Second)}
				if assertTypes(t, ev, TypeSubmissionStarted); !reflect.DeepEqual(ev[0].Data, want) {
					t.Fatalf("event %+v, want %+v", ev[0].Data, want)
				}
				if r.Attempts != 1 || r.Retry || !r.SubmittedAt.Equal(now) {
					t.Fatalf("refund %+v", *r)
				}
				return
			}
			due := t0.Add(tc.wantDue)
			want := SubmissionScheduled{RefundNo: no, Request: body(no), DueAt: due}
			if assertTypes(t, ev, TypeSubmissionWaits); !reflect.DeepEqual(ev[0].Data, want) {
				t.Fatalf("event %+v, want %+v", ev[0].Data, want)
			}
			// Journaled, with its bytes, but not submitted: no attempt yet.
			if r.State != Processing || r.Attempts != 0 || !r.Retry || !r.DueAt.Equal(due) || string(r.Request) != string(body(no)) ||
				!r.SubmittedAt.IsZero() || !r.UpdatedAt.Equal(now) || s.InFlight() < r.Amount {
				t.Fatalf("deferred refund %+v", *r)
			}
			if next := s.NextDue(); next.After(due) {
				t.Fatalf("NextDue %v is after the deferred submission %v", next, due)
			}
		})
	}
}

func TestFireTimer_Spacing(t *testing.T) {
	t.Run("submits when due", func(t *testing.T) {
		s, no, _ := deferredRefund(t)
		due := s.Refund(no).DueAt
		env := Env{Now: due, By: "engine", Policy: spacedPolicy}
		ev := run(t, s, FireTimer{RefundNo: no, DueAt: due}, env)
		want := SubmissionStarted{RefundNo: no, Attempt: 1, Request: body(no), DueAt: due.Add(30 * time.Second)}
		if assertTypes(t, ev, TypeSubmissionStarted); !reflect.DeepEqual(ev[0].Data, want) {
			t.Fatalf("event %+v, want %+v", ev[0].Data, want)
		}
		r := s.Refund(no)
		if r.Attempts != 1 || r.Retry || !r.SubmittedAt.Equal(due) || !r.DueAt.Equal(want.DueAt) || string(r.Request) != string(body(no)) {
			t.Fatalf("refund %+v", *r)
		}
		// Once: the timer is spent, and it is now an ordinary submission.
		mustNoop(t, s, FireTimer{RefundNo: no, DueAt: due}, env)
		assertTypes(t, run(t, s, CheckProvider{RefundNo: no}, env), TypeQueryStarted)
	})
	t.Run("fires late", func(t *testing.T) {
		s, no, _ := deferredRefund(t)
		due := s.Refund(no).DueAt
		late := due.Add(5 * time.Minute)
		ev := run(t, s, FireTimer{RefundNo: no, DueAt: due}, Env{Now: late, By: "engine", Policy: spacedPolicy})
		if d := ev[0].Data.(SubmissionStarted); d.Attempt != 1 || !d.DueAt.Equal(late.Add(30*time.Second)) || !s.Refund(no).SubmittedAt.Equal(late) {
			t.Fatalf("event %+v", d)
		}
	})
	t.Run("re-defers when another refund went first", func(t *testing.T) {
		s, b, _ := deferredRefund(t)
		c, ev := submitAt(t, s, "key-3", 1000, t0.Add(20*time.Second), spacedPolicy)
		if d := ev[0].Data.(SubmissionScheduled); !d.DueAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("third refund %+v: both wait for the first one's spacing", d)
		}
		at := t0.Add(time.Minute)
		env := Env{Now: at, By: "engine", Policy: spacedPolicy}
		assertTypes(t, run(t, s, FireTimer{RefundNo: b, DueAt: at}, env), TypeSubmissionStarted)
		ev = run(t, s, FireTimer{RefundNo: c, DueAt: at}, env)
		want := SubmissionScheduled{RefundNo: c, Request: body(c), DueAt: at.Add(time.Minute)}
		if assertTypes(t, ev, TypeSubmissionWaits); !reflect.DeepEqual(ev[0].Data, want) {
			t.Fatalf("event %+v, want %+v", ev[0].Data, want)
		}
		if r := s.Refund(c); r.Attempts != 0 || !r.Retry || !r.DueAt.Equal(want.DueAt) {
			t.Fatalf("re-deferred refund %+v", *r)
		}
		mustNoop(t, s, FireTimer{RefundNo: c, DueAt: at}, env)
		env.Now = want.DueAt
		ev = run(t, s, FireTimer{RefundNo: c, DueAt: want.DueAt}, env)
		if d := ev[0].Data.(SubmissionStarted); d.Attempt != 1 || string(d.Request) != string(body(c)) {
			t.Fatalf("event %+v", d)
		}
		// Three first submissions, each a minute apart.
		got := []time.Time{s.Refunds[0].SubmittedAt, s.Refunds[1].SubmittedAt, s.Refunds[2].SubmittedAt}
		if want := []time.Time{t0, t0.Add(time.Minute), t0.Add(2 * time.Minute)}; !reflect.DeepEqual(got, want) {
			t.Fatalf("first submissions at %v, want %v", got, want)
		}
	})
	t.Run("re-defers when the spacing grew", func(t *testing.T) {
		s, no, _ := deferredRefund(t)
		due := s.Refund(no).DueAt
		ev := run(t, s, FireTimer{RefundNo: no, DueAt: due}, Env{Now: due, By: "engine", Policy: Policy{RefundSpacing: 90 * time.Second}})
		if d := ev[0].Data.(SubmissionScheduled); !d.DueAt.Equal(t0.Add(90*time.Second)) || string(d.Request) != string(body(no)) {
			t.Fatalf("event %+v", d)
		}
	})
	t.Run("submits when the spacing was removed", func(t *testing.T) {
		s, no, _ := deferredRefund(t)
		due := s.Refund(no).DueAt
		assertTypes(t, run(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine")), TypeSubmissionStarted)
	})
	t.Run("stale timers", func(t *testing.T) {
		s, no, env := deferredRefund(t)
		due := s.Refund(no).DueAt
		for _, at := range []time.Time{{}, due.Add(-time.Nanosecond), due.Add(time.Nanosecond), t0.Add(30 * time.Second)} {
			mustNoop(t, s, FireTimer{RefundNo: no, DueAt: at}, Env{Now: due, By: "engine", Policy: env.Policy})
		}
	})
	t.Run("nothing else starts it", func(t *testing.T) {
		s, no, env := deferredRefund(t)
		mustNoop(t, s, CheckProvider{RefundNo: no}, env) // never submitted: nothing to ask
		mustFail(t, s, Resubmit{RefundNo: no}, env, ErrInvalidState)
		mustFail(t, s, Abandon{RefundNo: no, Reason: "x"}, env, ErrInvalidState)
		mustFail(t, s, Resolve{RefundNo: no, Reason: "x"}, env, ErrInvalidState)
		mustNoop(t, s, outcome(no, SourceQuery, OutcomeNotFound), env)
		mustNoop(t, s, outcome(no, SourceQuery, OutcomeUnknown), env)
	})
	t.Run("settled before it was sent", func(t *testing.T) {
		s, no, env := deferredRefund(t)
		due := s.Refund(no).DueAt
		run(t, s, outcome(no, SourceNotification, OutcomeFailed), env)
		if r := s.Refund(no); r.Retry || !r.DueAt.IsZero() {
			t.Fatalf("refund %+v", *r)
		}
		mustNoop(t, s, FireTimer{RefundNo: no, DueAt: due}, Env{Now: due, By: "engine", Policy: spacedPolicy})
	})
	t.Run("replayed", func(t *testing.T) {
		s, no, _ := deferredRefund(t)
		// Rebuild from a journal: the wait survives a restart.
		var journal []Event
		live := &State{}
		rec := func(cmd Command, env Env) { journal = append(journal, run(t, live, cmd, env)...) }
		rec(validRegister(), testEnv(t0, "system:booking"))
		rec(RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(4000)}, testEnv(t0, "user:"+testUser))
		rec(StartSubmission{RefundNo: "R-resv-1-1", Request: body("R-resv-1-1")}, testEnv(t0, "user:"+testUser))
		env := Env{Now: t0.Add(10 * time.Second), By: "user:" + testUser, Policy: spacedPolicy}
		rec(RequestRefund{UserID: testUser, IdempotencyKey: "key-2", Amount: ptr(1000)}, env)
		rec(StartSubmission{RefundNo: no, Request: body(no)}, env)
		replayed := Replay(journal)
		assertSameState(t, s, replayed)
		assertSameState(t, live, replayed)
		due := replayed.Refund(no).DueAt
		assertTypes(t, run(t, replayed, FireTimer{RefundNo: no, DueAt: due}, Env{Now: due, By: "engine", Policy: spacedPolicy}), TypeSubmissionStarted)
	})
}

func TestRequestRefund_Window(t *testing.T) {
	year := 365 * 24 * time.Hour
	paid := t0.Add(-time.Hour) // validRegister's PaidAt
	cases := []struct {
		name   string
		window time.Duration
		paidAt time.Time
		now    time.Time
		open   bool
	}{
		{"right after payment", 0, paid, paid, true},
		{"exactly a year (default)", 0, paid, paid.Add(year), true},
		{"a year and 1ns", 0, paid, paid.Add(year + time.Nanosecond), false},
		{"two years", 0, paid, paid.Add(2 * year), false},
		{"negative window means the default", -time.Hour, paid, paid.Add(year), true},
		{"exactly a custom hour", time.Hour, paid, paid.Add(time.Hour), true},
		{"a custom hour and 1ns", time.Hour, paid, paid.Add(time.Hour + time.Nanosecond), false},
		{"before the payment time", time.Hour, paid, paid.Add(-time.Hour), true},
		{"paid time unknown", time.Hour, time.Time{}, paid.Add(10 * year), true},
		{"paid time in another zone", 0, paid.In(time.FixedZone("CST", 8*3600)), paid.Add(year + time.Nanosecond), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &State{}
			reg := validRegister()
			reg.PaidAt = tc.paidAt
			run(t, s, reg, testEnv(t0, "system:booking"))
			env := Env{Now: tc.now, By: "user:" + testUser, Policy: Policy{RefundWindow: tc.window}}
			cmd := RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(100)}
			if tc.open {
				assertTypes(t, run(t, s, cmd, env), TypeRefundRequested)
				return
			}
			err := mustFail(t, s, cmd, env, ErrRefundWindowClosed)
			if CodeOf(err) != "refund_window_closed" || !strings.HasPrefix(err.Error(), "reservation: ") {
				t.Fatalf("error %q, code %q", err, CodeOf(err))
			}
		})
	}
}

// TestRequestRefund_WindowOrder pins which answer wins when the window is
// closed and something else is wrong too.
func TestRequestRefund_WindowOrder(t *testing.T) {
	closed := Env{Now: t0.Add(400 * 24 * time.Hour), By: "user:" + testUser}
	t.Run("a replay still answers", func(t *testing.T) {
		s := registered(t)
		first := RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(100)}
		run(t, s, first, testEnv(t0, "u"))
		mustNoop(t, s, first, closed)
		mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(101)}, closed, ErrIdempotencyKeyReused)
	})
	t.Run("canceled first", func(t *testing.T) {
		s := registered(t)
		no := newRefund(t, s, "key-1", nil)
		run(t, s, outcome(no, SourceNotification, OutcomeSucceeded), providerEnv)
		mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-2", Amount: ptr(1)}, closed, ErrCanceled)
	})
	t.Run("before the refund limit", func(t *testing.T) {
		s := registered(t)
		env := Env{Now: t0, By: "u", Policy: Policy{MaxRefunds: 1}}
		run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(1)}, env)
		env.Now = closed.Now
		mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-2", Amount: ptr(1)}, env, ErrRefundWindowClosed)
	})
	t.Run("before the amount check", func(t *testing.T) {
		s := registered(t)
		newRefund(t, s, "key-1", nil)
		mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-2", Amount: ptr(1)}, closed, ErrRefundWindowClosed)
		mustFail(t, registered(t), RequestRefund{UserID: testUser, IdempotencyKey: "key-2", Amount: ptr(testPaid + 1)}, closed, ErrRefundWindowClosed)
	})
	t.Run("after not found and invalid input", func(t *testing.T) {
		s := registered(t)
		mustFail(t, s, RequestRefund{UserID: "u-43", IdempotencyKey: "key-1"}, closed, ErrNotFound)
		mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "bad key"}, closed, ErrInvalid)
	})
	t.Run("refunds already requested carry on", func(t *testing.T) {
		s := registered(t)
		no := newRefund(t, s, "key-1", ptr(4000))
		assertTypes(t, run(t, s, FireTimer{RefundNo: no, DueAt: s.Refund(no).DueAt}, testEnv(closed.Now, "engine")), TypeFlaggedStuck, TypeQueryStarted)
		assertTypes(t, run(t, s, rejection(s, no), testEnv(closed.Now, "p")), TypeProviderResult)
		assertTypes(t, run(t, s, Resubmit{RefundNo: no}, testEnv(closed.Now, "operator:alice")), TypeSubmissionStarted)
		assertTypes(t, run(t, s, outcome(no, SourceQuery, OutcomeSucceeded), testEnv(closed.Now, "p")), TypeProviderResult)
		if s.Refunded() != 4000 {
			t.Fatalf("refunded %d", s.Refunded())
		}
	})
}

// order drives one reservation under spacedPolicy and keeps its journal, so
// a scenario can restart from it and check WeChat Pay's rule on what was
// journaled: every create request of an order (a first submission, a retry,
// a resubmission) at least RefundSpacing after the previous one.
type order struct {
	t       *testing.T
	s       *State
	journal []Event
}

func newOrder(t *testing.T) *order {
	o := &order{t: t, s: &State{}}
	o.do(validRegister(), t0, "system:booking")
	return o
}

func (o *order) do(cmd Command, at time.Time, by string) []Event {
	o.t.Helper()
	ev := run(o.t, o.s, cmd, Env{Now: at, By: by, Policy: spacedPolicy})
	o.journal = append(o.journal, ev...)
	return ev
}

// request asks for a refund of amount and starts its submission at once, as
// the engine does; it returns the refund's number.
func (o *order) request(key string, amount int64, at time.Time) string {
	o.t.Helper()
	no := o.do(RequestRefund{UserID: testUser, IdempotencyKey: key, Amount: ptr(amount)}, at, "user:"+testUser)[0].Data.(RefundRequested).RefundNo
	o.do(StartSubmission{RefundNo: no, Request: body(no)}, at, "user:"+testUser)
	return no
}

// unknown records an unknown answer to the refund's latest attempt.
func (o *order) unknown(no string, at time.Time) ProviderResult {
	o.t.Helper()
	a := o.s.Refund(no).Attempts
	return o.do(RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: a, Outcome: Outcome{Kind: OutcomeUnknown}}, at, "provider:wechatpay")[0].Data.(ProviderResult)
}

// fire fires the refund's timer at its due time, or at at if that is later.
func (o *order) fire(no string, at time.Time) []Event {
	o.t.Helper()
	due := o.s.Refund(no).DueAt
	return o.do(FireTimer{RefundNo: no, DueAt: due}, later(due, at), "engine")
}

// last is the latest journaled event.
func (o *order) last() []Event { return o.journal[len(o.journal)-1:] }

// restart continues from the journal, as an actor does after a crash.
func (o *order) restart() { o.s = Replay(o.journal) }

// wantWait requires ev to hold the refund's next submission back until due,
// with its bytes, and the refund to wait for it.
func (o *order) wantWait(ev []Event, no string, due time.Time) {
	o.t.Helper()
	want := SubmissionScheduled{RefundNo: no, Request: body(no), DueAt: due}
	if assertTypes(o.t, ev, TypeSubmissionWaits); !reflect.DeepEqual(ev[0].Data, want) {
		o.t.Fatalf("event %+v, want %+v", ev[0].Data, want)
	}
	if r := o.s.Refund(no); r.State != Processing || !r.Retry || !r.DueAt.Equal(due) || string(r.Request) != string(body(no)) {
		o.t.Fatalf("waiting refund %+v", *r)
	}
}

// wantStart requires ev to be the refund's submission attempt n.
func (o *order) wantStart(ev []Event, no string, n int) {
	o.t.Helper()
	if assertTypes(o.t, ev, TypeSubmissionStarted); ev[0].Data.(SubmissionStarted).Attempt != n {
		o.t.Fatalf("event %+v, want attempt %d", ev[0].Data, n)
	}
}

// check verifies the rule on the journal and that a replay rebuilds the state.
func (o *order) check() {
	o.t.Helper()
	var last time.Time
	for _, e := range o.journal {
		if _, ok := e.Data.(SubmissionStarted); !ok {
			continue
		}
		if !last.IsZero() && e.At.Sub(last) < spacedPolicy.RefundSpacing {
			o.t.Fatalf("create request %+v at %v, %v after the previous one", e.Data, e.At, e.At.Sub(last))
		}
		last = e.At
	}
	assertSameState(o.t, o.s, Replay(o.journal))
	if !o.s.LastCreateAt.Equal(last) {
		o.t.Fatalf("LastCreateAt %v, the last create request was journaled at %v", o.s.LastCreateAt, last)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func sec(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

// TestSpacing_EveryCreateRequest: issue 17 item 3. WeChat Pay refused a
// retry sent within the spacing after another refund's first submission
// (FREQUENCY_LIMITED): the spacing counts every create request of the
// order, whichever path starts it, and survives a restart.
func TestSpacing_EveryCreateRequest(t *testing.T) {
	cases := []struct {
		name    string
		restart bool // rebuild the state from the journal before each decision
	}{{"live", false}, {"restarted", true}}
	scenarios := []struct {
		name string
		run  func(o *order, restart func())
	}{
		{"a retry waits out its own attempt's spacing", func(o *order, restart func()) {
			r1 := o.request("k1", 1000, t0)
			restart()
			if pr := o.unknown(r1, sec(1)); !pr.Retry || !pr.DueAt.Equal(sec(60)) {
				o.t.Fatalf("retry %+v, want due at %v", pr, sec(60))
			}
			restart()
			o.wantStart(o.fire(r1, sec(60)), r1, 2)
		}},
		{"a retry after another refund's first submission waits again", func(o *order, restart func()) {
			r1 := o.request("k1", 1000, t0)
			r2 := o.request("k2", 1000, sec(10))
			o.wantWait(o.last(), r2, sec(60))
			if pr := o.unknown(r1, sec(59)); !pr.DueAt.Equal(sec(60)) {
				o.t.Fatalf("retry %+v, want due at %v", pr, sec(60))
			}
			// Both are due at once: the first to fire goes, the other re-checks.
			restart()
			o.wantStart(o.fire(r2, sec(60)), r2, 1)
			restart()
			o.wantWait(o.fire(r1, sec(60)), r1, sec(120))
			restart()
			o.wantStart(o.fire(r1, sec(120)), r1, 2)
		}},
		{"a retry an older version journaled within the spacing", func(o *order, restart func()) {
			r1 := o.request("k1", 1000, t0)
			r2 := o.request("k2", 1000, sec(60))
			o.wantStart(o.last(), r2, 1)
			// Before the rule, a retry was due its backoff after the answer.
			old := Event{At: sec(61), By: "provider:wechatpay", Data: ProviderResult{RefundNo: r1, Source: SourceResponse, Attempt: 1,
				Outcome: OutcomeUnknown, From: Processing, To: Processing, DueAt: sec(62), Retry: true}}
			Apply(o.s, old)
			o.journal = append(o.journal, old)
			restart()
			o.wantWait(o.fire(r1, sec(62)), r1, sec(120))
			restart()
			o.wantStart(o.fire(r1, time.Time{}), r1, 2)
		}},
		{"an unknown answer after another refund went out", func(o *order, restart func()) {
			r1 := o.request("k1", 1000, t0)
			r2 := o.request("k2", 1000, sec(60))
			o.wantStart(o.last(), r2, 1)
			restart()
			if pr := o.unknown(r1, sec(64)); !pr.Retry || !pr.DueAt.Equal(sec(120)) {
				o.t.Fatalf("retry %+v, want due at %v", pr, sec(120))
			}
			o.wantStart(o.fire(r1, sec(120)), r1, 2)
		}},
		{"a first submission after another refund's retry", func(o *order, restart func()) {
			r1 := o.request("k1", 1000, t0)
			o.unknown(r1, sec(1))
			o.wantStart(o.fire(r1, sec(65)), r1, 2) // a late timer
			restart()
			r2 := o.request("k2", 1000, sec(70))
			o.wantWait(o.last(), r2, sec(125))
			o.wantStart(o.fire(r2, time.Time{}), r2, 1)
		}},
		{"a resubmission after NOT_FOUND", func(o *order, restart func()) {
			r1 := o.request("k1", 1000, t0)
			r2 := o.request("k2", 1000, sec(120))
			o.wantStart(o.last(), r2, 1)
			assertTypes(o.t, o.do(CheckProvider{RefundNo: r1}, sec(121), "engine"), TypeQueryStarted)
			restart()
			o.wantWait(o.do(outcome(r1, SourceQuery, OutcomeNotFound), sec(125), "provider:wechatpay"), r1, sec(180))
			restart()
			o.wantStart(o.fire(r1, time.Time{}), r1, 2)
		}},
		{"a resubmission after NOT_FOUND of an UNKNOWN refund", func(o *order, restart func()) {
			r1 := o.request("k1", 1000, t0)
			now := t0
			for o.s.Refund(r1).State != Unknown {
				o.unknown(r1, now.Add(time.Second))
				if o.s.Refund(r1).State == Unknown {
					break
				}
				ev := o.fire(r1, time.Time{})
				o.wantStart(ev, r1, o.s.Refund(r1).Attempts)
				now = ev[0].At
			}
			r2 := o.request("k2", 1000, now.Add(time.Minute))
			o.wantStart(o.last(), r2, 1)
			restart()
			ev := o.do(outcome(r1, SourceQuery, OutcomeNotFound), now.Add(time.Minute+time.Second), "provider:wechatpay")
			o.wantWait(ev, r1, now.Add(2*time.Minute))
			if a := o.s.Refund(r1).Attention(); len(a) != 0 {
				o.t.Fatalf("attention %v for a refund waiting to be resent", a)
			}
			restart()
			o.wantStart(o.fire(r1, time.Time{}), r1, 6)
		}},
		{"an operator's resubmission", func(o *order, restart func()) {
			r1 := o.request("k1", 1000, t0)
			o.do(rejection(o.s, r1), sec(1), "provider:wechatpay")
			r2 := o.request("k2", 1000, sec(90))
			o.wantStart(o.last(), r2, 1)
			restart()
			// Accepted, and answered with the state that shows when it goes.
			o.wantWait(o.do(Resubmit{RefundNo: r1}, sec(100), "operator:alice"), r1, sec(150))
			if a := o.s.Refund(r1).Attention(); len(a) != 0 {
				o.t.Fatalf("attention %v for a resubmitted refund", a)
			}
			mustFail(o.t, o.s, Resubmit{RefundNo: r1}, Env{Now: sec(101), By: "operator:alice", Policy: spacedPolicy}, ErrInvalidState)
			restart()
			o.wantStart(o.fire(r1, time.Time{}), r1, 2)
		}},
	}
	for _, tc := range cases {
		for _, sc := range scenarios {
			t.Run(tc.name+"/"+sc.name, func(t *testing.T) {
				o := newOrder(t)
				restart := func() {}
				if tc.restart {
					restart = func() { o.check(); o.restart() }
				}
				sc.run(o, restart)
				o.check()
			})
		}
	}
}
