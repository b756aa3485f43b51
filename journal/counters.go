package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Counters are running totals kept beside the log, changed in the same
// commit as the records they count, so reading them answers "how many, how
// much" without reading the history (refundctl journal stats). The journal
// does not know what they mean: an append carries its changes
// (AppendRequest.Counters), worked out by the writer from the events, and a
// reader that knows the events (audit.Verify) recomputes them from the log
// and reports a difference.
//
// meta "counted" holds be64(G) when the counters cover every record: set
// when the file is created, or when SetCounters stores totals folded from
// the log up to its end G. A file from before format 4 lacks it: its
// counters hold only what was appended since the upgrade, and readers fold
// the log instead (Counts.Complete is false).

// CountersGeneration is the generation of the writers' counters that a
// file created (or rebuilt by SetCounters) by this build keeps from its
// first record: 1, the first ones; 2 added the per-hour refund totals
// (eventstore.CountTotals). The journal does not know what they mean; it
// stores the generation with "counted" (be64(G) + be64(generation); a file
// of generation 1 has be64(G) alone), so that a reader can tell whether
// the counters a later generation added cover the whole history or only
// what was appended since the upgrade.
const CountersGeneration = 2

var (
	bucketCounters   = []byte("counters")
	metaCountedKey   = []byte("counted")
	maxCounterKeyLen = 128
)

// Counter is one change to a counter of the journal.
type Counter struct {
	Key string // 1..128 bytes, no NUL
	// Add is added to the stored value (absent: 0), or with Max the larger
	// of the two is kept (a latest time, say).
	Add int64
	Max bool
}

// Counts is the counters as of one commit.
type Counts struct {
	Values map[string]int64
	// Complete is true when the counters cover every record (a file
	// created with them, or rebuilt by SetCounters); false for a file
	// that predates them.
	Complete bool
	// LastGlobal is the last record the counters include.
	LastGlobal uint64
	// Generation is the counters' generation (CountersGeneration) when
	// Complete; 0 otherwise.
	Generation uint64
}

// countedValue is meta "counted" for counters complete up to global at, of
// this build's generation.
func countedValue(at uint64) []byte {
	return append(be64(at), be64(CountersGeneration)...)
}

// countedGeneration reads the generation from meta "counted" (nil: 0, not
// complete).
func countedGeneration(v []byte) uint64 {
	switch {
	case v == nil:
		return 0
	case len(v) >= 16:
		return binary.BigEndian.Uint64(v[8:16])
	}
	return 1
}

func checkCounter(c Counter) error {
	if len(c.Key) == 0 || len(c.Key) > maxCounterKeyLen || strings.IndexByte(c.Key, 0) >= 0 {
		return fmt.Errorf("%w: counter key must be 1..%d bytes without NUL, got %d", ErrInvalid, maxCounterKeyLen, len(c.Key))
	}
	return nil
}

// counterBatch sums the counter changes of one commit's accepted requests,
// so each counter is written once per commit however many appends changed
// it.
type counterBatch struct {
	add map[string]int64
	max map[string]int64
}

func (b *counterBatch) put(cs []Counter) {
	for _, c := range cs {
		if c.Max {
			if b.max == nil {
				b.max = map[string]int64{}
			}
			if v, ok := b.max[c.Key]; !ok || c.Add > v {
				b.max[c.Key] = c.Add
			}
			continue
		}
		if b.add == nil {
			b.add = map[string]int64{}
		}
		b.add[c.Key] += c.Add
	}
}

// write applies the sums in tx.
func (b *counterBatch) write(bk *bolt.Bucket) error {
	for k, d := range b.add {
		if d == 0 {
			continue
		}
		v, err := counterValue(bk, k)
		if err != nil {
			return err
		}
		if err := bk.Put([]byte(k), be64(uint64(v+d))); err != nil {
			return err
		}
	}
	for k, m := range b.max {
		v, err := counterValue(bk, k)
		if err != nil {
			return err
		}
		if bk.Get([]byte(k)) == nil || m > v {
			if err := bk.Put([]byte(k), be64(uint64(m))); err != nil {
				return err
			}
		}
	}
	return nil
}

func counterValue(bk *bolt.Bucket, k string) (int64, error) {
	v := bk.Get([]byte(k))
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return int64(binary.BigEndian.Uint64(v)), nil
	}
	return 0, fmt.Errorf("%w: counter %q is %d bytes, want 8", ErrCorrupt, k, len(v))
}

