package eventstore

import (
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// BenchmarkAppendRequest builds the journal requests of a refund's typical
// appends (requested with its first submission, then its result), as the
// hot path does once per append.
func BenchmarkAppendRequest(b *testing.B) {
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	due := at.Add(time.Minute)
	ev := func(d reservation.EventData) reservation.Event {
		return reservation.Event{At: at, By: "engine", Data: d}
	}
	st := &reservation.State{}
	reservation.Apply(st, ev(reservation.Registered{ReservationID: "r1", UserID: "u", OutTradeNo: "O1", Amount: 100, Currency: "CNY"}))
	request := []reservation.Event{
		ev(reservation.RefundRequested{RefundNo: "T-r1-1", Number: 1, IdempotencyKey: "k", Fingerprint: "f", Amount: 100, Reason: "r"}),
		ev(reservation.SubmissionStarted{RefundNo: "T-r1-1", Attempt: 1, Request: []byte(`{"a":1}`), DueAt: due}),
	}
	submitted := st.Clone()
	for _, e := range request {
		reservation.Apply(submitted, e)
	}
	result := []reservation.Event{ev(reservation.ProviderResult{RefundNo: "T-r1-1", Source: reservation.SourceResponse,
		Outcome: reservation.OutcomeSucceeded, From: reservation.Processing, To: reservation.Succeeded})}
	cases := []struct {
		name   string
		before *reservation.State
		events []reservation.Event
	}{
		{"request", st, request},
		{"result", submitted, result},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := appendRequest("r1", c.before, c.events); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
