package journal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"refundd/journal"
)

// benchData makes each stored record about 216 bytes, the size the layout
// in docs/BENCHMARKS.md was measured with.
var benchData = make([]byte, 180)

// runWriters runs b.N appends split over writers goroutines, each taking
// the next unit of work from a shared counter, and reports events/s.
func runWriters(b *testing.B, writers int, appendOne func(w int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := appendOne(w); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// BenchmarkAppend measures the group-committing journal, fsync on: each
// writer appends one event per call to its own stream.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			db, err := journal.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			heads := make([]uint64, writers) // each owned by one writer goroutine
			ctx := context.Background()
			runWriters(b, writers, func(w int) error {
				last, err := db.Append(ctx, journal.AppendRequest{
					Stream:   fmt.Sprintf("reservation-%03d", w),
					Expected: heads[w],
					Events:   []journal.Event{{Type: "refund.requested", Version: 1, Data: benchData}},
				})
				heads[w] = last
				return err
			})
		})
	}
}

// BenchmarkAppendOneTxPerEvent is the baseline: a plain bbolt Update per
// event, writing the same log and head entries, on the same file system.
func BenchmarkAppendOneTxPerEvent(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			bdb, err := bolt.Open(filepath.Join(b.TempDir(), "baseline.db"), 0o600, &bolt.Options{Timeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer bdb.Close()
			if err := bdb.Update(func(tx *bolt.Tx) error {
				for _, name := range []string{"log", "heads"} {
					if _, err := tx.CreateBucket([]byte(name)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			value := make([]byte, 216)
			runWriters(b, writers, func(w int) error {
				stream := []byte(fmt.Sprintf("reservation-%03d", w))
				return bdb.Update(func(tx *bolt.Tx) error {
					log := tx.Bucket([]byte("log"))
					g, err := log.NextSequence()
					if err != nil {
						return err
					}
					if err := log.Put(be64(g), value); err != nil {
						return err
					}
					return tx.Bucket([]byte("heads")).Put(stream, be64(g))
				})
			})
		})
	}
}