// Counters returns the counters and the last global they include, read in
// one transaction.
func (db *DB) Counters(ctx context.Context) (Counts, error) {
	return db.countersBetween(ctx, "", "")
}

// CountersBetween returns the counters whose keys are in [from, to) (to ""
// means no end), read in one transaction with Complete, Generation and
// LastGlobal as Counters sets them: a range of keys that sort by time (per-
// hour totals) reads only its span.
func (db *DB) CountersBetween(ctx context.Context, from, to string) (Counts, error) {
	return db.countersBetween(ctx, from, to)
}

func (db *DB) countersBetween(ctx context.Context, from, to string) (Counts, error) {
	in := func(k string) bool { return k >= from && (to == "" || k < to) }
	var tail counterBatch
	copyTail := func(t *markTail) {
		tail = counterBatch{add: map[string]int64{}, max: map[string]int64{}}
		for k, d := range t.add {
			if in(k) {
				tail.add[k] = d
			}
		}
		for k, m := range t.max {
			if in(k) {
				tail.max[k] = m
			}
		}
	}
	var cs Counts
	err := db.viewMarked(ctx, copyTail, func(tx *bolt.Tx, tip uint64) error {
		cs = Counts{Values: map[string]int64{}, LastGlobal: tip}
		counted := tx.Bucket(bucketMeta).Get(metaCountedKey)
		cs.Complete, cs.Generation = counted != nil, countedGeneration(counted)
		bk := tx.Bucket(bucketCounters)
		if bk == nil {
			cs.Complete, cs.Generation = false, 0
			return nil
		}
		c := bk.Cursor()
		for k, v := c.Seek([]byte(from)); k != nil && (to == "" || string(k) < to); k, v = c.Next() {
			if len(v) != 8 {
				return fmt.Errorf("%w: counter %q is %d bytes, want 8", ErrCorrupt, k, len(v))
			}
			cs.Values[string(k)] = int64(binary.BigEndian.Uint64(v))
		}
		// What the tail adds, as its flush will write it (counterBatch.write).
		for k, d := range tail.add {
			if d != 0 {
				cs.Values[k] += d
			}
		}
		for k, m := range tail.max {
			if v, ok := cs.Values[k]; !ok || m > v {
				cs.Values[k] = m
			}
		}
		return nil
	})
	if err != nil {
		return Counts{}, fmt.Errorf("journal: counters: %w", err)
	}
	return cs, nil
}

// SetCounters replaces every counter with values, the totals of the records
// up to and including global at, and marks them complete, in one
// transaction: a crash leaves the old counters or the new ones. It fails
// with ErrMoved when the log no longer ends at at (fold again), and with
// ErrReadOnly on a read-only DB.
func (db *DB) SetCounters(ctx context.Context, at uint64, values map[string]int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.opts.ReadOnly {
		return fmt.Errorf("journal: set counters: %w", ErrReadOnly)
	}
	for k := range values {
		if err := checkCounter(Counter{Key: k}); err != nil {
			return fmt.Errorf("journal: set counters: %w", err)
		}
	}
	// The committer's own transactions are serialised with this one by
	// markMu: an append either commits before (and moves the log) or after
	// (and adds to the new totals). The mark tail's marks are written and
	// its counter changes dropped: the new totals hold them.
	db.markMu.Lock()
	defer db.markMu.Unlock()
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if last := tx.Bucket(bucketLog).Sequence(); last != at {
			return fmt.Errorf("%w: the totals are as of global %d, the log ends at %d", ErrMoved, at, last)
		}
		if _, err := db.writeMarkTail(tx, false); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMeta).Put(metaMarkedKey, be64(at)); err != nil {
			return err
		}
		if tx.Bucket(bucketCounters) != nil {
			if err := tx.DeleteBucket(bucketCounters); err != nil {
				return err
			}
		}
		bk, err := tx.CreateBucket(bucketCounters)
		if err != nil {
			return err
		}
		for k, v := range values {
			if err := bk.Put([]byte(k), be64(uint64(v))); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaCountedKey, countedValue(at))
	})
	if err == nil {
		db.resetMarks(at)
	}
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = ErrClosed
	}
	if err != nil {
		return fmt.Errorf("journal: set counters: %w", err)
	}
	return nil
}
