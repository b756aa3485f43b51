package journal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

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

// TestCommit_MarksWaitInTheTail: an append's marks and counter changes are
// one value of the pending bucket, not writes to the marks and counters
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
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	if _, err := db.BackupFile(ctx, crashed); err != nil {
		t.Fatal(err)
	}
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

// TestOpen_DamagedPending: a pending value that does not decode stops a
// writer from opening the file (its changes would be lost under new ones)
// and is skipped by a read-only open, so the file can still be examined.
func TestOpen_DamagedPending(t *testing.T) {
	ctx := context.Background()
	db, path, opts := appendPending(t, 2, func(i int) ([]Mark, []Counter) { return []Mark{{Key: fmt.Sprintf("k%d", i)}}, nil })
	// The file as a crash leaves it (the tail not flushed), with one
	// pending value damaged.
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	if _, err := db.BackupFile(ctx, crashed); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	path = crashed
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketPending).Put(be64(1), []byte{0xff}) })
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
