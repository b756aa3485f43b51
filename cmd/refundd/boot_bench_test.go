package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// writeHistory fills a journal with n reservations of about ten events each
// (registration, three refunds each submitted and answered), written through
// the real event store so claims, due times and marks are there too. The
// last refund of every tenth reservation stays in flight with a due time.
func writeHistory(b testing.TB, path string, n int) (events int) {
	return writeHistoryInterleaved(b, path, n, 1, true)
}

// historySpan is how far back writeHistory's reservations were paid.
const historySpan = 800 * 24 * time.Hour

// writeHistoryInterleaved is writeHistory with window reservations in
// progress at once: their decisions are appended in turns, one decision
// of each in turn, as a merchant's refunds interleave over the days of a
// refund window. With window 1 each reservation's events are one append,
// next to each other in the log. inFlight leaves every tenth reservation's
// last refund submitted without an outcome, due at once when refundd
// starts (recovery work, as after a crash); without it every refund
// succeeded (a steady history).
func writeHistoryInterleaved(b testing.TB, path string, n, window int, inFlight bool) (events int) {
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	store := eventstore.New(db)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour).UTC()
	// decisions returns reservation i's decisions, each the events of one
	// command.
	decisions := func(i int) (id string, out [][]reservation.Event) {
		id = "boot-" + strconv.Itoa(i)
		st := &reservation.State{}
		// Paid over the historySpan before t0, in order, each refunded
		// within its hour: about half of them older than archival's default
		// retention (400 days).
		at := t0.Add(-historySpan + time.Duration(int64(historySpan)/int64(max(n, 1))*int64(i)))
		run := func(cmd reservation.Command) {
			env := reservation.Env{Now: at, By: "bench", Policy: reservation.Policy{RefundNoPrefix: "B"}}
			evs, err := reservation.Decide(st, cmd, env)
			if err != nil {
				b.Fatalf("%s: %v", id, err)
			}
			for _, e := range evs {
				reservation.Apply(st, e)
			}
			out = append(out, evs)
		}
		run(reservation.Register{ReservationID: id, UserID: "u", OutTradeNo: "BOOT" + strconv.Itoa(i), Amount: 3000, Currency: "CNY",
			PaidAt: at.Add(-time.Minute)})
		for k := 1; k <= 3; k++ {
			amount := int64(1000)
			run(reservation.RequestRefund{UserID: "u", IdempotencyKey: "k" + strconv.Itoa(k), Amount: &amount})
			no := st.Refunds[k-1].No
			run(reservation.StartSubmission{RefundNo: no, Request: []byte(`{"out_refund_no":"` + no + `"}`)})
			if inFlight && k == 3 && i%10 == 0 {
				continue // in flight: its due time is in the index
			}
			run(reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse, Attempt: 1,
				Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded, ProviderID: "wx" + no}})
		}
		return id, out
	}
	window = max(window, 1)
	for start := 0; start < n; start += window {
		type pending struct {
			id    string
			st    *reservation.State
			steps [][]reservation.Event
		}
		group := make([]pending, 0, window)
		for i := start; i < min(start+window, n); i++ {
			id, steps := decisions(i)
			if window == 1 { // one append
				steps = [][]reservation.Event{slices.Concat(steps...)}
			}
			group = append(group, pending{id: id, st: &reservation.State{}, steps: steps})
		}
		for more := true; more; {
			more = false
			for i := range group {
				p := &group[i]
				if len(p.steps) == 0 {
					continue
				}
				evs := p.steps[0]
				p.steps = p.steps[1:]
				more = more || len(p.steps) > 0
				if err := store.Append(ctx, p.id, p.st, evs); err != nil {
					b.Fatal(err)
				}
				for _, e := range evs {
					reservation.Apply(p.st, e)
				}
				events += len(evs)
			}
		}
	}
	// Its appends wrote the list rows: no back-fill at boot.
	if err := db.Put(ctx, eventstore.ListIndexKey, []byte("1")); err != nil {
		b.Fatal(err)
	}
	return events
}

// TestWriteHistoryFile writes writeHistory's journal to $HISTORY_FILE with
// $HISTORY_RESERVATIONS reservations (default 100,000: about a million
// events), $HISTORY_INTERLEAVE of them in progress at once (default 1),
// every tenth with a refund in flight unless $HISTORY_IN_FLIGHT is 0, for
// measuring the audit tools on it (docs/BENCHMARKS.md):
//
//	HISTORY_FILE=/tmp/h.db go test -run=TestWriteHistoryFile -count=1 ./cmd/refundd/
func TestWriteHistoryFile(t *testing.T) {
	path := os.Getenv("HISTORY_FILE")
	if path == "" {
		t.Skip("set HISTORY_FILE to write a journal there")
	}
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("HISTORY_RESERVATIONS")); err == nil && v > 0 {
		n = v
	}
	window := 1
	if v, err := strconv.Atoi(os.Getenv("HISTORY_INTERLEAVE")); err == nil && v > 0 {
		window = v
	}
	inFlight := os.Getenv("HISTORY_IN_FLIGHT") != "0"
	t.Logf("wrote %d events for %d reservations (%d at once, in flight %v) to %s",
		writeHistoryInterleaved(t, path, n, window, inFlight), n, window, inFlight, path)
}

// BenchmarkBootToReady measures how long refundd takes from Run to a 200 on
// /readyz with a large journal: the state is rebuilt lazily, so this must
// not grow with the journal. BOOT_RESERVATIONS sets the size (default
// 100,000 reservations, about a million events).
//
//	go test -run='^$' -bench=BootToReady -benchtime=3x ./cmd/refundd/
func BenchmarkBootToReady(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("BOOT_RESERVATIONS")); err == nil && v > 0 {
		n = v
	}
	dir := b.TempDir()
	start := time.Now()
	events := writeHistory(b, filepath.Join(dir, "refundd.db"), n)
	b.Logf("wrote %d events for %d reservations in %s", events, n, time.Since(start).Round(time.Millisecond))
	b.ResetTimer()
	for range b.N {
		m := NewMain()
		m.Stdout, m.Stderr = io.Discard, io.Discard
		if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", dir, "--provider", "memory"}, testEnv); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := m.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		resp, err := http.Get("http://" + m.Addr() + "/readyz")
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("readyz: %v %v", resp, err)
		}
		resp.Body.Close()
		ready := time.Since(t0)
		b.ReportMetric(float64(ready.Microseconds())/1000, "ms-to-ready")
		// A cold reservation's first read replays it from the journal.
		t1 := time.Now()
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/v1/reservations/boot-%d", m.Addr(), n/2), nil)
		req.Header.Set("Authorization", "Bearer "+testServiceToken)
		resp, err = http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("cold read: %v %v", resp, err)
		}
		resp.Body.Close()
		b.ReportMetric(float64(time.Since(t1).Microseconds())/1000, "ms-cold-read")
		b.StopTimer()
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
