package journal_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/refundd/refundd/journal"
)

// backupOf writes a journal with n records and returns a backup of it.
func backupOf(t *testing.T, n int) (backup string, head journal.Checkpoint) {
	t.Helper()
	dir := t.TempDir()
	db, err := journal.Open(filepath.Join(dir, "live.db"), &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	appendN(t, db, "s", n)
	backup = filepath.Join(dir, "backup.db")
	head, err = db.BackupFile(bg, backup)
	if err != nil {
		t.Fatal(err)
	}
	return backup, head
}

func TestRestore_BumpsEpochAndRequiresReconcile(t *testing.T) {
	backup, head := backupOf(t, 3)
	before := fileSum(t, backup)
	dst := filepath.Join(t.TempDir(), "data", "refundd.db")
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 2, 1, 0, 0, 0, time.UTC)
	info, err := journal.Restore(bg, backup, dst, &journal.RestoreOptions{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch != 1 || info.BackupEpoch != 0 || info.Backup.Global != 3 || info.Backup.Hash != head.Hash || !info.RestoredAt.Equal(at) || info.Replaced != "" {
		t.Fatalf("RestoreInfo %+v", info)
	}
	if fileSum(t, backup) != before {
		t.Fatal("Restore changed the backup")
	}
	db, err := journal.Open(dst, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := db.Epoch(bg); err != nil || e != 1 {
		t.Fatalf("Epoch = %d, %v", e, err)
	}
	pending, err := db.ReconcileRequired(bg)
	if err != nil || pending == nil || pending.Epoch != 1 || pending.Backup.Global != 3 {
		t.Fatalf("ReconcileRequired = %+v, %v", pending, err)
	}
	if err := db.Verify(bg); err != nil {
		t.Fatal(err)
	}
	appendN(t, db, "s", 1) // the chain goes on from the backup's head
	if err := db.ClearReconcileRequired(bg); err != nil {
		t.Fatal(err)
	}
	if p, _ := db.ReconcileRequired(bg); p != nil {
		t.Fatalf("still pending after clear: %+v", p)
	}
	if last, _ := db.LastRestore(bg); last == nil || last.Epoch != 1 {
		t.Fatalf("LastRestore = %+v", last)
	}
	db.Close()

	t.Run("existing destination is refused", func(t *testing.T) {
		_, err := journal.Restore(bg, backup, dst, nil)
		if !errors.Is(err, journal.ErrInvalid) || !strings.Contains(err.Error(), "exists") {
			t.Fatalf("Restore over an existing file: %v", err)
		}
	})
	t.Run("replace moves it aside and counts its epoch", func(t *testing.T) {
		// The same backup again: epoch 2, not 1 again, because the
		// replaced journal already used epoch 1.
		info, err := journal.Restore(bg, backup, dst, &journal.RestoreOptions{Replace: true})
		if err != nil {
			t.Fatal(err)
		}
		if info.Epoch != 2 || info.ReplacedEpoch != 1 || info.Replaced == "" {
			t.Fatalf("RestoreInfo %+v", info)
		}
		old, err := journal.Open(info.Replaced, &journal.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("the replaced journal is kept: %v", err)
		}
		if last, _ := old.LastGlobal(bg); last != 4 {
			t.Fatalf("replaced journal last global %d, want 4", last)
		}
		old.Close()
	})
	t.Run("min epoch", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "r.db")
		info, err := journal.Restore(bg, backup, d, &journal.RestoreOptions{MinEpoch: 7})
		if err != nil || info.Epoch != 7 {
			t.Fatalf("Restore = %+v, %v", info, err)
		}
	})
	t.Run("destination held by refundd", func(t *testing.T) {
		live, err := journal.Open(dst, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		_, err = journal.Restore(bg, backup, dst, &journal.RestoreOptions{Replace: true, Timeout: 50 * time.Millisecond})
		if !errors.Is(err, journal.ErrLocked) {
			t.Fatalf("Restore onto a held journal: %v, want ErrLocked", err)
		}
	})
}

func TestRestore_RefusesCorruptBackup(t *testing.T) {
	backup, _ := backupOf(t, 3)
	patchFile(t, backup, func(tx *bolt.Tx) error { return tx.Bucket([]byte("log")).Delete(be64(2)) })
	dst := filepath.Join(t.TempDir(), "r.db")
	if _, err := journal.Restore(bg, backup, dst, nil); !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("Restore of a damaged backup: %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused restore left a file behind")
	}
	if _, err := journal.Restore(bg, backup, dst, &journal.RestoreOptions{Force: true}); err != nil {
		t.Fatalf("forced restore: %v", err)
	}
}

// Two restores within one second (an operator redoing one with another
// backup) each keep the journal they replace: the second must not put the
// first one's copy over the original, the only record of what happened
// after the backup.
func TestRestore_TwiceInOneSecondKeepsEveryReplacedJournal(t *testing.T) {
	backup, _ := backupOf(t, 3)
	dst := filepath.Join(t.TempDir(), "refundd.db")
	in, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, in, 0o600); err != nil {
		t.Fatal(err)
	}
	live, err := journal.Open(dst, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, live, "s", 5) // after the backup
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	opts := &journal.RestoreOptions{Replace: true, Now: func() time.Time { return at }}
	first, err := journal.Restore(bg, backup, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := journal.Restore(bg, backup, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.Replaced == "" || second.Replaced == first.Replaced {
		t.Fatalf("replaced journals kept as %q and %q: want two names", first.Replaced, second.Replaced)
	}
	for _, c := range []struct {
		path string
		want uint64
	}{{first.Replaced, 8}, {second.Replaced, 3}, {dst, 3}} {
		db, err := journal.Open(c.path, &journal.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		last, err := db.LastGlobal(bg)
		_ = db.Close()
		if err != nil || last != c.want {
			t.Fatalf("%s holds %d events (%v), want %d", c.path, last, err, c.want)
		}
	}
	if left, _ := filepath.Glob(dst + ".restoring"); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// A journal being replaced that cannot be read has an unknown epoch: the
// restore needs MinEpoch for it rather than guessing 0.
func TestRestore_UnreadableDestinationNeedsMinEpoch(t *testing.T) {
	backup, _ := backupOf(t, 3)
	dst := filepath.Join(t.TempDir(), "refundd.db")
	if err := os.WriteFile(dst, bytes.Repeat([]byte("not a journal "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := journal.Restore(bg, backup, dst, &journal.RestoreOptions{Replace: true})
	if !errors.Is(err, journal.ErrInvalid) || !strings.Contains(err.Error(), "pass MinEpoch") {
		t.Fatalf("err = %v, want ErrInvalid asking for MinEpoch", err)
	}
	if b, _ := os.ReadFile(dst); !bytes.HasPrefix(b, []byte("not a journal")) {
		t.Fatal("the refused restore changed the destination")
	}
	info, err := journal.Restore(bg, backup, dst, &journal.RestoreOptions{Replace: true, MinEpoch: 7})
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch != 7 || info.Replaced == "" {
		t.Fatalf("restore %+v, want epoch 7 and the unreadable file kept aside", info)
	}
	if b, _ := os.ReadFile(info.Replaced); !bytes.HasPrefix(b, []byte("not a journal")) {
		t.Fatal("the unreadable journal was not kept aside")
	}
}

// Rewritten is where a journal's records may start to differ from those of
// a journal it descends from: the first restore's backup head, kept by a
// restore from a backup of a restored journal.
func TestRestore_RewrittenKeepsTheFirstBackupHead(t *testing.T) {
	backup, _ := backupOf(t, 3)
	dir := t.TempDir()
	first := filepath.Join(dir, "first.db")
	info, err := journal.Restore(bg, backup, first, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.Rewritten == nil || *info.Rewritten != 3 || info.RewrittenAfter() != 3 {
		t.Fatalf("first restore: %+v, want rewritten after 3", info)
	}
	db, err := journal.Open(first, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, db, "s2", 4) // globals 4-7, after the restore
	second := filepath.Join(dir, "second-backup.db")
	if _, err := db.BackupFile(bg, second); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	info, err = journal.Restore(bg, second, filepath.Join(dir, "again.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.Backup.Global != 7 || info.RewrittenAfter() != 3 {
		t.Fatalf("restore of a restored journal's backup: backup head %d, rewritten after %d; want 7 and 3", info.Backup.Global, info.RewrittenAfter())
	}
	// A restore recorded before Rewritten existed counts from its backup.
	old := journal.RestoreInfo{Backup: journal.Checkpoint{Global: 9}}
	if old.RewrittenAfter() != 9 {
		t.Fatalf("RewrittenAfter of an older record = %d, want 9", old.RewrittenAfter())
	}
}
