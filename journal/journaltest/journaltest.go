// Package journaltest opens throwaway journals for tests and checks their
// consistency when the test ends.
package journaltest

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/refundd/refundd/journal"
)

// Open opens a fresh journal in t.TempDir() with default options (fsync
// on). When the test ends it runs Verify, failing the test if the journal is
// inconsistent, then closes it. If the test closed the DB itself, the file
// is reopened for the check; if the test still holds the file through
// another DB, the check is skipped with a log line.
func Open(t testing.TB) *journal.DB {
	t.Helper()
	return OpenWith(t, nil)
}

// OpenWith is Open with explicit options (nil means defaults).
func OpenWith(t testing.TB, opts *journal.Options) *journal.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := journal.Open(path, opts)
	if err != nil {
		t.Fatalf("journaltest: open: %v", err)
	}
	t.Cleanup(func() { verifyAndClose(t, db) })
	return db
}

func verifyAndClose(t testing.TB, db *journal.DB) {
	t.Helper()
	ctx := context.Background()
	err := db.Verify(ctx)
	if errors.Is(err, journal.ErrClosed) {
		reopened, oerr := journal.Open(db.Path(), &journal.Options{Timeout: 100 * time.Millisecond})
		if errors.Is(oerr, journal.ErrLocked) {
			t.Logf("journaltest: %s still open elsewhere; consistency check skipped", db.Path())
			return
		}
		if oerr != nil {
			t.Errorf("journaltest: reopen for verify: %v", oerr)
			return
		}
		err = reopened.Verify(ctx)
		if cerr := reopened.Close(); cerr != nil {
			t.Errorf("journaltest: close after verify: %v", cerr)
		}
	}
	if err != nil {
		t.Errorf("journaltest: journal inconsistent at end of test: %v", err)
	}
	if cerr := db.Close(); cerr != nil {
		t.Errorf("journaltest: close: %v", cerr)
	}
}
