package journal

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkAppend measures the group-committing journal, fsync on: each
// writer appends one event per call to its own stream.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			db, err := Open(filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			heads := make([]uint64, writers) // each owned by one writer goroutine
			ctx := context.Background()
			gcRun(b, writers, func(w int) error {
				last, err := db.Append(ctx, AppendRequest{
					Stream:   fmt.Sprintf("reservation-%03d", w),
					Expected: heads[w],
					Events:   []Event{{Type: "refund.requested", Version: 1, Data: gcData}},
				})
				heads[w] = last
				return err
			})
		})
	}
}

// BenchmarkAppendCounters is BenchmarkAppend with the counter changes the
// event store sends with a refund's request (ten, the running totals of
// stats), to measure what keeping the counters costs an append.
func BenchmarkAppendCounters(b *testing.B) {
	counters := []Counter{
		{Key: "reservations", Add: -1}, {Key: "paid", Add: -3000},
		{Key: "reservations", Add: 1}, {Key: "paid", Add: 3000},
		{Key: "refund_state/PROCESSING", Add: 1}, {Key: "refunds", Add: 1}, {Key: "in_flight", Add: 1000},
		{Key: "events/refund.requested", Add: 1}, {Key: "events/refund.submission_started", Add: 1},
		{Key: "latest", Add: time.Now().UnixNano(), Max: true},
	}
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			db, err := Open(filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			heads := make([]uint64, writers) // each owned by one writer goroutine
			ctx := context.Background()
			gcRun(b, writers, func(w int) error {
				last, err := db.Append(ctx, AppendRequest{
					Stream:   fmt.Sprintf("reservation-%03d", w),
					Expected: heads[w],
					Events:   []Event{{Type: "refund.requested", Version: 1, Data: gcData}},
					Counters: counters,
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
			gcRun(b, writers, func(w int) error {
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
