package journal

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Verify checks the whole file in one read transaction: bbolt's own page
// consistency, every record's format and checksum, that globals run 1..N
// without gaps, that each stream's seqs run 1..head without gaps and agree
// with the streams index and the heads bucket, and that every claim points
// to an existing stream. It returns the first problem found, wrapping
// ErrCorrupt (or ErrFormatTooNew). It reads everything: use it in tests,
// tools and after a crash, not on a hot path.
func (db *DB) Verify(ctx context.Context) error {
	err := db.view(ctx, func(tx *bolt.Tx) error {
		// Drain the whole channel so the checker goroutine ends; keep the
		// first error.
		var first error
		for err := range tx.Check() {
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return fmt.Errorf("%w: bbolt: %w", ErrCorrupt, first)
		}
		return verifyTx(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("journal: verify %s: %w", db.path, err)
	}
	return nil
}

func verifyTx(ctx context.Context, tx *bolt.Tx) error {
	b := txBuckets(tx)
	if b.log == nil || b.heads == nil || b.streams == nil || b.claims == nil || b.due == nil || tx.Bucket(bucketMeta) == nil {
		return fmt.Errorf("%w: missing bucket", ErrCorrupt)
	}

	// Log: gap-free globals, valid records, per-stream gap-free seqs, each
	// with its index entry.
	seqs := map[string]uint64{}
	var last uint64
	c := b.log.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if last%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if len(k) != 8 {
			return fmt.Errorf("%w: log key of %d bytes after global %d", ErrCorrupt, len(k), last)
		}
		g := binary.BigEndian.Uint64(k)
		if g != last+1 {
			return fmt.Errorf("%w: global %d follows %d", ErrCorrupt, g, last)
		}
		r, err := decodeRecord(g, v)
		if err != nil {
			return err
		}
		if err := checkStream(r.Stream); err != nil {
			return fmt.Errorf("%w: global %d: %w", ErrCorrupt, g, err)
		}
		if want := seqs[r.Stream] + 1; r.Seq != want {
			return fmt.Errorf("%w: global %d: stream %q seq %d, want %d", ErrCorrupt, g, r.Stream, r.Seq, want)
		}
		seqs[r.Stream] = r.Seq
		iv := b.streams.Get(streamKey(r.Stream, r.Seq))
		if len(iv) != 8 || binary.BigEndian.Uint64(iv) != g {
			return fmt.Errorf("%w: stream %q seq %d: index entry %x does not point to global %d",
				ErrCorrupt, r.Stream, r.Seq, iv, g)
		}
		last = g
	}
	if s := b.log.Sequence(); s != last {
		return fmt.Errorf("%w: log sequence is %d but last global is %d", ErrCorrupt, s, last)
	}

	// Streams index: no entries beyond those checked above. Every record has
	// its own entry, so equal counts means no extras.
	var indexed uint64
	if err := b.streams.ForEach(func(k, _ []byte) error {
		if _, _, ok := parseStreamKey(k); !ok {
			return fmt.Errorf("%w: malformed stream index key %x", ErrCorrupt, k)
		}
		indexed++
		return nil
	}); err != nil {
		return err
	}
	if indexed != last {
		return fmt.Errorf("%w: stream index has %d entries for %d records", ErrCorrupt, indexed, last)
	}

	// Heads: exactly one per stream, equal to its last seq.
	var heads int
	if err := b.heads.ForEach(func(k, v []byte) error {
		heads++
		h, err := readHead(b.heads, string(k))
		if err != nil {
			return err
		}
		if want, ok := seqs[string(k)]; !ok || h != want {
			return fmt.Errorf("%w: head of stream %q is %d, log says %d", ErrCorrupt, k, h, want)
		}
		return nil
	}); err != nil {
		return err
	}
	if heads != len(seqs) {
		return fmt.Errorf("%w: %d heads for %d streams", ErrCorrupt, heads, len(seqs))
	}

	// Claims: owned by a stream that exists.
	if err := b.claims.ForEach(func(k, v []byte) error {
		if _, ok := seqs[string(v)]; !ok {
			return fmt.Errorf("%w: claim %q owned by unknown stream %q", ErrCorrupt, k, v)
		}
		return nil
	}); err != nil {
		return err
	}

	// Due: well-formed keys.
	return b.due.ForEach(func(k, _ []byte) error {
		if _, ok := parseDueKey(k); !ok {
			return fmt.Errorf("%w: malformed due key %x", ErrCorrupt, k)
		}
		return nil
	})
}
