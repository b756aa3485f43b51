package reservation

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Fixtures shared by the table tests. All times are UTC so that states built
// live and states replayed from JSON compare with reflect.DeepEqual.
var (
	t0        = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	testPaid  = int64(10000)
	testUser  = "u-42"
	testResID = "resv-1"
	testOTN   = "OT20250301001"
)

func ptr(n int64) *int64 { return &n }

func testEnv(now time.Time, by string) Env { return Env{Now: now, By: by} }

func validRegister() Register {
	return Register{
		ReservationID: testResID, UserID: testUser, OutTradeNo: testOTN,
		TransactionID: "4200001234202503011234567890", Amount: testPaid, Currency: "CNY",
		PaidAt: t0.Add(-time.Hour),
	}
}

// run decides cmd on s and applies the events, failing the test on a domain
// error. It checks that every event carries the env's time and principal.
func run(t testing.TB, s *State, cmd Command, env Env) []Event {
	t.Helper()
	cmd = reported(s, cmd)
	events, err := Decide(s, cmd, env)
	if err != nil {
		t.Fatalf("Decide(%T %+v): %v", cmd, cmd, err)
	}
	for _, e := range events {
		if !e.At.Equal(env.Now) || e.By != env.By {
			t.Fatalf("event %s has At=%v By=%q, want %v %q", e.Data.EventType(), e.At, e.By, env.Now, env.By)
		}
		Apply(s, e)
	}
	return events
}

// mustFail decides cmd on s and requires the error to match want, with no
// events and no change to s.
func mustFail(t testing.TB, s *State, cmd Command, env Env, want *Error) error {
	t.Helper()
	cmd = reported(s, cmd)
	before := s.Clone()
	events, err := Decide(s, cmd, env)
	if !errors.Is(err, want) {
		t.Fatalf("Decide(%T %+v) error = %v, want %v", cmd, cmd, err, want)
	}
	if CodeOf(err) != want.Code {
		t.Fatalf("CodeOf(%v) = %q, want %q", err, CodeOf(err), want.Code)
	}
	if events != nil {
		t.Fatalf("Decide returned events %v with error %v", types(events), err)
	}
	assertSameState(t, before, s)
	return err
}

// mustNoop decides cmd on s and requires no events and no error.
func mustNoop(t testing.TB, s *State, cmd Command, env Env) {
	t.Helper()
	cmd = reported(s, cmd)
	events, err := Decide(s, cmd, env)
	if err != nil || len(events) != 0 {
		t.Fatalf("Decide(%T %+v) = %v, %v; want no events and no error", cmd, cmd, types(events), err)
	}
}

func types(events []Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Data.EventType())
	}
	return out
}

func assertTypes(t testing.TB, events []Event, want ...string) {
	t.Helper()
	if got := types(events); !reflect.DeepEqual(got, want) {
		t.Fatalf("event types = %v, want %v", got, want)
	}
}

// exported copies a state without its private indexes, so that a state built
// live compares equal to one replayed from events.
func exported(s *State) State {
	c := *s
	c.byNo, c.byKey = nil, nil
	if len(c.Refunds) == 0 {
		c.Refunds = nil // Clone makes an empty slice of a nil one
	}
	return c
}

// fatalf is what helpers need from *testing.T and *rapid.T alike.
type fatalf interface {
	Helper()
	Fatalf(format string, args ...any)
}

func assertSameState(t fatalf, want, got *State) {
	t.Helper()
	if w, g := exported(want), exported(got); !reflect.DeepEqual(w, g) {
		t.Fatalf("state changed:\nwant %s\ngot  %s", dump(&w), dump(&g))
	}
}

func dump(s *State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{%s %s %d %s v%d", s.ID, s.Status, s.Amount, s.OutTradeNo, s.Version)
	for _, r := range s.Refunds {
		fmt.Fprintf(&b, " %+v", *r)
	}
	b.WriteString("}")
	return b.String()
}

// registered returns a registered reservation of testPaid fen.
func registered(t testing.TB) *State {
	t.Helper()
	s := &State{}
	run(t, s, validRegister(), testEnv(t0, "system:booking"))
	return s
}

// newRefund requests a refund of amount (nil = all) and starts its first
// submission, as the engine does in one append. It returns the refund number.
func newRefund(t testing.TB, s *State, key string, amount *int64) string {
	t.Helper()
	ev := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: key, Amount: amount}, testEnv(t0, "user:"+testUser))
	no := ev[0].Data.(RefundRequested).RefundNo
	run(t, s, StartSubmission{RefundNo: no, Request: []byte(`{"out_refund_no":"` + no + `"}`)}, testEnv(t0, "user:"+testUser))
	return no
}

var providerEnv = testEnv(t0.Add(time.Minute), "provider:wechatpay")

func outcome(no string, src Source, kind OutcomeKind) RecordOutcome {
	return RecordOutcome{RefundNo: no, Source: src, Outcome: Outcome{Kind: kind}}
}

// rejection is the provider's refusal of the refund's latest submission
// attempt, the one answer that makes a refund REJECTED.
func rejection(s *State, no string) RecordOutcome {
	return RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: s.Refund(no).Attempts, Outcome: Outcome{Kind: OutcomeRejected}}
}

// Refund states a test can put a refund into. "FAILED(abandoned)" is FAILED
// reached by an operator rather than by the provider.
const failedAbandoned RefundState = "FAILED(abandoned)"

var allFromStates = []RefundState{Processing, Unknown, Rejected, Abnormal, Succeeded, Failed, failedAbandoned}

// refundIn returns a registered reservation with one submitted refund of
// 4000 fen driven into state st, and the refund's number.
func refundIn(t testing.TB, st RefundState) (*State, string) {
	t.Helper()
	s := registered(t)
	no := newRefund(t, s, "key-1", ptr(4000))
	drive := func(kind OutcomeKind, src Source) {
		run(t, s, RecordOutcome{RefundNo: no, Source: src, Attempt: 1, Outcome: Outcome{Kind: kind, Code: "C_" + string(kind)}}, providerEnv)
	}
	switch st {
	case Processing:
	case Unknown:
		exhaustRetries(t, s, no, providerEnv)
	case Rejected:
		drive(OutcomeRejected, SourceResponse)
	case Abnormal:
		drive(OutcomeAbnormal, SourceNotification)
	case Succeeded:
		drive(OutcomeSucceeded, SourceNotification)
	case Failed:
		drive(OutcomeFailed, SourceNotification)
	case failedAbandoned:
		drive(OutcomeRejected, SourceResponse)
		run(t, s, abandon(no, "merchant gave up", t0.Add(time.Hour)), testEnv(t0.Add(time.Hour), "operator:alice"))
	default:
		t.Fatalf("refundIn: unknown state %s", st)
	}
	want := st
	if st == failedAbandoned {
		want = Failed
	}
	if got := s.Refund(no).State; got != want {
		t.Fatalf("refundIn(%s): refund is %s", st, got)
	}
	return s, no
}

// exhaustRetries answers every submission of refund no with an unknown
// outcome and fires each retry timer when it is due, as the engine does,
// until the policy's attempts are used up and the refund is UNKNOWN. It
// returns the time of the last answer.
func exhaustRetries(t testing.TB, s *State, no string, env Env) time.Time {
	t.Helper()
	now := env.Now
	for range 100 {
		r := s.Refund(no)
		answer := RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: r.Attempts, Outcome: Outcome{Kind: OutcomeUnknown, Code: "C_UNKNOWN"}}
		ev := run(t, s, answer, Env{Now: now, By: "provider:wechatpay", Policy: env.Policy, Jitter: env.Jitter})
		assertTypes(t, ev, TypeProviderResult)
		if r = s.Refund(no); r.State == Unknown {
			if r.Attempts != env.Policy.maxAttempts() || r.Retry {
				t.Fatalf("UNKNOWN after %d attempts (retry %v), policy allows %d", r.Attempts, r.Retry, env.Policy.maxAttempts())
			}
			return now
		}
		if r.State != Processing || !r.Retry {
			t.Fatalf("unknown answer to attempt %d left %+v, want a retry", r.Attempts, *r)
		}
		now = r.DueAt
		assertTypes(t, run(t, s, FireTimer{RefundNo: no, DueAt: r.DueAt}, Env{Now: now, By: "engine", Policy: env.Policy}), TypeSubmissionStarted)
	}
	t.Fatalf("refund %s never became UNKNOWN", no)
	return now
}

func TestDecide_UnknownCommand(t *testing.T) {
	s := registered(t)
	err := mustFail(t, s, nil, testEnv(t0, "x"), ErrInvalid)
	var de *Error
	if !errors.As(err, &de) || de.Field != "command" {
		t.Fatalf("error %v, want field command", err)
	}
}

func TestDecide_DoesNotMutateState(t *testing.T) {
	setups := map[string]func(t *testing.T) (*State, string){
		"UNKNOWN":  func(t *testing.T) (*State, string) { return refundIn(t, Unknown) },
		"ABNORMAL": func(t *testing.T) (*State, string) { return refundIn(t, Abnormal) },
		"retry pending": func(t *testing.T) (*State, string) {
			s, no := refundIn(t, Processing)
			run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeUnknown}}, providerEnv)
			return s, no
		},
		"spacing deferred": func(t *testing.T) (*State, string) {
			s, no, _ := deferredRefund(t)
			return s, no
		},
	}
	for name, setup := range setups {
		t.Run(name, func(t *testing.T) {
			s, no := setup(t)
			before := s.Clone()
			env := Env{Now: t0.Add(48 * time.Hour), By: "someone", Policy: Policy{RefundSpacing: time.Hour, RefundWindow: time.Hour}, Jitter: 0.5}
			cmds := []Command{
				validRegister(),
				RequestRefund{UserID: testUser, IdempotencyKey: "key-9", Amount: ptr(100)},
				RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(4000)},
				StartSubmission{RefundNo: no, Request: []byte("other")},
				Resubmit{RefundNo: no},
				Abandon{RefundNo: no},
				FireTimer{RefundNo: no, DueAt: s.Refund(no).DueAt},
				CheckProvider{RefundNo: no},
				outcome(no, SourceQuery, OutcomeSucceeded),
				outcome(no, SourceQuery, OutcomeNotFound),
				outcome(no, SourceResponse, OutcomeRejected),
				RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: s.Refund(no).Attempts, Outcome: Outcome{Kind: OutcomeUnknown}},
				outcome(no, SourceNotification, OutcomeAbnormal),
				Resolve{RefundNo: no, Reason: "settled"},
				Resolve{RefundNo: no},
			}
			for _, cmd := range cmds {
				if _, err := Decide(s, cmd, env); err != nil && CodeOf(err) == "" {
					t.Fatalf("Decide(%T): non-domain error %v", cmd, err)
				}
				assertSameState(t, before, s)
				if !reflect.DeepEqual(before.byNo, s.byNo) || !reflect.DeepEqual(before.byKey, s.byKey) {
					t.Fatalf("Decide(%T) changed the indexes", cmd)
				}
			}
		})
	}
}

func TestRegister_Valid(t *testing.T) {
	s := &State{}
	c := validRegister()
	shanghai := time.FixedZone("CST", 8*3600)
	c.PaidAt = time.Date(2025, 3, 1, 17, 0, 0, 0, shanghai)
	env := testEnv(t0, "system:booking")
	ev := run(t, s, c, env)
	assertTypes(t, ev, TypeRegistered)
	want := Registered{
		ReservationID: c.ReservationID, UserID: c.UserID, OutTradeNo: c.OutTradeNo,
		TransactionID: c.TransactionID, Amount: c.Amount, Currency: "CNY",
		PaidAt:   time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC),
		Merchant: DefaultMerchant,
	}
	if !reflect.DeepEqual(ev[0].Data, want) {
		t.Fatalf("event = %+v, want %+v (PaidAt in UTC)", ev[0].Data, want)
	}
	if !s.Registered() || s.Status != StatusAccepted || s.ID != testResID || s.Amount != testPaid ||
		s.RegisteredBy != "system:booking" || !s.RegisteredAt.Equal(t0) || s.Version != 1 {
		t.Fatalf("state after Register = %s", dump(s))
	}
	if s.Refunded() != 0 || s.InFlight() != 0 || s.Refundable() != testPaid {
		t.Fatalf("refunded/in-flight/refundable = %d/%d/%d", s.Refunded(), s.InFlight(), s.Refundable())
	}
}

