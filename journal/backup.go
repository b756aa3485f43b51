package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Snapshot is a consistent, read-only view of the whole file as of one
// moment, for hot backups: WriteTo writes a complete bbolt file that opens
// as a journal of its own. It holds a bbolt read transaction until Close.
// While it is open, bbolt cannot remap the file, so an append that needs
// the file to grow past its current mapping waits until the Snapshot is
// closed (mappings grow by doubling, then by 1 GiB, so this is rare, but a
// slow reader of WriteTo can stall appends for as long as it takes). Copy
// it to local disk first when the reader may be slow, and Close it
// promptly. A Snapshot must be used by one goroutine at a time; never
// append from the goroutine that holds one open.
type Snapshot struct {
	tx    *bolt.Tx
	head  Checkpoint
	epoch uint64
}

// Snapshot starts a hot backup. The caller must Close the Snapshot.
func (db *DB) Snapshot(ctx context.Context) (*Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("journal: snapshot: %w", err)
	}
	tx, err := db.bolt.Begin(false)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = ErrClosed
	}
	if err != nil {
		return nil, fmt.Errorf("journal: snapshot: %w", err)
	}
	t, err := tipInTx(tx)
	if err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("journal: snapshot: %w", err)
	}
	epoch, err := epochInTx(tx)
	if err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("journal: snapshot: %w", err)
	}
	return &Snapshot{tx: tx, head: db.newCheckpoint(t, db.opts.Now()), epoch: epoch}, nil
}

// Epoch is the refund-number epoch of the journal the snapshot holds.
// Read it here, not with DB.Epoch, while the snapshot is open: a second
// read transaction can wait behind a commit that waits for this one (bbolt
// remaps the file only when no read transaction is open), and deadlock.
func (s *Snapshot) Epoch() uint64 { return s.epoch }

// Size is the exact number of bytes WriteTo writes.
func (s *Snapshot) Size() int64 { return s.tx.Size() }

// Head is the chain head the snapshot holds: its last global and chain
// hash, timed when the snapshot was taken (signed when the DB has a
// SigningKey).
func (s *Snapshot) Head() Checkpoint { return s.head }

// WriteTo writes the snapshot as a bbolt file, exactly Size() bytes when
// it succeeds.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	n, err := s.tx.WriteTo(w)
	if err != nil {
		return n, fmt.Errorf("journal: snapshot: write: %w", err)
	}
	return n, nil
}

// Close ends the snapshot's read transaction. It is safe to call twice.
func (s *Snapshot) Close() error {
	err := s.tx.Rollback()
	if errors.Is(err, berrors.ErrTxClosed) {
		return nil
	}
	return err
}

// BackupFile writes a consistent copy of the journal to path (mode 0600),
// through a temporary file in the same directory that is fsynced and then
// renamed, so path holds either nothing new or a complete copy. An existing
// path is replaced. It returns the head the copy holds.
func (db *DB) BackupFile(ctx context.Context, path string) (Checkpoint, error) {
	snap, err := db.Snapshot(ctx)
	if err != nil {
		return Checkpoint{}, err
	}
	defer snap.Close()
	err = WriteFileAtomic(path, func(w io.Writer) error {
		_, err := snap.WriteTo(w)
		return err
	})
	if err != nil {
		return Checkpoint{}, fmt.Errorf("journal: backup to %s: %w", path, err)
	}
	return snap.Head(), nil
}

// WriteFileAtomic creates path (mode 0600) with what write writes, through
// a temporary file in the same directory that is fsynced, renamed over
// path, and followed by an fsync of the directory. On error nothing is left
// behind and an existing path is untouched.
func WriteFileAtomic(path string, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return err
	}
	if err = write(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
