package journal

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketLen counts the keys of a bucket of the file as it is committed.
func bucketLen(t *testing.T, db *DB, name []byte) int {
	t.Helper()
	n := 0
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(name).ForEach(func(_, _ []byte) error { n++; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// crashCopy is db's file as a crash would leave it now, the mark tail not
// flushed: a copy of what is committed.
func crashCopy(t *testing.T, db *DB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crashed.db")
	if _, err := db.BackupFile(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCommit_MarksWaitInTheTail: an append's marks and counter changes are
// values of the pending bucket, not writes to the marks and counters
// buckets (a page per merchant there: the cost the tail removes); reads
// see them at once, a flush moves them, and a reopen finds what was
// pending.
// appendPending opens a journal that flushes its mark tail only at Close
// and appends n one-event requests, request i carrying the marks and
// counters mark(i) gives.
func appendPending(t *testing.T, n int, mark func(i int) ([]Mark, []Counter)) (*DB, string, *Options) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	opts := &Options{NoSync: true, MarkFlushDelay: -1}
	db, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		marks, counters := mark(i)
		_, err := db.Append(context.Background(), AppendRequest{Stream: fmt.Sprintf("s%d", i), Events: []Event{{Type: "t", Version: 1}},
			Marks: marks, Counters: counters})
		if err != nil {
			t.Fatal(err)
		}
	}
	return db, path, opts
}

func TestCommit_MarksWaitInTheTail(t *testing.T) {
	ctx := context.Background()
	db, _, opts := appendPending(t, 10, func(i int) ([]Mark, []Counter) {
		return []Mark{{Key: fmt.Sprintf("list/m%d/row", i)}}, []Counter{{Key: "n", Add: 1}, {Key: fmt.Sprintf("merchant/m%d", i), Add: 5}}
	})
	if n := bucketLen(t, db, bucketMarks); n != 0 {
		t.Errorf("marks bucket holds %d keys before a flush, want 0", n)
	}
	if n := bucketLen(t, db, bucketCounters); n != 0 {
		t.Errorf("counters bucket holds %d keys before a flush, want 0", n)
	}
	if n := bucketLen(t, db, bucketPending); n != 10 {
		t.Errorf("pending bucket holds %d values, want one per commit (10)", n)
	}
	checkReads := func(db *DB, when string) {
		t.Helper()
		keys, err := db.Marks(ctx, "list/", "", 0)
		if err != nil || len(keys) != 10 || keys[0] != "list/m0/row" {
			t.Fatalf("%s: Marks = %q, %v; want the 10 rows", when, keys, err)
		}
		cs, err := db.Counters(ctx)
		if err != nil || cs.Values["n"] != 10 || cs.Values["merchant/m3"] != 5 || cs.LastGlobal != 10 {
			t.Fatalf("%s: Counters = %+v, %v; want n 10, merchant/m3 5 at 10", when, cs, err)
		}
	}
	checkReads(db, "pending")

	// A crash: the file as committed, opened again, reads the same.
	crashed := crashCopy(t, db)
	c, err := Open(crashed, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkReads(c, "after a crash")
	_ = c.Close()

	if err := db.flushMarks(); err != nil {
		t.Fatal(err)
	}
	if got := []int{bucketLen(t, db, bucketMarks), bucketLen(t, db, bucketCounters), bucketLen(t, db, bucketPending)}; !slices.Equal(got, []int{10, 11, 0}) {
		t.Errorf("after a flush: marks, counters, pending = %v, want [10 11 0]", got)
	}
	checkReads(db, "flushed")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPending_RoundTrip: what a commit leaves in the pending bucket reads
// back as it was written, and damage is ErrCorrupt, never a panic.
func TestPending_RoundTrip(t *testing.T) {
	p := &pendingChange{tip: 42, marks: []Mark{{Key: "a"}, {Key: "b", Clear: true}}}
	p.counts.put([]Counter{{Key: "n", Add: -3}, {Key: "latest", Add: 1 << 40, Max: true}})
	v := encodePending(p)
	got, err := decodePending(v)
	if err != nil {
		t.Fatal(err)
	}
	if got.tip != 42 || !slices.Equal(got.marks, p.marks) || got.counts.add["n"] != -3 || got.counts.max["latest"] != 1<<40 {
		t.Fatalf("decoded %+v, want %+v", got, p)
	}
	for i := range v {
		if _, err := decodePending(v[:i]); err == nil {
			t.Errorf("a value cut at %d of %d decoded", i, len(v))
		}
	}
}

// TestPending_CommitsKeepTheirPages: a commit's pending changes stay on the
// pages their commit wrote, and what a crash leaves reads back whole. As
// values of one bucket, a commit's changes (some 13 KB at the lifecycle's
// batches) sat with up to three others on a leaf bbolt does not split
// (four entries or fewer), and every commit rewrote them all.
func TestPending_CommitsKeepTheirPages(t *testing.T) {
	ctx := context.Background()
	const commits, marks = 8, 130 // ~13 KB of marks per commit
	db, _, opts := appendPending(t, commits, func(i int) ([]Mark, []Counter) {
		var ms []Mark
		for j := range marks {
			ms = append(ms, Mark{Key: fmt.Sprintf("list/refund/1900000109/PROCESSING/%016x/res-%08d/T-res-%08d-1/%016x/", i*marks+j, i, i, j)})
		}
		return ms, []Counter{{Key: "refunds", Add: 1}}
	})
	defer db.Close()
	// roots is the page of each commit's changes, or a failure.
	roots := func() []uint64 {
		t.Helper()
		var out []uint64
		err := db.bolt.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketPending).ForEach(func(k, v []byte) error {
				if v != nil {
					return fmt.Errorf("pending %x is a value of %d bytes in the pending bucket's leaves", k, len(v))
				}
				out = append(out, uint64(tx.Bucket(bucketPending).Bucket(k).Root()))
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := roots()
	if len(first) != commits {
		t.Fatalf("%d commits left %d changes pending", commits, len(first))
	}
	if _, err := db.Append(ctx, AppendRequest{Stream: "late", Events: []Event{{Type: "t", Version: 1}}, Marks: []Mark{{Key: "list/late"}}}); err != nil {
		t.Fatal(err)
	}
	if got := roots(); !slices.Equal(got[:commits], first) {
		t.Errorf("a commit moved the earlier commits' changes: pages %v, then %v", first, got)
	}
	// What a crash leaves reads back whole.
	crashed := crashCopy(t, db)
	c, err := Open(crashed, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys, err := c.Marks(ctx, "list/", "", 0)
	if err != nil || len(keys) != commits*marks+1 {
		t.Fatalf("after a crash: %d marks, %v; want %d", len(keys), err, commits*marks+1)
	}
	cs, err := c.Counters(ctx)
	if err != nil || cs.Values["refunds"] != commits {
		t.Fatalf("after a crash: Counters = %+v, %v; want refunds %d", cs.Values, err, commits)
	}
}

// TestOpen_PendingValues: a file written before the pending bucket held a
// bucket per commit (its changes as values of the bucket, left by a crash)
// opens with them in the tail, beside changes of the new kind.
func TestOpen_PendingValues(t *testing.T) {
	ctx := context.Background()
	db, _, opts := appendPending(t, 1, func(int) ([]Mark, []Counter) {
		return []Mark{{Key: "new"}}, []Counter{{Key: "n", Add: 1}}
	})
	crashed := crashCopy(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(crashed, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := &pendingChange{tip: 1, marks: []Mark{{Key: "old"}, {Key: "new", Clear: true}}}
	old.counts.put([]Counter{{Key: "n", Add: 2}})
	// Before the new change in key order, as it would have been.
	err = bdb.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketPending).Put(be64(0), encodePending(old)) })
	_ = bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(crashed, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if keys, err := c.Marks(ctx, "", "", 0); err != nil || !slices.Equal(keys, []string{"new", "old"}) {
		t.Fatalf("Marks = %q, %v; want new (set after the old value cleared it) and old", keys, err)
	}
	if cs, err := c.Counters(ctx); err != nil || cs.Values["n"] != 3 {
		t.Fatalf("Counters = %+v, %v; want n 3", cs.Values, err)
	}
}

// TestOpen_DamagedPending: a pending value that does not decode stops a
// writer from opening the file (its changes would be lost under new ones)
// and is skipped by a read-only open, so the file can still be examined.
func TestOpen_DamagedPending(t *testing.T) {
	ctx := context.Background()
	db, path, opts := appendPending(t, 2, func(i int) ([]Mark, []Counter) { return []Mark{{Key: fmt.Sprintf("k%d", i)}}, nil })
	// The file as a crash leaves it (the tail not flushed), with one
	// pending value damaged.
	crashed := crashCopy(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	path = crashed
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPending).Bucket(be64(1)).Put(pendingValueKey, []byte{0xff})
	})
	_ = bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, opts); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open for writing: %v, want ErrCorrupt", err)
	}
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open read-only: %v", err)
	}
	defer ro.Close()
	if keys, err := ro.Marks(ctx, "", "", 0); err != nil || !slices.Equal(keys, []string{"k1"}) {
		t.Fatalf("Marks = %q, %v; want the undamaged value's k1", keys, err)
	}
}

// TestArchiveStreams_KeepsPending: the archival move of a file a crash left
// with changes pending keeps them, less the rows of the streams it archives
// (the move opens the journal first, and its Close writes the tail to the
// buckets, so the new generation is copied from buckets without nested
// ones).
func TestArchiveStreams_KeepsPending(t *testing.T) {
	ctx := context.Background()
	db, _, opts := appendPending(t, 4, func(i int) ([]Mark, []Counter) {
		return []Mark{{Key: fmt.Sprintf("list/s%d", i)}}, []Counter{{Key: "n", Add: 1}}
	})
	crashed := crashCopy(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(nil)
	_, err := ArchiveStreams(ctx, crashed, ArchiveDir(crashed), ArchivePlan{Streams: []string{"s0"},
		Cutoff: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), SigningKey: key, DropMarks: []string{"list/s0"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(crashed, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if keys, err := c.Marks(ctx, "list/", "", 0); err != nil || !slices.Equal(keys, []string{"list/s1", "list/s2", "list/s3"}) {
		t.Fatalf("after the move: Marks = %q, %v; want the pending rows but the archived stream's", keys, err)
	}
	if cs, err := c.Counters(ctx); err != nil || cs.Values["n"] != 4 {
		t.Fatalf("after the move: Counters = %+v, %v; want n 4", cs.Values, err)
	}
}

// encodePending is the pending value of p in a buffer of its own.
func encodePending(p *pendingChange) []byte { return appendPendingValue(nil, p) }
