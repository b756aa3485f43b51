package reservation

import (
	"reflect"
	"testing"
	"time"
)

// TestCheckProvider_HintWindow: anyone who captured one APIv2 notification
// can replay it at will, and each replay is a hint (CheckProvider). A hint
// while the refund's last query started less than the hint window ago costs
// nothing: that query is in flight or was just answered. Timers and an
// operator's explicit reconcile keep their queries.
func TestCheckProvider_HintWindow(t *testing.T) {
	hint := func(no string) Command { return CheckProvider{RefundNo: no} }
	type step struct {
		after time.Duration // since the start of the case
		cmd   func(s *State, no string) Command
		want  []string // event types; nil means none
	}
	query := []string{TypeQueryStarted}
	answer := func(kind OutcomeKind) func(*State, string) Command {
		return func(_ *State, no string) Command {
			return RecordOutcome{RefundNo: no, Source: SourceQuery, Outcome: Outcome{Kind: kind, ProviderID: "wx-1"}}
		}
	}
	cases := []struct {
		name   string
		policy Policy
		steps  []step
	}{
		{"a second hint while the first query is in flight", Policy{}, []step{
			{0, func(_ *State, no string) Command { return hint(no) }, query},
			{time.Second, func(_ *State, no string) Command { return hint(no) }, nil},
			{59 * time.Second, func(_ *State, no string) Command { return hint(no) }, nil},
		}},
		{"a hint after the query was answered within the window", Policy{}, []step{
			{0, func(_ *State, no string) Command { return hint(no) }, query},
			{time.Second, answer(OutcomeProcessing), []string{TypeProviderResult}}, // the provider id is news
			{2 * time.Second, func(_ *State, no string) Command { return hint(no) }, nil},
		}},
		{"a hint after the window", Policy{}, []step{
			{0, func(_ *State, no string) Command { return hint(no) }, query},
			{time.Minute, func(_ *State, no string) Command { return hint(no) }, query},
			{time.Minute + time.Second, func(_ *State, no string) Command { return hint(no) }, nil},
		}},
		{"a query never answered (a crash) holds hints back only for the window", Policy{}, []step{
			{0, func(_ *State, no string) Command { return hint(no) }, query},
			{10 * time.Minute, func(_ *State, no string) Command { return hint(no) }, query},
		}},
		{"a hint just after a timer's query", Policy{}, []step{
			{0, func(s *State, no string) Command { return FireTimer{RefundNo: no, DueAt: s.Refund(no).DueAt} }, query},
			{time.Second, func(_ *State, no string) Command { return hint(no) }, nil},
		}},
		{"a timer keeps its schedule after a hint", Policy{QueryBackoff: []time.Duration{10 * time.Second}}, []step{
			{0, func(_ *State, no string) Command { return hint(no) }, query},
			{10 * time.Second, func(s *State, no string) Command { return FireTimer{RefundNo: no, DueAt: s.Refund(no).DueAt} }, query},
		}},
		{"an operator's reconcile is not held back", Policy{}, []step{
			{0, func(_ *State, no string) Command { return hint(no) }, query},
			{time.Second, func(_ *State, no string) Command { return CheckProvider{RefundNo: no, Operator: true} }, query},
			{2 * time.Second, func(_ *State, no string) Command { return hint(no) }, nil},
		}},
		{"the policy's window", Policy{HintWindow: 10 * time.Minute}, []step{
			{0, func(_ *State, no string) Command { return hint(no) }, query},
			{9 * time.Minute, func(_ *State, no string) Command { return hint(no) }, nil},
			{10 * time.Minute, func(_ *State, no string) Command { return hint(no) }, query},
		}},
		{"a clock set back does not hold hints back", Policy{}, []step{
			{time.Hour, func(_ *State, no string) Command { return hint(no) }, query},
			{0, func(_ *State, no string) Command { return hint(no) }, query},
			{time.Second, func(_ *State, no string) Command { return hint(no) }, nil},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, no := refundIn(t, Processing)
			start := t0.Add(time.Hour)
			for i, st := range tc.steps {
				env := Env{Now: start.Add(st.after), By: "wechatpay:notification", Policy: tc.policy}
				cmd := st.cmd(s, no)
				if st.want == nil {
					mustNoop(t, s, cmd, env)
					continue
				}
				if got := run(t, s, cmd, env); !equalTypes(types(got), st.want) {
					t.Fatalf("step %d (%T): events %v, want %v", i, cmd, types(got), st.want)
				}
			}
		})
	}
}

