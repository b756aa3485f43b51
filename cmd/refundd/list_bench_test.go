package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkList measures a page of GET /v1/refunds and GET
// /v1/reservations (50 rows) on a real refundd over a journal of
// LIST_RESERVATIONS reservations (default 100,000, three refunds each:
// writeHistory's), over HTTP with a service token, and reports the p50
// and p99 per page. The baseline, in the same run, is GET
// /v1/reservations/{id}. Each page after the first of a run follows the
// previous page's next_cursor (from the start again at the end), so most
// pages read rows no earlier page read. writeHistory's refunds are all
// SUCCEEDED but one in thirty, PROCESSING, and every one is 1000 fen:
// state=ABNORMAL matches nothing and reads no row (its prefixes are
// empty), amount_min=5000 matches nothing and reads rows until the scan
// bound (5,000 keys) answers an empty page with a cursor.
//
//	go test -run='^$' -bench=List -benchtime=1000x ./cmd/refundd/
func BenchmarkList(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("LIST_RESERVATIONS")); err == nil && v > 0 {
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
	kinds := []struct {
		name string
		path string
		rows int // rows a page must hold (-1: the baseline, not a list)
	}{
		{"baseline_reservation_id", "", -1},
		{"refunds_no_filter", "/v1/refunds?limit=50", 50},
		{"refunds_state_PROCESSING", "/v1/refunds?limit=50&state=PROCESSING", 50},
		{"reservations_no_filter", "/v1/reservations?limit=50", 50},
		{"refunds_nothing_state_ABNORMAL", "/v1/refunds?limit=50&state=ABNORMAL&order=desc", 0},
		{"refunds_nothing_amount_scan_bound", "/v1/refunds?limit=50&amount_min=5000", 0},
	}
	for _, kind := range kinds {
		b.Run(kind.name, func(b *testing.B) {
			took := make([]time.Duration, 0, b.N)
			cursor := ""
			i := 0
			for b.Loop() {
				path := "/v1/reservations/boot-" + strconv.Itoa(i%n)
				i += 7919
				if kind.rows >= 0 {
					path = kind.path
					if cursor != "" {
						path += "&cursor=" + cursor
					}
				}
				t0 := time.Now()
				body := get(b, path)
				took = append(took, time.Since(t0))
				if kind.rows < 0 {
					continue
				}
				var out struct {
					Refunds      []json.RawMessage `json:"refunds"`
					Reservations []json.RawMessage `json:"reservations"`
					NextCursor   string            `json:"next_cursor"`
				}
				if err := json.Unmarshal(body, &out); err != nil {
					b.Fatal(err)
				}
				if got := len(out.Refunds) + len(out.Reservations); got != kind.rows {
					b.Fatalf("%s: %d rows, want %d: %.300s", path, got, kind.rows, body)
				}
				cursor = out.NextCursor
			}
			slices.Sort(took)
			at := func(q float64) float64 {
				return float64(took[int(q*float64(len(took)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(at(0.5), "ms-p50")
			b.ReportMetric(at(0.99), "ms-p99")
			b.Logf("%s: %d pages, p50 %.3f ms, p99 %.3f ms, max %s", kind.name, len(took), at(0.5), at(0.99), took[len(took)-1])
		})
	}
}