func TestRegister_Boundaries(t *testing.T) {
	cases := map[string]func(*Register){
		"id 40 chars":              func(c *Register) { c.ReservationID = strings.Repeat("a-_9", 10) },
		"id 1 char":                func(c *Register) { c.ReservationID = "x" },
		"user 64 bytes":            func(c *Register) { c.UserID = strings.Repeat("u", 64) },
		"user utf8":                func(c *Register) { c.UserID = "用户 42" },
		"out_trade_no 32 with |*":  func(c *Register) { c.OutTradeNo = strings.Repeat("a|*-", 8) },
		"transaction_id empty":     func(c *Register) { c.TransactionID = "" },
		"transaction_id 32 digits": func(c *Register) { c.TransactionID = strings.Repeat("9", 32) },
		"amount 1":                 func(c *Register) { c.Amount = 1 },
		"amount MaxAmount":         func(c *Register) { c.Amount = MaxAmount },
		"paid_at zero (not known)": func(c *Register) { c.PaidAt = time.Time{} },
		"paid_at year 9999":        func(c *Register) { c.PaidAt = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC) },
		"paid_at year 1":           func(c *Register) { c.PaidAt = time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC) },
		"merchant 64 chars":        func(c *Register) { c.Merchant = strings.Repeat("m-_9", 16) },
		"merchant default named":   func(c *Register) { c.Merchant = DefaultMerchant },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := validRegister()
			mutate(&c)
			s := &State{}
			assertTypes(t, run(t, s, c, testEnv(t0, "system")), TypeRegistered)
			if s.ID != c.ReservationID || s.UserID != c.UserID || s.OutTradeNo != c.OutTradeNo ||
				s.TransactionID != c.TransactionID || s.Amount != c.Amount || !s.PaidAt.Equal(c.PaidAt) ||
				s.Merchant != MerchantOf(c.Merchant) {
				t.Fatalf("state %s does not hold %+v", dump(s), c)
			}
		})
	}
}

func TestRegister_Invalid(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Register)
		field  string
	}{
		{"id empty", func(c *Register) { c.ReservationID = "" }, "id"},
		{"id 41 chars", func(c *Register) { c.ReservationID = strings.Repeat("a", 41) }, "id"},
		{"id space", func(c *Register) { c.ReservationID = "resv 1" }, "id"},
		{"id dot", func(c *Register) { c.ReservationID = "resv.1" }, "id"},
		{"id non-ascii", func(c *Register) { c.ReservationID = "预订1" }, "id"},
		{"merchant with the claim separator", func(c *Register) { c.Merchant = "hotel/sh" }, "merchant"},
		{"merchant 65 chars", func(c *Register) { c.Merchant = strings.Repeat("m", 65) }, "merchant"},
		{"merchant space", func(c *Register) { c.Merchant = "hotel sh" }, "merchant"},
		{"user empty", func(c *Register) { c.UserID = "" }, "user_id"},
		{"user 65 bytes", func(c *Register) { c.UserID = strings.Repeat("u", 65) }, "user_id"},
		{"user control char", func(c *Register) { c.UserID = "u\n42" }, "user_id"},
		{"user DEL", func(c *Register) { c.UserID = "u\x7f" }, "user_id"},
		{"user invalid utf8", func(c *Register) { c.UserID = "u\xff" }, "user_id"},
		{"out_trade_no empty", func(c *Register) { c.OutTradeNo = "" }, "out_trade_no"},
		{"out_trade_no 33", func(c *Register) { c.OutTradeNo = strings.Repeat("1", 33) }, "out_trade_no"},
		{"out_trade_no hash", func(c *Register) { c.OutTradeNo = "OT#1" }, "out_trade_no"},
		{"transaction_id letters", func(c *Register) { c.TransactionID = "42000a" }, "transaction_id"},
		{"transaction_id 33 digits", func(c *Register) { c.TransactionID = strings.Repeat("4", 33) }, "transaction_id"},
		{"amount zero", func(c *Register) { c.Amount = 0 }, "amount"},
		{"amount negative", func(c *Register) { c.Amount = -1 }, "amount"},
		{"amount too big", func(c *Register) { c.Amount = MaxAmount + 1 }, "amount"},
		{"currency empty", func(c *Register) { c.Currency = "" }, "currency"},
		{"currency USD", func(c *Register) { c.Currency = "USD" }, "currency"},
		{"currency lower case", func(c *Register) { c.Currency = "cny" }, "currency"},
		{"paid_at year 10000", func(c *Register) { c.PaidAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "paid_at"},
		{"paid_at year 0", func(c *Register) { c.PaidAt = time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC) }, "paid_at"},
		{"paid_at year 0 in UTC", func(c *Register) { c.PaidAt = time.Date(1, 1, 1, 7, 0, 0, 0, time.FixedZone("CST", 8*3600)) }, "paid_at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validRegister()
			tc.mutate(&c)
			for _, s := range []*State{{}, registered(t)} {
				err := mustFail(t, s, c, testEnv(t0, "system"), ErrInvalid)
				var de *Error
				if !errors.As(err, &de) || de.Field != tc.field {
					t.Fatalf("error %v: field %q, want %q", err, de.Field, tc.field)
				}
				if !strings.HasPrefix(err.Error(), "reservation: "+tc.field+":") {
					t.Fatalf("message %q does not name the field", err.Error())
				}
			}
		})
	}
}

func TestRegister_IdenticalRepeat(t *testing.T) {
	s := registered(t)
	before := s.Clone()
	c := validRegister()
	mustNoop(t, s, c, testEnv(t0.Add(time.Hour), "system:booking"))
	// The same instant in another zone is the same payment time.
	c.PaidAt = c.PaidAt.In(time.FixedZone("CST", 8*3600))
	mustNoop(t, s, c, testEnv(t0.Add(time.Hour), "system:booking"))
	assertSameState(t, before, s)
}

func TestRegister_ConflictingRepeat(t *testing.T) {
	cases := map[string]func(*Register){
		"other id":             func(c *Register) { c.ReservationID = "resv-2" },
		"other user":           func(c *Register) { c.UserID = "u-43" },
		"other out_trade_no":   func(c *Register) { c.OutTradeNo = "OT2" },
		"other transaction_id": func(c *Register) { c.TransactionID = "42" },
		"transaction_id added": func(c *Register) {},
		"other amount":         func(c *Register) { c.Amount = testPaid + 1 },
		"other paid_at":        func(c *Register) { c.PaidAt = c.PaidAt.Add(time.Second) },
		"other merchant":       func(c *Register) { c.Merchant = "hotel-sh" },
		"merchant dropped":     func(c *Register) {},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			s := &State{}
			first := validRegister()
			switch name {
			case "transaction_id added":
				first.TransactionID = ""
			case "merchant dropped":
				first.Merchant = "hotel-bj"
			}
			run(t, s, first, testEnv(t0, "system"))
			c := validRegister()
			mutate(&c)
			mustFail(t, s, c, testEnv(t0, "system"), ErrConflict)
		})
	}
}

// TestRegister_Merchant: the merchant is journaled with the registration
// and never changes; a registration journaled before reservations had
// merchants belongs to the default merchant, and repeating it, naming the
// default merchant or none, changes nothing.
func TestRegister_Merchant(t *testing.T) {
	old := validRegister()
	oldEvent := Event{At: t0, By: "system:booking", Data: Registered{
		ReservationID: old.ReservationID, UserID: old.UserID, OutTradeNo: old.OutTradeNo, TransactionID: old.TransactionID,
		Amount: old.Amount, Currency: old.Currency, PaidAt: old.PaidAt.UTC(),
	}}
	tests := []struct {
		name      string
		journaled func(t *testing.T) *State
		repeat    string // the repeat's merchant
		want      string // the state's merchant
		conflict  bool
	}{
		{"old journal, repeated without a merchant", func(*testing.T) *State { return Replay([]Event{oldEvent}) }, "", DefaultMerchant, false},
		{"old journal, repeated naming the default", func(*testing.T) *State { return Replay([]Event{oldEvent}) }, DefaultMerchant, DefaultMerchant, false},
		{"old journal, repeated for another merchant", func(*testing.T) *State { return Replay([]Event{oldEvent}) }, "hotel-sh", DefaultMerchant, true},
		{"registered for a merchant, repeated for it", registeredFor("hotel-sh"), "hotel-sh", "hotel-sh", false},
		{"registered for a merchant, repeated for the default", registeredFor("hotel-sh"), DefaultMerchant, "hotel-sh", true},
		{"registered for a merchant, repeated for another", registeredFor("hotel-sh"), "hotel-bj", "hotel-sh", true},
		{"registered without one, repeated naming the default", registeredFor(""), DefaultMerchant, DefaultMerchant, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.journaled(t)
			before := s.Clone()
			c := validRegister()
			c.Merchant = tt.repeat
			if tt.conflict {
				mustFail(t, s, c, testEnv(t0.Add(time.Hour), "system:booking"), ErrConflict)
			} else {
				mustNoop(t, s, c, testEnv(t0.Add(time.Hour), "system:booking"))
			}
			assertSameState(t, before, s)
			if s.Merchant != tt.want {
				t.Fatalf("merchant %q, want %q", s.Merchant, tt.want)
			}
		})
	}
}

// registeredFor registers validRegister for merchant and checks that the
// event names the merchant (the default one when none is named).
func registeredFor(merchant string) func(t *testing.T) *State {
	return func(t *testing.T) *State {
		t.Helper()
		s := &State{}
		c := validRegister()
		c.Merchant = merchant
		ev := run(t, s, c, testEnv(t0, "system:booking"))
		if d := ev[0].Data.(Registered); d.Merchant != MerchantOf(merchant) {
			t.Fatalf("journaled merchant %q for %q", d.Merchant, merchant)
		}
		return s
	}
}

func TestFingerprint_Distinguishes(t *testing.T) {
	base := RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(100), Reason: "r"}
	same := base
	same.IdempotencyKey = "other-key"
	same.Amount = ptr(100)
	if Fingerprint(base) != Fingerprint(same) {
		t.Fatal("fingerprint depends on the key or on the amount pointer, not only on the content")
	}
	variants := map[string]RequestRefund{
		"amount omitted": {UserID: testUser, Reason: "r"},
		"other amount":   {UserID: testUser, Amount: ptr(101), Reason: "r"},
		"other reason":   {UserID: testUser, Amount: ptr(100), Reason: "r2"},
		"no reason":      {UserID: testUser, Amount: ptr(100)},
		"other user":     {UserID: "u-43", Amount: ptr(100), Reason: "r"},
		// Field separators must keep "1"+"00" apart from "10"+"0".
		"shifted": {UserID: testUser, Amount: ptr(10), Reason: "0r"},
	}
	seen := map[string]string{Fingerprint(base): "base"}
	for name, v := range variants {
		fp := Fingerprint(v)
		if prev, ok := seen[fp]; ok {
			t.Fatalf("%s has the same fingerprint as %s", name, prev)
		}
		seen[fp] = name
	}
}

