package journal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

var bg = context.Background()

func ev(typ string, data string) journal.Event {
	return journal.Event{Type: typ, Version: 1, Data: []byte(data)}
}

func mustAppend(t testing.TB, db *journal.DB, req journal.AppendRequest) uint64 {
	t.Helper()
	last, err := db.Append(bg, req)
	if err != nil {
		t.Fatalf("append %q expected %d: %v", req.Stream, req.Expected, err)
	}
	return last
}

func TestAppend_RoundTrip(t *testing.T) {
	db := journaltest.Open(t)
	if last := mustAppend(t, db, journal.AppendRequest{Stream: "r-1", Events: []journal.Event{
		ev("refund.requested", "a"), {Type: "refund.approved", Version: 3, Data: nil},
	}, Claims: []journal.Claim{{Namespace: "refund_no", Key: "RF1"}}}); last != 2 {
		t.Fatalf("last = %d, want 2", last)
	}
	mustAppend(t, db, journal.AppendRequest{Stream: "r-2", Events: []journal.Event{ev("refund.requested", "b")},
		Claims: []journal.Claim{{Namespace: "out_trade_no", Key: "T2"}}})
	if last := mustAppend(t, db, journal.AppendRequest{Stream: "r-1", Expected: 2, Events: []journal.Event{ev("refund.sent", "c")}}); last != 3 {
		t.Fatalf("last = %d, want 3", last)
	}

	want1 := []journal.Record{
		{Global: 1, Stream: "r-1", Seq: 1, Type: "refund.requested", Version: 1, Data: []byte("a")},
		{Global: 2, Stream: "r-1", Seq: 2, Type: "refund.approved", Version: 3, Data: []byte{}},
		{Global: 4, Stream: "r-1", Seq: 3, Type: "refund.sent", Version: 1, Data: []byte("c")},
	}
	got, err := db.Load(bg, "r-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	assertRecords(t, "Load(r-1, 0)", got, want1)
	got, err = db.Load(bg, "r-1", 2)
	if err != nil {
		t.Fatal(err)
	}
	assertRecords(t, "Load(r-1, 2)", got, want1[2:])
	got, err = db.Load(bg, "nobody", 0)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Load(unknown) = %v, %v; want empty non-nil slice", got, err)
	}

	for stream, want := range map[string]uint64{"r-1": 3, "r-2": 1, "nobody": 0} {
		if h, err := db.Head(bg, stream); err != nil || h != want {
			t.Errorf("Head(%s) = %d, %v; want %d", stream, h, err, want)
		}
	}
	if g, err := db.LastGlobal(bg); err != nil || g != 4 {
		t.Fatalf("LastGlobal = %d, %v; want 4", g, err)
	}
	all, err := db.Scan(bg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertRecords(t, "Scan(0, all)", all, []journal.Record{want1[0], want1[1],
		{Global: 3, Stream: "r-2", Seq: 1, Type: "refund.requested", Version: 1, Data: []byte("b")}, want1[2]})
	page, err := db.Scan(bg, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	assertRecords(t, "Scan(1, 2)", page, all[1:3])

	if s, err := db.Lookup(bg, "refund_no", "RF1"); err != nil || s != "r-1" {
		t.Fatalf("Lookup(RF1) = %q, %v", s, err)
	}
	if s, err := db.Lookup(bg, "out_trade_no", "T2"); err != nil || s != "r-2" {
		t.Fatalf("Lookup(T2) = %q, %v", s, err)
	}
	if _, err := db.Lookup(bg, "refund_no", "T2"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("Lookup in wrong namespace: %v, want ErrNotFound", err)
	}
}

func assertRecords(t *testing.T, what string, got, want []journal.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d: %+v", what, len(got), len(want), got)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Global != w.Global || g.Stream != w.Stream || g.Seq != w.Seq || g.Type != w.Type ||
			g.Version != w.Version || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%s[%d] = %+v, want %+v", what, i, g, w)
		}
	}
}

