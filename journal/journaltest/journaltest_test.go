package journaltest

import (
	"context"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/refundd/refundd/journal"
)

// recorder is a testing.TB that keeps cleanups and errors for inspection.
type recorder struct {
	*testing.T
	cleanups []func()
	errs     []string
}

func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func appendOne(t *testing.T, db *journal.DB) {
	t.Helper()
	if _, err := db.Append(context.Background(), journal.AppendRequest{Stream: "s",
		Events: []journal.Event{{Type: "t", Version: 1}}}); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_ConsistentPasses(t *testing.T) {
	r := &recorder{T: t}
	db := Open(r)
	appendOne(t, db)
	r.runCleanups()
	if len(r.errs) != 0 {
		t.Fatalf("cleanup reported %v", r.errs)
	}
	if _, err := db.Head(context.Background(), "s"); err == nil {
		t.Fatal("DB still open after cleanup")
	}
}

func TestOpen_InconsistentFails(t *testing.T) {
	r := &recorder{T: t}
	db := Open(r)
	appendOne(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Damage the closed file: drop the stream's head.
	bdb, err := bolt.Open(db.Path(), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("heads")).Delete([]byte("s")) }); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	r.runCleanups()
	if len(r.errs) != 1 {
		t.Fatalf("cleanup errors = %v, want one inconsistency report", r.errs)
	}
}
