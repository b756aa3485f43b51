package journal_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

func TestBackupFile_UnderConcurrentAppends(t *testing.T) {
	db := journaltest.OpenWith(t, &journal.Options{NoSync: true, CheckpointEvery: 50})
	ctx, cancel := context.WithCancel(bg)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("w%d", w)
			var seq uint64
			for ctx.Err() == nil {
				_, err := db.Append(bg, journal.AppendRequest{Stream: stream, Expected: seq,
					Events: []journal.Event{ev("t", fmt.Sprint(seq+1)), ev("u", "")},
					Claims: []journal.Claim{{Namespace: "n", Key: fmt.Sprintf("%s-%d", stream, seq)}}})
				if err != nil {
					t.Error(err)
					return
				}
				seq += 2
			}
		}()
	}
	// Take backups while the writers run, waiting for progress between them.
	var heads []journal.Checkpoint
	var paths []string
	for i := range 3 {
		if err := db.WaitGlobal(bg, uint64(40*(i+1))); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), fmt.Sprintf("backup-%d.db", i))
		head, err := db.BackupFile(bg, p)
		if err != nil {
			t.Fatal(err)
		}
		heads, paths = append(heads, head), append(paths, p)
	}
	cancel()
	wg.Wait()

	live, err := db.Scan(bg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range paths {
		b, err := journal.Open(p, &journal.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Check(bg, nil)
		if err != nil || !res.OK() {
			t.Fatalf("backup %d: %v %+v", i, err, res.Problems)
		}
		if res.Head.Global != heads[i].Global || res.Head.Hash != heads[i].Hash {
			t.Fatalf("backup %d: head %+v, BackupFile said %+v", i, res.Head, heads[i])
		}
		// The backup is a prefix of the live journal: same records, same chain.
		recs, err := b.Scan(bg, 0, 0)
		b.Close()
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(recs)) != heads[i].Global {
			t.Fatalf("backup %d holds %d records, head says %d", i, len(recs), heads[i].Global)
		}
		assertRecords(t, "backup", recs, live[:len(recs)])
		for j := range recs {
			if recs[j].Hash != live[j].Hash {
				t.Fatalf("backup %d global %d: hash differs from the live journal", i, recs[j].Global)
			}
		}
		// Every backup also verifies against the live journal: its head is
		// on the live chain.
		res, err = db.Check(bg, &journal.CheckOptions{Heads: []journal.Checkpoint{heads[i]}})
		if err != nil || !res.OK() || res.HeadsMatched != 1 {
			t.Fatalf("backup %d head not on the live chain: %v %+v", i, err, res.Problems)
		}
	}
}

func TestSnapshot_SizeAndContent(t *testing.T) {
	db := journaltest.Open(t)
	appendN(t, db, "s", 5)
	snap, err := db.Snapshot(bg)
	if err != nil {
		t.Fatal(err)
	}
	// An append after the snapshot is not in it. It may have to wait for
	// the snapshot to close (when the file must grow, bbolt remaps it only
	// once no read transaction is open), so it runs on its own.
	appended := make(chan error, 1)
	go func() {
		_, err := db.Append(bg, journal.AppendRequest{Stream: "s", Expected: 5, Events: []journal.Event{ev("t", "late")}})
		appended <- err
	}()
	var buf bytes.Buffer
	n, err := snap.WriteTo(&buf)
	if err != nil || n != snap.Size() || int64(buf.Len()) != snap.Size() {
		t.Fatalf("WriteTo = %d, %v; Size %d, wrote %d", n, err, snap.Size(), buf.Len())
	}
	if snap.Head().Global != 5 {
		t.Fatalf("snapshot head %d, want 5", snap.Head().Global)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if err := snap.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "b.db")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := journal.Open(p, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if last, _ := b.LastGlobal(bg); last != 5 {
		t.Fatalf("backup last global %d, want 5", last)
	}
}
