package reservation_test

import (
	"fmt"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// A reservation paid 100.00 CNY is refunded 30.00 CNY, then the rest. Each
// command is decided against the state, and its events are applied (an
// engine journals them in between).
func Example() {
	s := &reservation.State{}
	env := reservation.Env{
		Now:    time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC),
		Policy: reservation.Policy{RefundNoPrefix: "DEMO"},
	}
	do := func(by string, cmd reservation.Command) []reservation.Event {
		env.By = by
		events, err := reservation.Decide(s, cmd, env)
		if err != nil {
			fmt.Println("error:", err)
			return nil
		}
		for _, e := range events {
			reservation.Apply(s, e)
			fmt.Println(" ", e.Data.EventType())
		}
		return events
	}

	fmt.Println("register:")
	do("system:booking", reservation.Register{
		ReservationID: "resv-1", UserID: "u-42", OutTradeNo: "OT20250301001",
		Amount: 10000, Currency: "CNY",
	})

	fmt.Println("request 30.00:")
	amount := int64(3000)
	ev := do("user:u-42", reservation.RequestRefund{UserID: "u-42", IdempotencyKey: "key-1", Amount: &amount, Reason: "one night less"})
	no := ev[0].Data.(reservation.RefundRequested).RefundNo
	do("engine", reservation.StartSubmission{RefundNo: no, Request: []byte(`{"out_refund_no":"` + no + `"}`)})

	fmt.Println("replay of the same request:")
	do("user:u-42", reservation.RequestRefund{UserID: "u-42", IdempotencyKey: "key-1", Amount: &amount, Reason: "one night less"})

	fmt.Println("WeChat Pay says SUCCESS:")
	env.Now = env.Now.Add(time.Minute)
	do("provider:wechatpay", reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceNotification, Outcome: reservation.Outcome{
		Kind: reservation.OutcomeSucceeded, ProviderID: "50300001", OutTradeNo: "OT20250301001", RefundAmount: 3000, TotalAmount: 10000,
	}})

	r := s.Refund(no)
	fmt.Println(r.No, r.State, r.Amount, r.Attempts)
	fmt.Println(s.Status, "refunded", s.Refunded(), "in flight", s.InFlight(), "refundable", s.Refundable())

	fmt.Println("request more than is left:")
	too := int64(7001)
	do("user:u-42", reservation.RequestRefund{UserID: "u-42", IdempotencyKey: "key-2", Amount: &too})

	fmt.Println("request the rest:")
	ev = do("user:u-42", reservation.RequestRefund{UserID: "u-42", IdempotencyKey: "key-3"})
	rest := ev[0].Data.(reservation.RefundRequested).RefundNo
	do("engine", reservation.StartSubmission{RefundNo: rest, Request: []byte(`{"out_refund_no":"` + rest + `"}`)})
	do("provider:wechatpay", reservation.RecordOutcome{RefundNo: rest, Source: reservation.SourceQuery, Outcome: reservation.Outcome{
		Kind: reservation.OutcomeSucceeded, ProviderID: "50300002", OutTradeNo: "OT20250301001", RefundAmount: 7000, TotalAmount: 10000,
	}})
	fmt.Println(s.Status, "refunded", s.Refunded(), "in flight", s.InFlight(), "refundable", s.Refundable())

	// Output:
	// register:
	//   reservation.registered
	// request 30.00:
	//   refund.requested
	//   refund.submission_started
	// replay of the same request:
	// WeChat Pay says SUCCESS:
	//   refund.provider_result
	// DEMO-resv-1-1 SUCCEEDED 3000 1
	// ACCEPTED refunded 3000 in flight 0 refundable 7000
	// request more than is left:
	// error: reservation: amount 7001 exceeds the refundable 7000
	// request the rest:
	//   refund.requested
	//   refund.submission_started
	//   refund.provider_result
	//   reservation.canceled
	// CANCELED refunded 10000 in flight 0 refundable 0
}