func TestAppend_SequenceMismatch(t *testing.T) {
	tests := []struct {
		name     string
		stream   string
		expected uint64
		actual   uint64
	}{
		{"stale expected", "s", 1, 2},
		{"ahead expected", "s", 5, 2},
		{"new stream with nonzero expected", "fresh", 1, 0},
		{"existing stream with zero expected", "s", 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := journaltest.Open(t)
			mustAppend(t, db, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("a", ""), ev("b", "")}})
			_, err := db.Append(bg, journal.AppendRequest{Stream: tt.stream, Expected: tt.expected,
				Events: []journal.Event{ev("c", "")}, Claims: []journal.Claim{{Namespace: "n", Key: "k"}},
				Dues: []journal.Due{{At: time.Unix(10, 0)}}})
			var se *journal.SequenceError
			if !errors.As(err, &se) || !errors.Is(err, journal.ErrSequenceMismatch) {
				t.Fatalf("err = %v, want *SequenceError", err)
			}
			if se.Stream != tt.stream || se.Expected != tt.expected || se.Actual != tt.actual {
				t.Fatalf("SequenceError = %+v, want stream %q expected %d actual %d", se, tt.stream, tt.expected, tt.actual)
			}
			assertNothingWritten(t, db, 2)
		})
	}
}

// assertNothingWritten checks that only the setup's events exist, and no
// claim "n"/"k" or due entry.
func assertNothingWritten(t *testing.T, db *journal.DB, globals uint64) {
	t.Helper()
	if g, _ := db.LastGlobal(bg); g != globals {
		t.Errorf("LastGlobal = %d, want %d", g, globals)
	}
	if _, err := db.Lookup(bg, "n", "k"); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("claim written by failed request: %v", err)
	}
	if d, _ := db.DueBefore(bg, time.Unix(1<<40, 0), 0); len(d) != 0 {
		t.Errorf("due written by failed request: %v", d)
	}
}

