package eventstore_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
)

// tallied is Tally(s, sign) as a map, zeros left out.
func tallied(s *reservation.State, sign int64, into map[string]int64) {
	eventstore.Tally(s, sign, func(k string, n int64) { into[k] += n })
	maps.DeleteFunc(into, func(_ string, v int64) bool { return v == 0 })
}

// TestTally_Figures pins Tally to the figures it defines, written out by
// hand for one reservation of each kind.
func TestTally_Figures(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)
	ev := func(min int, d reservation.EventData) reservation.Event {
		return reservation.Event{At: at.Add(time.Duration(min) * time.Minute), By: "test", Data: d}
	}
	reg := ev(0, reservation.Registered{ReservationID: "r1", UserID: "u", OutTradeNo: "O1", Amount: 1000, Currency: "CNY", Merchant: "hotel-sh"})
	req := func(min int, no string, amount int64) reservation.Event {
		return ev(min, reservation.RefundRequested{RefundNo: no, Number: 1, IdempotencyKey: no, Fingerprint: "f", Amount: amount})
	}
	result := func(min int, no string, from, to reservation.RefundState) reservation.Event {
		return ev(min, reservation.ProviderResult{RefundNo: no, Source: reservation.SourceQuery, Outcome: reservation.OutcomeUnknown, From: from, To: to})
	}
	for _, tc := range []struct {
		name   string
		events []reservation.Event
		want   map[string]int64
	}{
		{"not registered", nil, map[string]int64{}},
		{"registered", []reservation.Event{reg}, map[string]int64{
			"reservations": 1, "merchant/hotel-sh/reservations": 1, "paid": 1000, "merchant/hotel-sh/paid": 1000,
		}},
		{"canceled", []reservation.Event{reg, ev(1, reservation.Canceled{})}, map[string]int64{
			"reservations": 1, "merchant/hotel-sh/reservations": 1, "paid": 1000, "merchant/hotel-sh/paid": 1000,
			"canceled": 1, "merchant/hotel-sh/canceled": 1,
		}},
		{"three refunds in two hours and three states", []reservation.Event{reg,
			req(1, "T1", 100), req(2, "T2", 200), req(40, "T3", 300),
			result(50, "T1", reservation.Processing, reservation.Succeeded),
			result(51, "T2", reservation.Processing, reservation.Failed)}, map[string]int64{
			"reservations": 1, "merchant/hotel-sh/reservations": 1, "paid": 1000, "merchant/hotel-sh/paid": 1000,
			"refunds": 3, "merchant/hotel-sh/refunds": 3,
			"refunded": 100, "merchant/hotel-sh/refunded": 100,
			"released": 200, "merchant/hotel-sh/released": 200,
			"in_flight": 300, "merchant/hotel-sh/in_flight": 300,
			"refund_state/SUCCEEDED": 1, "refund_state/FAILED": 1, "refund_state/PROCESSING": 1,
			"totals/2026120108/hotel-sh/SUCCEEDED/fen": 100, "totals/2026120108/hotel-sh/SUCCEEDED/refunds": 1,
			"totals/2026120108/hotel-sh/FAILED/fen": 200, "totals/2026120108/hotel-sh/FAILED/refunds": 1,
			"totals/2026120109/hotel-sh/PROCESSING/fen": 300, "totals/2026120109/hotel-sh/PROCESSING/refunds": 1,
		}},
		{"two refunds of one hour and state", []reservation.Event{reg, req(1, "T1", 100), req(2, "T2", 200)}, map[string]int64{
			"reservations": 1, "merchant/hotel-sh/reservations": 1, "paid": 1000, "merchant/hotel-sh/paid": 1000,
			"refunds": 2, "merchant/hotel-sh/refunds": 2, "in_flight": 300, "merchant/hotel-sh/in_flight": 300,
			"refund_state/PROCESSING":                   2,
			"totals/2026120108/hotel-sh/PROCESSING/fen": 300, "totals/2026120108/hotel-sh/PROCESSING/refunds": 2,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := reservation.After(nil, tc.events)
			got := map[string]int64{}
			tallied(s, 1, got)
			if !maps.Equal(got, tc.want) {
				t.Errorf("Tally\n got %v\nwant %v", got, tc.want)
			}
			neg := map[string]int64{}
			tallied(s, -1, neg)
			for k, v := range tc.want {
				if neg[k] != -v {
					t.Errorf("Tally with sign -1: %s = %d, want %d", k, neg[k], -v)
				}
			}
		})
	}
}