// WeChat Pay does not answer a refund: the same request (same number, same
// bytes) is sent again, each time no sooner than WeChat Pay's spacing after
// the order's previous create request (a minute here, above the backoff),
// then the refund is UNKNOWN and the reconciler queries it. A second refund
// of the order waits for the spacing too, goes ABNORMAL, and an operator
// resolves it. The engine fires each due time with FireTimer.
func Example_retriesAndSpacing() {
	s := &reservation.State{}
	start := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	now := start
	// Jitter 0 (the Env default) gives the shortest backoff: 0.5s, 1s, ...
	policy := reservation.Policy{RefundNoPrefix: "DEMO", MaxAttempts: 3, RefundSpacing: time.Minute}
	do := func(by string, cmd reservation.Command) []reservation.Event {
		events, err := reservation.Decide(s, cmd, reservation.Env{Now: now, By: by, Policy: policy})
		if err != nil {
			fmt.Println("error:", err)
			return nil
		}
		for _, e := range events {
			reservation.Apply(s, e)
			at := "+" + now.Sub(start).String()
			switch d := e.Data.(type) {
			case reservation.SubmissionStarted:
				fmt.Println(" ", at, e.Data.EventType(), d.RefundNo, "attempt", d.Attempt)
			case reservation.SubmissionScheduled:
				fmt.Println(" ", at, e.Data.EventType(), d.RefundNo, "until +"+d.DueAt.Sub(start).String())
			case reservation.ProviderResult:
				fmt.Println(" ", at, e.Data.EventType(), d.RefundNo, d.From, "->", d.To, "retry:", d.Retry)
			default:
				fmt.Println(" ", at, e.Data.EventType())
			}
		}
		return events
	}
	fire := func(no string) {
		now = s.Refund(no).DueAt
		do("engine", reservation.FireTimer{RefundNo: no, DueAt: now})
	}
	unknown := func(no string) {
		do("provider:wechatpay", reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse,
			Attempt: s.Refund(no).Attempts, Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "SYSTEM_ERROR"}})
	}

	do("system:booking", reservation.Register{ReservationID: "resv-1", UserID: "u-42", OutTradeNo: "OT20250301001",
		Amount: 10000, Currency: "CNY", PaidAt: start.Add(-time.Hour)})
	amount := int64(3000)
	first := do("user:u-42", reservation.RequestRefund{UserID: "u-42", IdempotencyKey: "key-1", Amount: &amount})[0].Data.(reservation.RefundRequested).RefundNo
	do("engine", reservation.StartSubmission{RefundNo: first, Request: []byte(`{"out_refund_no":"DEMO-resv-1-1"}`)})
	fmt.Println("no answer, three times:")
	unknown(first)
	fire(first)
	unknown(first)
	fire(first)
	unknown(first)

	fmt.Println("the rest, 20s later:")
	now = now.Add(20 * time.Second)
	rest := do("user:u-42", reservation.RequestRefund{UserID: "u-42", IdempotencyKey: "key-2"})[0].Data.(reservation.RefundRequested).RefundNo
	do("engine", reservation.StartSubmission{RefundNo: rest, Request: []byte(`{"out_refund_no":"DEMO-resv-1-2"}`)})
	fire(first) // the reconciler's first query
	do("provider:wechatpay", reservation.RecordOutcome{RefundNo: first, Source: reservation.SourceQuery,
		Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded, ProviderID: "50300001", OutTradeNo: "OT20250301001",
			RefundAmount: 3000, TotalAmount: 10000}})
	fire(rest)

	fmt.Println("the bank account is closed:")
	do("provider:wechatpay", reservation.RecordOutcome{RefundNo: rest, Source: reservation.SourceNotification,
		Outcome: reservation.Outcome{Kind: reservation.OutcomeAbnormal, ProviderID: "50300002", OutTradeNo: "OT20250301001",
			RefundAmount: 7000, TotalAmount: 10000}})
	fire(rest) // ABNORMAL is still queried
	now = now.Add(time.Hour)
	do("operator:alice", reservation.Resolve{RefundNo: rest, Reason: "paid by bank transfer"})

	for _, r := range s.Refunds {
		fmt.Println(r.No, r.State, r.Code, "attempts", r.Attempts, "first sent +"+r.SubmittedAt.Sub(start).String())
	}
	fmt.Println(s.Status, "refunded", s.Refunded())

	// Output:
	//   +0s reservation.registered
	//   +0s refund.requested
	//   +0s refund.submission_started DEMO-resv-1-1 attempt 1
	// no answer, three times:
	//   +0s refund.provider_result DEMO-resv-1-1 PROCESSING -> PROCESSING retry: true
	//   +1m0s refund.submission_started DEMO-resv-1-1 attempt 2
	//   +1m0s refund.provider_result DEMO-resv-1-1 PROCESSING -> PROCESSING retry: true
	//   +2m0s refund.submission_started DEMO-resv-1-1 attempt 3
	//   +2m0s refund.provider_result DEMO-resv-1-1 PROCESSING -> UNKNOWN retry: false
	// the rest, 20s later:
	//   +2m20s refund.requested
	//   +2m20s refund.submission_scheduled DEMO-resv-1-2 until +3m0s
	//   +2m30s refund.query_started
	//   +2m30s refund.provider_result DEMO-resv-1-1 UNKNOWN -> SUCCEEDED retry: false
	//   +3m0s refund.submission_started DEMO-resv-1-2 attempt 1
	// the bank account is closed:
	//   +3m0s refund.provider_result DEMO-resv-1-2 PROCESSING -> ABNORMAL retry: false
	//   +4m0s refund.query_started
	//   +1h4m0s refund.resolved
	//   +1h4m0s reservation.canceled
	// DEMO-resv-1-1 SUCCEEDED  attempts 3 first sent +0s
	// DEMO-resv-1-2 SUCCEEDED RESOLVED_BY_OPERATOR attempts 1 first sent +3m0s
	// CANCELED refunded 10000
}
