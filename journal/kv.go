package journal

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The kv bucket is a small durable key-value area beside the log, for
// readers of the journal that must remember where they are (a webhook
// endpoint's cursor, its parked events). It lives in the same file so a
// backup carries the log and the readers' positions together. It is not part
// of the event history: Verify does not look at it, and nothing in it is
// checksummed or versioned by the journal.
//
// Keys are namespaced by convention, "owner/part/part" (for example
// "webhook/ledger/cursor"), so List by prefix reads one owner's entries.

var bucketKV = []byte("kv")

// maxKVValueLen caps one value; the area holds cursors and small records.
const maxKVValueLen = 1 << 20

// KV is one entry of the key-value area.
type KV struct {
	Key   string
	Value []byte
}

func checkKVKey(k string) error {
	if len(k) == 0 || len(k) > maxKeyLen {
		return fmt.Errorf("%w: kv key must be 1..%d bytes, got %d", ErrInvalid, maxKeyLen, len(k))
	}
	return nil
}

// Get returns the value stored under key, or ErrNotFound.
func (db *DB) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKVKey(key); err != nil {
		return nil, fmt.Errorf("journal: kv get: %w", err)
	}
	var v []byte
	err := db.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKV)
		if b == nil {
			return ErrNotFound
		}
		raw := b.Get([]byte(key))
		if raw == nil {
			return ErrNotFound
		}
		v = append([]byte{}, raw...) // raw is only valid inside the transaction
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: kv get %q: %w", key, err)
	}
	return v, nil
}

// List returns the entries whose key starts with prefix, in key order. An
// empty prefix lists everything.
func (db *DB) List(ctx context.Context, prefix string) ([]KV, error) {
	out := []KV{}
	p := []byte(prefix)
	err := db.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKV)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			out = append(out, KV{Key: string(k), Value: append([]byte{}, v...)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: kv list %q: %w", prefix, err)
	}
	return out, nil
}

// Put stores value under key, replacing any previous value, and returns
// after the write is fsynced (unless Options.NoSync).
func (db *DB) Put(ctx context.Context, key string, value []byte) error {
	return db.WriteKV(ctx, []KV{{Key: key, Value: value}}, nil)
}

// Delete removes key; removing a missing key is not an error.
func (db *DB) Delete(ctx context.Context, key string) error {
	return db.WriteKV(ctx, nil, []string{key})
}

// WriteKV stores put and removes del in one fsynced transaction: either all
// of it is durable or none. Deletes run after puts, so a key in both ends up
// removed. Value may be empty but not over 1 MiB.
//
// It rides in the append group commit: a write queued while a commit runs
// goes out with the appends of the next one, and costs no fsync of its own.
func (db *DB) WriteKV(ctx context.Context, put []KV, del []string) error {
	for _, e := range put {
		if err := checkKVKey(e.Key); err != nil {
			return fmt.Errorf("journal: kv write: %w", err)
		}
		if len(e.Value) > maxKVValueLen {
			return fmt.Errorf("journal: kv write %q: %w: value is %d bytes, limit %d",
				e.Key, ErrInvalid, len(e.Value), maxKVValueLen)
		}
	}
	for _, k := range del {
		if err := checkKVKey(k); err != nil {
			return fmt.Errorf("journal: kv write: %w", err)
		}
	}
	if len(put) == 0 && len(del) == 0 {
		return nil
	}
	if db.opts.ReadOnly {
		return fmt.Errorf("journal: kv write: %w", ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("journal: kv write: %w", err)
	}
	// bbolt keeps the slices until commit, and the commit runs after the
	// caller may have reused its buffers: hand it copies.
	w := &kvWrite{put: make([]KV, len(put)), del: slices.Clone(del)}
	for i, e := range put {
		w.put[i] = KV{Key: e.Key, Value: slices.Clone(e.Value)}
	}
	if _, err := db.loop.Do(ctx, request{kv: w}); err != nil {
		return fmt.Errorf("journal: kv write: %w", err)
	}
	return nil
}

// writeKV writes w in tx, the committer's transaction.
func writeKV(tx *bolt.Tx, w *kvWrite) error {
	b, err := tx.CreateBucketIfNotExists(bucketKV)
	if err != nil {
		return err
	}
	for _, e := range w.put {
		v := e.Value
		if v == nil {
			v = []byte{} // an empty value is a value, not a missing one
		}
		if err := b.Put([]byte(e.Key), v); err != nil {
			return err
		}
	}
	for _, k := range w.del {
		if err := b.Delete([]byte(k)); err != nil {
			return err
		}
	}
	return nil
}

// Committed returns a channel that is closed after the next commit of
// appends (successful or not), or when the DB is closed. A reader that wants
// to wait for new records takes the channel first, then reads, and waits on
// the channel only if the read found nothing new, so no commit is missed.
func (db *DB) Committed() <-chan struct{} {
	ch, _ := db.loop.Committed()
	return ch
}

// WaitGlobal returns nil as soon as the journal holds a record with Global >
// after (at once if it already does). It returns ctx's error when ctx ends
// first, and ErrClosed when the DB is closed.
func (db *DB) WaitGlobal(ctx context.Context, after uint64) error {
	for {
		ch, stopped := db.loop.Committed()
		last, err := db.LastGlobal(ctx)
		if err != nil {
			return err
		}
		if last > after {
			return nil
		}
		if stopped { // no record can come any more
			return fmt.Errorf("journal: wait after %d: %w", after, ErrClosed)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
