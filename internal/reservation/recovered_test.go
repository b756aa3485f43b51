package reservation

import (
	"testing"
	"time"
)

// Refunds found at WeChat Pay after a restore: journaled as recovered,
// counted by the cap, only ever queried.

// recoveredNo is a number of an earlier epoch (the tests' current prefix is
// the default, "R").
func recoveredNo(n string) string { return "RE0-" + testResID + "-" + n }

func recovered(no string, kind OutcomeKind, amount int64) RecordRecovered {
	return RecordRecovered{RefundNo: no, Outcome: Outcome{Kind: kind, ProviderID: "50300" + no, OutTradeNo: testOTN,
		RefundAmount: amount, TotalAmount: testPaid, SuccessTime: t0.Add(-time.Minute)}}
}

var gateEnv = testEnv(t0.Add(2*time.Hour), "engine")

func TestRecordRecovered_States(t *testing.T) {
	for _, tc := range []struct {
		kind      OutcomeKind
		state     RefundState
		due       time.Time
		held      int64 // what the 3000 fen recovered refund takes from the refundable
		attention []string
	}{
		{OutcomeSucceeded, Succeeded, time.Time{}, 3000, nil},
		{OutcomeProcessing, Processing, gateEnv.Now.Add(gateEnv.Policy.recheckAfter()), 3000, nil},
		{OutcomeAbnormal, Abnormal, gateEnv.Now.Add(gateEnv.Policy.queryBackoff(1)), 3000, []string{string(Abnormal)}},
		{OutcomeFailed, Failed, time.Time{}, 0, nil},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			s := registered(t)
			settled := newRefund(t, s, "key-1", ptr(1000))
			run(t, s, outcome(settled, SourceQuery, OutcomeSucceeded), providerEnv)
			no := recoveredNo("2")
			ev := run(t, s, recovered(no, tc.kind, 3000), gateEnv)
			assertTypes(t, ev, TypeRefundRecovered)
			d := ev[0].Data.(RefundRecovered)
			if d.Number != 2 || d.Amount != 3000 || d.State != tc.state || d.ProviderID != "50300"+no || !d.DueAt.Equal(tc.due) {
				t.Fatalf("event %+v", d)
			}
			r := s.Refund(no)
			if r == nil || !r.Recovered || r.State != tc.state || r.Amount != 3000 || r.ProviderID != d.ProviderID ||
				!r.DueAt.Equal(tc.due) || r.Retry || len(r.Request) != 0 || r.IdempotencyKey != "" || r.Attempts != 0 {
				t.Fatalf("refund %+v", r)
			}
			if tc.state == Succeeded && !r.SucceededAt.Equal(t0.Add(-time.Minute)) {
				t.Fatalf("succeeded at %v", r.SucceededAt)
			}
			if got := r.Attention(); len(got) != len(tc.attention) || (len(got) == 1 && got[0] != tc.attention[0]) {
				t.Fatalf("attention %v, want %v", got, tc.attention)
			}
			if _, add, _ := AttentionOf(d); len(add) != len(tc.attention) {
				t.Fatalf("AttentionOf adds %v, want %v", add, tc.attention)
			}
			if got, _, ok := DueOf(d); ok != !tc.due.IsZero() || (ok && got != no) {
				t.Fatalf("DueOf = %q %v", got, ok)
			}
			if want := testPaid - 1000 - tc.held; s.Refundable() != want {
				t.Fatalf("refundable %d, want %d: the cap must count the recovered refund", s.Refundable(), want)
			}
			// Recorded again (the gate after a crash): nothing new.
			mustNoop(t, s, recovered(no, tc.kind, 3000), gateEnv)
			// A different refund under the number is a contradiction.
			mustFail(t, s, recovered(no, tc.kind, 2999), gateEnv, ErrOutcomeMismatch)
		})
	}
}

// The cap counts recovered refunds: a retry of the lost request is refused
// when what is left does not cover it.
func TestRecordRecovered_CapCountsIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   OutcomeKind
		amount int64
		retry  *int64
		want   *Error // nil: the request fits and gets a new number
	}{
		{"succeeded part", OutcomeSucceeded, 6000, ptr(6000), ErrInsufficientRefundable},
		{"processing part", OutcomeProcessing, 6000, ptr(6000), ErrInsufficientRefundable},
		{"abnormal part", OutcomeAbnormal, 6000, ptr(6000), ErrInsufficientRefundable},
		{"succeeded all", OutcomeSucceeded, 9000, nil, ErrCanceled},
		{"processing all", OutcomeProcessing, 9000, nil, ErrInsufficientRefundable},
		{"fits", OutcomeSucceeded, 3000, ptr(3000), nil},
		{"closed frees", OutcomeFailed, 9000, ptr(9000), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := registered(t)
			settled := newRefund(t, s, "key-1", ptr(1000))
			run(t, s, outcome(settled, SourceQuery, OutcomeSucceeded), providerEnv)
			ev := run(t, s, recovered(recoveredNo("2"), tc.kind, tc.amount), gateEnv)
			if full := tc.kind == OutcomeSucceeded && tc.amount == 9000; full {
				assertTypes(t, ev, TypeRefundRecovered, TypeCanceled)
				if s.Status != StatusCanceled || ev[1].Data != (Canceled{Refunded: testPaid}) {
					t.Fatalf("state %s", dump(s))
				}
			}
			retry := RequestRefund{UserID: testUser, IdempotencyKey: "key-2", Amount: tc.retry}
			if tc.want != nil {
				mustFail(t, s, retry, gateEnv, tc.want)
				return
			}
			// What still fits is a separate refund, under a new number that
			// counts the recovered one.
			ev = run(t, s, retry, gateEnv)
			if d := ev[0].Data.(RefundRequested); d.RefundNo != "R-"+testResID+"-3" || d.Number != 3 {
				t.Fatalf("new refund %+v", d)
			}
		})
	}
}

