package journal

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// RestoreInfo records a restore in the restored journal's meta.
type RestoreInfo struct {
	// Epoch is the restored journal's epoch, above every epoch the backup
	// or the replaced journal had.
	Epoch uint64 `json:"epoch"`
	// BackupEpoch is the epoch the backup was taken in; refund numbers of
	// that epoch issued after the backup are unknown to the journal.
	BackupEpoch uint64 `json:"backup_epoch"`
	// ReplacedEpoch is the epoch of the journal the restore replaced (0
	// when there was none or it could not be read).
	ReplacedEpoch uint64 `json:"replaced_epoch,omitempty"`
	// Backup is the chain head the backup holds: records after it were
	// lost, and heads recorded after it no longer match.
	Backup     Checkpoint `json:"backup"`
	RestoredAt time.Time  `json:"restored_at"`
	Source     string     `json:"source"`
	// Replaced is where the journal that was at the destination was moved
	// (kept as evidence); empty when there was none.
	Replaced string `json:"replaced,omitempty"`
	// Rewritten is the global sequence after which this journal's records
	// may differ from those of a journal it descends from: the head of the
	// first backup in its line of restores (a backup of a restored journal
	// keeps the earlier, lower one). Records up to it are the original
	// journal's; a global sequence above it may have named another record
	// before a restore. Nil in restores written before it was recorded:
	// Backup.Global then.
	Rewritten *uint64 `json:"rewritten,omitempty"`
}

// RewrittenAfter returns Rewritten, or Backup.Global where it was not
// recorded.
func (r *RestoreInfo) RewrittenAfter() uint64 {
	if r.Rewritten != nil {
		return *r.Rewritten
	}
	return r.Backup.Global
}

// RestoreOptions configures Restore. The zero value refuses to overwrite
// anything and refuses a backup that fails Check.
type RestoreOptions struct {
	// MinEpoch is the lowest epoch the restored journal may get. Zero means
	// no floor beyond the backup's and the replaced journal's epochs. Set it
	// when the journal being replaced is lost, above every epoch ever used;
	// a journal being replaced that cannot be read is refused without it.
	MinEpoch uint64
	// Replace allows the destination to exist: it is moved aside to
	// dst+".replaced-<UTC time>", never deleted. A destination held by a
	// running refundd fails with ErrLocked. Zero (false) fails if it exists.
	Replace bool
	// Force restores a backup even if Check finds problems in it. Zero
	// (false) refuses such a backup.
	Force bool
	// Timeout is how long to wait for file locks; zero means 1s.
	Timeout time.Duration
	// Now is the clock for RestoredAt; nil means time.Now.
	Now func() time.Time
	// ArchiveDir is the backup's archive (segments and manifests), when
	// the backup's journal archived streams. Empty means ArchiveDir(src).
	// The restored journal gets a copy of it in ArchiveDir(dst).
	ArchiveDir string
}