// TestCounterChanges_AreTallyDifferences is the property the append's
// counters rest on: for random appends (one to three events: refunds
// requested over three hours, moved through random states, cancellations)
// the changes of an append, without the per-type and latest counters, sum
// to Tally of the state after it less Tally of the state before it; no
// change adds 0; the per-type counters count the events; the latest is the
// latest event time.
func TestCounterChanges_AreTallyDifferences(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 11))
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	moves := []reservation.RefundState{reservation.Succeeded, reservation.Failed, reservation.Unknown,
		reservation.Rejected, reservation.Abnormal, reservation.Processing, reservation.PendingApproval}
	for res := range 300 {
		id := fmt.Sprintf("r%d", res)
		var s *reservation.State
		merchant := []string{"", "hotel-sh", "hotel-bj"}[r.IntN(3)]
		for step := range 12 {
			at := start.Add(time.Duration(r.IntN(3*60)) * time.Minute)
			var events []reservation.Event
			for range 1 + r.IntN(3) {
				cur := reservation.After(s, events)
				var d reservation.EventData
				switch k := r.IntN(10); {
				case !cur.Registered():
					d = reservation.Registered{ReservationID: id, UserID: "u", OutTradeNo: "O" + id, Amount: 10_000,
						Currency: "CNY", Merchant: merchant}
				case k < 4 || len(cur.Refunds) == 0:
					no := fmt.Sprintf("T-%s-%d", id, len(cur.Refunds)+1)
					d = reservation.RefundRequested{RefundNo: no, Number: len(cur.Refunds) + 1, IdempotencyKey: no,
						Fingerprint: "f", Amount: int64(1 + r.IntN(500))}
				case k == 9:
					d = reservation.Canceled{}
				default:
					rf := cur.Refunds[r.IntN(len(cur.Refunds))]
					d = reservation.ProviderResult{RefundNo: rf.No, Source: reservation.SourceQuery,
						Outcome: reservation.OutcomeUnknown, From: rf.State, To: moves[r.IntN(len(moves))]}
				}
				events = append(events, reservation.Event{At: at.Add(time.Duration(len(events)) * time.Second), By: "test", Data: d})
			}
			after := reservation.After(s, events)
			want := map[string]int64{}
			tallied(after, 1, want)
			if s != nil {
				tallied(s, -1, want)
			}
			got := map[string]int64{}
			types := map[string]int64{}
			var latest int64
			for _, c := range eventstore.CounterChanges(nil, s, events) {
				switch {
				case c.Max:
					if c.Key != eventstore.CountLatest {
						t.Fatalf("%s step %d: a maximum of %s", id, step, c.Key)
					}
					latest = c.Add
				case c.Add == 0:
					t.Errorf("%s step %d: %s adds 0", id, step, c.Key)
				case len(c.Key) > len(eventstore.CountEvents) && c.Key[:len(eventstore.CountEvents)] == eventstore.CountEvents:
					types[c.Key[len(eventstore.CountEvents):]] += c.Add
				default:
					got[c.Key] += c.Add
				}
			}
			maps.DeleteFunc(got, func(_ string, v int64) bool { return v == 0 })
			if !maps.Equal(got, want) {
				t.Fatalf("%s step %d (%d events): changes\n got %v\nwant %v", id, step, len(events), got, want)
			}
			wantTypes := map[string]int64{}
			for _, e := range events {
				wantTypes[e.Data.EventType()]++
			}
			if !maps.Equal(types, wantTypes) {
				t.Fatalf("%s step %d: per-type counters %v, want %v", id, step, types, wantTypes)
			}
			if want := events[len(events)-1].At.UnixNano(); latest != want {
				t.Fatalf("%s step %d: latest %d, want %d", id, step, latest, want)
			}
			s = after
		}
	}
}
