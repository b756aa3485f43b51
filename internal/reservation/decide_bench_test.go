package reservation_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// The pure core's cost per command: Decide plus Apply of what it decided,
// without IO. These bound what an actor can do per message before the
// journal, HTTP and the provider add theirs. Run:
//
//	go test -run='^$' -bench=. -benchmem ./internal/reservation/

// benchPaid is the largest amount Register accepts, so refunds never run out.
const benchPaid = 1_000_000_000_000

var benchNow = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func benchEnv() reservation.Env {
	return reservation.Env{Now: benchNow, By: "bench", Policy: reservation.Policy{RefundNoPrefix: "B"}}
}

func benchRegistered(b *testing.B, amount int64) *reservation.State {
	b.Helper()
	s := &reservation.State{}
	benchDo(b, s, reservation.Register{
		ReservationID: "resv-bench", UserID: "u-1", OutTradeNo: "OT-bench", Amount: amount, Currency: "CNY",
	})
	return s
}

// benchDo decides and applies one command and fails the benchmark if it
// produced nothing: a benchmark of a no-op would measure the wrong path.
func benchDo(b *testing.B, s *reservation.State, cmd reservation.Command) []reservation.Event {
	events, err := reservation.Decide(s, cmd, benchEnv())
	if err != nil || len(events) == 0 {
		b.Fatalf("decide %T: %d events, err %v", cmd, len(events), err)
	}
	for _, e := range events {
		reservation.Apply(s, e)
	}
	return events
}

// benchClones hands out fresh copies of base, made 1024 at a time with the
// timer stopped: stopping it around every single Clone would cost more than
// the command being measured.
func benchClones(b *testing.B, base *reservation.State) func() *reservation.State {
	var pool []*reservation.State
	return func() *reservation.State {
		if len(pool) == 0 {
			b.StopTimer()
			pool = make([]*reservation.State, 1024)
			for i := range pool {
				pool[i] = base.Clone()
			}
			b.StartTimer()
		}
		s := pool[len(pool)-1]
		pool = pool[:len(pool)-1]
		return s
	}
}

// BenchmarkDecideApply measures one command decided and applied, per
// command type, on a reservation holding few refunds.
func BenchmarkDecideApply(b *testing.B) {
	amount := int64(100)
	b.Run("register", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchRegistered(b, 10000)
		}
	})
	b.Run("request_refund", func(b *testing.B) {
		b.ReportAllocs()
		base := benchRegistered(b, benchPaid)
		next := benchClones(b, base)
		var s *reservation.State
		for i := 0; b.Loop(); i++ {
			if i%40 == 0 { // stay under MaxRefunds (50)
				s = next()
			}
			benchDo(b, s, reservation.RequestRefund{UserID: "u-1", IdempotencyKey: "k" + strconv.Itoa(i), Amount: &amount})
		}
	})
	b.Run("start_submission", func(b *testing.B) {
		b.ReportAllocs()
		base := benchRegistered(b, benchPaid)
		no := benchDo(b, base, reservation.RequestRefund{UserID: "u-1", IdempotencyKey: "k", Amount: &amount})[0].
			Data.(reservation.RefundRequested).RefundNo
		body := []byte(`{"out_refund_no":"` + no + `"}`)
		next := benchClones(b, base)
		for b.Loop() {
			benchDo(b, next(), reservation.StartSubmission{RefundNo: no, Request: body})
		}
	})
	b.Run("record_success", func(b *testing.B) {
		b.ReportAllocs()
		base := benchRegistered(b, benchPaid)
		no := benchDo(b, base, reservation.RequestRefund{UserID: "u-1", IdempotencyKey: "k", Amount: &amount})[0].
			Data.(reservation.RefundRequested).RefundNo
		benchDo(b, base, reservation.StartSubmission{RefundNo: no, Request: []byte("x")})
		cmd := reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceNotification, Outcome: reservation.Outcome{
			Kind: reservation.OutcomeSucceeded, ProviderID: "p1", RefundAmount: amount, TotalAmount: benchPaid,
		}}
		next := benchClones(b, base)
		for b.Loop() {
			benchDo(b, next(), cmd)
		}
	})
	b.Run("duplicate_notification", func(b *testing.B) {
		// The notify-storm path: a SUCCESS notification for a refund that
		// already succeeded decides nothing.
		b.ReportAllocs()
		s := benchRegistered(b, benchPaid)
		no := benchDo(b, s, reservation.RequestRefund{UserID: "u-1", IdempotencyKey: "k", Amount: &amount})[0].
			Data.(reservation.RefundRequested).RefundNo
		benchDo(b, s, reservation.StartSubmission{RefundNo: no, Request: []byte("x")})
		cmd := reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceNotification,
			Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded, ProviderID: "p1"}}
		benchDo(b, s, cmd)
		for b.Loop() {
			events, err := reservation.Decide(s, cmd, benchEnv())
			if err != nil || len(events) != 0 {
				b.Fatalf("duplicate decided %d events, err %v", len(events), err)
			}
		}
	})
}