func TestRequestRefund_DefaultAmount(t *testing.T) {
	s := registered(t)
	cmd := RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Reason: "trip canceled"}
	env := testEnv(t0.Add(time.Minute), "user:u-42")
	ev := run(t, s, cmd, env)
	assertTypes(t, ev, TypeRefundRequested)
	want := RefundRequested{
		RefundNo: "R-resv-1-1", Number: 1, IdempotencyKey: "key-1", Fingerprint: Fingerprint(cmd),
		Amount: testPaid, Reason: "trip canceled",
	}
	if !reflect.DeepEqual(ev[0].Data, want) {
		t.Fatalf("event = %+v, want %+v", ev[0].Data, want)
	}
	r := s.Refund("R-resv-1-1")
	if r == nil || s.RefundByKey("key-1") != r {
		t.Fatal("refund not indexed by number and key")
	}
	if r.State != Processing || r.Amount != testPaid || r.RequestedBy != "user:u-42" || !r.CreatedAt.Equal(env.Now) ||
		r.Attempts != 0 || len(r.Request) != 0 || !r.DueAt.IsZero() {
		t.Fatalf("refund = %+v", *r)
	}
	if s.InFlight() != testPaid || s.Refundable() != 0 || s.Refunded() != 0 {
		t.Fatalf("in-flight/refundable/refunded = %d/%d/%d", s.InFlight(), s.Refundable(), s.Refunded())
	}
}

func TestRequestRefund_DefaultAmountAfterPartial(t *testing.T) {
	s := registered(t)
	newRefund(t, s, "key-1", ptr(3000))
	ev := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-2"}, testEnv(t0, "u"))
	if got := ev[0].Data.(RefundRequested); got.Amount != 7000 || got.Number != 2 || got.RefundNo != "R-resv-1-2" {
		t.Fatalf("second refund = %+v, want 7000 fen as number 2", got)
	}
}

func TestRequestRefund_Partial(t *testing.T) {
	s := registered(t)
	for i, amount := range []int64{3000, 2500, 4499, 1} {
		ev := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: fmt.Sprintf("key-%d", i), Amount: ptr(amount)}, testEnv(t0, "u"))
		if got := ev[0].Data.(RefundRequested).Amount; got != amount {
			t.Fatalf("refund %d amount = %d, want %d", i, got, amount)
		}
	}
	if s.InFlight() != 9999+1 || s.Refundable() != 0 {
		t.Fatalf("in-flight %d refundable %d", s.InFlight(), s.Refundable())
	}
}

func TestRequestRefund_OverRefundable(t *testing.T) {
	cases := []struct {
		name    string
		before  []int64 // amounts already claimed
		request int64
		ok      bool
	}{
		{"more than paid", nil, testPaid + 1, false},
		{"exactly paid", nil, testPaid, true},
		{"more than left", []int64{3000}, 7001, false},
		{"exactly left", []int64{3000}, 7000, true},
		{"MaxAmount", nil, MaxAmount, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := registered(t)
			for i, a := range tc.before {
				newRefund(t, s, fmt.Sprintf("pre-%d", i), ptr(a))
			}
			cmd := RequestRefund{UserID: testUser, IdempotencyKey: "key", Amount: ptr(tc.request)}
			if tc.ok {
				run(t, s, cmd, testEnv(t0, "u"))
				return
			}
			err := mustFail(t, s, cmd, testEnv(t0, "u"), ErrInsufficientRefundable)
			if !strings.Contains(err.Error(), "exceeds the refundable") {
				t.Fatalf("message %q does not explain", err)
			}
		})
	}
}

func TestRequestRefund_NothingLeft(t *testing.T) {
	s := registered(t)
	newRefund(t, s, "key-1", nil) // everything in flight, not refunded yet
	for _, amount := range []*int64{nil, ptr(1)} {
		err := mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-2", Amount: amount}, testEnv(t0, "u"), ErrInsufficientRefundable)
		if !strings.Contains(err.Error(), "nothing is left") {
			t.Fatalf("message %q", err)
		}
	}
	if s.Status != StatusAccepted {
		t.Fatal("in-flight refunds must not cancel the reservation")
	}
}

func TestRequestRefund_FailedReleasesAmount(t *testing.T) {
	for _, st := range []RefundState{Failed, failedAbandoned} {
		t.Run(string(st), func(t *testing.T) {
			s, _ := refundIn(t, st)
			if s.Refundable() != testPaid || s.InFlight() != 0 {
				t.Fatalf("refundable %d in-flight %d after FAILED", s.Refundable(), s.InFlight())
			}
			ev := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-2"}, testEnv(t0, "u"))
			if got := ev[0].Data.(RefundRequested); got.Amount != testPaid || got.Number != 2 {
				t.Fatalf("refund after FAILED = %+v; want all %d under a new number 2", got, testPaid)
			}
		})
	}
}

func TestRequestRefund_HeldStatesKeepAmount(t *testing.T) {
	for _, st := range []RefundState{Processing, Unknown, Rejected, Abnormal, Succeeded} {
		t.Run(string(st), func(t *testing.T) {
			s, _ := refundIn(t, st)
			if s.Refundable() != testPaid-4000 {
				t.Fatalf("refundable = %d with a %s refund of 4000", s.Refundable(), st)
			}
			mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-2", Amount: ptr(testPaid - 3999)}, testEnv(t0, "u"), ErrInsufficientRefundable)
		})
	}
}

func TestRequestRefund_Canceled(t *testing.T) {
	s := registered(t)
	first := RequestRefund{UserID: testUser, IdempotencyKey: "key-1"}
	no := newRefund(t, s, first.IdempotencyKey, nil)
	run(t, s, outcome(no, SourceNotification, OutcomeSucceeded), providerEnv)
	if s.Status != StatusCanceled {
		t.Fatalf("status %s after full refund", s.Status)
	}
	mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-2"}, testEnv(t0, "u"), ErrCanceled)
	mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-2", Amount: ptr(1)}, testEnv(t0, "u"), ErrCanceled)
	// A replay still answers with the refund that canceled it.
	mustNoop(t, s, first, testEnv(t0, "u"))
	// And a reused key is still told apart.
	mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(1)}, testEnv(t0, "u"), ErrIdempotencyKeyReused)
}

func TestRequestRefund_NotFound(t *testing.T) {
	reg := registered(t)
	existing := RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(100)}
	run(t, reg, existing, testEnv(t0, "u"))

	unregistered := mustFail(t, &State{}, RequestRefund{UserID: testUser, IdempotencyKey: "key-1"}, testEnv(t0, "u"), ErrNotFound)
	cases := map[string]RequestRefund{
		"other user":                 {UserID: "u-43", IdempotencyKey: "key-2"},
		"other user, existing key":   {UserID: "u-43", IdempotencyKey: "key-1", Amount: ptr(100)},
		"other user, key, no amount": {UserID: "u-43", IdempotencyKey: "key-1"},
		"user id case differs":       {UserID: "U-42", IdempotencyKey: "key-2"},
	}
	for name, cmd := range cases {
		t.Run(name, func(t *testing.T) {
			err := mustFail(t, reg, cmd, testEnv(t0, "u"), ErrNotFound)
			// Indistinguishable from "no such reservation".
			if err.Error() != unregistered.Error() {
				t.Fatalf("other user sees %q, unknown reservation gives %q", err, unregistered)
			}
		})
	}
	// A nil state is an unknown reservation too.
	if _, err := Decide(nil, RequestRefund{UserID: testUser, IdempotencyKey: "k"}, testEnv(t0, "u")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("nil state: %v", err)
	}
}

func TestRequestRefund_IdempotentReplay(t *testing.T) {
	cases := []struct {
		name  string
		first RequestRefund
		// after runs between the first request and the replay.
		after func(t *testing.T, s *State, no string)
	}{
		{"right away", RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(3000), Reason: "r"}, nil},
		{"default amount", RequestRefund{UserID: testUser, IdempotencyKey: "key-1"}, nil},
		{"after success", RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(3000)}, func(t *testing.T, s *State, no string) {
			run(t, s, outcome(no, SourceNotification, OutcomeSucceeded), providerEnv)
		}},
		{"after failure", RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(3000)}, func(t *testing.T, s *State, no string) {
			run(t, s, outcome(no, SourceNotification, OutcomeFailed), providerEnv)
		}},
		{"after the rest was claimed", RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(3000)}, func(t *testing.T, s *State, no string) {
			newRefund(t, s, "key-2", nil)
		}},
		{"at the refund limit", RequestRefund{UserID: testUser, IdempotencyKey: "key-1", Amount: ptr(1)}, func(t *testing.T, s *State, no string) {
			for i := 2; i <= 50; i++ {
				run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: fmt.Sprintf("key-%d", i), Amount: ptr(1)}, testEnv(t0, "u"))
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := registered(t)
			ev := run(t, s, tc.first, testEnv(t0, "u"))
			no := ev[0].Data.(RefundRequested).RefundNo
			if tc.after != nil {
				tc.after(t, s, no)
			}
			before := s.Clone()
			replay := tc.first
			if tc.first.Amount != nil {
				replay.Amount = ptr(*tc.first.Amount) // same value, other pointer
			}
			mustNoop(t, s, replay, testEnv(t0.Add(time.Hour), "u"))
			assertSameState(t, before, s)
			if r := s.RefundByKey("key-1"); r == nil || r.No != no {
				t.Fatalf("key-1 maps to %+v, want refund %s", r, no)
			}
		})
	}
}

func TestRequestRefund_KeyReused(t *testing.T) {
	cases := []struct {
		name          string
		first, second RequestRefund
	}{
		{"different amount",
			RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(100)},
			RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(200)}},
		{"different reason",
			RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(100), Reason: "a"},
			RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(100), Reason: "b"}},
		{"reason dropped",
			RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(100), Reason: "a"},
			RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(100)}},
		{"omitted then explicit (same value)",
			RequestRefund{UserID: testUser, IdempotencyKey: "k"},
			RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(testPaid)}},
		{"explicit then omitted",
			RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(testPaid)},
			RequestRefund{UserID: testUser, IdempotencyKey: "k"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := registered(t)
			run(t, s, tc.first, testEnv(t0, "u"))
			mustFail(t, s, tc.second, testEnv(t0, "u"), ErrIdempotencyKeyReused)
			if len(s.Refunds) != 1 {
				t.Fatalf("%d refunds", len(s.Refunds))
			}
		})
	}
}

func TestRequestRefund_KeyScopedToReservation(t *testing.T) {
	a, b := registered(t), &State{}
	other := validRegister()
	other.ReservationID, other.OutTradeNo = "resv-2", "OT2"
	run(t, b, other, testEnv(t0, "system"))
	cmd := RequestRefund{UserID: testUser, IdempotencyKey: "shared", Amount: ptr(100)}
	na := run(t, a, cmd, testEnv(t0, "u"))[0].Data.(RefundRequested).RefundNo
	nb := run(t, b, cmd, testEnv(t0, "u"))[0].Data.(RefundRequested).RefundNo
	if na == nb {
		t.Fatalf("two reservations produced the same refund number %s", na)
	}
}

func TestRequestRefund_RefundLimit(t *testing.T) {
	cases := []struct {
		name  string
		limit int
		want  int
	}{
		{"default 50", 0, 50},
		{"custom 3", 3, 3},
		{"negative means default", -1, 50},
		{"max 99", 99, 99},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &State{}
			reg := validRegister()
			reg.Amount = 1000
			env := Env{Now: t0, By: "u", Policy: Policy{MaxRefunds: tc.limit}}
			run(t, s, reg, env)
			for i := 1; i <= tc.want; i++ {
				ev := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: fmt.Sprintf("k%d", i), Amount: ptr(1)}, env)
				no := ev[0].Data.(RefundRequested).RefundNo
				if i%2 == 0 { // failed refunds still count against the limit
					run(t, s, StartSubmission{RefundNo: no, Request: []byte("x")}, env)
					run(t, s, outcome(no, SourceNotification, OutcomeFailed), env)
				}
			}
			mustFail(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "one-more", Amount: ptr(1)}, env, ErrRefundLimit)
			if last := s.Refunds[len(s.Refunds)-1].No; len(last) > 64 {
				t.Fatalf("refund number %q too long", last)
			}
		})
	}
}