// An OnCommit observer that panics must not make the committer forget a
// commit that is on disk: the append succeeds, its record is in the index,
// the next append at the same sequence is refused, and the file verifies.
func TestAppend_ObserverPanicKeepsTheCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	var calls atomic.Int32
	db, err := journal.Open(path, &journal.Options{NoSync: true, OnCommit: func(journal.CommitInfo) {
		if calls.Add(1) == 1 {
			panic("metrics exploded")
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	req := journal.AppendRequest{Stream: "s", Expected: 0, Events: []journal.Event{ev("t", "a")}}
	if last, err := db.Append(bg, req); err != nil || last != 1 {
		t.Fatalf("append under a panicking observer = %d, %v; want 1, nil", last, err)
	}
	if head, err := db.Head(bg, "s"); err != nil || head != 1 {
		t.Fatalf("Head = %d, %v; want 1", head, err)
	}
	if _, err := db.Append(bg, req); !errors.Is(err, journal.ErrSequenceMismatch) {
		t.Fatalf("second append at sequence 1: %v, want ErrSequenceMismatch", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Verify(bg); err != nil {
		t.Fatalf("verify after reopen: %v", err)
	}
	if recs, err := db.Load(bg, "s", 0); err != nil || len(recs) != 1 {
		t.Fatalf("Load = %d records, %v; want 1", len(recs), err)
	}
}

func TestAppend_Invalid(t *testing.T) {
	ok := []journal.Event{ev("t", "")}
	tests := []struct {
		name string
		req  journal.AppendRequest
	}{
		{"empty stream", journal.AppendRequest{Events: ok}},
		{"stream with NUL", journal.AppendRequest{Stream: "a\x00b", Events: ok}},
		{"stream too long", journal.AppendRequest{Stream: strings.Repeat("s", 129), Events: ok}},
		{"no events", journal.AppendRequest{Stream: "s"}},
		{"empty type", journal.AppendRequest{Stream: "s", Events: []journal.Event{{Version: 1}}}},
		{"type too long", journal.AppendRequest{Stream: "s", Events: []journal.Event{{Type: strings.Repeat("t", 65), Version: 1}}}},
		{"version zero", journal.AppendRequest{Stream: "s", Events: []journal.Event{{Type: "t"}}}},
		{"claim empty namespace", journal.AppendRequest{Stream: "s", Events: ok, Claims: []journal.Claim{{Key: "k"}}}},
		{"claim namespace with NUL", journal.AppendRequest{Stream: "s", Events: ok, Claims: []journal.Claim{{Namespace: "a\x00", Key: "k"}}}},
		{"claim empty key", journal.AppendRequest{Stream: "s", Events: ok, Claims: []journal.Claim{{Namespace: "n"}}}},
		{"due before 1970", journal.AppendRequest{Stream: "s", Events: ok, Dues: []journal.Due{{At: time.Unix(-1, 0)}}}},
		{"due zero time", journal.AppendRequest{Stream: "s", Events: ok, Dues: []journal.Due{{}}}},
		{"due stream with NUL", journal.AppendRequest{Stream: "s", Events: ok, Dues: []journal.Due{{At: time.Unix(1, 0), Stream: "x\x00"}}}},
	}
	db := journaltest.Open(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := db.Append(bg, tt.req); !errors.Is(err, journal.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			assertNothingWritten(t, db, 0)
		})
	}
	// Boundaries that must pass.
	mustAppend(t, db, journal.AppendRequest{Stream: strings.Repeat("s", 128),
		Events: []journal.Event{{Type: strings.Repeat("t", 64), Version: 65535}}})
}

func TestAppend_Claims(t *testing.T) {
	db := journaltest.Open(t)
	rf := journal.Claim{Namespace: "refund_no", Key: "RF1"}
	mustAppend(t, db, journal.AppendRequest{Stream: "a", Events: []journal.Event{ev("x", "")}, Claims: []journal.Claim{rf}})

	// Same stream claiming again (also twice in one request) is a no-op.
	mustAppend(t, db, journal.AppendRequest{Stream: "a", Expected: 1, Events: []journal.Event{ev("x", "")},
		Claims: []journal.Claim{rf, rf, {Namespace: "out_trade_no", Key: "T1"}}})

	// Another stream: KeyTakenError naming the owner, and nothing of the
	// request is written, including its other, free claim.
	_, err := db.Append(bg, journal.AppendRequest{Stream: "b", Events: []journal.Event{ev("x", "")},
		Claims: []journal.Claim{{Namespace: "n", Key: "k"}, rf}, Dues: []journal.Due{{At: time.Unix(1, 0)}}})
	var kt *journal.KeyTakenError
	if !errors.As(err, &kt) || !errors.Is(err, journal.ErrKeyTaken) {
		t.Fatalf("err = %v, want *KeyTakenError", err)
	}
	if kt.Owner != "a" || kt.Namespace != "refund_no" || kt.Key != "RF1" {
		t.Fatalf("KeyTakenError = %+v", kt)
	}
	if h, _ := db.Head(bg, "b"); h != 0 {
		t.Fatalf("head of b = %d, want 0", h)
	}
	assertNothingWritten(t, db, 2)

	// A namespace with NUL could alias another (namespace, key) pair.
	if _, err := db.Lookup(bg, "refund_no\x00RF1", ""); !errors.Is(err, journal.ErrInvalid) {
		t.Fatalf("Lookup with NUL namespace: %v, want ErrInvalid", err)
	}

	// The same key in another namespace is a different key.
	mustAppend(t, db, journal.AppendRequest{Stream: "b", Events: []journal.Event{ev("x", "")},
		Claims: []journal.Claim{{Namespace: "other", Key: "RF1"}}})
	if s, err := db.Lookup(bg, "other", "RF1"); err != nil || s != "b" {
		t.Fatalf("Lookup = %q, %v", s, err)
	}
}

func TestAppend_CanceledContext(t *testing.T) {
	db := journaltest.Open(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := db.Append(ctx, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("x", "")}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	assertNothingWritten(t, db, 0)
}

func TestDueBefore_OrderAndDelete(t *testing.T) {
	db := journaltest.Open(t)
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.FixedZone("CST", 8*3600))
	mustAppend(t, db, journal.AppendRequest{Stream: "b", Events: []journal.Event{ev("x", "")}, Dues: []journal.Due{
		{At: base.Add(3 * time.Second), Key: "query"},
		{At: base.Add(1), Key: "retry"}, // nanosecond precision
	}})
	mustAppend(t, db, journal.AppendRequest{Stream: "a", Events: []journal.Event{ev("x", "")}, Dues: []journal.Due{
		{At: base, Key: "expire"},
		{At: base.Add(time.Second), Stream: "other", Key: "poke"},
		{At: base.Add(time.Hour), Key: "late"},
	}})

	got, err := db.DueBefore(bg, base.Add(3*time.Second), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []journal.Due{
		{At: base.UTC(), Stream: "a", Key: "expire"},
		{At: base.Add(1).UTC(), Stream: "b", Key: "retry"},
		{At: base.Add(time.Second).UTC(), Stream: "other", Key: "poke"},
		{At: base.Add(3 * time.Second).UTC(), Stream: "b", Key: "query"}, // At == t is due
	}
	assertDues(t, "DueBefore(+3s)", got, want)
	if got[0].At.Location() != time.UTC {
		t.Errorf("At location = %v, want UTC", got[0].At.Location())
	}
	limited, err := db.DueBefore(bg, base.Add(3*time.Second), 2)
	if err != nil {
		t.Fatal(err)
	}
	assertDues(t, "DueBefore(+3s, 2)", limited, want[:2])
	if none, err := db.DueBefore(bg, base.Add(-1), 0); err != nil || len(none) != 0 {
		t.Fatalf("DueBefore(before all) = %v, %v", none, err)
	}

	missing := journal.Due{At: base, Stream: "zzz", Key: "never"}
	if err := db.DeleteDue(bg, []journal.Due{want[0], want[2], missing}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteDue(bg, []journal.Due{want[0]}); err != nil { // again: still fine
		t.Fatal(err)
	}
	got, err = db.DueBefore(bg, base.Add(24*time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	assertDues(t, "after delete", got, []journal.Due{want[1], want[3], {At: base.Add(time.Hour).UTC(), Stream: "a", Key: "late"}})
}

func assertDues(t *testing.T, what string, got, want []journal.Due) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for i := range got {
		if !got[i].At.Equal(want[i].At) || got[i].Stream != want[i].Stream || got[i].Key != want[i].Key {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestOpen_ReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "dir", "j.db")
	db, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		mustAppend(t, db, journal.AppendRequest{Stream: fmt.Sprintf("s%d", i%3), Expected: uint64(i / 3),
			Events: []journal.Event{ev("t", fmt.Sprint(i))}, Claims: []journal.Claim{{Namespace: "n", Key: fmt.Sprint(i)}}})
	}
	before, err := db.Scan(bg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := db.Load(bg, "s0", 0); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("Load after Close: %v, want ErrClosed", err)
	}
	if _, err := db.Append(bg, journal.AppendRequest{Stream: "s0", Expected: 4, Events: []journal.Event{ev("t", "")}}); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, want 0600", fi.Mode().Perm())
	}

	db2, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	after, err := db2.Scan(bg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	assertRecords(t, "Scan after reopen", after, before)
	for i := range 3 {
		s := fmt.Sprintf("s%d", i)
		recs, err := db2.Load(bg, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		var want []journal.Record
		for _, r := range before {
			if r.Stream == s {
				want = append(want, r)
			}
		}
		assertRecords(t, "Load "+s, recs, want)
	}
	if o, err := db2.Lookup(bg, "n", "7"); err != nil || o != "s1" {
		t.Fatalf("Lookup after reopen = %q, %v", o, err)
	}
	// Appends continue the sequences.
	if last := mustAppend(t, db2, journal.AppendRequest{Stream: "s0", Expected: 4, Events: []journal.Event{ev("t", "")}}); last != 5 {
		t.Fatalf("last = %d", last)
	}
	if g, _ := db2.LastGlobal(bg); g != 11 {
		t.Fatalf("LastGlobal = %d, want 11", g)
	}
	if err := db2.Verify(bg); err != nil {
		t.Fatal(err)
	}
}

// patchFile opens path with bbolt directly and runs fn in a write
// transaction, the way a disk fault or a newer build would change it.
func patchFile(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeThree(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	db, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("a", "one"), ev("b", "two"), ev("c", "three")}})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoad_Corrupt(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(v []byte) []byte
		want   string
	}{
		{"flipped data byte", func(v []byte) []byte { v[len(v)-6] ^= 0x40; return v }, "checksum mismatch"},
		{"flipped checksum", func(v []byte) []byte { v[len(v)-1] ^= 0x01; return v }, "checksum mismatch"},
		{"truncated", func(v []byte) []byte { return v[:len(v)-3] }, "record global 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeThree(t)
			patchFile(t, path, func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("log"))
				v := append([]byte{}, b.Get(be64(2))...)
				return b.Put(be64(2), tt.mutate(v))
			})
			db, err := journal.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			_, err = db.Load(bg, "s", 0)
			if !errors.Is(err, journal.ErrCorrupt) || !strings.Contains(err.Error(), "global 2") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load: %v, want ErrCorrupt mentioning global 2 and %q", err, tt.want)
			}
			if _, err := db.Load(bg, "s", 2); err != nil { // records after the bad one still load
				t.Fatalf("Load after 2: %v", err)
			}
			if _, err := db.Scan(bg, 0, 0); !errors.Is(err, journal.ErrCorrupt) {
				t.Fatalf("Scan: %v, want ErrCorrupt", err)
			}
			if err := db.Verify(bg); !errors.Is(err, journal.ErrCorrupt) {
				t.Fatalf("Verify: %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestVerify_Inconsistent(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(tx *bolt.Tx) error
		want   string
	}{
		{"record moved to another key", func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("log"))
			v := append([]byte{}, b.Get(be64(3))...)
			return b.Put(be64(2), v)
		}, "encodes global 3"},
		{"global gap", func(tx *bolt.Tx) error { return tx.Bucket([]byte("log")).Delete(be64(2)) }, "global 3 follows 1"},
		{"head too high", func(tx *bolt.Tx) error { return tx.Bucket([]byte("heads")).Put([]byte("s"), be64(4)) }, "head of stream"},
		{"missing head", func(tx *bolt.Tx) error { return tx.Bucket([]byte("heads")).Delete([]byte("s")) }, "not covered by its head"},
		{"index points elsewhere", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("streams")).Put(append([]byte("s\x00"), be64(2)...), be64(3))
		}, "index entry"},
		{"missing index entry", func(tx *bolt.Tx) error { // the cursor's Next lands on seq 3's entry
			return tx.Bucket([]byte("streams")).Delete(append([]byte("s\x00"), be64(2)...))
		}, "seq 2: index entry"},
		{"extra index entry", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("streams")).Put(append([]byte("s\x00"), be64(9)...), be64(3))
		}, "stream index has"},
		{"claim of unknown stream", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("claims")).Put([]byte("n\x00k"), []byte("ghost"))
		}, "unknown stream"},
		{"log sequence behind", func(tx *bolt.Tx) error { return tx.Bucket([]byte("log")).SetSequence(2) }, "log sequence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeThree(t)
			patchFile(t, path, tt.mutate)
			db, err := journal.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = db.Verify(bg)
			if !errors.Is(err, journal.ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Verify: %v, want ErrCorrupt containing %q", err, tt.want)
			}
		})
	}
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func TestOpen_FormatTooNew(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		path := writeThree(t)
		patchFile(t, path, func(tx *bolt.Tx) error {
			// 7: one past the newest format this build reads (6, a file
			// with archived streams; it writes 5 otherwise).
			return tx.Bucket([]byte("meta")).Put([]byte("format"), binary.BigEndian.AppendUint32(nil, 7))
		})
		_, err := journal.Open(path, nil)
		if !errors.Is(err, journal.ErrFormatTooNew) || !strings.Contains(err.Error(), path) {
			t.Fatalf("Open: %v, want ErrFormatTooNew naming the path", err)
		}
		// The refused file was not touched: still format 7.
		bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer bdb.Close()
		_ = bdb.View(func(tx *bolt.Tx) error {
			if v := tx.Bucket([]byte("meta")).Get([]byte("format")); binary.BigEndian.Uint32(v) != 7 {
				t.Errorf("format rewritten to %x", v)
			}
			return nil
		})
	})
	t.Run("record", func(t *testing.T) {
		path := writeThree(t)
		patchFile(t, path, func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("log"))
			v := append([]byte{}, b.Get(be64(1))...)
			v[0] = 3
			return b.Put(be64(1), v)
		})
		db, err := journal.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Load(bg, "s", 0); !errors.Is(err, journal.ErrFormatTooNew) {
			t.Fatalf("Load: %v, want ErrFormatTooNew", err)
		}
	})
}