func equalTypes(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPolicy_HintWindowMustNotBeNegative(t *testing.T) {
	if err := (Policy{HintWindow: -time.Second}).Validate(); CodeOf(err) != CodeInvalid {
		t.Fatalf("Validate = %v, want invalid_argument", err)
	}
}

// TestConflict_RepeatedContradictionIsRecordedOnce: a verified notification
// that contradicts a terminal state is a conflict for operators, once. WeChat
// re-sends it, and anyone can replay it within its signature's time window:
// the same contradiction again is no new evidence and journals nothing. A
// different one is.
func TestConflict_RepeatedContradictionIsRecordedOnce(t *testing.T) {
	s, no := refundIn(t, Succeeded)
	id := s.Refund(no).ProviderID // the success reported it
	closed := RecordOutcome{RefundNo: no, Source: SourceNotification, Outcome: Outcome{Kind: OutcomeFailed, Code: "CLOSED", ProviderID: id}}
	assertTypes(t, run(t, s, closed, providerEnv), TypeConflict)
	for range 3 {
		mustNoop(t, s, closed, providerEnv)
	}
	if c := s.Refund(no).Conflicts; c != 1 {
		t.Fatalf("%d conflicts, want 1", c)
	}
	others := []RecordOutcome{
		{RefundNo: no, Source: SourceQuery, Outcome: closed.Outcome},
		{RefundNo: no, Source: SourceNotification, Outcome: Outcome{Kind: OutcomeAbnormal, ProviderID: id}},
		{RefundNo: no, Source: SourceNotification, Outcome: Outcome{Kind: OutcomeFailed, Code: "OTHER", ProviderID: id}},
	}
	for i, o := range others {
		if ev := run(t, s, o, providerEnv); !equalTypes(types(ev), []string{TypeConflict}) {
			t.Fatalf("contradiction %d: events %v, want a conflict", i, types(ev))
		}
	}
}

// TestNotification_Hint: a hint (an unsigned APIv2 notification, or a
// verified one whose status has no outcome kind) names a refund with its
// order and amounts. The core matches them against the records before it
// asks the provider, on any refund state, zero amounts included; the API
// refused the same notifications as mismatches when it matched them itself.
func TestNotification_Hint(t *testing.T) {
	match := func(s *State, no string) Outcome {
		return Outcome{OutTradeNo: s.OutTradeNo, RefundAmount: s.Refund(no).Amount, TotalAmount: s.Amount, ProviderID: "50300001"}
	}
	cases := []struct {
		name    string
		state   RefundState
		report  func(o *Outcome)
		refund  string // "" means the refund's own number
		want    []string
		wantErr *Error
	}{
		{"matching: query", Processing, func(*Outcome) {}, "", []string{TypeQueryStarted}, nil},
		{"matching on an UNKNOWN refund: query", Unknown, func(*Outcome) {}, "", []string{TypeQueryStarted}, nil},
		{"another order", Processing, func(o *Outcome) { o.OutTradeNo = "other-order" }, "", nil, ErrOutcomeMismatch},
		{"another refund amount", Processing, func(o *Outcome) { o.RefundAmount++ }, "", nil, ErrOutcomeMismatch},
		{"another order total", Processing, func(o *Outcome) { o.TotalAmount-- }, "", nil, ErrOutcomeMismatch},
		{"amounts absent", Processing, func(o *Outcome) { o.RefundAmount, o.TotalAmount = 0, 0 }, "", nil, ErrOutcomeMismatch},
		{"order absent", Processing, func(o *Outcome) { o.OutTradeNo = "" }, "", nil, ErrOutcomeMismatch},
		{"matching on a settled refund: nothing to ask", Succeeded, func(*Outcome) {}, "", nil, nil},
		{"another amount on a settled refund", Succeeded, func(o *Outcome) { o.RefundAmount++ }, "", nil, ErrOutcomeMismatch},
		{"unknown refund number", Processing, func(*Outcome) {}, "T-nobody-1", nil, ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, no := refundIn(t, tc.state)
			o := match(s, no)
			tc.report(&o)
			if tc.refund != "" {
				no = tc.refund
			}
			cmd := Notification{RefundNo: no, Outcome: o, Hint: true}.Command()
			env := Env{Now: t0.Add(time.Hour), By: "wechatpay:notification"}
			switch {
			case tc.wantErr != nil:
				mustFail(t, s, cmd, env, tc.wantErr)
			case tc.want == nil:
				mustNoop(t, s, cmd, env)
			default:
				assertTypes(t, run(t, s, cmd, env), tc.want...)
				// The hint window holds a replay back, as for any hint.
				mustNoop(t, s, cmd, Env{Now: env.Now.Add(time.Second), By: env.By})
			}
		})
	}
}

// TestNotification_Command: a notification that is not a hint records its
// outcome as a notification; a hint carries what it reports to the check.
func TestNotification_Command(t *testing.T) {
	o := Outcome{Kind: OutcomeSucceeded, ProviderID: "50300001", OutTradeNo: testOTN, RefundAmount: 1, TotalAmount: 2}
	for _, tc := range []struct {
		n    Notification
		want Command
	}{
		{Notification{RefundNo: "n", Outcome: o}, RecordOutcome{RefundNo: "n", Source: SourceNotification, Outcome: o}},
		{Notification{RefundNo: "n", Outcome: o, Hint: true}, CheckProvider{RefundNo: "n", Reported: &o}},
	} {
		if got := tc.n.Command(); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("%+v.Command() = %#v, want %#v", tc.n, got, tc.want)
		}
	}
}