func TestRequestRefund_Invalid(t *testing.T) {
	cases := []struct {
		name  string
		cmd   RequestRefund
		field string
	}{
		{"key empty", RequestRefund{UserID: testUser}, "idempotency_key"},
		{"key 65 chars", RequestRefund{UserID: testUser, IdempotencyKey: strings.Repeat("k", 65)}, "idempotency_key"},
		{"key with space", RequestRefund{UserID: testUser, IdempotencyKey: "a b"}, "idempotency_key"},
		{"key with colon", RequestRefund{UserID: testUser, IdempotencyKey: "a:b"}, "idempotency_key"},
		{"user empty", RequestRefund{IdempotencyKey: "k"}, "user_id"},
		{"user too long", RequestRefund{UserID: strings.Repeat("u", 65), IdempotencyKey: "k"}, "user_id"},
		{"amount zero", RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(0)}, "amount"},
		{"amount negative", RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(-100)}, "amount"},
		{"amount over MaxAmount", RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(MaxAmount + 1)}, "amount"},
		{"reason 81 bytes", RequestRefund{UserID: testUser, IdempotencyKey: "k", Reason: strings.Repeat("r", 81)}, "reason"},
		{"reason 27 CJK chars (81 bytes)", RequestRefund{UserID: testUser, IdempotencyKey: "k", Reason: strings.Repeat("退", 27)}, "reason"},
		{"reason newline", RequestRefund{UserID: testUser, IdempotencyKey: "k", Reason: "a\nb"}, "reason"},
		{"reason invalid utf8", RequestRefund{UserID: testUser, IdempotencyKey: "k", Reason: "\xc3"}, "reason"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range []*State{{}, registered(t)} {
				err := mustFail(t, s, tc.cmd, testEnv(t0, "u"), ErrInvalid)
				var de *Error
				if !errors.As(err, &de) || de.Field != tc.field {
					t.Fatalf("error %v, want field %q", err, tc.field)
				}
			}
		})
	}
}

func TestRequestRefund_Boundaries(t *testing.T) {
	cases := map[string]RequestRefund{
		"key 64 chars":      {UserID: testUser, IdempotencyKey: strings.Repeat("k_-9", 16), Amount: ptr(1)},
		"key 1 char":        {UserID: testUser, IdempotencyKey: "k", Amount: ptr(1)},
		"reason 80 bytes":   {UserID: testUser, IdempotencyKey: "k", Amount: ptr(1), Reason: strings.Repeat("r", 80)},
		"reason 26 CJK + 2": {UserID: testUser, IdempotencyKey: "k", Amount: ptr(1), Reason: strings.Repeat("退", 26) + "ab"},
	}
	for name, cmd := range cases {
		t.Run(name, func(t *testing.T) {
			s := registered(t)
			ev := run(t, s, cmd, testEnv(t0, "u"))
			if got := ev[0].Data.(RefundRequested); got.IdempotencyKey != cmd.IdempotencyKey || got.Reason != cmd.Reason {
				t.Fatalf("event %+v lost key or reason", got)
			}
		})
	}
}

func TestRequestRefund_NumbersNeverReused(t *testing.T) {
	s := &State{}
	env := Env{Now: t0, By: "u", Policy: Policy{RefundNoPrefix: "TEST"}}
	run(t, s, validRegister(), env)
	var nos []string
	for i := 1; i <= 5; i++ {
		ev := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: fmt.Sprintf("k%d", i)}, env)
		d := ev[0].Data.(RefundRequested)
		if want := fmt.Sprintf("TEST-resv-1-%d", i); d.RefundNo != want || d.Number != i {
			t.Fatalf("refund %d = %s (number %d), want %s", i, d.RefundNo, d.Number, want)
		}
		nos = append(nos, d.RefundNo)
		// Fail it so that the next one can claim everything again.
		run(t, s, outcome(d.RefundNo, SourceNotification, OutcomeFailed), env)
	}
	for i, r := range s.Refunds {
		if r.No != nos[i] {
			t.Fatalf("refund %d changed number %s -> %s", i, nos[i], r.No)
		}
	}
}

func TestStartSubmission_First(t *testing.T) {
	for _, recheck := range []time.Duration{0, 7 * time.Second} {
		t.Run(recheck.String(), func(t *testing.T) {
			s := registered(t)
			no := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k"}, testEnv(t0, "u"))[0].Data.(RefundRequested).RefundNo
			body := []byte(`{"out_refund_no":"x","amount":{"refund":10000}}`)
			env := Env{Now: t0.Add(time.Second), By: "engine", Policy: Policy{RecheckAfter: recheck}}
			ev := run(t, s, StartSubmission{RefundNo: no, Request: body}, env)
			wantDue := env.Now.Add(30 * time.Second)
			if recheck != 0 {
				wantDue = env.Now.Add(recheck)
			}
			want := SubmissionStarted{RefundNo: no, Attempt: 1, Request: body, DueAt: wantDue}
			assertTypes(t, ev, TypeSubmissionStarted)
			if !reflect.DeepEqual(ev[0].Data, want) {
				t.Fatalf("event %+v, want %+v", ev[0].Data, want)
			}
			r := s.Refund(no)
			if r.Attempts != 1 || string(r.Request) != string(body) || !r.DueAt.Equal(wantDue) || r.State != Processing ||
				r.Retry || !r.SubmittedAt.Equal(env.Now) {
				t.Fatalf("refund %+v", *r)
			}
			if !s.NextDue().Equal(wantDue) {
				t.Fatalf("NextDue = %v, want %v", s.NextDue(), wantDue)
			}
		})
	}
}

func TestStartSubmission_SecondIsNoop(t *testing.T) {
	s, no := refundIn(t, Processing)
	first := append([]byte(nil), s.Refund(no).Request...)
	mustNoop(t, s, StartSubmission{RefundNo: no, Request: []byte("different bytes")}, testEnv(t0.Add(time.Hour), "engine"))
	mustNoop(t, s, StartSubmission{RefundNo: no, Request: first}, testEnv(t0.Add(time.Hour), "engine"))
	// Also after the refund moved on: the bytes are fixed forever.
	for _, st := range []RefundState{Unknown, Rejected, Succeeded, failedAbandoned} {
		s, no := refundIn(t, st)
		before := s.Clone()
		mustNoop(t, s, StartSubmission{RefundNo: no, Request: []byte("different bytes")}, testEnv(t0, "engine"))
		assertSameState(t, before, s)
	}
	if string(s.Refund(no).Request) != string(first) {
		t.Fatalf("request bytes changed to %q", s.Refund(no).Request)
	}
}

func TestStartSubmission_Refused(t *testing.T) {
	t.Run("empty request", func(t *testing.T) {
		s := registered(t)
		no := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k"}, testEnv(t0, "u"))[0].Data.(RefundRequested).RefundNo
		for _, body := range [][]byte{nil, {}} {
			err := mustFail(t, s, StartSubmission{RefundNo: no, Request: body}, testEnv(t0, "engine"), ErrInvalid)
			if de := err.(*Error); de.Field != "request" {
				t.Fatalf("field %q", de.Field)
			}
		}
	})
	t.Run("unknown refund", func(t *testing.T) {
		mustFail(t, registered(t), StartSubmission{RefundNo: "R-resv-1-9", Request: []byte("x")}, testEnv(t0, "engine"), ErrNotFound)
	})
	t.Run("unregistered", func(t *testing.T) {
		mustFail(t, &State{}, StartSubmission{RefundNo: "R-resv-1-1", Request: []byte("x")}, testEnv(t0, "engine"), ErrNotFound)
	})
	t.Run("deferred by spacing: its bytes are journaled already", func(t *testing.T) {
		s, no, env := deferredRefund(t)
		body := append([]byte(nil), s.Refund(no).Request...)
		for _, other := range [][]byte{body, []byte("other bytes")} {
			mustFail(t, s, StartSubmission{RefundNo: no, Request: other}, env, ErrInvalidState)
		}
		if string(s.Refund(no).Request) != string(body) {
			t.Fatalf("request bytes changed to %q", s.Refund(no).Request)
		}
	})
	t.Run("resolved before the first submission", func(t *testing.T) {
		s := registered(t)
		no := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k"}, testEnv(t0, "u"))[0].Data.(RefundRequested).RefundNo
		run(t, s, outcome(no, SourceNotification, OutcomeFailed), providerEnv)
		mustFail(t, s, StartSubmission{RefundNo: no, Request: []byte("x")}, testEnv(t0, "engine"), ErrInvalidState)
	})
}

// outcomeRule is what one outcome kind does to a refund in one state.
type outcomeRule int

const (
	ruleIgnore   outcomeRule = iota // no events from any source
	ruleMove                        // ProviderResult to the target state, from any source
	ruleAttempt                     // a response is journaled as an attempt with From == To; others ignored
	ruleConflict                    // Conflict event, state unchanged
	ruleResend                      // from a query: SubmissionStarted with Attempt+1; others ignored
	ruleRetry                       // a response to the latest attempt: PROCESSING again, resubmitted at a due time; others ignored
)

// outcomeTable is the specification of provider outcomes. Rows are the
// refund's state before the outcome; columns the outcome kind. A rule of
// ruleMove goes to the state named in moveTo.
var outcomeTable = map[RefundState]map[OutcomeKind]outcomeRule{
	Processing: {OutcomeSucceeded: ruleMove, OutcomeFailed: ruleMove, OutcomeAbnormal: ruleMove, OutcomeProcessing: ruleAttempt,
		OutcomeRejected: ruleMove, OutcomeUnknown: ruleRetry, OutcomeNotFound: ruleResend},
	Unknown: {OutcomeSucceeded: ruleMove, OutcomeFailed: ruleMove, OutcomeAbnormal: ruleMove, OutcomeProcessing: ruleMove,
		OutcomeRejected: ruleMove, OutcomeUnknown: ruleAttempt, OutcomeNotFound: ruleResend},
	Rejected: {OutcomeSucceeded: ruleMove, OutcomeFailed: ruleMove, OutcomeAbnormal: ruleMove, OutcomeProcessing: ruleMove,
		OutcomeRejected: ruleAttempt, OutcomeUnknown: ruleAttempt, OutcomeNotFound: ruleIgnore},
	Abnormal: {OutcomeSucceeded: ruleMove, OutcomeFailed: ruleMove, OutcomeAbnormal: ruleIgnore, OutcomeProcessing: ruleIgnore,
		OutcomeRejected: ruleAttempt, OutcomeUnknown: ruleAttempt, OutcomeNotFound: ruleIgnore},
	Succeeded: {OutcomeSucceeded: ruleIgnore, OutcomeFailed: ruleConflict, OutcomeAbnormal: ruleConflict, OutcomeProcessing: ruleIgnore,
		OutcomeRejected: ruleIgnore, OutcomeUnknown: ruleIgnore, OutcomeNotFound: ruleIgnore},
	// WeChat paid a refund closed as FAILED: counted where the money is
	// (the fixture's 4000 fen fit), and listed as a conflict.
	Failed: {OutcomeSucceeded: ruleMove, OutcomeFailed: ruleIgnore, OutcomeAbnormal: ruleConflict, OutcomeProcessing: ruleIgnore,
		OutcomeRejected: ruleIgnore, OutcomeUnknown: ruleIgnore, OutcomeNotFound: ruleIgnore},
}

var (
	allKinds   = []OutcomeKind{OutcomeSucceeded, OutcomeProcessing, OutcomeFailed, OutcomeAbnormal, OutcomeRejected, OutcomeUnknown, OutcomeNotFound}
	allSources = []Source{SourceResponse, SourceNotification, SourceQuery}
)

