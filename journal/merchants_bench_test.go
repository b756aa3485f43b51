package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// BenchmarkCommitMerchants appends what a refund's settlement appends in
// refundd (one event; its list rows moved from PROCESSING to SUCCEEDED;
// global, per-merchant and per-hour counters) from 64 writers, spread over
// one merchant or over 100, and reports the bbolt pages each commit writes
// and the bytes (write calls; Linux) each commit writes: keys partitioned by
// merchant dirty a page per merchant per commit unless they wait in the mark
// tail, and the tail's pending values must not be rewritten by every commit.
//
//	go test -run='^$' -bench=CommitMerchants -benchtime=20000x ./journal/
func BenchmarkCommitMerchants(b *testing.B) {
	for _, merchants := range []int{1, 100} {
		b.Run(fmt.Sprintf("merchants=%d", merchants), func(b *testing.B) {
			ctx := context.Background()
			db, err := Open(filepath.Join(b.TempDir(), "j.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			data := make([]byte, 480)
			var next sync.Mutex
			n := 0
			take := func() (int, bool) {
				next.Lock()
				defer next.Unlock()
				if n >= b.N {
					return 0, false
				}
				n++
				return n, true
			}
			req := func(i int) AppendRequest {
				m := fmt.Sprintf("m%03d", i%merchants)
				id := fmt.Sprintf("res-%08d", i)
				at := fmt.Sprintf("%016x", ^uint64(i))
				row := func(kind, state string) string {
					return "list/" + kind + "/" + m + "/" + state + "/" + at + "/" + id + "/" + id + "-1/0000000000002710/0000000000000000/"
				}
				return AppendRequest{Stream: id, Events: []Event{{Type: "refund.result", Version: 1, Data: data}},
					Marks: []Mark{
						{Key: row("refund", "PROCESSING"), Clear: true}, {Key: row("refund", "SUCCEEDED")},
						{Key: row("reservation", "PAID"), Clear: true}, {Key: row("reservation", "REFUNDED")},
					},
					Counters: []Counter{
						{Key: "refunded", Add: 10000}, {Key: "in_flight", Add: -10000}, {Key: "events/refund.result", Add: 1},
						{Key: "refund_state/PROCESSING", Add: -1}, {Key: "refund_state/SUCCEEDED", Add: 1},
						{Key: "merchant/" + m + "/refunded", Add: 10000}, {Key: "merchant/" + m + "/in_flight", Add: -10000},
						{Key: "totals/2026120512/" + m + "/PROCESSING/fen", Add: -10000}, {Key: "totals/2026120512/" + m + "/SUCCEEDED/fen", Add: 10000},
						{Key: "totals/2026120512/" + m + "/PROCESSING/refunds", Add: -1}, {Key: "totals/2026120512/" + m + "/SUCCEEDED/refunds", Add: 1},
						{Key: "latest", Add: int64(i), Max: true},
					}}
			}
			// A journal that has run a while: every merchant's rows and
			// counters exist, over several pages.
			for i := range 20000 {
				if _, err := db.Append(ctx, req(-i-1)); err != nil {
					b.Fatal(err)
				}
			}
			w0, c0, by0 := pagesWritten(db.bolt), db.commits.Load(), bytesWritten()
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i, ok := take(); ok; i, ok = take() {
						if _, err := db.Append(ctx, req(i)); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			commits := db.commits.Load() - c0
			b.ReportMetric(float64(pagesWritten(db.bolt)-w0)/float64(commits), "pages/commit")
			if by0 >= 0 {
				b.ReportMetric(float64(bytesWritten()-by0)/float64(commits), "bytes/commit")
			}
			b.ReportMetric(float64(b.N)/float64(commits), "appends/commit")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

// bytesWritten is what this process has passed to write calls (wchar of
// /proc/self/io), or -1 where that is not to be had.
func bytesWritten() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}
