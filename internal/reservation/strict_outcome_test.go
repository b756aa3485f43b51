package reservation

import (
	"errors"
	"fmt"
	"testing"
)

// TestCheckOutcome_NotificationAndQueryReportEveryField: WeChat Pay always
// sends the refund id, out_trade_no and amounts with a refund object, in a
// notification and in a query answer, so from those sources an absent field
// is refused like a wrong one instead of being skipped (a notification with
// only out_refund_no once moved a refund to SUCCEEDED). A submission's
// answer, and outcomes that carry no refund object (unknown, not found,
// rejected), are not held to it.
func TestCheckOutcome_NotificationAndQueryReportEveryField(t *testing.T) {
	complete := Outcome{OutTradeNo: testOTN, RefundAmount: 4000, TotalAmount: testPaid, ProviderID: "50300001"}
	omit := []struct {
		name   string
		mutate func(*Outcome)
	}{
		{"nothing omitted", func(*Outcome) {}},
		{"out_trade_no", func(o *Outcome) { o.OutTradeNo = "" }},
		{"refund amount", func(o *Outcome) { o.RefundAmount = 0 }},
		{"order total", func(o *Outcome) { o.TotalAmount = 0 }},
		{"provider refund id", func(o *Outcome) { o.ProviderID = "" }},
		{"everything", func(o *Outcome) { *o = Outcome{} }},
	}
	for _, src := range allSources {
		for _, kind := range allKinds {
			for _, tc := range omit {
				t.Run(fmt.Sprintf("%s/%s/%s", src, kind, tc.name), func(t *testing.T) {
					s, no := refundIn(t, Processing)
					o := complete
					tc.mutate(&o)
					o.Kind = kind
					c := RecordOutcome{RefundNo: no, Source: src, Attempt: s.Refund(no).Attempts, Outcome: o}
					_, err := Decide(s, c, providerEnv)
					strict := src != SourceResponse && kind != OutcomeUnknown && kind != OutcomeNotFound && kind != OutcomeRejected
					if strict && tc.name != "nothing omitted" {
						if !errors.Is(err, ErrOutcomeMismatch) {
							t.Fatalf("outcome %+v from %s: err %v, want ErrOutcomeMismatch", o, src, err)
						}
						return
					}
					if err != nil {
						t.Fatalf("outcome %+v from %s: %v", o, src, err)
					}
				})
			}
		}
	}
}

// reported completes an outcome that a test states by kind (and perhaps
// provider id) only, as WeChat Pay reports it: a notification or query about
// a refund object carries its id, out_trade_no and amounts, which match
// local records. Only absent values are filled, so mismatches stay testable;
// tests of absent values call Decide directly.
func reported(s *State, cmd Command) Command {
	c, ok := cmd.(RecordOutcome)
	if !ok || !reportsRefundObject(c.Source, c.Outcome.Kind) {
		return cmd
	}
	r := s.Refund(c.RefundNo)
	if r == nil {
		return cmd
	}
	o := &c.Outcome
	if o.ProviderID == "" {
		o.ProviderID = r.ProviderID
		if o.ProviderID == "" {
			o.ProviderID = "50300001"
		}
	}
	if o.OutTradeNo == "" {
		o.OutTradeNo = s.OutTradeNo
	}
	if o.RefundAmount == 0 {
		o.RefundAmount = r.Amount
	}
	if o.TotalAmount == 0 {
		o.TotalAmount = s.Amount
	}
	return c
}