// Restore makes dst a copy of the journal backup at src, ready for refundd:
// the copy gets a new epoch, above the backup's, the replaced journal's
// and opts.MinEpoch, so refund numbers issued after the backup are never
// issued again for other requests; and it is marked as needing
// reconciliation (ReconcileRequired) until refundd has checked every refund
// in flight with the provider. src is only read (opened read-only). The
// copy is written to a temporary file, fsynced, and renamed onto dst.
func Restore(ctx context.Context, src, dst string, opts *RestoreOptions) (RestoreInfo, error) {
	var o RestoreOptions
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	fail := func(err error) (RestoreInfo, error) {
		return RestoreInfo{}, fmt.Errorf("journal: restore %s to %s: %w", src, dst, err)
	}
	info := RestoreInfo{RestoredAt: o.Now().UTC(), Source: src}

	// The destination: not held by refundd, and its epoch counts.
	if _, err := os.Stat(dst); err == nil {
		if !o.Replace {
			return fail(fmt.Errorf("%w: destination exists (pass Replace to move it aside)", ErrInvalid))
		}
		old, err := Open(dst, &Options{Timeout: o.Timeout, ReadOnly: true})
		switch {
		case errors.Is(err, ErrLocked):
			return fail(err)
		case err != nil && o.MinEpoch == 0:
			// Its epoch is unknown: guessing 0 could issue again the refund
			// numbers of an epoch it used.
			return fail(fmt.Errorf("%w: the journal being replaced cannot be read, so its epoch is unknown (%v): pass MinEpoch above every epoch ever used (the refund-number prefixes in WeChat Pay's bills show them)", ErrInvalid, err))
		case err == nil:
			info.ReplacedEpoch, err = old.Epoch(ctx)
			cerr := old.Close()
			if err != nil {
				return fail(err)
			}
			if cerr != nil {
				return fail(cerr)
			}
		}
		// An unreadable destination is moved aside all the same, under the
		// MinEpoch the caller gave for it.
	} else if !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}

	// The backup: read-only, whole, consistent.
	from, err := Open(src, &Options{Timeout: o.Timeout, ReadOnly: true})
	if err != nil {
		return fail(err)
	}
	defer from.Close()
	// A journal that archived streams is whole only with its archive: it
	// is checked with it, and goes with it.
	var arch *Archive
	if segs, err := from.ArchivedSegments(); err != nil {
		return fail(err)
	} else if len(segs) > 0 {
		if arch, err = OpenArchive(from, cmpOr(o.ArchiveDir, ArchiveDir(src))); err != nil {
			return fail(err)
		}
	}
	res, err := from.Check(ctx, &CheckOptions{Archive: arch})
	if err != nil {
		return fail(err)
	}
	if !res.OK() && !o.Force {
		return fail(fmt.Errorf("backup fails its check (%d problems; first: %w)", len(res.Problems)+res.Dropped, res.Problems[0]))
	}
	rewritten := res.Head.Global
	if prev, err := from.LastRestore(ctx); err != nil {
		return fail(err)
	} else if prev != nil {
		rewritten = min(rewritten, prev.RewrittenAfter())
	}
	info.Rewritten = &rewritten
	info.BackupEpoch = res.Epoch
	info.Backup = Checkpoint{Global: res.Head.Global, Hash: res.Head.Hash}
	info.Epoch = max(info.BackupEpoch, info.ReplacedEpoch) + 1
	info.Epoch = max(info.Epoch, o.MinEpoch)
	meta, err := json.Marshal(info)
	if err != nil {
		return fail(err)
	}

	snap, err := from.Snapshot(ctx)
	if err != nil {
		return fail(err)
	}
	defer snap.Close()
	tmp := dst + ".restoring"
	_ = os.Remove(tmp) // a leftover of an interrupted restore
	err = WriteFileAtomic(tmp, func(w io.Writer) error {
		_, err := snap.WriteTo(w)
		return err
	})
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp) // gone after the rename; only left on failure
	if err := markRestored(tmp, info.Epoch, meta, o.Timeout); err != nil {
		return fail(err)
	}
	if arch != nil {
		// The archive first: dst never names segments it does not have.
		if err := arch.CopyTo(ArchiveDir(dst)); err != nil {
			return fail(err)
		}
	}
	if _, err := os.Stat(dst); err == nil {
		if info.Replaced, err = keepAside(dst, info.RestoredAt); err != nil {
			return fail(err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		if info.Replaced != "" {
			_ = os.Remove(info.Replaced) // dst still holds the same file
		}
		return fail(err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return fail(err)
	}
	return info, nil
}

// keepAside gives the journal at dst a second name that no file has yet,
// dst.replaced-TIME (with -2, -3, ... when taken), by a hard link: a link
// never replaces a file, so two restores within one second cannot put the
// first one's copy over the journal it kept aside, and dst stays in place
// until the restored copy replaces it in one rename, so no crash leaves
// no journal at dst.
func keepAside(dst string, at time.Time) (string, error) {
	base := dst + ".replaced-" + at.Format("20060102T150405Z")
	name := base
	for n := 2; ; n++ {
		err := os.Link(dst, name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) || n > 1000 {
			return "", fmt.Errorf("keep %s aside: %w", dst, err)
		}
		name = fmt.Sprintf("%s-%d", base, n)
	}
}

// markRestored writes the epoch and the restore records into the copy at
// path, fsynced.
func markRestored(path string, epoch uint64, info []byte, timeout time.Duration) error {
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if err != nil {
		return err
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%w: no meta bucket", ErrCorrupt)
		}
		if err := meta.Put(metaEpochKey, be64(epoch)); err != nil {
			return err
		}
		if err := meta.Put(metaRestoreKey, info); err != nil {
			return err
		}
		return meta.Put(metaReconcileKey, info)
	})
	if cerr := bdb.Close(); err == nil {
		err = cerr
	}
	return err
}

