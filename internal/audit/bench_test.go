package audit_test

import (
	"os"
	"testing"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/journal"
)

// historyFile opens $HISTORY_FILE read-only (a journal written by
// cmd/refundd's TestWriteHistoryFile), or skips.
func historyFile(b *testing.B) *journal.DB {
	path := os.Getenv("HISTORY_FILE")
	if path == "" {
		b.Skip("set HISTORY_FILE to a journal (cmd/refundd TestWriteHistoryFile writes one)")
	}
	db, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkVerifyFile verifies a large journal; with -memprofile it shows
// what Verify holds in memory (docs/BENCHMARKS.md).
//
//	HISTORY_FILE=/tmp/h.db go test -run='^$' -bench=VerifyFile -benchtime=1x -memprofile=mem.out ./internal/audit/
func BenchmarkVerifyFile(b *testing.B) {
	db := historyFile(b)
	for range b.N {
		rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
		if err != nil || !rep.OK() {
			b.Fatalf("verify: %v %+v", err, rep)
		}
	}
}

// BenchmarkStatsFile computes the figures of a large journal.
func BenchmarkStatsFile(b *testing.B) {
	db := historyFile(b)
	for range b.N {
		if _, err := audit.ComputeStats(bg, db, audit.StatsOptions{Fold: true}); err != nil {
			b.Fatal(err)
		}
	}
}
