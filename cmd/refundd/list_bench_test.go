package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
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
// refunds_state_PROCESSING_engine_reads is the PROCESSING page as it was
// read before the page's reservations were read in one batch from the
// journal (api.StatesReader): each row's reservation through the engine, an
// actor started per cold row. It runs on a second API server over the same
// engine and journal (no tokens: an operator), just before the PROCESSING
// page proper, which goes on from its cursor so that both read reservations
// no actor holds yet (with -benchtime of at most 100x on 100,000
// reservations: 10,000 refunds are PROCESSING).
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

	// The API as it read a page's reservations before: through the engine.
	old := httptest.NewServer(api.New(m.be.engine, api.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		List: engineReads{eventstore.Reader{DB: m.be.db}}}))
	b.Cleanup(old.Close)

	get := func(b *testing.B, base, path string) []byte {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
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
		old  bool
	}{
		{"baseline_reservation_id", "", -1, false},
		{"refunds_no_filter", "/v1/refunds?limit=50", 50, false},
		{"refunds_state_PROCESSING_engine_reads", "/v1/refunds?limit=50&state=PROCESSING", 50, true},
		{"refunds_state_PROCESSING", "/v1/refunds?limit=50&state=PROCESSING", 50, false},
		{"reservations_no_filter", "/v1/reservations?limit=50", 50, false},
		{"refunds_nothing_state_ABNORMAL", "/v1/refunds?limit=50&state=ABNORMAL&order=desc", 0, false},
		{"refunds_nothing_amount_scan_bound", "/v1/refunds?limit=50&amount_min=5000", 0, false},
	}
	cursors := map[string]string{} // by path: a list goes on where the last run of it stopped
	for _, kind := range kinds {
		b.Run(kind.name, func(b *testing.B) {
			took := make([]time.Duration, 0, b.N)
			cursor := cursors[kind.path]
			base := "http://" + m.Addr()
			if kind.old {
				base = old.URL
			}
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
				body := get(b, base, path)
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
			cursors[kind.path] = cursor
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

// engineReads is a Lister without api.StatesReader: the API reads each
// row's reservation through the engine.
type engineReads struct{ r eventstore.Reader }

func (l engineReads) List(ctx context.Context, f reservation.ListFilter, o reservation.ListOptions) (reservation.ListPage, error) {
	return l.r.List(ctx, f, o)
}