// Epoch returns the journal's refund-number epoch: 0 for a journal never
// restored, raised by each Restore.
func (db *DB) Epoch(ctx context.Context) (uint64, error) {
	var epoch uint64
	err := db.view(ctx, func(tx *bolt.Tx) (err error) {
		epoch, err = epochInTx(tx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("journal: epoch: %w", err)
	}
	return epoch, nil
}

func epochInTx(tx *bolt.Tx) (uint64, error) {
	v := tx.Bucket(bucketMeta).Get(metaEpochKey)
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	}
	return 0, fmt.Errorf("%w: meta epoch is %d bytes", ErrCorrupt, len(v))
}

// ReconcileRequired returns the restore whose reconciliation is still
// pending, or nil when none is: a restored journal has lost the refunds
// made after its backup, so refundd must check every refund in flight with
// the provider before it takes new refund requests, then call
// ClearReconcileRequired.
func (db *DB) ReconcileRequired(ctx context.Context) (*RestoreInfo, error) {
	info, err := db.metaRestore(ctx, metaReconcileKey)
	if err != nil {
		return nil, fmt.Errorf("journal: reconcile required: %w", err)
	}
	return info, nil
}

// LastRestore returns the last restore of this journal, or nil when it was
// never restored.
func (db *DB) LastRestore(ctx context.Context) (*RestoreInfo, error) {
	info, err := db.metaRestore(ctx, metaRestoreKey)
	if err != nil {
		return nil, fmt.Errorf("journal: last restore: %w", err)
	}
	return info, nil
}

func (db *DB) metaRestore(ctx context.Context, key []byte) (*RestoreInfo, error) {
	var info *RestoreInfo
	err := db.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get(key)
		if v == nil {
			return nil
		}
		info = &RestoreInfo{}
		if err := json.Unmarshal(v, info); err != nil {
			return fmt.Errorf("%w: meta %s: %v", ErrCorrupt, key, err)
		}
		return nil
	})
	return info, err
}

// ClearReconcileRequired records that the reconciliation after a restore
// is done (fsynced). Clearing when nothing is pending is not an error.
func (db *DB) ClearReconcileRequired(ctx context.Context) error {
	if db.opts.ReadOnly {
		return fmt.Errorf("journal: clear reconcile: %w", ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("journal: clear reconcile: %w", err)
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(metaReconcileKey) })
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = ErrClosed
	}
	if err != nil {
		return fmt.Errorf("journal: clear reconcile: %w", err)
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// CopyTo copies the segments and manifests a names into dir, each
// through a temporary file, fsynced and renamed (read-only, like the
// originals), for a backup or a restore. A file already there with the
// expected SHA-256 is kept.
func (a *Archive) CopyTo(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for i, ap := range a.Applied {
		for _, f := range []struct{ name, sum string }{{ap.Segment, a.Manifests[i].SegmentSHA256}, {ap.Manifest, ap.ManifestSHA256}} {
			from, to := filepath.Join(a.Dir, f.name), filepath.Join(dir, f.name)
			if sum, err := FileSHA256(to); err == nil && sum == f.sum {
				continue
			}
			err := WriteFileAtomic(to, func(w io.Writer) error {
				src, err := os.Open(from)
				if err != nil {
					return err
				}
				defer src.Close()
				_, err = io.Copy(w, src)
				return err
			})
			if err != nil {
				return fmt.Errorf("copy archive %s: %w", f.name, err)
			}
			_ = os.Chmod(to, 0o400)
		}
	}
	return nil
}

// FileSHA256 is the hex SHA-256 of the file at path, as manifests and
// AppliedSegment record it.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