func TestOpen_NotAJournal(t *testing.T) {
	t.Run("garbage file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "j.db")
		if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 8192), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := journal.Open(path, nil); !errors.Is(err, journal.ErrCorrupt) {
			t.Fatalf("Open: %v, want ErrCorrupt", err)
		}
	})
	t.Run("bbolt file without meta", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "j.db")
		patchFile(t, path, func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("log")); return err })
		if _, err := journal.Open(path, nil); !errors.Is(err, journal.ErrCorrupt) {
			t.Fatalf("Open: %v, want ErrCorrupt", err)
		}
	})
}

func TestOpen_Locked(t *testing.T) {
	db := journaltest.Open(t)
	start := time.Now()
	_, err := journal.Open(db.Path(), &journal.Options{Timeout: 50 * time.Millisecond})
	elapsed := time.Since(start)
	if !errors.Is(err, journal.ErrLocked) || !errors.Is(err, berrors.ErrTimeout) {
		t.Fatalf("second Open: %v, want ErrLocked wrapping bbolt's timeout", err)
	}
	if !strings.Contains(err.Error(), db.Path()) {
		t.Fatalf("error %q does not name the path", err)
	}
	if elapsed > 2*time.Second {
		t.Fatalf("second Open took %v, want fail-fast", elapsed)
	}
	// The first DB is unaffected.
	mustAppend(t, db, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("x", "")}})
}

