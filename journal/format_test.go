package journal_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/refundd/refundd/journal"
)

var updateFixtures = flag.Bool("update-fixtures", false, "rewrite journal/testdata/format2.db with this build")

// fixtureRequests is what both committed fixtures hold: format1.db was
// written by the format 1 build with exactly these appends and a kv entry.
func fixtureRequests() []journal.AppendRequest {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	return []journal.AppendRequest{
		{Stream: "alpha", Events: []journal.Event{{Type: "a.created", Version: 1, Data: []byte(`{"n":1}`)}},
			Claims: []journal.Claim{{Namespace: "ns", Key: "alpha-key"}}, Dues: []journal.Due{{At: at, Key: "d1"}}},
		{Stream: "beta", Events: []journal.Event{{Type: "b.created", Version: 1, Data: []byte("beta one")}, {Type: "b.changed", Version: 2, Data: nil}},
			Marks: []journal.Mark{{Key: "mark/beta"}}},
		{Stream: "alpha", Expected: 1, Events: []journal.Event{{Type: "a.changed", Version: 1, Data: []byte{0, 1, 2, 255}}}},
	}
}

func TestGenerateFormat2Fixture(t *testing.T) {
	if !*updateFixtures {
		t.Skip("run with -update-fixtures to rewrite testdata/format2.db")
	}
	path := filepath.Join("testdata", "format2.db")
	_ = os.Remove(path)
	clock := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	db, err := journal.Open(path, &journal.Options{CheckpointEvery: 2, CheckpointInterval: -1, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range fixtureRequests() {
		if _, err := db.Append(bg, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Put(bg, "webhook/x/cursor", []byte("3")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// copyFixture copies a committed fixture into a temp dir, so tests never
// change it.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var s [32]byte
	h.Sum(s[:0])
	return s
}

func TestOpen_Fixtures(t *testing.T) {
	for _, tt := range []struct {
		file   string
		format uint8
	}{{"format1.db", 1}, {"format2.db", 2}} {
		t.Run(tt.file, func(t *testing.T) {
			path := copyFixture(t, tt.file)
			before := fileSum(t, path)
			db, err := journal.Open(path, &journal.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			recs, err := db.Scan(bg, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var want []journal.Record
			var g uint64
			seqs := map[string]uint64{}
			for _, r := range fixtureRequests() {
				for _, e := range r.Events {
					g++
					seqs[r.Stream]++
					want = append(want, journal.Record{Global: g, Stream: r.Stream, Seq: seqs[r.Stream], Type: e.Type, Version: e.Version, Data: e.Data})
				}
			}
			assertRecords(t, "Scan", recs, want)
			var prev journal.Hash
			for _, r := range recs {
				if r.Format != tt.format {
					t.Fatalf("global %d format %d, want %d", r.Global, r.Format, tt.format)
				}
				prev = journal.ChainHash(prev, r)
				if tt.format >= 2 && r.Hash != prev {
					t.Fatalf("global %d: stored hash %s, computed %s", r.Global, r.Hash, prev)
				}
			}
			res, err := db.Check(bg, nil)
			if err != nil || !res.OK() {
				t.Fatalf("Check: %v %+v", err, res.Problems)
			}
			if res.Head.Global != 4 || res.Head.Hash != prev || res.Formats[tt.format] != 4 {
				t.Fatalf("Check result %+v, want head 4 %s", res, prev)
			}
			if tt.format >= 2 && (res.Checkpoints != 1 || res.LastCheckpoint.Global != 3) {
				t.Fatalf("checkpoints %d last %+v, want one, at global 3 (written with the batch that reached it)", res.Checkpoints, res.LastCheckpoint)
			}
			if owner, err := db.Lookup(bg, "ns", "alpha-key"); err != nil || owner != "alpha" {
				t.Fatalf("Lookup = %q, %v", owner, err)
			}
			if v, err := db.Get(bg, "webhook/x/cursor"); err != nil || string(v) != "3" {
				t.Fatalf("kv = %q, %v", v, err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if fileSum(t, path) != before {
				t.Fatal("a read-only open changed the file")
			}
		})
	}
	// Both fixtures hold the same records, so the same chain: the chain
	// does not depend on the storage format.
	h := map[string]journal.Hash{}
	for _, f := range []string{"format1.db", "format2.db"} {
		db, err := journal.Open(copyFixture(t, f), &journal.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		head, err := db.ChainHead(bg)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		h[f] = head.Hash
	}
	if h["format1.db"] != h["format2.db"] {
		t.Fatalf("chain heads differ across formats: %v", h)
	}
}

func TestOpen_UpgradesFormat1(t *testing.T) {
	path := copyFixture(t, "format1.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	headBefore, err := db.ChainHead(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(bg, journal.AppendRequest{Stream: "alpha", Expected: 2, Events: []journal.Event{ev("a.more", "x")}}); err != nil {
		t.Fatal(err)
	}
	recs, err := db.Scan(bg, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Format != 2 || recs[0].Hash != journal.ChainHash(headBefore.Hash, recs[0]) {
		t.Fatalf("new record %+v does not chain onto the format 1 records (head %s)", recs, headBefore.Hash)
	}
	if err := db.Verify(bg); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	_ = bdb.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("meta")).Get([]byte("format")); binary.BigEndian.Uint32(v) != 5 {
			t.Errorf("meta format %x after upgrade, want 5", v)
		}
		return nil
	})
}

func TestOpen_ReadOnly(t *testing.T) {
	path := writeThree(t)
	before := fileSum(t, path)
	db, err := journal.Open(path, &journal.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A second reader shares the file.
	db2, err := journal.Open(path, &journal.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("second read-only open: %v", err)
	}
	db2.Close()
	if _, err := db.Append(bg, journal.AppendRequest{Stream: "s", Expected: 3, Events: []journal.Event{ev("d", "")}}); !errors.Is(err, journal.ErrReadOnly) {
		t.Fatalf("Append: %v, want ErrReadOnly", err)
	}
	if err := db.Put(bg, "k", nil); !errors.Is(err, journal.ErrReadOnly) {
		t.Fatalf("Put: %v, want ErrReadOnly", err)
	}
	if err := db.DeleteDue(bg, []journal.Due{{At: time.Now(), Stream: "s"}}); !errors.Is(err, journal.ErrReadOnly) {
		t.Fatalf("DeleteDue: %v, want ErrReadOnly", err)
	}
	if _, err := db.WriteCheckpoint(bg); !errors.Is(err, journal.ErrReadOnly) {
		t.Fatalf("WriteCheckpoint: %v, want ErrReadOnly", err)
	}
	if err := db.ClearReconcileRequired(bg); !errors.Is(err, journal.ErrReadOnly) {
		t.Fatalf("ClearReconcileRequired: %v, want ErrReadOnly", err)
	}
	if err := db.Verify(bg); err != nil {
		t.Fatal(err)
	}
	// A writer cannot take the file from readers.
	if _, err := journal.Open(path, &journal.Options{Timeout: 50 * time.Millisecond}); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("writer open during read-only use: %v, want ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if fileSum(t, path) != before {
		t.Fatal("read-only use changed the file")
	}

	t.Run("held by a writer", func(t *testing.T) {
		w, err := journal.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		_, err = journal.Open(path, &journal.Options{ReadOnly: true, Timeout: 50 * time.Millisecond})
		if !errors.Is(err, journal.ErrLocked) || !strings.Contains(err.Error(), "another refundd") {
			t.Fatalf("read-only open of a held file: %v, want ErrLocked with a hint", err)
		}
	})
	t.Run("missing file is not created", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "none.db")
		if _, err := journal.Open(missing, &journal.Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Open: %v, want ErrNotExist", err)
		}
		if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("read-only open created the file")
		}
	})
	t.Run("not a journal", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "other.db")
		patchFile(t, p, func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("x")); return err })
		if _, err := journal.Open(p, &journal.Options{ReadOnly: true}); !errors.Is(err, journal.ErrCorrupt) {
			t.Fatalf("Open: %v, want ErrCorrupt", err)
		}
	})
}

var _ = bytes.Equal
var _ = context.Background
