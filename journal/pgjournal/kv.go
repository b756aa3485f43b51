package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/refundd/refundd/journal"
)

// The kv table is the bbolt journal's key-value area (journal/kv.go): a
// small durable map beside the log for readers that must remember where
// they are. It is shared by every node and not part of the event history.

// Get returns the value stored under key, or journal.ErrNotFound.
func (db *DB) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKVKey(key); err != nil {
		return nil, fmt.Errorf("pgjournal: kv get: %w", err)
	}
	if err := db.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgjournal: kv get %q: %w", key, err)
	}
	var v []byte
	err := db.pool.QueryRow(ctx, "SELECT value FROM kv WHERE key = $1", b(key)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		err = journal.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgjournal: kv get %q: %w", key, err)
	}
	return nonNil(v), nil
}

// List returns the entries whose key starts with prefix, in key order. An
// empty prefix lists everything.
func (db *DB) List(ctx context.Context, prefix string) ([]journal.KV, error) {
	out := []journal.KV{}
	if err := db.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgjournal: kv list %q: %w", prefix, err)
	}
	q := "SELECT key, value FROM kv WHERE key >= $1 ORDER BY key"
	args := []any{b(prefix)}
	if end := prefixEnd(prefix); end != nil {
		q = "SELECT key, value FROM kv WHERE key >= $1 AND key < $2 ORDER BY key"
		args = append(args, end)
	}
	rows, err := db.pool.Query(ctx, q, args...)
	if err == nil {
		defer rows.Close()
		for rows.Next() {
			var k, v []byte
			if err = rows.Scan(&k, &v); err != nil {
				break
			}
			out = append(out, journal.KV{Key: string(k), Value: nonNil(v)})
		}
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pgjournal: kv list %q: %w", prefix, err)
	}
	return out, nil
}

// Put stores value under key, replacing any previous value.
func (db *DB) Put(ctx context.Context, key string, value []byte) error {
	return db.WriteKV(ctx, []journal.KV{{Key: key, Value: value}}, nil)
}

// Delete removes key; removing a missing key is not an error.
func (db *DB) Delete(ctx context.Context, key string) error {
	return db.WriteKV(ctx, nil, []string{key})
}

// WriteKV stores put and removes del in one transaction: either all of it
// is durable or none. Deletes run after puts, so a key in both ends up
// removed; of two puts of one key the later wins. Value may be empty but
// not over 1 MiB. It does not go through the append group commit.
func (db *DB) WriteKV(ctx context.Context, put []journal.KV, del []string) error {
	for _, e := range put {
		if err := checkKVKey(e.Key); err != nil {
			return fmt.Errorf("pgjournal: kv write: %w", err)
		}
		if len(e.Value) > maxKVValueLen {
			return fmt.Errorf("pgjournal: kv write %q: %w: value is %d bytes, limit %d",
				e.Key, journal.ErrInvalid, len(e.Value), maxKVValueLen)
		}
	}
	for _, k := range del {
		if err := checkKVKey(k); err != nil {
			return fmt.Errorf("pgjournal: kv write: %w", err)
		}
	}
	if len(put) == 0 && len(del) == 0 {
		return nil
	}
	// One row per key (ON CONFLICT DO UPDATE may not touch a row twice),
	// the last put winning.
	last := make(map[string]int, len(put))
	for i, e := range put {
		last[e.Key] = i
	}
	// Rows in key order, so two concurrent WriteKVs lock them in the same
	// order and cannot deadlock.
	kvs := make([]journal.KV, 0, len(last))
	for i, e := range put {
		if last[e.Key] == i {
			kvs = append(kvs, e)
		}
	}
	slices.SortFunc(kvs, func(x, y journal.KV) int { return strings.Compare(x.Key, y.Key) })
	var keys, values [][]byte
	for _, e := range kvs {
		keys = append(keys, b(e.Key))
		values = append(values, append([]byte{}, e.Value...))
	}
	sorted := slices.Sorted(slices.Values(del))
	dels := make([][]byte, len(sorted))
	for i, k := range sorted {
		dels[i] = b(k)
	}
	err := db.exec(ctx, func(tx pgx.Tx) error {
		if len(keys) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO kv (key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[])
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, keys, values); err != nil {
				return err
			}
		}
		if len(dels) > 0 {
			if _, err := tx.Exec(ctx, "DELETE FROM kv WHERE key = ANY($1::bytea[])", dels); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgjournal: kv write: %w", err)
	}
	return nil
}