func TestAppend_Concurrent(t *testing.T) {
	db := journaltest.Open(t)
	const (
		writers   = 64
		streams   = 50
		perWriter = 20
	)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				s := fmt.Sprintf("stream-%02d", (w*7+i)%streams)
				// Optimistic retry: contention on a stream is expected and
				// must surface as SequenceError, never as a lost update.
				for {
					h, err := db.Head(bg, s)
					if err != nil {
						errs <- err
						return
					}
					_, err = db.Append(bg, journal.AppendRequest{Stream: s, Expected: h,
						Events: []journal.Event{ev("t", fmt.Sprintf("%d/%d", w, i))}})
					if err == nil {
						break
					}
					if !errors.Is(err, journal.ErrSequenceMismatch) {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	total := uint64(writers * perWriter)
	if g, _ := db.LastGlobal(bg); g != total {
		t.Fatalf("LastGlobal = %d, want %d", g, total)
	}
	all, err := db.Scan(bg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, r := range all {
		if r.Global != uint64(i+1) {
			t.Fatalf("global gap at %d: %d", i, r.Global)
		}
		if seen[string(r.Data)] {
			t.Fatalf("event %s stored twice", r.Data)
		}
		seen[string(r.Data)] = true
	}
	var sum uint64
	for s := range streams {
		name := fmt.Sprintf("stream-%02d", s)
		recs, err := db.Load(bg, name, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if r.Seq != uint64(i+1) {
				t.Fatalf("%s: seq gap at %d: %d", name, i, r.Seq)
			}
		}
		if h, _ := db.Head(bg, name); h != uint64(len(recs)) {
			t.Fatalf("%s: head %d, %d records", name, h, len(recs))
		}
		sum += uint64(len(recs))
	}
	if sum != total {
		t.Fatalf("streams hold %d records, want %d", sum, total)
	}
	if err := db.Verify(bg); err != nil {
		t.Fatal(err)
	}
}

// TestCheck_MissingEntryNamesOnlyItsRecord: the log walk reads the streams
// index with a cursor that steps to the next entry; when an entry is
// missing, the records after it are still checked against their own
// entries, not the ones the cursor stepped onto.
func TestCheck_MissingEntryNamesOnlyItsRecord(t *testing.T) {
	path := writeThree(t)
	patchFile(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("streams")).Delete(append([]byte("s\x00"), be64(2)...))
	})
	db, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Check(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var atTwo bool
	for _, p := range res.Problems {
		switch {
		case p.Global == 2 && p.Kind == "index":
			atTwo = true
		case p.Global == 3 && p.Kind == "index":
			t.Errorf("index problem at record 3, whose entry is intact: %v", p)
		}
	}
	if !atTwo {
		t.Fatalf("no index problem at global 2 in %v", res.Problems)
	}
}