func TestRecordRecovered_Refused(t *testing.T) {
	valid := recovered(recoveredNo("2"), OutcomeSucceeded, 3000)
	with := func(f func(*RecordRecovered)) RecordRecovered { c := valid; f(&c); return c }
	for _, tc := range []struct {
		name string
		cmd  RecordRecovered
		want *Error
	}{
		{"current prefix", with(func(c *RecordRecovered) { c.RefundNo = "R-" + testResID + "-2" }), ErrInvalid},
		{"other reservation", with(func(c *RecordRecovered) { c.RefundNo = "RE0-other-2" }), ErrInvalid},
		{"not a number of ours", with(func(c *RecordRecovered) { c.RefundNo = "MP-1" }), ErrInvalid},
		{"rejected", with(func(c *RecordRecovered) { c.Outcome.Kind = OutcomeRejected }), ErrInvalid},
		{"unknown", with(func(c *RecordRecovered) { c.Outcome.Kind = OutcomeUnknown }), ErrInvalid},
		{"not found", with(func(c *RecordRecovered) { c.Outcome.Kind = OutcomeNotFound }), ErrInvalid},
		{"no amount", with(func(c *RecordRecovered) { c.Outcome.RefundAmount = 0 }), ErrInvalid},
		{"no provider id", with(func(c *RecordRecovered) { c.Outcome.ProviderID = "" }), ErrInvalid},
		{"other order", with(func(c *RecordRecovered) { c.Outcome.OutTradeNo = "OT-other" }), ErrOutcomeMismatch},
		{"other total", with(func(c *RecordRecovered) { c.Outcome.TotalAmount = testPaid + 1 }), ErrOutcomeMismatch},
		// The journal holds more than WeChat Pay could have paid beside it.
		{"over the cap", with(func(c *RecordRecovered) { c.Outcome.RefundAmount = 9001 }), ErrOutcomeMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := registered(t)
			settled := newRefund(t, s, "key-1", ptr(1000))
			run(t, s, outcome(settled, SourceQuery, OutcomeSucceeded), providerEnv)
			mustFail(t, s, tc.cmd, gateEnv, tc.want)
		})
	}
	t.Run("not registered", func(t *testing.T) {
		mustFail(t, &State{}, valid, gateEnv, ErrNotFound)
	})
	t.Run("known number", func(t *testing.T) {
		// A refund the journal made is not recovered over.
		s := registered(t)
		no := newRefund(t, s, "key-1", ptr(1000))
		mustFail(t, s, with(func(c *RecordRecovered) { c.RefundNo = no }), Env{Now: gateEnv.Now, By: "engine", Policy: Policy{RefundNoPrefix: "RE1"}}, ErrOutcomeMismatch)
	})
}

// A recovered refund has no request bytes: nothing ever sends it. One in
// flight is queried until it is final.
func TestRecordRecovered_OnlyQueried(t *testing.T) {
	s := registered(t)
	no := recoveredNo("1")
	run(t, s, recovered(no, OutcomeProcessing, 3000), gateEnv)
	due := s.Refund(no).DueAt
	mustFail(t, s, Resubmit{RefundNo: no}, gateEnv, ErrInvalidState)
	mustFail(t, s, Abandon{RefundNo: no}, gateEnv, ErrInvalidState)
	// "Not found" proves nothing, and there are no bytes to resend.
	mustNoop(t, s, outcome(no, SourceQuery, OutcomeNotFound), providerEnv)
	// A rejection only answers a submission of a refund WeChat Pay has no
	// id for: it cannot release a recovered refund's amount.
	run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Outcome: Outcome{Kind: OutcomeRejected}}, providerEnv)
	if r := s.Refund(no); r.State != Processing || !r.DueAt.Equal(due) || s.Refundable() != testPaid-3000 {
		t.Fatalf("after a stray rejection: %+v", *r)
	}
	for i := 1; i <= 3; i++ {
		ev := run(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
		if len(ev) != 1 || ev[0].Data.EventType() != TypeQueryStarted {
			t.Fatalf("timer %d: %v, want a query", i, types(ev))
		}
		due = s.Refund(no).DueAt
	}
	run(t, s, RecordOutcome{RefundNo: no, Source: SourceQuery, Outcome: Outcome{Kind: OutcomeSucceeded, RefundAmount: 3000, ProviderID: "50300" + no}}, providerEnv)
	if r := s.Refund(no); r.State != Succeeded || !r.DueAt.IsZero() || r.Attempts != 0 || s.Refunded() != 3000 {
		t.Fatalf("refund %+v", *r)
	}
}

// A journal with recovered refunds replays to the same state.
func TestRecordRecovered_Replays(t *testing.T) {
	s := registered(t)
	events := []Event{}
	events = append(events, Event{At: t0, By: "system:booking", Data: Registered{ReservationID: testResID, UserID: testUser,
		OutTradeNo: testOTN, TransactionID: "4200001234202503011234567890", Amount: testPaid, Currency: "CNY", PaidAt: t0.Add(-time.Hour)}})
	for i, kind := range []OutcomeKind{OutcomeProcessing, OutcomeSucceeded, OutcomeAbnormal} {
		ev := run(t, s, recovered(recoveredNo(string(rune('1'+i))), kind, 1000), gateEnv)
		for _, e := range ev {
			typ, ver, data, err := Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Decode(typ, ver, data)
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, back)
		}
	}
	assertSameState(t, s, Replay(events))
}
