package journal

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
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
