package actors_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal"
)

// Engine benchmarks: the actor round trip, activation (journal read, decode,
// replay) and a whole refund in process, fsync on. Run:
//
//	go test -run='^$' -bench=. -benchmem ./actors/

type benchEngine struct {
	db     *journal.DB
	store  *eventstore.Store
	engine *actors.Engine
}

func newBenchEngine(b *testing.B, opts *journal.Options, idle time.Duration) *benchEngine {
	b.Helper()
	if opts == nil {
		opts = &journal.Options{}
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := journal.Open(filepath.Join(b.TempDir(), "bench.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	store := eventstore.New(db)
	e, err := actors.New(actors.Config{
		Store: store, Provider: simprovider.New(simprovider.Options{}), Encode: simprovider.Encode, IdleTimeout: idle,
		// No bound on live actors: the activation benchmark measures the
		// heap of every actor it activated, and passivation by idle time.
		MaxActive: -1,
		Policy:    reservation.Policy{RefundNoPrefix: "B"}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = e.Close(context.Background())
		_ = db.Close()
	})
	return &benchEngine{db: db, store: store, engine: e}
}

func (be *benchEngine) register(b *testing.B, id string, amount int64) {
	b.Helper()
	_, _, err := be.engine.Execute(context.Background(), id, "bench", reservation.Register{
		ReservationID: id, UserID: "u-" + id, OutTradeNo: "OT-" + id, Amount: amount, Currency: "CNY",
	})
	if err != nil {
		b.Fatalf("register %s: %v", id, err)
	}
}

// BenchmarkEngineGet is one request/reply with an active reservation's
// actor (a snapshot Clone included).
func BenchmarkEngineGet(b *testing.B) {
	be := newBenchEngine(b, &journal.Options{NoSync: true}, time.Hour)
	be.register(b, "hot", 10000)
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := be.engine.Get(ctx, "hot"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := be.engine.Get(ctx, "hot"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// activationTemplate returns the encoded events of one reservation with
// refunds whole refund lifecycles (1 + 3*refunds events), naming the
// reservation tmplID so that copies can be made by replacing it.
func activationTemplate(b *testing.B, tmplID string, refunds int) []journal.Event {
	b.Helper()
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	env := reservation.Env{Now: now, By: "bench", Policy: reservation.Policy{RefundNoPrefix: "B"}}
	s := &reservation.State{}
	var out []journal.Event
	do := func(cmd reservation.Command) []reservation.Event {
		events, err := reservation.Decide(s, cmd, env)
		if err != nil || len(events) == 0 {
			b.Fatalf("template %T: %d events, %v", cmd, len(events), err)
		}
		for _, e := range events {
			reservation.Apply(s, e)
			typ, ver, data, err := reservation.Encode(e)
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, journal.Event{Type: typ, Version: ver, Data: data})
		}
		return events
	}
	do(reservation.Register{ReservationID: tmplID, UserID: "u-1", OutTradeNo: "OT-" + tmplID, Amount: 1_000_000, Currency: "CNY"})
	amount := int64(100)
	for i := range refunds {
		no := do(reservation.RequestRefund{UserID: "u-1", IdempotencyKey: "key-" + strconv.Itoa(i), Amount: &amount})[0].
			Data.(reservation.RefundRequested).RefundNo
		do(reservation.StartSubmission{RefundNo: no, Request: []byte(`{"out_trade_no":"OT-` + tmplID + `","out_refund_no":"` + no +
			`","amount":{"refund":100,"total":1000000,"currency":"CNY"}}`)})
		do(reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse, Attempt: 1,
			Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded, ProviderID: simprovider.RefundID(no)}})
	}
	return out
}

// writeReservations appends n copies of tmpl under ids made by ids(i), 64
// at a time. Copies are the template with its id replaced (same length).
func writeReservations(b *testing.B, db *journal.DB, tmplID string, tmpl []journal.Event, n int, ids func(int) string) {
	b.Helper()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				id := ids(i)
				events := make([]journal.Event, len(tmpl))
				for j, e := range tmpl {
					e.Data = bytes.ReplaceAll(e.Data, []byte(tmplID), []byte(id))
					events[j] = e
				}
				if _, err := db.Append(context.Background(), journal.AppendRequest{Stream: id, Events: events}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchmarkActivation is a Get on a reservation that has no live actor:
// spawn, journal read (warm page cache), decode and replay of its events.
// It reports the latency percentiles of single activations and the heap
// each activated actor keeps, then how much of it passivation returns.
func BenchmarkActivation(b *testing.B) {
	for _, refunds := range []int{0, 3, 10, 40} {
		const tmplID = "act000000000"
		tmpl := activationTemplate(b, tmplID, refunds)
		b.Run("events="+strconv.Itoa(len(tmpl)), func(b *testing.B) {
			be := newBenchEngine(b, &journal.Options{NoSync: true}, 2*time.Second)
			ids := func(i int) string { return fmt.Sprintf("act%09d", i) }
			writeReservations(b, be.db, tmplID, tmpl, b.N, ids)
			lat := make([]time.Duration, b.N)
			ctx := context.Background()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				t := time.Now()
				st, err := be.engine.Get(ctx, ids(i))
				lat[i] = time.Since(t)
				if err != nil {
					b.Fatal(err)
				}
				if st.Version != uint64(len(tmpl)) {
					b.Fatalf("activated at version %d, want %d", st.Version, len(tmpl))
				}
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			live := be.engine.Active()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			if live > 100 {
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(live), "heap-B/actor")
				// Passivation (IdleTimeout 2s) must give the memory back.
				deadline := time.Now().Add(30 * time.Second)
				for be.engine.Active() > 0 && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if n := be.engine.Active(); n > 0 {
					b.Fatalf("%d actors still live after 30s", n)
				}
				var passive runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&passive)
				b.ReportMetric(float64(int64(passive.HeapAlloc)-int64(before.HeapAlloc))/float64(live), "heap-B/passivated")
			}
		})
	}
}

// BenchmarkStoreLoad is activation without the actor: journal read and
// decode of one reservation's events through the eventstore.
func BenchmarkStoreLoad(b *testing.B) {
	for _, refunds := range []int{0, 3, 10, 40} {
		const tmplID = "ld0000000000"
		tmpl := activationTemplate(b, tmplID, refunds)
		b.Run("events="+strconv.Itoa(len(tmpl)), func(b *testing.B) {
			be := newBenchEngine(b, &journal.Options{NoSync: true}, time.Hour)
			const n = 1000
			ids := func(i int) string { return fmt.Sprintf("ld%010d", i) }
			writeReservations(b, be.db, tmplID, tmpl, n, ids)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				events, _, err := be.store.Load(ctx, ids(i%n))
				if err != nil || len(events) != len(tmpl) {
					b.Fatalf("load: %d events, %v", len(events), err)
				}
				i++
			}
			b.ReportMetric(float64(b.N*len(tmpl))/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkEngineRefund is a whole refund in process: register
// a reservation, request a refund, and wait until the in-memory provider's
// answer has been journaled as SUCCEEDED (3 appends). clients run
// concurrently, each on its own reservations. With fsync off the journal's
// disk is out of the picture and cpu-us/refund is the process's CPU time
// (user + system, every goroutine) per refund: the engine's own cost,
// steadier than the rate on a shared machine.
func BenchmarkEngineRefund(b *testing.B) {
	for _, fsync := range []bool{true, false} {
		for _, clients := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("fsync=%v/clients=%d", fsync, clients), func(b *testing.B) {
				benchEngineRefund(b, !fsync, clients)
			})
		}
	}
}

func benchEngineRefund(b *testing.B, noSync bool, clients int) {
	be := newBenchEngine(b, &journal.Options{NoSync: noSync}, time.Minute)
	ctx := context.Background()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	cpu0 := processCPU()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				id := "ref" + strconv.Itoa(i)
				t := time.Now()
				if _, _, err := be.engine.Execute(ctx, id, "bench", reservation.Register{
					ReservationID: id, UserID: "u", OutTradeNo: "OT-" + id, Amount: 10000, Currency: "CNY",
				}); err != nil {
					b.Error(err)
					return
				}
				amount := int64(2500)
				st, _, err := be.engine.Execute(ctx, id, "bench", reservation.RequestRefund{UserID: "u", IdempotencyKey: "k", Amount: &amount})
				if err != nil {
					b.Error(err)
					return
				}
				no := st.RefundByKey("k").No
				st, err = be.engine.Await(ctx, id, func(s *reservation.State) bool { return s.Refund(no).State.Terminal() })
				if err != nil || st.Refund(no).State != reservation.Succeeded {
					b.Errorf("refund %s: %v", no, err)
					return
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	b.StopTimer()
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/refund")
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "refunds/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