func TestRecordOutcome_Transitions(t *testing.T) {
	for _, from := range allFromStates {
		row := from
		if from == failedAbandoned {
			row = Failed
		}
		for _, kind := range allKinds {
			for _, src := range allSources {
				name := fmt.Sprintf("%s/%s/%s", from, kind, src)
				t.Run(name, func(t *testing.T) {
					rule, ok := outcomeTable[row][kind]
					if !ok {
						t.Fatalf("no rule for %s/%s", row, kind)
					}
					s, no := refundIn(t, from)
					before := s.Clone()
					r0 := *before.Refund(no)
					env := testEnv(t0.Add(2*time.Hour), "provider:wechatpay")
					success := t0.Add(90 * time.Minute)
					// Notifications and queries always report the provider's
					// refund id; the first one to do so is recorded.
					id := r0.ProviderID
					if id == "" {
						id = "50300001"
					}
					cmd := RecordOutcome{RefundNo: no, Source: src, Attempt: r0.Attempts, Outcome: Outcome{
						Kind: kind, Code: "CODE_" + string(kind), Message: "msg " + string(kind), ProviderID: id,
						OutTradeNo: testOTN, RefundAmount: 4000, TotalAmount: testPaid, SuccessTime: success,
					}}
					events, err := Decide(s, cmd, env)
					if err != nil {
						t.Fatalf("Decide: %v", err)
					}
					learnsID := r0.ProviderID == "" && kind == OutcomeProcessing && src != SourceResponse
					if (rule == ruleAttempt || rule == ruleRetry) && src != SourceResponse && !learnsID || rule == ruleResend && src != SourceQuery ||
						kind == OutcomeRejected && src != SourceResponse {
						rule = ruleIgnore
					}
					switch rule {
					case ruleIgnore:
						if len(events) != 0 {
							t.Fatalf("events %v, want none", types(events))
						}
					case ruleMove, ruleAttempt:
						to := kind.target()
						if rule == ruleAttempt {
							to = row
						}
						assertTypes(t, events, TypeProviderResult)
						want := ProviderResult{RefundNo: no, Source: src, Attempt: r0.Attempts, Outcome: kind,
							Code: cmd.Outcome.Code, Message: cmd.Outcome.Message, ProviderID: id, From: row, To: to, SuccessTime: success}
						switch {
						case (to == Processing || to == Unknown) && r0.DueAt.IsZero():
							want.DueAt = env.Now.Add(30 * time.Second) // waiting again: check on it
						case to == Rejected && row == Unknown:
							// Earlier attempts timed out and may still land:
							// REJECTED keeps being queried.
							want.DueAt = r0.DueAt
						case to == Abnormal && row != Abnormal:
							if r0.Queries != 0 {
								t.Fatalf("fixture made %d queries", r0.Queries)
							}
							want.DueAt = env.Now.Add(time.Minute) // reconciled: the first query of the default schedule
						}
						if got := events[0].Data.(ProviderResult); !reflect.DeepEqual(got, want) {
							t.Fatalf("event %+v\nwant  %+v", got, want)
						}
					case ruleRetry:
						assertTypes(t, events, TypeProviderResult)
						// Attempt 1 answered unknown: the default first wait is
						// 1s with equal jitter, so 500ms at jitter 0.
						want := ProviderResult{RefundNo: no, Source: src, Attempt: r0.Attempts, Outcome: kind, Code: cmd.Outcome.Code,
							Message: cmd.Outcome.Message, ProviderID: id, From: Processing, To: Processing, SuccessTime: success,
							DueAt: env.Now.Add(500 * time.Millisecond), Retry: true}
						if got := events[0].Data.(ProviderResult); !reflect.DeepEqual(got, want) {
							t.Fatalf("event %+v\nwant  %+v", got, want)
						}
					case ruleConflict:
						assertTypes(t, events, TypeConflict)
						want := Conflict{RefundNo: no, State: row, Source: src, Outcome: kind, Code: cmd.Outcome.Code, ProviderID: id}
						if got := events[0].Data.(Conflict); !reflect.DeepEqual(got, want) {
							t.Fatalf("event %+v, want %+v", got, want)
						}
					case ruleResend:
						assertTypes(t, events, TypeSubmissionStarted)
						want := SubmissionStarted{RefundNo: no, Attempt: r0.Attempts + 1, DueAt: env.Now.Add(30 * time.Second)}
						if got := events[0].Data.(SubmissionStarted); !reflect.DeepEqual(got, want) {
							t.Fatalf("event %+v, want %+v (no request bytes)", got, want)
						}
					}
					for _, e := range events {
						Apply(s, e)
					}
					r := s.Refund(no)
					switch rule {
					case ruleIgnore:
						assertSameState(t, before, s)
					case ruleMove:
						if r.State != kind.target() || r.Code != cmd.Outcome.Code || r.Message != cmd.Outcome.Message || !r.UpdatedAt.Equal(env.Now) {
							t.Fatalf("refund after move: %+v", *r)
						}
						if r.State == Succeeded && !r.SucceededAt.Equal(success) {
							t.Fatalf("SucceededAt = %v, want %v", r.SucceededAt, success)
						}
						settling := r.State == Rejected && row == Unknown
						if keepsDue := r.State == Processing || r.State == Unknown || r.State == Abnormal || settling; keepsDue != !r.DueAt.IsZero() || r.Retry {
							t.Fatalf("%s refund has DueAt %v (retry %v)", r.State, r.DueAt, r.Retry)
						}
					case ruleAttempt:
						if r.State != row || r.Code != cmd.Outcome.Code || r.Retry != r0.Retry {
							t.Fatalf("refund after attempt record: %+v", *r)
						}
					case ruleRetry:
						if r.State != Processing || !r.Retry || !r.DueAt.Equal(env.Now.Add(500*time.Millisecond)) || r.Attempts != r0.Attempts ||
							r.Code != cmd.Outcome.Code || !s.NextDue().Equal(r.DueAt) {
							t.Fatalf("refund after an unknown answer: %+v", *r)
						}
					case ruleConflict:
						if r.State != row || r.Conflicts != r0.Conflicts+1 || r.Code != r0.Code {
							t.Fatalf("refund after conflict: %+v", *r)
						}
					case ruleResend:
						if r.State != Processing || r.Attempts != r0.Attempts+1 || string(r.Request) != string(r0.Request) ||
							!r.DueAt.Equal(env.Now.Add(30*time.Second)) {
							t.Fatalf("refund after resend: %+v", *r)
						}
					}
					if paidLate := row == Failed && r.State == Succeeded && r.PaidAfterFailed; before.Refund(no).State.Terminal() && r.State != before.Refund(no).State && !paidLate {
						t.Fatalf("terminal refund moved %s -> %s", before.Refund(no).State, r.State)
					}
					if s.Refunded()+s.InFlight() > s.Amount || (s.Status == StatusCanceled) != (s.Refunded() == s.Amount) {
						t.Fatalf("money invariant broken: %s", dump(s))
					}
				})
			}
		}
	}
}

func TestRecordOutcome_SuccessCancels(t *testing.T) {
	t.Run("single full refund", func(t *testing.T) {
		s := registered(t)
		no := newRefund(t, s, "k1", nil)
		ev := run(t, s, outcome(no, SourceQuery, OutcomeSucceeded), providerEnv)
		assertTypes(t, ev, TypeProviderResult, TypeCanceled)
		if got := ev[1].Data.(Canceled); got.Refunded != testPaid {
			t.Fatalf("Canceled = %+v", got)
		}
		if s.Status != StatusCanceled || s.Refunded() != testPaid || s.InFlight() != 0 || s.Refundable() != 0 {
			t.Fatalf("state %s", dump(s))
		}
		if !s.Refund(no).SucceededAt.Equal(providerEnv.Now) {
			t.Fatal("SucceededAt without SuccessTime must be the event time")
		}
	})
	t.Run("partials adding up", func(t *testing.T) {
		s := registered(t)
		a := newRefund(t, s, "k1", ptr(6000))
		b := newRefund(t, s, "k2", nil)
		assertTypes(t, run(t, s, outcome(b, SourceNotification, OutcomeSucceeded), providerEnv), TypeProviderResult)
		if s.Status != StatusAccepted {
			t.Fatal("canceled before the paid amount was refunded")
		}
		ev := run(t, s, outcome(a, SourceResponse, OutcomeSucceeded), providerEnv)
		assertTypes(t, ev, TypeProviderResult, TypeCanceled)
		if s.Status != StatusCanceled {
			t.Fatal("not canceled")
		}
	})
	t.Run("a failed refund in between", func(t *testing.T) {
		s := registered(t)
		a := newRefund(t, s, "k1", ptr(6000))
		b := newRefund(t, s, "k2", nil)
		run(t, s, outcome(a, SourceNotification, OutcomeFailed), providerEnv)
		assertTypes(t, run(t, s, outcome(b, SourceNotification, OutcomeSucceeded), providerEnv), TypeProviderResult)
		if s.Status != StatusAccepted || s.Refundable() != 6000 {
			t.Fatalf("state %s", dump(s))
		}
		c := newRefund(t, s, "k3", nil)
		assertTypes(t, run(t, s, outcome(c, SourceNotification, OutcomeSucceeded), providerEnv), TypeProviderResult, TypeCanceled)
	})
	t.Run("from every held state", func(t *testing.T) {
		for _, st := range []RefundState{Processing, Unknown, Rejected, Abnormal} {
			s := registered(t)
			newRefund(t, s, "k0", ptr(6000))
			run(t, s, outcome("R-resv-1-1", SourceNotification, OutcomeSucceeded), providerEnv)
			no := newRefund(t, s, "k1", nil)
			switch st {
			case Unknown:
				exhaustRetries(t, s, no, providerEnv)
			case Rejected:
				run(t, s, rejection(s, no), providerEnv)
			case Abnormal:
				run(t, s, outcome(no, SourceNotification, OutcomeAbnormal), providerEnv)
			}
			if got := s.Refund(no).State; got != st {
				t.Fatalf("refund is %s, want %s", got, st)
			}
			assertTypes(t, run(t, s, outcome(no, SourceNotification, OutcomeSucceeded), providerEnv), TypeProviderResult, TypeCanceled)
		}
	})
}

func TestRecordOutcome_ProviderID(t *testing.T) {
	s, no := refundIn(t, Processing)
	// PROCESSING with a first provider id is recorded even from a query.
	withID := RecordOutcome{RefundNo: no, Source: SourceQuery, Outcome: Outcome{Kind: OutcomeProcessing, ProviderID: "50300001"}}
	ev := run(t, s, withID, providerEnv)
	assertTypes(t, ev, TypeProviderResult)
	if d := ev[0].Data.(ProviderResult); d.From != Processing || d.To != Processing || s.Refund(no).ProviderID != "50300001" {
		t.Fatalf("event %+v, refund %+v", d, *s.Refund(no))
	}
	// Again: nothing new.
	mustNoop(t, s, withID, providerEnv)
	// An outcome without an id keeps the one known.
	run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeUnknown}}, providerEnv)
	if r := s.Refund(no); r.ProviderID != "50300001" || !r.Retry {
		t.Fatalf("refund %+v: provider id lost or no retry", *r)
	}
}

func TestRecordOutcome_Mismatch(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Outcome)
	}{
		{"out_trade_no", func(o *Outcome) { o.OutTradeNo = "OT-other" }},
		{"refund amount", func(o *Outcome) { o.RefundAmount = 4001 }},
		{"refund amount negative", func(o *Outcome) { o.RefundAmount = -4000 }},
		{"order total", func(o *Outcome) { o.TotalAmount = testPaid - 1 }},
		{"provider id", func(o *Outcome) { o.ProviderID = "50300002" }},
	}
	for _, from := range allFromStates {
		for _, tc := range cases {
			for _, kind := range allKinds {
				t.Run(fmt.Sprintf("%s/%s/%s", from, tc.name, kind), func(t *testing.T) {
					s, no := refundIn(t, from)
					if !s.Refund(no).State.Terminal() {
						// Learn the provider id first, so that a different one can contradict it.
						run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Outcome: Outcome{Kind: OutcomeRejected, ProviderID: "50300001"}}, providerEnv)
						if s.Refund(no).ProviderID != "50300001" {
							t.Fatal("provider id not learned")
						}
					} else {
						s.Refund(no).ProviderID = "50300001" // as if a result had carried it
					}
					o := Outcome{Kind: kind, OutTradeNo: testOTN, RefundAmount: 4000, TotalAmount: testPaid, ProviderID: "50300001"}
					tc.mutate(&o)
					mustFail(t, s, RecordOutcome{RefundNo: no, Source: SourceNotification, Outcome: o}, providerEnv, ErrOutcomeMismatch)
				})
			}
		}
	}
	// Unreported values: TestCheckOutcome_NotificationAndQueryReportEveryField.
	t.Run("matching values are accepted", func(t *testing.T) {
		for _, o := range []Outcome{
			{Kind: OutcomeSucceeded, OutTradeNo: testOTN, RefundAmount: 4000, TotalAmount: testPaid, ProviderID: "503"},
		} {
			s, no := refundIn(t, Processing)
			run(t, s, RecordOutcome{RefundNo: no, Source: SourceNotification, Outcome: o}, providerEnv)
			if s.Refund(no).State != Succeeded {
				t.Fatalf("outcome %+v not applied", o)
			}
		}
	})
}

