package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestIndexTail_PartialFlushesSurviveACrash flushes one stream at a time
// (so streams younger than the watermark are often already indexed) and
// opens a consistent copy of the file after every append, as a crash at
// that moment would leave it: every stream must read back whole, Head
// must agree, and the copy must verify.
func TestIndexTail_PartialFlushesSurviveACrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(filepath.Join(dir, "j.db"), &Options{NoSync: true, IndexFlushEntries: 3, IndexFlushDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.flushStreams = 1 // set before the first append; only the committer reads it
	rng := rand.New(rand.NewPCG(1, 2))
	heads := map[string]uint64{}
	partial := 0
	for i := range 120 {
		s := fmt.Sprintf("s%d", rng.IntN(6))
		n := 1 + rng.IntN(3)
		events := make([]Event, n)
		for j := range events {
			events[j] = Event{Type: "t", Version: 1, Data: []byte(fmt.Sprintf("%d.%d", i, j))}
		}
		last, err := db.Append(ctx, AppendRequest{Stream: s, Expected: heads[s], Events: events})
		if err != nil {
			t.Fatal(err)
		}
		heads[s] = last

		copyPath := filepath.Join(dir, fmt.Sprintf("crash-%d.db", i))
		if _, err := db.BackupFile(ctx, copyPath); err != nil {
			t.Fatal(err)
		}
		c, err := Open(copyPath, &Options{NoSync: true, ReadOnly: true})
		if err != nil {
			t.Fatalf("append %d: open copy: %v", i, err)
		}
		var covered int
		if err := c.bolt.View(func(tx *bolt.Tx) (err error) {
			_, covered, err = loadTail(tx, newTail(), time.Now(), true)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if covered > 0 && len(c.tail.order) > 0 {
			partial++ // records past the watermark both indexed and not
		}
		for s, want := range heads {
			recs, err := c.Load(ctx, s, 0)
			if err != nil || uint64(len(recs)) != want {
				t.Fatalf("append %d: copy Load(%s) = %d records, %v; want %d", i, s, len(recs), err, want)
			}
			if h, err := c.Head(ctx, s); err != nil || h != want {
				t.Fatalf("append %d: copy Head(%s) = %d, %v; want %d", i, s, h, err, want)
			}
		}
		if err := c.Verify(ctx); err != nil {
			t.Fatalf("append %d: copy: %v", i, err)
		}
		_ = c.Close()
	}
	if db.indexFlushes.Load() == 0 || partial == 0 {
		t.Fatalf("%d index flushes, %d copies with a partly flushed tail: the test did not exercise the tail", db.indexFlushes.Load(), partial)
	}
}

// TestClose_FlushesTheWholeTail: a clean shutdown leaves nothing for the
// next Open to read from the log.
func TestClose_FlushesTheWholeTail(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	db, err := Open(path, &Options{NoSync: true, IndexFlushEntries: 1 << 20, IndexFlushDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := db.Append(ctx, AppendRequest{Stream: fmt.Sprintf("s%d", i%7), Expected: uint64(i / 7),
			Events: []Event{{Type: "t", Version: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := db.tail.entries; got != 50 {
		t.Fatalf("tail holds %d entries before Close, want 50 (nothing flushed)", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.tail.entries != 0 {
		t.Fatalf("tail holds %d entries after a clean Close and Open, want 0", db.tail.entries)
	}
	if err := db.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}
