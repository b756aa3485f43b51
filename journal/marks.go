package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Mark sets (or, with Clear, removes) a key in the marks index, atomically
// with the events it is appended with. Marks are a small secondary index the
// caller derives from its events (for example "refunds needing attention"),
// so that listing them never needs a scan of the log.
type Mark struct {
	Key   string // 1..1024 bytes
	Clear bool
}

// ValidateMark checks a mark as Append and WriteMarks do (the PostgreSQL
// journal too): ErrInvalid for an empty or too long key.
func ValidateMark(m Mark) error {
	if len(m.Key) == 0 || len(m.Key) > maxKeyLen {
		return fmt.Errorf("%w: mark key must be 1..%d bytes, got %d", ErrInvalid, maxKeyLen, len(m.Key))
	}
	return nil
}

// Marks lists the keys in the marks index that start with prefix, in key
// order, after the key after (exclusive; "" starts at the beginning), at
// most limit (limit <= 0 means no limit).
func (db *DB) Marks(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	keys := []string{}
	var tail []markEntry
	copyTail := func(t *markTail) { tail = t.tailMarks(prefix, after, "") }
	err := db.viewMarked(ctx, copyTail, func(tx *bolt.Tx, _ uint64) error {
		if len(tail) > 0 && tail[0].key == after {
			tail = tail[1:]
		}
		b := tx.Bucket(bucketMarks)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		p := []byte(prefix)
		// From the prefix or after it, whichever is later (an after
		// before the prefix used to end the list at once).
		k, _ := c.Seek([]byte(max(prefix, after)))
		if after != "" && k != nil && string(k) == after {
			k, _ = c.Next()
		}
		next := func() []byte {
			if k == nil || !bytes.HasPrefix(k, p) {
				return nil
			}
			return k
		}
		keys = mergeMarks(keys, next, func() { k, _ = c.Next() }, tail, limit, func(a, b string) bool { return a < b })
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: marks %q: %w", prefix, err)
	}
	return keys, nil
}

// mergeMarks appends to keys, up to limit in all, the bucket's keys (cur
// the current one or nil, advance to the next) merged with the tail's
// marks in the same order (less), a tail mark replacing the bucket's key.
func mergeMarks(keys []string, cur func() []byte, advance func(), tail []markEntry, limit int, less func(a, b string) bool) []string {
	for limit <= 0 || len(keys) < limit {
		k := cur()
		if k == nil && len(tail) == 0 {
			break
		}
		if len(tail) > 0 && (k == nil || !less(string(k), tail[0].key)) {
			if k != nil && string(k) == tail[0].key {
				advance()
			}
			if tail[0].set {
				keys = append(keys, tail[0].key)
			}
			tail = tail[1:]
			continue
		}
		keys = append(keys, string(k))
		advance()
	}
	return keys
}

// MarksDesc lists the keys in the marks index that start with prefix and
// sort before before ("" means no bound), in descending key order, at most
// limit (limit <= 0 means no limit): Marks read from the other end, for a
// list that pages through an index both ways (GET /v1/refunds?order=asc).
func (db *DB) MarksDesc(ctx context.Context, prefix, before string, limit int) ([]string, error) {
	keys := []string{}
	var tail []markEntry
	copyTail := func(t *markTail) { tail = t.tailMarks(prefix, "", before) }
	err := db.viewMarked(ctx, copyTail, func(tx *bolt.Tx, _ uint64) error {
		slices.Reverse(tail)
		b := tx.Bucket(bucketMarks)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		p := []byte(prefix)
		var k []byte
		end := prefixEnd(p)
		switch {
		case before != "" && (end == nil || before < string(end)):
			k, _ = c.Seek([]byte(before))
		case end != nil:
			k, _ = c.Seek(end)
		}
		if k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
		next := func() []byte {
			if k == nil || !bytes.HasPrefix(k, p) {
				return nil
			}
			return k
		}
		keys = mergeMarks(keys, next, func() { k, _ = c.Prev() }, tail, limit, func(a, b string) bool { return a > b })
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: marks desc %q: %w", prefix, err)
	}
	return keys, nil
}

// prefixEnd is the least key greater than every key that starts with p, or
// nil when there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	e := bytes.Clone(p)
	for i := len(e) - 1; i >= 0; i-- {
		if e[i] < 0xff {
			e[i]++
			return e[:i+1]
		}
	}
	return nil
}

// WriteMarks sets and clears marks in one fsynced transaction without
// appending a record: for an upgrade that back-fills a marks index the
// journal's older appends did not write (eventstore.BackfillLists), run
// before any append can change the marks it writes.
func (db *DB) WriteMarks(ctx context.Context, marks []Mark) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.opts.ReadOnly {
		return fmt.Errorf("journal: write marks: %w", ErrReadOnly)
	}
	for _, m := range marks {
		if err := ValidateMark(m); err != nil {
			return fmt.Errorf("journal: write marks: %w", err)
		}
	}
	// The mark tail goes first, in the same transaction, so that these
	// marks are not undone by older pending ones.
	db.markMu.Lock()
	defer db.markMu.Unlock()
	var w uint64
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		if w, err = db.writeMarkTail(tx, true); err != nil {
			return err
		}
		b := tx.Bucket(bucketMarks)
		for _, m := range marks {
			if m.Clear {
				err = b.Delete([]byte(m.Key))
			} else {
				err = b.Put([]byte(m.Key), nil)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		db.resetMarks(w)
	}
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = ErrClosed
	}
	if err != nil {
		return fmt.Errorf("journal: write marks: %w", err)
	}
	return nil
}

// StreamMarks is one stream's marks for a write that holds only while the
// stream's head is still Head (pgjournal.DB.WriteMarksAt): marks derived
// from the stream's state at that head, such as its list rows.
type StreamMarks struct {
	Stream string
	Head   uint64
	Marks  []Mark
}