func TestRecordOutcome_NotFoundResends(t *testing.T) {
	for _, from := range []RefundState{Processing, Unknown} {
		t.Run(string(from), func(t *testing.T) {
			s, no := refundIn(t, from)
			body := append([]byte(nil), s.Refund(no).Request...)
			first := s.Refund(no).Attempts
			env := Env{Now: t0.Add(time.Hour), By: "provider:wechatpay", Policy: Policy{RecheckAfter: time.Minute}}
			for attempt := first + 1; attempt <= first+3; attempt++ {
				ev := run(t, s, outcome(no, SourceQuery, OutcomeNotFound), env)
				assertTypes(t, ev, TypeSubmissionStarted)
				d := ev[0].Data.(SubmissionStarted)
				if d.Attempt != attempt || d.Request != nil || !d.DueAt.Equal(env.Now.Add(time.Minute)) {
					t.Fatalf("event %+v, want attempt %d without bytes", d, attempt)
				}
				r := s.Refund(no)
				if r.Attempts != attempt || string(r.Request) != string(body) || r.State != Processing {
					t.Fatalf("refund %+v", *r)
				}
			}
		})
	}
	t.Run("never submitted", func(t *testing.T) {
		s := registered(t)
		no := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k"}, testEnv(t0, "u"))[0].Data.(RefundRequested).RefundNo
		mustNoop(t, s, outcome(no, SourceQuery, OutcomeNotFound), providerEnv)
	})
	// A refund held back by spacing has its bytes journaled but was never
	// sent: "not found" is simply true, and sending it now would break the
	// spacing. Its timer submits it.
	t.Run("deferred by spacing", func(t *testing.T) {
		s, no, env := deferredRefund(t)
		before := s.Clone()
		mustNoop(t, s, outcome(no, SourceQuery, OutcomeNotFound), env)
		assertSameState(t, before, s)
	})
}

// A REJECTED refund has no due time. When the provider then says the refund
// is PROCESSING after all, something must check on it again: otherwise it
// would wait forever, since operators cannot resubmit or abandon it either.
func TestRecordOutcome_RejectedThenProcessingIsChecked(t *testing.T) {
	for _, src := range allSources {
		t.Run(string(src), func(t *testing.T) {
			s, no := refundIn(t, Rejected)
			env := Env{Now: t0.Add(time.Hour), By: "provider:wechatpay", Policy: Policy{RecheckAfter: time.Minute}}
			ev := run(t, s, outcome(no, src, OutcomeProcessing), env)
			if d := ev[0].Data.(ProviderResult); d.To != Processing || !d.DueAt.Equal(env.Now.Add(time.Minute)) {
				t.Fatalf("event %+v, want PROCESSING due in 1m", d)
			}
			r := s.Refund(no)
			if !r.DueAt.Equal(env.Now.Add(time.Minute)) || !s.NextDue().Equal(r.DueAt) {
				t.Fatalf("refund due at %v", r.DueAt)
			}
			mustFail(t, s, Resubmit{RefundNo: no}, env, ErrInvalidState)
			mustFail(t, s, Abandon{RefundNo: no}, env, ErrInvalidState)
			assertTypes(t, run(t, s, FireTimer{RefundNo: no, DueAt: r.DueAt}, testEnv(r.DueAt, "engine")), TypeQueryStarted)
			// A due time already set is kept by answers that do not retry: a
			// stale unknown answer (attempt 0 was never made) is only
			// recorded, and with no attempts left PROCESSING -> UNKNOWN
			// leaves the next check where it is.
			due := s.Refund(no).DueAt
			ev = run(t, s, outcome(no, SourceResponse, OutcomeUnknown), env)
			if d := ev[0].Data.(ProviderResult); d.From != Processing || d.To != Processing || d.Retry || !d.DueAt.IsZero() ||
				!s.Refund(no).DueAt.Equal(due) || s.Refund(no).Retry {
				t.Fatalf("event %+v moved the due time %v -> %v", d, due, s.Refund(no).DueAt)
			}
			last := env
			last.Policy.MaxAttempts = 1
			ev = run(t, s, RecordOutcome{RefundNo: no, Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeUnknown}}, last)
			if d := ev[0].Data.(ProviderResult); d.To != Unknown || d.Retry || !d.DueAt.IsZero() || !s.Refund(no).DueAt.Equal(due) {
				t.Fatalf("event %+v moved the due time %v -> %v", d, due, s.Refund(no).DueAt)
			}
		})
	}
}

// A refusal makes a refund REJECTED, and so abandonable with its amount
// free again, only as a submission's answer to the latest attempt of a
// refund the provider never acknowledged. Anything else may still pay out.
func TestRecordOutcome_RejectionOnlyOfTheLatestUnacknowledgedAttempt(t *testing.T) {
	at := t0.Add(2 * time.Second)
	pEnv := testEnv(at, "provider:wechatpay")
	// resent: attempt 1 is still in flight when a query finds nothing, so
	// attempt 2 goes out under the same number.
	resent := func(t *testing.T) (*State, string) {
		s, no := refundIn(t, Processing)
		assertTypes(t, run(t, s, CheckProvider{RefundNo: no}, testEnv(at, "operator:alice")), TypeQueryStarted)
		assertTypes(t, run(t, s, outcome(no, SourceQuery, OutcomeNotFound), pEnv), TypeSubmissionStarted)
		return s, no
	}
	acknowledged := func(s *State, no string, src Source, attempt int) {
		run(t, s, RecordOutcome{RefundNo: no, Source: src, Attempt: attempt,
			Outcome: Outcome{Kind: OutcomeProcessing, ProviderID: "50300000001"}}, pEnv)
		if r := s.Refund(no); r.ProviderID != "50300000001" {
			t.Fatalf("provider id not learned: %+v", *r)
		}
	}
	olderAttempt := func(s *State, no string) RecordOutcome {
		c := rejection(s, no)
		c.Attempt = s.Refund(no).Attempts - 1
		return c
	}
	from := func(src Source) func(s *State, no string) RecordOutcome {
		return func(s *State, no string) RecordOutcome {
			c := rejection(s, no)
			c.Source = src
			return c
		}
	}
	processing := func(t *testing.T) (*State, string) { return refundIn(t, Processing) }
	cases := []struct {
		name   string
		setup  func(t *testing.T) (*State, string)
		refuse func(s *State, no string) RecordOutcome
		want   RefundState
	}{
		{"the latest attempt, never acknowledged", processing, rejection, Rejected},
		{"the latest attempt after a resend", resent, rejection, Rejected},
		{"an older attempt after a resend", resent, olderAttempt, Processing},
		{"an older attempt after the resend was acknowledged", func(t *testing.T) (*State, string) {
			s, no := resent(t)
			acknowledged(s, no, SourceResponse, 2)
			return s, no
		}, olderAttempt, Processing},
		{"the latest attempt after a query found the refund", func(t *testing.T) (*State, string) {
			s, no := refundIn(t, Processing)
			acknowledged(s, no, SourceQuery, 0)
			return s, no
		}, rejection, Processing},
		{"a query", processing, from(SourceQuery), Processing},
		{"a notification", processing, from(SourceNotification), Processing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, no := tc.setup(t)
			held := s.InFlight()
			run(t, s, tc.refuse(s, no), pEnv)
			r := s.Refund(no)
			if r.State != tc.want {
				t.Fatalf("refund is %s, want %s: %+v", r.State, tc.want, *r)
			}
			if tc.want == Rejected {
				return
			}
			mustFail(t, s, Abandon{RefundNo: no}, testEnv(at.Add(time.Minute), "operator:alice"), ErrInvalidState)
			if s.InFlight() != held || held < r.Amount {
				t.Fatalf("in flight %d, was %d: the refund's %d fen must stay held", s.InFlight(), held, r.Amount)
			}
		})
	}
}

func TestRecordOutcome_Refused(t *testing.T) {
	s, no := refundIn(t, Processing)
	err := mustFail(t, s, RecordOutcome{RefundNo: no, Source: SourceQuery, Outcome: Outcome{Kind: "SUCCESS"}}, providerEnv, ErrInvalid)
	if err.(*Error).Field != "outcome" {
		t.Fatalf("field %q", err.(*Error).Field)
	}
	mustFail(t, s, RecordOutcome{RefundNo: no, Source: SourceQuery}, providerEnv, ErrInvalid)
	mustFail(t, s, outcome("R-resv-1-2", SourceQuery, OutcomeSucceeded), providerEnv, ErrNotFound)
	mustFail(t, &State{}, outcome(no, SourceQuery, OutcomeSucceeded), providerEnv, ErrNotFound)
}

func TestResubmit_States(t *testing.T) {
	allowed := map[RefundState]bool{Unknown: true, Rejected: true}
	for _, from := range allFromStates {
		t.Run(string(from), func(t *testing.T) {
			s, no := refundIn(t, from)
			env := Env{Now: t0.Add(3 * time.Hour), By: "operator:alice"}
			if !allowed[from] {
				mustFail(t, s, Resubmit{RefundNo: no}, env, ErrInvalidState)
				return
			}
			body := append([]byte(nil), s.Refund(no).Request...)
			r0 := *s.Refund(no)
			wantAttempts := map[RefundState]int{Rejected: 2, Unknown: 6}[from] // UNKNOWN after the default 5 attempts
			ev := run(t, s, Resubmit{RefundNo: no}, env)
			want := SubmissionStarted{RefundNo: no, Attempt: wantAttempts, DueAt: env.Now.Add(30 * time.Second)}
			if assertTypes(t, ev, TypeSubmissionStarted); !reflect.DeepEqual(ev[0].Data, want) {
				t.Fatalf("event %+v, want %+v", ev[0].Data, want)
			}
			r := s.Refund(no)
			if r.State != Processing || r.No != no || r.Attempts != wantAttempts || string(r.Request) != string(body) || !r.DueAt.Equal(want.DueAt) ||
				r.Retry || !r.SubmittedAt.Equal(r0.SubmittedAt) {
				t.Fatalf("refund %+v", *r)
			}
			if s.InFlight() != 4000 {
				t.Fatalf("in-flight %d", s.InFlight())
			}
		})
	}
	t.Run("never submitted", func(t *testing.T) {
		s := registered(t)
		no := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k"}, testEnv(t0, "u"))[0].Data.(RefundRequested).RefundNo
		run(t, s, rejection(s, no), providerEnv)
		mustFail(t, s, Resubmit{RefundNo: no}, testEnv(t0, "op"), ErrInvalidState)
	})
	t.Run("unknown refund", func(t *testing.T) {
		mustFail(t, registered(t), Resubmit{RefundNo: "R-resv-1-1"}, testEnv(t0, "op"), ErrNotFound)
	})
}

