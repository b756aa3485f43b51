package pgjournal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// The PostgreSQL journal against the bbolt journal, in the same run, at
// 1/8/64 concurrent writers, each appending one ~180-byte event at a time
// to its own stream, durably (bbolt fsyncs every commit; the server runs
// with fsync and synchronous_commit on, which the benchmark checks):
//
//	export REFUNDD_TEST_POSTGRES=$(scripts/start-postgres)
//	go test -run='^$' -bench=Append -benchtime=3s ./journal/pgjournal/
//
// events/commit is how many appends the group committer put in one
// transaction on average.

var benchData = make([]byte, 180)

// appender is what the benchmark needs of either journal.
type appender interface {
	Append(ctx context.Context, req journal.AppendRequest) (uint64, error)
}

func BenchmarkAppend(b *testing.B) {
	for _, backend := range []string{"bolt", "postgres"} {
		for _, writers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("backend=%s/writers=%d", backend, writers), func(b *testing.B) {
				var commits atomic.Int64
				onCommit := func(journal.CommitInfo) { commits.Add(1) }
				streams := make([]string, writers)
				for w := range streams {
					streams[w] = fmt.Sprintf("reservation-%03d", w)
				}
				var db appender
				switch backend {
				case "bolt":
					j, err := journal.Open(filepath.Join(b.TempDir(), "j.db"), &journal.Options{OnCommit: onCommit})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = j.Close() })
					db = j
				case "postgres":
					s := pgtest.New(b)
					checkDurable(b, s)
					j := s.Open(b, &pgjournal.Options{OnCommit: onCommit})
					for _, st := range streams {
						if _, err := j.Activate(context.Background(), st); err != nil {
							b.Fatal(err)
						}
					}
					db = j
				}
				runWriters(b, db, streams, &commits)
			})
		}
	}
}

func runWriters(b *testing.B, db appender, streams []string, commits *atomic.Int64) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	commits.Store(0)
	start := time.Now()
	for _, stream := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var head uint64
			for next.Add(1) <= int64(b.N) {
				last, err := db.Append(ctx, journal.AppendRequest{Stream: stream, Expected: head,
					Events: []journal.Event{{Type: "refund.requested", Version: 1, Data: benchData}}})
				if err != nil {
					b.Error(err)
					return
				}
				head = last
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	if c := commits.Load(); c > 0 {
		b.ReportMetric(float64(b.N)/float64(c), "events/commit")
	}
}

// checkDurable fails the benchmark if the server would acknowledge
// commits before they are on disk.
func checkDurable(b *testing.B, s *pgtest.Store) {
	b.Helper()
	ctx := context.Background()
	s.Open(b, nil) // creates the schema the connection uses
	conn := connectTB(b, s)
	for _, setting := range []string{"fsync", "synchronous_commit"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&v); err != nil {
			b.Fatal(err)
		}
		if v != "on" {
			b.Fatalf("server runs with %s = %s; the comparison needs it on", setting, v)
		}
	}
}
