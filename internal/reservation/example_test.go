package reservation_test

import (
	"fmt"
	"time"

	"refundd/internal/reservation"
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
		Kind: reservation.OutcomeSucceeded, ProviderID: "50300001", RefundAmount: 3000, TotalAmount: 10000,
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
	do("provider:wechatpay", reservation.RecordOutcome{RefundNo: rest, Source: reservation.SourceQuery, Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded}})
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