// BenchmarkLifecycle is one whole refund in the pure core: request, first
// submission, success; the state is a fresh registered reservation each
// time (a Clone, made untimed).
func BenchmarkLifecycle(b *testing.B) {
	b.ReportAllocs()
	base := benchRegistered(b, 10000)
	amount := int64(2500)
	next := benchClones(b, base)
	for b.Loop() {
		s := next()
		no := benchDo(b, s, reservation.RequestRefund{UserID: "u-1", IdempotencyKey: "k", Amount: &amount})[0].
			Data.(reservation.RefundRequested).RefundNo
		benchDo(b, s, reservation.StartSubmission{RefundNo: no, Request: []byte("x")})
		benchDo(b, s, reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse, Attempt: 1,
			Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded}})
	}
}

// BenchmarkCodec measures the JSON encoding every journaled event pays
// (Encode on append, Decode on activation), for the three events of a
// refund's lifecycle.
func BenchmarkCodec(b *testing.B) {
	events := []reservation.Event{
		{At: benchNow, By: "api", Data: reservation.RefundRequested{RefundNo: "B-resv-bench-1", Number: 1,
			IdempotencyKey: "key-000001", Fingerprint: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Amount: 2500}},
		{At: benchNow, By: "api", Data: reservation.SubmissionStarted{RefundNo: "B-resv-bench-1", Attempt: 1,
			Request: []byte(`{"out_trade_no":"OT-bench","out_refund_no":"B-resv-bench-1","amount":{"refund":2500,"total":10000,"currency":"CNY"}}`),
			DueAt:   benchNow.Add(30 * time.Second)}},
		{At: benchNow, By: "provider", Data: reservation.ProviderResult{RefundNo: "B-resv-bench-1", Source: reservation.SourceResponse,
			Attempt: 1, Outcome: reservation.OutcomeSucceeded, ProviderID: "simB-resv-bench-1", From: reservation.Processing,
			To: reservation.Succeeded, SuccessTime: benchNow}},
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			for _, e := range events {
				_, _, data, err := reservation.Encode(e)
				if err != nil {
					b.Fatal(err)
				}
				n += len(data)
			}
		}
		b.ReportMetric(float64(n)/float64(b.N)/float64(len(events)), "bytes/event")
		b.ReportMetric(float64(b.N*len(events))/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		type stored struct {
			typ  string
			ver  uint16
			data []byte
		}
		var raw []stored
		for _, e := range events {
			typ, ver, data, err := reservation.Encode(e)
			if err != nil {
				b.Fatal(err)
			}
			raw = append(raw, stored{typ, ver, data})
		}
		for b.Loop() {
			for _, r := range raw {
				if _, err := reservation.Decode(r.typ, r.ver, r.data); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.N*len(events))/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkReplay rebuilds a state from n events (what activation does
// after the journal read and decoding).
func BenchmarkReplay(b *testing.B) {
	for _, refunds := range []int{1, 10, 40} {
		s := benchRegistered(b, benchPaid)
		amount := int64(100)
		var events []reservation.Event
		events = append(events, reservation.Event{At: benchNow, By: "bench", Data: reservation.Registered{
			ReservationID: "resv-bench", UserID: "u-1", OutTradeNo: "OT-bench", Amount: benchPaid, Currency: "CNY"}})
		for i := range refunds {
			ev := benchDo(b, s, reservation.RequestRefund{UserID: "u-1", IdempotencyKey: "k" + strconv.Itoa(i), Amount: &amount})
			no := ev[0].Data.(reservation.RefundRequested).RefundNo
			events = append(events, ev...)
			events = append(events, benchDo(b, s, reservation.StartSubmission{RefundNo: no, Request: []byte("x")})...)
			events = append(events, benchDo(b, s, reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse,
				Attempt: 1, Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded}})...)
		}
		b.Run("events="+strconv.Itoa(len(events)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if st := reservation.Replay(events); st.Version != uint64(len(events)) {
					b.Fatalf("replayed version %d, want %d", st.Version, len(events))
				}
			}
			b.ReportMetric(float64(b.N*len(events))/b.Elapsed().Seconds(), "events/s")
		})
	}
}

var cloneSink *reservation.State

// BenchmarkClone measures the deep copy an actor makes for every reply that
// carries a state, by the number of refunds held.
func BenchmarkClone(b *testing.B) {
	for _, refunds := range []int{0, 1, 10} {
		b.Run("refunds="+strconv.Itoa(refunds), func(b *testing.B) {
			s := benchRegistered(b, benchPaid)
			for i := range refunds {
				amount := int64(100)
				benchDo(b, s, reservation.RequestRefund{UserID: "u-1", IdempotencyKey: "k" + strconv.Itoa(i), Amount: &amount})
			}
			b.ReportAllocs()
			for b.Loop() {
				// Kept in a global, as a reply keeps it: an inlined
				// Clone whose copy does not escape would be measured on
				// the stack.
				cloneSink = s.Clone()
				if cloneSink.Version != s.Version {
					b.Fatal("clone differs")
				}
			}
		})
	}
}
