package main

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSearch measures GET /v1/search on a real refundd over a journal
// of SEARCH_RESERVATIONS reservations (default 100,000, about a million
// events; writeHistory's), each lookup over HTTP with a service token, and
// reports the p50 and p99 per lookup. The baseline, in the same run, is
// GET /v1/reservations/{id}. Every kind of lookup draws its reservations
// from a slice of the journal of its own, so nearly every lookup reads a
// reservation no earlier lookup woke (a cold read, replayed from the
// journal), except user_id: writeHistory gives every reservation user "u",
// so that search always answers the same first 20 of n matches.
//
//	go test -run='^$' -bench=Search -benchtime=2000x ./cmd/refundd/
func BenchmarkSearch(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("SEARCH_RESERVATIONS")); err == nil && v > 0 {
		n = v
	}
	dir := b.TempDir()
	start := time.Now()
	events := writeHistory(b, filepath.Join(dir, "refundd.db"), n)
	b.Logf("wrote %d events for %d reservations in %s", events, n, time.Since(start).Round(time.Millisecond))
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", dir, "--provider", "memory"}, testEnv); err != nil {
		b.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })

	get := func(b *testing.B, path string) []byte {
		req, _ := http.NewRequest(http.MethodGet, "http://"+m.Addr()+path, nil)
		req.Header.Set("Authorization", "Bearer "+testServiceToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, body, err)
		}
		return body
	}
	// Each kind: the path of a lookup of reservation i, and how many
	// matches its answer must hold (0: not a search).
	no := func(i int) string { return "B-boot-" + strconv.Itoa(i) + "-1" }
	kinds := []struct {
		name  string
		path  func(i int) string
		match int
	}{
		{"baseline_reservation_id", func(i int) string { return "/v1/reservations/boot-" + strconv.Itoa(i) }, 0},
		{"refund_no", func(i int) string { return "/v1/search?q=" + url.QueryEscape(no(i)) }, 1},
		{"out_trade_no", func(i int) string { return "/v1/search?q=BOOT" + strconv.Itoa(i) }, 1},
		{"wechat_refund_id", func(i int) string { return "/v1/search?q=" + url.QueryEscape("wx"+no(i)) }, 1},
		{"user_id_of_every_reservation", func(int) string { return "/v1/search?q=u" }, 20},
		{"unknown_id", func(i int) string { return "/v1/search?q=nothing-" + strconv.Itoa(i) }, 0},
	}
	for k, kind := range kinds {
		b.Run(kind.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(uint64(k), 1))
			slice := n / len(kinds)
			took := make([]time.Duration, 0, b.N)
			for b.Loop() {
				i := k*slice + r.IntN(slice)
				t0 := time.Now()
				body := get(b, kind.path(i))
				took = append(took, time.Since(t0))
				if kind.match == 0 && kind.name != "unknown_id" {
					continue
				}
				var out struct {
					Matches []json.RawMessage `json:"matches"`
				}
				if err := json.Unmarshal(body, &out); err != nil || len(out.Matches) != kind.match {
					b.Fatalf("%s: %d matches, want %d: %.300s", kind.path(i), len(out.Matches), kind.match, body)
				}
			}
			slices.Sort(took)
			at := func(q float64) float64 {
				return float64(took[int(q*float64(len(took)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(at(0.5), "ms-p50")
			b.ReportMetric(at(0.99), "ms-p99")
			b.Logf("%s: %d lookups, p50 %.3f ms, p99 %.3f ms, max %s", kind.name, len(took), at(0.5), at(0.99), took[len(took)-1])
		})
	}
}
