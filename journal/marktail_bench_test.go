package journal

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkMarkFlush times one mark flush of a second of the pinned
// lifecycle (about 2,500 reservations, 14 mark changes each: list rows set
// and replaced as the refund moves, search keys, attention keys cleared)
// over a marks bucket that already holds twenty such flushes. The flush
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
	n := 0 // reservations so far; a later one sorts first, as list rows do
	second := func() {
		for range perFlush {
			n++
			id := fmt.Sprintf("r%08d", n)
			pos := fmt.Sprintf("%016x/%s/", ^uint64(n), id)
			row := func(state string, v int) string {
				return fmt.Sprintf("list/refund/default/%s/%sT-%s-1/%016x/%016x/", state, pos, id, 100, v)
			}
			res := func(v int) string {
				return fmt.Sprintf("list/reservation/default/%sPAID/%016x/%016x/%016x", pos, 1000, v, v)
			}
			marks := []Mark{
				{Key: res(0)}, {Key: "search/user_id/default/u" + id + "/" + id + "/"}, {Key: "search/transaction_id/default/t" + id + "/" + id + "/"},
				{Key: res(0), Clear: true}, {Key: res(1)}, {Key: row("PROCESSING", 1)},
				{Key: "attention/UNKNOWN/" + id + "/T-" + id + "-1", Clear: true}, {Key: "attention/REJECTED/" + id + "/T-" + id + "-1", Clear: true},
				{Key: res(1), Clear: true}, {Key: res(2)}, {Key: row("PROCESSING", 1), Clear: true}, {Key: row("SUCCEEDED", 2)},
				{Key: "attention/stuck/" + id + "/T-" + id + "-1", Clear: true}, {Key: "search/refund_id/default/w" + id + "/" + id + "/T-" + id + "-1"},
			}
			if _, err := db.Append(ctx, AppendRequest{Stream: id, Events: []Event{{Type: "t", Version: 1}}, Marks: marks}); err != nil {
				b.Fatal(err)
			}
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
	for range b.N {
		b.StopTimer()
		second()
		b.StartTimer()
		if err := db.flushMarks(); err != nil {
			b.Fatal(err)
		}
	}
}
