package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestCheck_ReportsBrokenPages: bbolt's own page check is part of Check,
// on a DB open for writing (in its write transaction) and on a read-only
// one.
func TestCheck_ReportsBrokenPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	db, err := Open(path, &Options{NoSync: true, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		head, _ := db.Head(bgCtx, "a")
		if _, err := db.Append(bgCtx, AppendRequest{Stream: "a", Expected: head,
			Events: []Event{{Type: "t", Version: 1, Data: fmt.Appendf(nil, "event %03d %080d", i, i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The log bucket's root is one leaf page (about 3 KB of records): put
	// its second key after its third, which only the page check sees as
	// a broken page (the log walk sees odd globals).
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var root, pageSize int64
	if err := bdb.View(func(tx *bolt.Tx) error {
		root, pageSize = int64(tx.Bucket(bucketLog).Root()), int64(bdb.Info().PageSize)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	if root == 0 {
		t.Fatal("the log bucket is inline: the fixture needs more records")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	page := make([]byte, pageSize)
	if _, err := f.ReadAt(page, root*pageSize); err != nil {
		t.Fatal(err)
	}
	if flags := binary.LittleEndian.Uint16(page[8:]); flags != 0x02 {
		t.Fatalf("root page flags %#x, want a leaf", flags)
	}
	const header, elem = 16, 16
	el := header + 1*elem
	pos, ksize := binary.LittleEndian.Uint32(page[el+4:]), binary.LittleEndian.Uint32(page[el+8:])
	copy(page[el+int(pos):el+int(pos)+int(ksize)], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	if _, err := f.WriteAt(page, root*pageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	for _, readOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("read-only=%v", readOnly), func(t *testing.T) {
			db, err := Open(path, &Options{ReadOnly: readOnly, NoSync: true, CheckpointInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			done := false
			res, err := db.Check(bgCtx, &CheckOptions{PagesDone: func() { done = true }})
			if err != nil {
				t.Fatal(err)
			}
			if !done {
				t.Error("PagesDone was not called")
			}
			pages := 0
			for _, p := range res.Problems {
				if p.Kind == "bbolt" {
					pages++
				}
			}
			if pages == 0 {
				t.Fatalf("no bbolt problem among %v", res.Problems)
			}
		})
	}
}

// pagesFixture writes a journal whose log bucket is a branch over several
// leaves and whose freelist is not empty, and returns its path.
func pagesFixture(t testing.TB) string { return pagesFixtureN(t, 200, 1) }

// pagesFixtureN appends n times, each time perAppend events to one of
// seven streams.
func pagesFixtureN(t testing.TB, n, perAppend int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	db, err := Open(path, &Options{NoSync: true, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		stream := fmt.Sprintf("s%02d", i%7)
		head, _ := db.Head(bgCtx, stream)
		events := make([]Event, perAppend)
		for j := range events {
			events[j] = Event{Type: "t", Version: 1, Data: fmt.Appendf(nil, "event %03d %080d", i, j)}
		}
		if _, err := db.Append(bgCtx, AppendRequest{Stream: stream, Expected: head, Events: events}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// filePages is what the mutations need to know of a fixture.
type filePages struct {
	size             int64
	meta             boltMeta
	logRoot          uint64   // a branch page
	children         []uint64 // the log root's children, leaves
	free             []uint64 // the freelist's ids
	freelistElements int64    // offset of the first free id
}

func readFilePages(t testing.TB, path string) filePages {
	t.Helper()
	meta := metaOf(t, path)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fp := filePages{size: int64(meta.pageSize), meta: meta}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.View(func(tx *bolt.Tx) error {
		fp.logRoot = uint64(tx.Bucket(bucketLog).Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	page := make([]byte, fp.size)
	if _, err := f.ReadAt(page, int64(fp.logRoot)*fp.size); err != nil {
		t.Fatal(err)
	}
	hdr := pageHeader(page)
	if hdr.flags != pageBranch || hdr.count < 2 {
		t.Fatalf("log root %d: flags %#x, %d elements; the fixture needs a branch", fp.logRoot, hdr.flags, hdr.count)
	}
	for i := range int(hdr.count) {
		e, _ := element(page, hdr.flags, i)
		fp.children = append(fp.children, e.child)
	}
	if _, err := f.ReadAt(page, int64(meta.freelist)*fp.size); err != nil {
		t.Fatal(err)
	}
	hdr = pageHeader(page)
	fp.freelistElements = int64(meta.freelist)*fp.size + pageHeaderSize
	for i := range int(hdr.count) {
		fp.free = append(fp.free, binary.LittleEndian.Uint64(page[pageHeaderSize+8*i:]))
	}
	if len(fp.free) == 0 || hdr.count == 0xFFFF {
		t.Fatalf("the fixture's freelist has %d ids; the tests need a few", hdr.count)
	}
	return fp
}

func writeAt(t testing.TB, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }

// metaOf returns the committed meta of the file at path.
func metaOf(t testing.TB, path string) boltMeta {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta, err := committedMeta(f)
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

func runCheckPages(t testing.TB, path string) []string {
	t.Helper()
	meta := metaOf(t, path)
	var got []string
	if err := checkPages(path, meta.txid, func(msg string) { got = append(got, msg) }); err != nil {
		t.Fatal(err)
	}
	return got
}

// bboltCheck runs bbolt's own page check, for the cases it can read
// without faulting.
func bboltCheck(t testing.TB, path string) []string {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var got []string
	if err := bdb.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			got = append(got, err.Error())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCheckPages_Mutations: each damage to the page structure is
// reported by the bitmap walk, and (where bbolt can read the file without
// faulting) by bbolt's own check too, so the two check the same things.
func TestCheckPages_Mutations(t *testing.T) {
	tests := []struct {
		name  string
		bbolt bool // bbolt's check reads this damage safely
		want  string
		apply func(t *testing.T, path string, fp filePages)
	}{
		{"intact", true, "", func(*testing.T, string, filePages) {}},
		{"child referenced twice", true, "multiple references", func(t *testing.T, path string, fp filePages) {
			// Element 1 of the log root points at element 0's leaf.
			writeAt(t, path, int64(fp.logRoot)*fp.size+pageHeaderSize+pageElemSize+8, le64(fp.children[0]))
		}},
		{"reachable page freed", true, "reachable freed", func(t *testing.T, path string, fp filePages) {
			writeAt(t, path, fp.freelistElements, le64(fp.children[1]))
		}},
		{"free page lost", true, "unreachable unfreed", func(t *testing.T, path string, fp filePages) {
			writeAt(t, path, int64(fp.meta.freelist)*fp.size+10, le16(uint16(len(fp.free)-1)))
		}},
		{"page freed twice", true, "already freed", func(t *testing.T, path string, fp filePages) {
			if len(fp.free) < 2 {
				t.Skip("one free page")
			}
			writeAt(t, path, fp.freelistElements+8, le64(fp.free[0]))
		}},
		{"leaf of the wrong type", true, "invalid type", func(t *testing.T, path string, fp filePages) {
			writeAt(t, path, int64(fp.children[0])*fp.size+8, le16(pageFreelist))
		}},
		{"child past the end", false, "out of bounds", func(t *testing.T, path string, fp filePages) {
			writeAt(t, path, int64(fp.logRoot)*fp.size+pageHeaderSize+8, le64(fp.meta.hwm+3))
		}},
		{"header names another page", false, "header says", func(t *testing.T, path string, fp filePages) {
			writeAt(t, path, int64(fp.children[0])*fp.size, le64(fp.children[0]+1))
		}},
		{"element outside its page", false, "outside the page", func(t *testing.T, path string, fp filePages) {
			// A leaf element's key size runs past the page.
			writeAt(t, path, int64(fp.children[0])*fp.size+pageHeaderSize+8, binary.LittleEndian.AppendUint32(nil, 1<<20))
		}},
		{"leaves out of order", true, "ancestor", func(t *testing.T, path string, fp filePages) {
			// Swap the root's first two children: keys then fall outside
			// the bounds the root gives them.
			at := int64(fp.logRoot)*fp.size + pageHeaderSize + 8
			writeAt(t, path, at, le64(fp.children[1]))
			writeAt(t, path, at+pageElemSize, le64(fp.children[0]))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := pagesFixture(t)
			fp := readFilePages(t, path)
			tt.apply(t, path, fp)
			got := runCheckPages(t, path)
			if tt.want == "" {
				if len(got) != 0 {
					t.Fatalf("problems in an intact file: %q", got)
				}
			} else if !slices.ContainsFunc(got, func(m string) bool { return strings.Contains(m, tt.want) }) {
				t.Fatalf("no %q among %q", tt.want, got)
			}
			if tt.bbolt {
				if b := bboltCheck(t, path); (len(b) == 0) != (tt.want == "") {
					t.Fatalf("bbolt's check says %q, the walk %q", b, got)
				}
			}
		})
	}
}

// FuzzCheckPages: no damage to a file makes the walk panic, loop or read
// past the file; the intact file has no problem.
func FuzzCheckPages(f *testing.F) {
	seed, err := os.ReadFile(pagesFixture(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint16(0), []byte{})
	f.Add(uint16(4096*3+8), []byte{0x01})
	f.Add(uint16(4096*2+10), []byte{0xff, 0xff})
	f.Add(uint16(16), []byte{0x00, 0x10})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, off uint16, b []byte) {
		file := bytes.Clone(seed)
		copy(file[min(int(off), len(file)):], b)
		path := filepath.Join(dir, "fuzz.db")
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		meta, merr := committedMeta(fh)
		fh.Close()
		var got []string
		if err := checkPages(path, meta.txid, func(msg string) { got = append(got, msg) }); err != nil {
			t.Fatal(err)
		}
		if merr == nil && bytes.Equal(file, seed) && len(got) > 0 {
			t.Fatalf("problems in the intact file: %q", got)
		}
	})
}

// BenchmarkCheckPages: the bitmap walk against bbolt's tx.Check on the
// same file (100,000 records, 6,000 pages; or the journal at
// $PAGES_FILE, which must not be open for writing), time and memory per
// check.
//
//	go test -run='^$' -bench=CheckPages -benchmem ./journal/
func BenchmarkCheckPages(b *testing.B) {
	path := os.Getenv("PAGES_FILE")
	if path == "" {
		path = pagesFixtureN(b, 1000, 100)
	}
	meta := metaOf(b, path)
	b.Logf("%d pages", meta.hwm)
	b.Run("walk=bitmap", func(b *testing.B) {
		for b.Loop() {
			if err := checkPages(path, meta.txid, func(msg string) { b.Fatal(msg) }); err != nil {
				b.Fatal(err)
			}
		}
	})
	// bbolt's check on a file opened for it, as verify opens it: both
	// then fault the file's pages into a new mapping.
	b.Run("walk=bbolt", func(b *testing.B) {
		for b.Loop() {
			bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			if err := bdb.View(func(tx *bolt.Tx) error {
				for err := range tx.Check() {
					b.Fatal(err)
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			if err := bdb.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