func TestAbandon_States(t *testing.T) {
	for _, from := range allFromStates {
		t.Run(string(from), func(t *testing.T) {
			s, no := refundIn(t, from)
			env := Env{Now: t0.Add(3 * time.Hour), By: "operator:alice"}
			if from != Rejected {
				mustFail(t, s, Abandon{RefundNo: no, Reason: "x"}, env, ErrInvalidState)
				return
			}
			refundable := s.Refundable()
			ev := run(t, s, abandon(no, "balance too low for a week", env.Now), env)
			if assertTypes(t, ev, TypeProviderResult, TypeAbandoned); ev[1].Data != (Abandoned{RefundNo: no, Reason: "balance too low for a week"}) {
				t.Fatalf("event %+v", ev[1].Data)
			}
			r := s.Refund(no)
			if r.State != Failed || r.Code != "ABANDONED" || r.Message != "balance too low for a week" || !r.DueAt.IsZero() || !r.UpdatedAt.Equal(env.Now) {
				t.Fatalf("refund %+v", *r)
			}
			if s.Refundable() != refundable+4000 {
				t.Fatalf("refundable %d, want %d: the amount was not released", s.Refundable(), refundable+4000)
			}
			mustFail(t, s, Abandon{RefundNo: no}, env, ErrInvalidState)
			mustFail(t, s, Resubmit{RefundNo: no}, env, ErrInvalidState)
		})
	}
	t.Run("invalid reason", func(t *testing.T) {
		s, no := refundIn(t, Rejected)
		for _, reason := range []string{strings.Repeat("x", 81), "a\tb", "\xff"} {
			err := mustFail(t, s, Abandon{RefundNo: no, Reason: reason}, testEnv(t0, "op"), ErrInvalid)
			if err.(*Error).Field != "reason" {
				t.Fatalf("field %q", err.(*Error).Field)
			}
		}
		run(t, s, abandon(no, "", t0), testEnv(t0, "op")) // a reason is optional
	})
	t.Run("unknown refund", func(t *testing.T) {
		mustFail(t, registered(t), Abandon{RefundNo: "R-resv-1-1"}, testEnv(t0, "op"), ErrNotFound)
	})
}

func TestFireTimer_Stale(t *testing.T) {
	s, no := refundIn(t, Processing)
	due := s.Refund(no).DueAt
	for _, at := range []time.Time{{}, due.Add(-time.Nanosecond), due.Add(time.Second), t0} {
		mustNoop(t, s, FireTimer{RefundNo: no, DueAt: at}, testEnv(due.Add(time.Hour), "engine"))
	}
	// After a query the previous due time is stale.
	run(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
	mustNoop(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due.Add(time.Hour), "engine"))
	// A refund never submitted has no due time.
	s2 := registered(t)
	no2 := run(t, s2, RequestRefund{UserID: testUser, IdempotencyKey: "k"}, testEnv(t0, "u"))[0].Data.(RefundRequested).RefundNo
	mustNoop(t, s2, FireTimer{RefundNo: no2}, testEnv(t0, "engine"))
	mustFail(t, s2, FireTimer{RefundNo: "R-resv-1-5", DueAt: due}, testEnv(t0, "engine"), ErrNotFound)
}

func TestFireTimer_AfterResolution(t *testing.T) {
	// refundIn submits at t0, so the first check was due at t0+30s.
	due := t0.Add(30 * time.Second)
	if s, no := refundIn(t, Processing); !s.Refund(no).DueAt.Equal(due) {
		t.Fatalf("submitted refund due at %v, want %v", s.Refund(no).DueAt, due)
	}
	// ABNORMAL is not here: it stays reconciled (TestFireTimer_AbnormalReconciled).
	for _, to := range []RefundState{Rejected, Succeeded, Failed, failedAbandoned} {
		t.Run(string(to), func(t *testing.T) {
			s, no := refundIn(t, to)
			if !s.Refund(no).DueAt.IsZero() || !s.NextDue().IsZero() || s.Refund(no).Retry {
				t.Fatalf("%s refund still has a due time %v", to, s.Refund(no).DueAt)
			}
			mustNoop(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
		})
	}
}

func TestFireTimer_Queries(t *testing.T) {
	cases := []struct {
		name    string
		backoff []time.Duration
		want    []time.Duration
	}{
		{"default backoff", nil, []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour, time.Hour, time.Hour}},
		{"custom backoff", []time.Duration{time.Second, 2 * time.Second}, []time.Duration{time.Second, 2 * time.Second, 2 * time.Second}},
	}
	for _, tc := range cases {
		for _, from := range []RefundState{Processing, Unknown, Abnormal} {
			t.Run(tc.name+"/"+string(from), func(t *testing.T) {
				s, no := refundIn(t, from)
				now := s.Refund(no).DueAt
				for i, wait := range tc.want {
					env := Env{Now: now, By: "engine", Policy: Policy{QueryBackoff: tc.backoff}}
					ev := run(t, s, FireTimer{RefundNo: no, DueAt: s.Refund(no).DueAt}, env)
					want := QueryStarted{RefundNo: no, Query: i + 1, DueAt: now.Add(wait)}
					if assertTypes(t, ev, TypeQueryStarted); ev[0].Data != want {
						t.Fatalf("query %d: event %+v, want %+v", i+1, ev[0].Data, want)
					}
					if r := s.Refund(no); r.Queries != i+1 || !r.DueAt.Equal(want.DueAt) || r.State != from || r.Retry {
						t.Fatalf("refund %+v", *r)
					}
					now = want.DueAt
				}
			})
		}
	}
}

func TestFireTimer_Stuck(t *testing.T) {
	for _, stuckAfter := range []time.Duration{0, 2 * time.Hour} {
		t.Run(stuckAfter.String(), func(t *testing.T) {
			limit := stuckAfter
			if limit == 0 {
				limit = 24 * time.Hour
			}
			s, no := refundIn(t, Processing)
			created := s.Refund(no).CreatedAt
			policy := Policy{StuckAfter: stuckAfter, QueryBackoff: []time.Duration{limit/3 + time.Nanosecond}}
			fire := func(now time.Time) []Event {
				return run(t, s, FireTimer{RefundNo: no, DueAt: s.Refund(no).DueAt}, Env{Now: now, By: "engine", Policy: policy})
			}
			assertTypes(t, fire(created.Add(limit-time.Nanosecond)), TypeQueryStarted)
			if s.Refund(no).Stuck {
				t.Fatal("flagged before StuckAfter")
			}
			ev := fire(created.Add(limit))
			assertTypes(t, ev, TypeFlaggedStuck, TypeQueryStarted)
			if ev[0].Data != (FlaggedStuck{RefundNo: no}) || !s.Refund(no).Stuck {
				t.Fatalf("event %+v, stuck %v", ev[0].Data, s.Refund(no).Stuck)
			}
			// Exactly once.
			assertTypes(t, fire(created.Add(2*limit)), TypeQueryStarted)
			mustNoop(t, s, outcome(no, SourceQuery, OutcomeUnknown), providerEnv) // a failed query says nothing
			assertTypes(t, fire(created.Add(3*limit)), TypeQueryStarted)
		})
	}
}

func TestCheckProvider_States(t *testing.T) {
	asks := map[RefundState]bool{Processing: true, Unknown: true, Rejected: true, Abnormal: true}
	for _, from := range allFromStates {
		t.Run(string(from), func(t *testing.T) {
			s, no := refundIn(t, from)
			env := Env{Now: t0.Add(48 * time.Hour), By: "wechatpay:notification", Policy: Policy{QueryBackoff: []time.Duration{time.Minute, time.Hour}}}
			if !asks[from] {
				mustNoop(t, s, CheckProvider{RefundNo: no}, env)
				return
			}
			before := *s.Refund(no)
			for i, wait := range []time.Duration{time.Minute, time.Hour, time.Hour} {
				if i > 0 {
					env.Now = env.Now.Add(time.Hour) // past the hint window
				}
				ev := run(t, s, CheckProvider{RefundNo: no}, env)
				want := QueryStarted{RefundNo: no, Query: i + 1, DueAt: env.Now.Add(wait)}
				if assertTypes(t, ev, TypeQueryStarted); ev[0].Data != want {
					t.Fatalf("event %+v, want %+v", ev[0].Data, want)
				}
			}
			// A hint changes nothing but the query count and the next check;
			// in particular it never flags a refund stuck, however old.
			r := s.Refund(no)
			if r.State != before.State || r.Stuck || r.Attempts != before.Attempts || r.Queries != 3 || !r.DueAt.Equal(env.Now.Add(time.Hour)) {
				t.Fatalf("refund %+v", *r)
			}
		})
	}
	t.Run("never submitted", func(t *testing.T) {
		s := registered(t)
		no := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k"}, testEnv(t0, "u"))[0].Data.(RefundRequested).RefundNo
		mustNoop(t, s, CheckProvider{RefundNo: no}, testEnv(t0, "op"))
	})
	t.Run("unknown refund", func(t *testing.T) {
		mustFail(t, registered(t), CheckProvider{RefundNo: "R-resv-1-1"}, testEnv(t0, "op"), ErrNotFound)
		mustFail(t, &State{}, CheckProvider{RefundNo: "R-resv-1-1"}, testEnv(t0, "op"), ErrNotFound)
	})
	t.Run("the answer is applied as usual", func(t *testing.T) {
		s, no := refundIn(t, Abnormal)
		ev := run(t, s, CheckProvider{RefundNo: no}, testEnv(t0.Add(time.Hour), "op"))
		due := ev[0].Data.(QueryStarted).DueAt
		// The check's timer keeps reconciling the ABNORMAL refund.
		ev = run(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine"))
		if assertTypes(t, ev, TypeQueryStarted); ev[0].Data.(QueryStarted).Query != 2 {
			t.Fatalf("event %+v, want query 2", ev[0].Data)
		}
		assertTypes(t, run(t, s, outcome(no, SourceQuery, OutcomeSucceeded), providerEnv), TypeProviderResult)
		if r := s.Refund(no); r.State != Succeeded || !r.DueAt.IsZero() {
			t.Fatalf("refund %+v", *r)
		}
	})
}

func TestNextDue_Earliest(t *testing.T) {
	s := registered(t)
	if !s.NextDue().IsZero() {
		t.Fatal("no refunds, yet a due time")
	}
	a := newRefund(t, s, "k1", ptr(100))
	b := newRefund(t, s, "k2", ptr(100))
	run(t, s, FireTimer{RefundNo: a, DueAt: s.Refund(a).DueAt}, testEnv(t0.Add(time.Hour), "engine"))
	if want := s.Refund(b).DueAt; !s.NextDue().Equal(want) {
		t.Fatalf("NextDue = %v, want %v", s.NextDue(), want)
	}
	run(t, s, outcome(b, SourceNotification, OutcomeSucceeded), providerEnv)
	if want := s.Refund(a).DueAt; !s.NextDue().Equal(want) {
		t.Fatalf("NextDue = %v, want %v", s.NextDue(), want)
	}
}

func TestClone_Independent(t *testing.T) {
	s, no := refundIn(t, Processing)
	c := s.Clone()
	assertSameState(t, s, c)
	run(t, c, outcome(no, SourceNotification, OutcomeSucceeded), providerEnv)
	run(t, c, RequestRefund{UserID: testUser, IdempotencyKey: "k2"}, testEnv(t0, "u"))
	if s.Refund(no).State != Processing || len(s.Refunds) != 1 || s.RefundByKey("k2") != nil || s.Version == c.Version {
		t.Fatalf("changing the clone changed the original: %s", dump(s))
	}
	if c.Refund(no).State != Succeeded || c.RefundByKey("k2") == nil {
		t.Fatal("clone lost its own changes")
	}
	empty := (&State{}).Clone()
	run(t, empty, validRegister(), testEnv(t0, "s"))
	run(t, empty, RequestRefund{UserID: testUser, IdempotencyKey: "k"}, testEnv(t0, "u"))
}

// TestState_LookupAcrossIndexFrom finds every refund by number and key as
// a reservation grows past the size from which it keeps lookup maps, in the
// state and in clones taken at every size (which then grow on their own).
func TestState_LookupAcrossIndexFrom(t *testing.T) {
	s := &State{}
	run(t, s, Register{ReservationID: "r", UserID: testUser, OutTradeNo: "o", Amount: 1000, Currency: "CNY"}, testEnv(t0, "s"))
	var clones []*State
	check := func(st *State, n int) {
		t.Helper()
		if len(st.Refunds) != n {
			t.Fatalf("%d refunds, want %d", len(st.Refunds), n)
		}
		for i, r := range st.Refunds {
			if st.Refund(r.No) != r || st.RefundByKey(r.IdempotencyKey) != r {
				t.Fatalf("refund %d of %d (%s, %s) not found by number or key", i, n, r.No, r.IdempotencyKey)
			}
		}
		if st.Refund("R-r-999") != nil || st.RefundByKey("nope") != nil {
			t.Fatal("found a refund that does not exist")
		}
	}
	for n := 1; n <= 2*indexFrom+1; n++ {
		run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k" + strconv.Itoa(n), Amount: ptr(1)}, testEnv(t0, "u"))
		check(s, n)
		for _, c := range clones {
			run(t, c, RequestRefund{UserID: testUser, IdempotencyKey: "k" + strconv.Itoa(n), Amount: ptr(1)}, testEnv(t0, "u"))
			check(c, n)
		}
		clones = append(clones, s.Clone())
		if (s.byNo != nil) != (n >= indexFrom) {
			t.Fatalf("%d refunds: maps kept = %v", n, s.byNo != nil)
		}
	}
}

func TestRefundNo_Format(t *testing.T) {
	cases := []struct {
		prefix, id string
		n          int
		want       string
	}{
		{"R", "resv-1", 1, "R-resv-1-1"},
		{"PROD1", "abc", 12, "PROD1-abc-12"},
		{"T", "a_b-c", 99, "T-a_b-c-99"},
		{"X", "-", 3, "X---3"},
		{"X", "9-", 3, "X-9--3"},
	}
	for _, tc := range cases {
		got := RefundNo(tc.prefix, tc.id, tc.n)
		if got != tc.want {
			t.Fatalf("RefundNo(%q,%q,%d) = %q, want %q", tc.prefix, tc.id, tc.n, got, tc.want)
		}
		p, id, n, ok := ParseRefundNo(got)
		if !ok || p != tc.prefix || id != tc.id || n != tc.n {
			t.Fatalf("ParseRefundNo(%q) = %q %q %d %v", got, p, id, n, ok)
		}
		if !ValidRefundNo(got) {
			t.Fatalf("%q is not a valid out_refund_no", got)
		}
	}
}

func TestRefundNo_MaxLength(t *testing.T) {
	prefix := strings.Repeat("P", 16)
	id := strings.Repeat("i-_", 13) + "z"
	if len(id) != MaxReservationIDLen || !ValidReservationID(id) {
		t.Fatalf("test id has %d chars", len(id))
	}
	if err := (Policy{RefundNoPrefix: prefix, MaxRefunds: maxRefundNumber}).Validate(); err != nil {
		t.Fatalf("longest policy refused: %v", err)
	}
	no := RefundNo(prefix, id, maxRefundNumber)
	if len(no) > 64 || !ValidRefundNo(no) {
		t.Fatalf("%q has %d chars, WeChat allows 64", no, len(no))
	}
	// Through Decide as well: the longest id, prefix and count.
	s := &State{}
	env := Env{Now: t0, By: "u", Policy: Policy{RefundNoPrefix: prefix, MaxRefunds: maxRefundNumber}}
	reg := validRegister()
	reg.ReservationID = id
	run(t, s, reg, env)
	for i := 1; i <= maxRefundNumber; i++ {
		d := run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: fmt.Sprintf("k%d", i), Amount: ptr(1)}, env)[0].Data.(RefundRequested)
		if !ValidRefundNo(d.RefundNo) {
			t.Fatalf("refund %d number %q is not a valid out_refund_no", i, d.RefundNo)
		}
	}
}

