package journal

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Mark sets (or, with Clear, removes) a key in the marks index, atomically
// with the events it is appended with. Marks are a small secondary index the
// caller derives from its events (for example "refunds needing attention"),
// so that listing them never needs a scan of the log.
type Mark struct {
	Key   string // 1..1024 bytes
	Clear bool
}

// Marks lists the keys in the marks index that start with prefix, in key
// order, after the key after (exclusive; "" starts at the beginning), at
// most limit (limit <= 0 means no limit).
func (db *DB) Marks(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	keys := []string{}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMarks)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		p := []byte(prefix)
		k, _ := c.Seek(p)
		if after != "" {
			k, _ = c.Seek([]byte(after))
			if k != nil && string(k) == after {
				k, _ = c.Next()
			}
		}
		for ; k != nil && bytes.HasPrefix(k, p) && (limit <= 0 || len(keys) < limit); k, _ = c.Next() {
			keys = append(keys, string(k))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: marks %q: %w", prefix, err)
	}
	return keys, nil
}
