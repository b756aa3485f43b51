package journal_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/refundd/refundd/journal"
)

// blockData is record seq (from 1) of stream s: about 600 bytes, so a
// few hundred streams fill several blocks of a segment.
func blockData(s string, seq int) string {
	return fmt.Sprintf("%s-%d-%s", s, seq, strings.Repeat(fmt.Sprintf("<%s:%d>", s, seq), 90))
}

// archivedBlocks writes 200 streams of 4 records, interleaved, and
// archives 150 of them (every fourth stays hot); it returns the file and
// the archived streams.
func archivedBlocks(t *testing.T) (string, []string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "refundd.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var move []string
	for seq := range 4 {
		for i := range 200 {
			s := fmt.Sprintf("s%03d", i)
			if _, err := db.Append(ctx, journal.AppendRequest{Stream: s, Expected: uint64(seq),
				Events: []journal.Event{{Type: "t", Version: 1, Data: []byte(blockData(s, seq+1))}}}); err != nil {
				t.Fatal(err)
			}
			if seq == 0 && i%4 != 3 {
				move = append(move, s)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.ArchiveStreams(ctx, path, journal.ArchiveDir(path), journal.ArchivePlan{Streams: move, Cutoff: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return path, move
}

func checkLoaded(recs []journal.Record, stream string) error {
	if len(recs) != 4 {
		return fmt.Errorf("%d records", len(recs))
	}
	for i, r := range recs {
		if r.Stream != stream || r.Seq != uint64(i+1) || string(r.Data) != blockData(stream, i+1) {
			return fmt.Errorf("record %d is %s/%d %.20q", i, r.Stream, r.Seq, r.Data)
		}
	}
	return nil
}

// A read of an archived stream decompresses the blocks its entry lists,
// and finds the same records as a walk of the segment.
func TestLoadArchived_ReadsItsBlocks(t *testing.T) {
	path, move := archivedBlocks(t)
	if got := checkWith(t, path, nil, true); !got.OK() {
		t.Fatalf("verify: %+v", got.Problems)
	}
	db, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a := &journal.Archive{Dir: db.ArchiveDir()}
	all := map[int64]bool{}
	for _, s := range move {
		at, ok, err := db.ArchivedStream(s)
		if err != nil || !ok {
			t.Fatalf("ArchivedStream(%s) = %v, %v", s, ok, err)
		}
		if len(at.Blocks) == 0 || len(at.Blocks) > 4 || !slices.IsSorted(at.Blocks) {
			t.Fatalf("%s: blocks %v", s, at.Blocks)
		}
		for _, b := range at.Blocks {
			all[b] = true
		}
		recs, err := a.Load(s, at)
		if err == nil {
			err = checkLoaded(recs, s)
		}
		if err != nil {
			t.Fatalf("Load(%s) by blocks: %v", s, err)
		}
		walked, err := a.Load(s, journal.ArchivedAt{Segment: at.Segment, Head: at.Head})
		if err == nil {
			err = checkLoaded(walked, s)
		}
		if err != nil {
			t.Fatalf("Load(%s) by walking: %v", s, err)
		}
	}
	if len(all) < 6 {
		t.Fatalf("the segment has %d blocks: the test needs several", len(all))
	}
}

// A damaged block outside a stream's blocks does not stop its read: the
// read touches nothing else of the segment.
func TestLoadArchived_OnlyItsBlocks(t *testing.T) {
	path, move := archivedBlocks(t)
	db, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	entries := map[string]journal.ArchivedAt{}
	for _, s := range move {
		at, _, err := db.ArchivedStream(s)
		if err != nil {
			t.Fatal(err)
		}
		entries[s] = at
	}
	// The first data block, and a stream that has nothing in it.
	first := entries[move[0]].Blocks[0]
	var clear string
	for _, s := range move {
		if entries[s].Blocks[0] > first {
			clear = s
			break
		}
	}
	if clear == "" {
		t.Fatal("every stream has a record in the first block")
	}
	seg := filepath.Join(db.ArchiveDir(), entries[move[0]].Segment)
	if err := os.Chmod(seg, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	for i := first + 100; i < first+200; i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	recs, _, err := db.LoadArchived(context.Background(), clear)
	if err == nil {
		err = checkLoaded(recs, clear)
	}
	if err != nil {
		t.Fatalf("read of %s, which has no record in the damaged block: %v", clear, err)
	}
	if _, _, err := db.LoadArchived(context.Background(), move[0]); err == nil {
		t.Fatalf("read of %s, which has a record in the damaged block, succeeded", move[0])
	}
}

// An archived entry whose blocks do not match the segment fails the read
// of its stream, and verify says so first; an entry without blocks (as
// written before blocks) is read by walking the segment.
func TestArchivedEntry_Damage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(head uint64, segment string, blocks []int64) []byte
		loadErr bool
		problem string // "" for a journal that verifies
	}{
		{"as written", func(h uint64, seg string, bs []int64) []byte { return entry(h, seg, bs) }, false, ""},
		{"without blocks", func(h uint64, seg string, _ []int64) []byte { return entry(h, seg, nil) }, false, ""},
		{"a block left out", func(h uint64, seg string, bs []int64) []byte { return entry(h, seg, bs[1:]) }, true, "does not list"},
		{"an offset not a block", func(h uint64, seg string, bs []int64) []byte {
			return entry(h, seg, append([]int64{bs[0] + 1}, bs[1:]...))
		}, true, "does not list"},
		{"a block list that does not decode", func(h uint64, seg string, _ []int64) []byte {
			return append(entry(h, seg, nil), 0, 0xff)
		}, false, "does not decode"},
		{"another segment", func(h uint64, _ string, bs []int64) []byte { return entry(h, "2020-01.seg", bs) }, true, "names 2020-01.seg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, move := archivedBlocks(t)
			s := move[len(move)/2]
			at, _ := archivedStream(t, path, s)
			if len(at.Blocks) < 2 {
				t.Fatalf("%s has blocks %v: the test needs two", s, at.Blocks)
			}
			bdb, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = bdb.Update(func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("archived")).Put([]byte(s), tc.change(at.Head, at.Segment, at.Blocks))
			})
			if cerr := bdb.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}

			got := checkWith(t, path, nil, true)
			var msgs []string
			for _, p := range got.Problems {
				msgs = append(msgs, p.Message)
			}
			switch {
			case tc.problem == "" && !got.OK():
				t.Errorf("verify: %v", msgs)
			case tc.problem != "" && !strings.Contains(strings.Join(msgs, "\n"), tc.problem):
				t.Errorf("verify says %q, want a problem with %q", msgs, tc.problem)
			}

			db, err := journal.Open(path, &journal.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			recs, _, err := db.LoadArchived(context.Background(), s)
			if err == nil {
				err = checkLoaded(recs, s)
			}
			if tc.loadErr != (err != nil) {
				t.Errorf("read of %s: %v (want an error: %v)", s, err, tc.loadErr)
			}
		})
	}
}

// entry encodes an archived entry as the journal does
// (journal/archive.go): be64(head) || segment [|| 0 || uvarint deltas].
func entry(head uint64, segment string, blocks []int64) []byte {
	v := binary.BigEndian.AppendUint64(nil, head)
	v = append(v, segment...)
	if len(blocks) == 0 {
		return v
	}
	v = append(v, 0)
	var prev int64
	for _, b := range blocks {
		v = binary.AppendUvarint(v, uint64(b-prev))
		prev = b
	}
	return v
}

// An archival stopped part way (here: canceled once the copy of the
// next generation has begun) leaves the journal as it was and no partial
// next generation.
func TestArchiveStreams_CanceledLeavesNoNext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refundd.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	streams := []string{"a", "b", "c", "d"}
	writeStreams(t, db, streams, 3)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = journal.ArchiveStreams(ctx, path, journal.ArchiveDir(path), journal.ArchivePlan{
		Streams: []string{"a", "c"}, Cutoff: time.Now(),
		Progress: func(stage string, _ uint64) {
			if stage == "generation" {
				cancel()
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ArchiveStreams canceled: %v", err)
	}
	if _, err := os.Stat(path + ".next"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a partial next generation is left: %v", err)
	}
	if got := checkWith(t, path, nil, false); !got.OK() || got.Records != 12 || got.Archived != 0 {
		t.Fatalf("the journal after a canceled archival: %+v", got)
	}
}
