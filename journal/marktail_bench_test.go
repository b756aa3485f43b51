package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkMarkFlush times one mark flush of a second of the pinned
// lifecycle (about 2,500 reservations, 14 mark changes each: list rows set
// and replaced as the refund moves, search keys, attention keys cleared;
// a tenth of the refunds answered in the next second, their rows moving
// among rows already flushed; 250 older reservations whose row is
// replaced) over a marks bucket that already holds twenty such flushes. The flush
// is the committer's longest transaction, and every append waits for it.
// NoSync: this is the write phase, the CPU the committer spends, not the
// disk's flush.
func BenchmarkMarkFlush(b *testing.B) {
	const perFlush = 2500
	db, err := Open(filepath.Join(b.TempDir(), "j.db"), &Options{NoSync: true, MarkFlushDelay: -1, MarkFlushEntries: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	n := 0          // reservations so far; a later one sorts first, as list rows do
	ver := []int{0} // the version of each reservation's row
	resRow := func(i, v int) string {
		return fmt.Sprintf("list/reservation/default/%016x/r%08d/ACCEPTED/%016x/%016x/%016x", ^uint64(i), i, 1000, v, v)
	}
	refundRow := func(i int, state string, v int) string {
		return fmt.Sprintf("list/refund/default/%s/%016x/r%08d/T-r%08d-1/%016x/%016x/", state, ^uint64(i), i, i, 100, v)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	updates := 0
	var late []int // reservations whose refund's answer comes in the next second
	appendMarks := func(marks []Mark) {
		updates++ // a stream each: Append checks the stream's head
		if _, err := db.Append(ctx, AppendRequest{Stream: fmt.Sprintf("s%d", updates), Events: []Event{{Type: "t", Version: 1}}, Marks: marks}); err != nil {
			b.Fatal(err)
		}
	}
	second := func() {
		// The answers that came late: the refund's row moves from
		// PROCESSING to SUCCEEDED, where it stands by its request time,
		// among rows an earlier flush wrote.
		for _, i := range late {
			appendMarks([]Mark{{Key: resRow(i, 1), Clear: true}, {Key: resRow(i, 2)},
				{Key: refundRow(i, "PROCESSING", 1), Clear: true}, {Key: refundRow(i, "SUCCEEDED", 2)}})
			ver[i] = 2
		}
		late = late[:0]
		for range perFlush {
			n++
			id := fmt.Sprintf("r%08d", n)
			marks := []Mark{
				{Key: resRow(n, 0)}, {Key: "search/user_id/default/u" + id + "/" + id + "/"}, {Key: "search/transaction_id/default/t" + id + "/" + id + "/"},
				{Key: resRow(n, 0), Clear: true}, {Key: resRow(n, 1)}, {Key: refundRow(n, "PROCESSING", 1)},
				{Key: "attention/UNKNOWN/" + id + "/T-" + id + "-1", Clear: true}, {Key: "attention/REJECTED/" + id + "/T-" + id + "-1", Clear: true},
			}
			ver = append(ver, 1)
			if n%10 == 0 { // a tenth are answered in the next second
				late = append(late, n)
			} else {
				marks = append(marks, Mark{Key: resRow(n, 1), Clear: true}, Mark{Key: resRow(n, 2)},
					Mark{Key: refundRow(n, "PROCESSING", 1), Clear: true}, Mark{Key: refundRow(n, "SUCCEEDED", 2)},
					Mark{Key: "attention/stuck/" + id + "/T-" + id + "-1", Clear: true},
					Mark{Key: "search/refund_id/default/w" + id + "/" + id + "/T-" + id + "-1"})
				ver[n] = 2
			}
			appendMarks(marks)
		}
		// A tenth as many older reservations change too (a later refund):
		// their row is replaced where it stands.
		for range perFlush / 10 {
			i := 1 + rng.IntN(n)
			appendMarks([]Mark{{Key: resRow(i, ver[i]), Clear: true}, {Key: resRow(i, ver[i]+1)}})
			ver[i]++
		}
	}
	for range 20 {
		second()
		if err := db.flushMarks(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var written int64 // pages the flushes wrote
	for range b.N {
		b.StopTimer()
		second()
		st := db.bolt.Stats()
		w := st.TxStats.GetWrite()
		b.StartTimer()
		if err := db.flushMarks(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		st = db.bolt.Stats()
		written += st.TxStats.GetWrite() - w
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(written)/float64(b.N), "pages/flush")
	// What the flushes leave on disk: the marks bucket's pages per
	// reservation (each keeps 5 keys of some 100 bytes) and how full
	// its leaves are.
	err = db.bolt.View(func(tx *bolt.Tx) error {
		st := tx.Bucket(bucketMarks).Stats()
		pages := st.LeafPageN + st.LeafOverflowN + st.BranchPageN + st.BranchOverflowN
		b.ReportMetric(float64(pages*db.bolt.Info().PageSize)/float64(n), "bytes/reservation")
		b.ReportMetric(100*float64(st.LeafInuse)/float64(st.LeafAlloc), "%leaf-fill")
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
