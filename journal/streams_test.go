package journal_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/refundd/refundd/journal"
)

// TestForEachStream_IndexAndTail: every stream comes once, in name order,
// with all its records in seq order, whether they are in the streams index
// or still in the index tail (not flushed yet), and a stream whose records
// are all in the tail too.
func TestForEachStream_IndexAndTail(t *testing.T) {
	tests := []struct {
		name  string
		flush bool // flush the index before appending the tail
	}{
		{"all in the tail", false},
		{"index then tail", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{NoSync: true,
				IndexFlushEntries: 1 << 20, IndexFlushDelay: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			want := map[string]int{}
			appendTo := func(stream string, n int) {
				t.Helper()
				for range n {
					if _, err := db.Append(bg, journal.AppendRequest{Stream: stream, Expected: uint64(want[stream]),
						Events: []journal.Event{{Type: "t", Version: 1, Data: []byte(fmt.Sprint(want[stream]))}}}); err != nil {
						t.Fatal(err)
					}
					want[stream]++
				}
			}
			appendTo("b", 2)
			appendTo("a", 3)
			appendTo("a-b", 1)
			if tt.flush {
				// Reopening flushes the tail into the index.
				path := db.Path()
				db.Close()
				if db, err = journal.Open(path, &journal.Options{NoSync: true, IndexFlushEntries: 1 << 20, IndexFlushDelay: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			appendTo("a", 2)
			appendTo("c", 1) // only in the tail
			var names []string
			err = db.ForEachStream(bg, func(sr journal.StreamRecords) error {
				names = append(names, sr.Stream)
				if sr.Unreadable != 0 || len(sr.Records) != want[sr.Stream] {
					t.Errorf("%s: %d records (%d unreadable), want %d", sr.Stream, len(sr.Records), sr.Unreadable, want[sr.Stream])
				}
				for i, r := range sr.Records {
					if r.Stream != sr.Stream || r.Seq != uint64(i+1) || string(r.Data) != fmt.Sprint(i) {
						t.Errorf("%s record %d: %+v", sr.Stream, i, r)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if wantNames := []string{"a", "a-b", "b", "c"}; !slices.Equal(names, wantNames) {
				t.Fatalf("streams %q, want %q", names, wantNames)
			}
		})
	}
}

// TestScanStreams_HeadsInFileOrder: ScanStreams gives every record in
// global order with its stream's head, whether the head is in the streams
// index (flushed) or only in the index tail.
func TestScanStreams_HeadsInFileOrder(t *testing.T) {
	for _, flushed := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "j.db")
		db, err := journal.Open(path, &journal.Options{NoSync: true, IndexFlushEntries: 1 << 20, IndexFlushDelay: -1})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]uint64{}
		for i := range 30 {
			s := "s" + string(rune('a'+i%4))
			if _, err := db.Append(bg, journal.AppendRequest{Stream: s, Expected: want[s], Events: []journal.Event{{Type: "t", Version: 1}}}); err != nil {
				t.Fatal(err)
			}
			want[s]++
		}
		if flushed {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = journal.Open(path, &journal.Options{ReadOnly: true}); err != nil {
				t.Fatal(err)
			}
		}
		var last uint64
		err = db.ScanStreams(bg, func(_ *journal.StreamScan, r journal.Record, head uint64) error {
			if r.Global != last+1 || head != want[r.Stream] {
				t.Fatalf("flushed=%v: global %d after %d, stream %s head %d, want %d", flushed, r.Global, last, r.Stream, head, want[r.Stream])
			}
			last = r.Global
			return nil
		}, func(g uint64, err error) error { t.Fatalf("bad record %d: %v", g, err); return nil }, func(sc *journal.StreamScan) error {
			// Read again whole, in the walk's snapshot: each stream's
			// records, and the stream whose head is the last record.
			for s, n := range want {
				sr := sc.Stream(s)
				if len(sr.Records) != int(n) || sr.Unreadable != 0 || sr.Records[n-1].Seq != n {
					t.Fatalf("flushed=%v: Stream(%s) = %d records (%d unreadable), want %d", flushed, s, len(sr.Records), sr.Unreadable, n)
				}
			}
			if got := sc.HeadsAt([]uint64{30, 29, 1}); !slices.Equal(got, []string{"sa", "sb"}) {
				t.Fatalf("flushed=%v: HeadsAt(30, 29, 1) = %v, want [sa sb]", flushed, got)
			}
			return nil
		})
		if err != nil || last != 30 {
			t.Fatalf("flushed=%v: ScanStreams: %v, last global %d", flushed, err, last)
		}
		db.Close()
	}
}