func TestRefundNo_Unique(t *testing.T) {
	prefixes := []string{"R", "R1", "1", "PROD", "prod"}
	ids := []string{"a", "a-1", "a-1-1", "1", "1-a", "a_", "-", "--", "a-", "-a"}
	seen := map[string]string{}
	for _, p := range prefixes {
		for _, id := range ids {
			for n := 1; n <= 12; n++ {
				no := RefundNo(p, id, n)
				key := fmt.Sprintf("%s|%s|%d", p, id, n)
				if prev, ok := seen[no]; ok {
					t.Fatalf("%s and %s both give %q", prev, key, no)
				}
				seen[no] = key
				gp, gid, gn, ok := ParseRefundNo(no)
				if !ok || fmt.Sprintf("%s|%s|%d", gp, gid, gn) != key {
					t.Fatalf("ParseRefundNo(%q) = %q %q %d %v, want %s", no, gp, gid, gn, ok, key)
				}
			}
		}
	}
}

func TestParseRefundNo_Invalid(t *testing.T) {
	for _, no := range []string{
		"", "R", "R-", "R-1", "R--1", "-a-1", "R-a-", "R-a-0", "R-a-01", "R-a-+1", "R-a-1a", "R-a-x",
		"R_x-a-1",                             // '_' in a prefix
		strings.Repeat("P", 17) + "-a-1",      // prefix too long
		"R-" + strings.Repeat("a", 41) + "-1", // id too long
		"R-a b-1", "R-a.b-1", "Ré-a-1",
	} {
		if p, id, n, ok := ParseRefundNo(no); ok {
			t.Errorf("ParseRefundNo(%q) = %q %q %d, want not ok", no, p, id, n)
		}
	}
}

func TestValidRefundNo_Limits(t *testing.T) {
	cases := map[string]bool{
		"":                      false,
		"a":                     true,
		strings.Repeat("a", 64): true,
		strings.Repeat("a", 65): false,
		"R-resv_1-2":            true,
		"R-resv.1-2":            false,
		"R resv":                false,
	}
	for no, want := range cases {
		if got := ValidRefundNo(no); got != want {
			t.Errorf("ValidRefundNo(%q) = %v, want %v", no, got, want)
		}
	}
}

func TestPolicy_Validate(t *testing.T) {
	cases := []struct {
		name  string
		p     Policy
		field string // "" = valid
	}{
		{"zero", Policy{}, ""},
		{"prefix", Policy{RefundNoPrefix: "STAGING2"}, ""},
		{"prefix 16", Policy{RefundNoPrefix: strings.Repeat("a", 16)}, ""},
		{"prefix 17", Policy{RefundNoPrefix: strings.Repeat("a", 17)}, "refund_no_prefix"},
		{"prefix hyphen", Policy{RefundNoPrefix: "a-b"}, "refund_no_prefix"},
		{"prefix underscore", Policy{RefundNoPrefix: "a_b"}, "refund_no_prefix"},
		{"prefix space", Policy{RefundNoPrefix: " "}, "refund_no_prefix"},
		{"prefix non-ascii", Policy{RefundNoPrefix: "测试"}, "refund_no_prefix"},
		{"max refunds 99", Policy{MaxRefunds: 99}, ""},
		{"max refunds 100", Policy{MaxRefunds: 100}, "max_refunds"},
		{"backoff", Policy{QueryBackoff: []time.Duration{time.Second, time.Minute}}, ""},
		{"backoff zero", Policy{QueryBackoff: []time.Duration{time.Second, 0}}, "query_backoff"},
		{"backoff negative", Policy{QueryBackoff: []time.Duration{-time.Second}}, "query_backoff"},
		{"retry settings", Policy{MaxAttempts: 1, RetryBackoff: time.Millisecond, RetryBackoffMax: time.Hour}, ""},
		{"spacing and window", Policy{RefundSpacing: time.Minute, RefundWindow: 24 * time.Hour}, ""},
		{"backoff above its cap", Policy{RetryBackoff: time.Hour, RetryBackoffMax: time.Second}, ""}, // the cap wins
		{"recheck negative", Policy{RecheckAfter: -time.Nanosecond}, "policy"},
		{"stuck negative", Policy{StuckAfter: -time.Hour}, "policy"},
		{"retry backoff negative", Policy{RetryBackoff: -time.Second}, "policy"},
		{"retry backoff max negative", Policy{RetryBackoffMax: -time.Second}, "policy"},
		{"spacing negative", Policy{RefundSpacing: -time.Minute}, "policy"},
		{"window negative", Policy{RefundWindow: -time.Nanosecond}, "policy"},
		{"max attempts negative", Policy{MaxAttempts: -1}, "policy"},
		{"max refunds negative", Policy{MaxRefunds: -1}, "policy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			var de *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &de) || de.Field != tc.field {
				t.Fatalf("Validate() = %v, want invalid %s", err, tc.field)
			}
			if !strings.HasPrefix(err.Error(), "reservation: "+tc.field+": ") {
				t.Fatalf("message %q does not name the field", err)
			}
		})
	}
}

func TestPolicy_Defaults(t *testing.T) {
	var p Policy
	if p.prefix() != DefaultRefundNoPrefix || p.maxRefunds() != 50 || p.recheckAfter() != 30*time.Second || p.stuckAfter() != 24*time.Hour {
		t.Fatalf("defaults: %q %d %v %v", p.prefix(), p.maxRefunds(), p.recheckAfter(), p.stuckAfter())
	}
	for n, want := range map[int]time.Duration{-1: time.Minute, 0: time.Minute, 1: time.Minute, 2: 5 * time.Minute, 5: time.Hour, 100: time.Hour} {
		if got := p.queryBackoff(n); got != want {
			t.Errorf("queryBackoff(%d) = %v, want %v", n, got, want)
		}
	}
	if p.maxAttempts() != 5 || p.refundWindow() != 365*24*time.Hour || p.RefundSpacing != 0 {
		t.Fatalf("defaults: max attempts %d, window %v, spacing %v", p.maxAttempts(), p.refundWindow(), p.RefundSpacing)
	}
	// Negative values (refused by Validate) fall back to the defaults too.
	n := Policy{MaxAttempts: -1, RefundWindow: -time.Hour, RetryBackoff: -time.Second, RetryBackoffMax: -time.Second}
	if n.maxAttempts() != 5 || n.refundWindow() != 365*24*time.Hour || n.retryDelay(1, 0) != 500*time.Millisecond || n.retryDelay(9, 0) != 30*time.Second {
		t.Fatalf("negative settings: %d %v %v %v", n.maxAttempts(), n.refundWindow(), n.retryDelay(1, 0), n.retryDelay(9, 0))
	}
}

func TestCodeOf_Errors(t *testing.T) {
	sentinels := []*Error{ErrInvalid, ErrNotFound, ErrConflict, ErrOutTradeNoTaken, ErrIdempotencyKeyReused,
		ErrInsufficientRefundable, ErrCanceled, ErrRefundLimit, ErrInvalidState, ErrOutcomeMismatch, ErrRefundWindowClosed}
	seen := map[Code]bool{}
	for _, e := range sentinels {
		if seen[e.Code] {
			t.Fatalf("code %q used twice", e.Code)
		}
		seen[e.Code] = true
		wrapped := fmt.Errorf("actor: %w", withMessage(e, "details"))
		if CodeOf(wrapped) != e.Code || !errors.Is(wrapped, e) {
			t.Fatalf("wrapped %v: CodeOf %q, Is %v", e, CodeOf(wrapped), errors.Is(wrapped, e))
		}
		for _, other := range sentinels {
			if other != e && errors.Is(wrapped, other) {
				t.Fatalf("%v matches %v", e, other)
			}
		}
		if !strings.HasPrefix(e.Error(), "reservation: ") {
			t.Fatalf("message %q lacks the package prefix", e.Error())
		}
	}
	if CodeOf(nil) != "" || CodeOf(errors.New("x")) != "" || CodeOf(ErrUnknownEvent) != "" {
		t.Fatal("CodeOf of a non-domain error must be empty")
	}
	if err := invalid("amount", "bad"); !errors.Is(err, ErrInvalid) || err.Error() != "reservation: amount: bad" {
		t.Fatalf("invalid() = %v", err)
	}
}
