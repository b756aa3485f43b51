package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzSegmentReader feeds arbitrary bytes to the segment reader as a
// segment file: segments come back from object storage and copies, so
// they are outside input. A walk of the whole file and a read of one
// block at any offset must never panic, must end, and must refuse what
// they do not understand with ErrCorrupt (or ErrFormatTooNew).
func FuzzSegmentReader(f *testing.F) {
	seed := segmentSeed(f)
	f.Add(seed, int64(0))
	f.Add(seed, int64(len(seed)/2))
	f.Add(seed[:len(seed)-9], int64(0))
	f.Add([]byte{}, int64(0))
	f.Add([]byte{0x1f, 0x8b}, int64(1))
	path := filepath.Join(f.TempDir(), "f.seg")
	f.Fuzz(func(t *testing.T, b []byte, off int64) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		wantKind := func(err error) {
			if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFormatTooNew) {
				t.Fatalf("unexpected error kind: %v", err)
			}
		}
		r, err := OpenSegment(path)
		if err != nil {
			wantKind(err)
			return
		}
		defer r.Close()
		// walk reads to the end; a record takes at least a byte.
		walk := func(what string) {
			for n := 0; ; n++ {
				if _, _, ok := r.Next(); !ok {
					break
				}
				if n > len(b) {
					t.Fatalf("%s: %d records from %d bytes", what, n, len(b))
				}
			}
			wantKind(r.Err())
		}
		walk("the segment")
		if err := r.openBlock(off % int64(len(b)+1)); err != nil {
			if off >= 0 {
				wantKind(err)
			}
			return
		}
		walk("one block")
	})
}

// segmentSeed archives a few streams and returns their segment's bytes.
func segmentSeed(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "refundd.db")
	db, err := Open(path, &Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	var streams []string
	for seq := range 3 {
		for i := range 40 {
			s := fmt.Sprintf("s%d", i)
			if _, err := db.Append(context.Background(), AppendRequest{Stream: s, Expected: uint64(seq),
				Events: []Event{{Type: "t", Version: 1, Data: fmt.Appendf(nil, "%s-%d-%0900d", s, seq, i)}}}); err != nil {
				f.Fatal(err)
			}
			if seq == 0 {
				streams = append(streams, s)
			}
		}
	}
	if err := db.Close(); err != nil {
		f.Fatal(err)
	}
	res, err := ArchiveStreams(context.Background(), path, ArchiveDir(path), ArchivePlan{Streams: streams, Cutoff: time.Now()})
	if err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(res.SegmentPath)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
