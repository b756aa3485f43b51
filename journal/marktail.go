package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/google/btree"
	bolt "go.etcd.io/bbolt"
)

// The marks index and the counters are derived from the appends, like the
// streams index, and had the same cost at scale: a list row or a merchant's
// counter lives on a page per merchant (and state), so a commit of appends
// for 30 merchants dirtied some 30 such pages besides the log. With 100
// merchants a commit took 78 page writes per fsync against 16.8 with one,
// and the lifecycle made 0.72x of one merchant's throughput
// (docs/BENCHMARKS.md, "Many merchants").
//
// So an append's marks and counter changes are written in its commit as
// one entry of the pending bucket (sequential keys: the bucket grows at its
// end; each commit's changes on pages of their own, putPending) and kept
// in memory, in the mark tail, which every reader of marks and counters
// merges over the buckets. A later flush applies the whole tail to the
// marks and counters buckets in key order, in one commit (a page once for
// many commits), empties the pending bucket and records in meta "marked"
// the global up to which the buckets are complete. Open reads the pending
// bucket back into the tail: a crash loses nothing and replays no log.
//
// A reader copies what it needs of the tail, then opens its read
// transaction, and starts again when the transaction's "marked" is not the
// copy's base (a flush committed in between: its copy is in the buckets,
// and what came after it is not in the copy). Flushes are rare, so the
// retry is too.

const (
	defaultMarkFlushEntries = 65536
	defaultMarkFlushDelay   = time.Second
)

var (
	// bucketPending holds the marks and counter changes of the commits
	// since the last mark flush: be64(n) -> a bucket of one value,
	// pendingValueKey -> appendPendingValue (putPending); files written
	// before 2026-12-07 may hold be64(n) -> the same value, read alike.
	bucketPending = []byte("pending")
	// metaMarkedKey holds be64(W): the marks and counters buckets hold the
	// changes of every record up to global W; the pending bucket holds the
	// rest. Absent in a file from before format 5, where they hold all.
	metaMarkedKey = []byte("marked")
)

type markEntry struct {
	key string
	set bool // false: cleared
}

func markLess(a, b markEntry) bool { return a.key < b.key }

// markTail holds the marks and counter changes of committed appends that
// no mark flush has written to their buckets yet. Only the committer (and
// WriteMarks, SetCounters, under DB.markMu) changes it; readers take
// mu.RLock.
type markTail struct {
	mu sync.RWMutex
	// base is meta "marked" as of the tail: the buckets hold the changes
	// up to it, the tail those after it.
	base uint64
	// tip is the last global committed when the tail last changed: the
	// buckets and the tail together hold the changes up to it.
	tip   uint64
	marks *btree.BTreeG[markEntry] // the latest of each key
	add   map[string]int64
	max   map[string]int64
	// changes counts what joined since base (marks and counter keys, for
	// the flush policy); since is when the first of them joined.
	changes int
	since   time.Time
}

func newMarkTail() *markTail {
	return &markTail{marks: btree.NewG(32, markLess), add: map[string]int64{}, max: map[string]int64{}}
}

// pendingChange is one commit's marks (in order: a later mark of a key
// wins) and summed counter changes.
type pendingChange struct {
	tip    uint64
	marks  []Mark
	counts counterBatch
}

func (p *pendingChange) empty() bool {
	return len(p.marks) == 0 && len(p.counts.add) == 0 && len(p.counts.max) == 0
}

// apply adds p to the tail; the caller holds mu for writing.
func (t *markTail) apply(p *pendingChange, now time.Time) {
	if t.changes == 0 {
		t.since = now
	}
	for _, m := range p.marks {
		t.marks.ReplaceOrInsert(markEntry{key: m.Key, set: !m.Clear})
	}
	for k, d := range p.counts.add {
		t.add[k] += d
	}
	for k, m := range p.counts.max {
		if v, ok := t.max[k]; !ok || m > v {
			t.max[k] = m
		}
	}
	t.changes += len(p.marks) + len(p.counts.add) + len(p.counts.max)
	if p.tip > t.tip {
		t.tip = p.tip
	}
}

// reset empties the tail once a flush up to base has committed.
func (t *markTail) reset(base uint64) {
	t.base = base
	if base > t.tip {
		t.tip = base
	}
	t.marks.Clear(false)
	clear(t.add)
	clear(t.max)
	t.changes = 0
}

// appendPendingValue appends to dst the pending bucket's value for p (the
// bytes after dst's length): uvarint tip, then the marks (count; each a
// byte 1 set / 0 clear, uvarint length, key), the added counters and the
// maximum counters (count; each uvarint length, key, varint value).
func appendPendingValue(dst []byte, p *pendingChange) []byte {
	n := 3 * binary.MaxVarintLen64
	for _, m := range p.marks {
		n += 1 + binary.MaxVarintLen64 + len(m.Key)
	}
	for k := range p.counts.add {
		n += 2*binary.MaxVarintLen64 + len(k)
	}
	for k := range p.counts.max {
		n += 2*binary.MaxVarintLen64 + len(k)
	}
	b := slices.Grow(dst, n+binary.MaxVarintLen64)
	b = binary.AppendUvarint(b, p.tip)
	b = binary.AppendUvarint(b, uint64(len(p.marks)))
	for _, m := range p.marks {
		set := byte(1)
		if m.Clear {
			set = 0
		}
		b = append(b, set)
		b = binary.AppendUvarint(b, uint64(len(m.Key)))
		b = append(b, m.Key...)
	}
	for _, c := range []map[string]int64{p.counts.add, p.counts.max} {
		b = binary.AppendUvarint(b, uint64(len(c)))
		for k, v := range c {
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendVarint(b, v)
		}
	}
	return b
}

// decodePending reads appendPendingValue's value.
func decodePending(v []byte) (*pendingChange, error) {
	r := bytes.NewReader(v)
	bad := func(what string) error { return fmt.Errorf("%w: pending marks: %s", ErrCorrupt, what) }
	str := func() (string, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return "", bad("key length")
		}
		var sb strings.Builder
		sb.Grow(int(n))
		for range n {
			c, _ := r.ReadByte()
			sb.WriteByte(c)
		}
		return sb.String(), nil
	}
	p := &pendingChange{}
	var err error
	if p.tip, err = binary.ReadUvarint(r); err != nil {
		return nil, bad("tip")
	}
	n, err := binary.ReadUvarint(r)
	if err != nil || n > uint64(r.Len()) {
		return nil, bad("mark count")
	}
	p.marks = make([]Mark, 0, n)
	for range n {
		set, err := r.ReadByte()
		if err != nil || set > 1 {
			return nil, bad("mark flag")
		}
		k, err := str()
		if err != nil {
			return nil, err
		}
		p.marks = append(p.marks, Mark{Key: k, Clear: set == 0})
	}
	for i := range 2 {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return nil, bad("counter count")
		}
		m := make(map[string]int64, n)
		for range n {
			k, err := str()
			if err != nil {
				return nil, err
			}
			if m[k], err = binary.ReadVarint(r); err != nil {
				return nil, bad("counter value")
			}
		}
		if i == 0 {
			p.counts.add = m
		} else {
			p.counts.max = m
		}
	}
	if r.Len() != 0 {
		return nil, bad("trailing bytes")
	}
	return p, nil
}

// putPending writes one commit's changes to the pending bucket, as the one
// value of a bucket of its own under be64(n).
//
// As a value of the pending bucket itself, a commit's changes (some 13 KB
// at the pinned lifecycle's batches) sat with up to three others on a leaf
// bbolt does not split (four entries or fewer: common.MinKeysPerPage*2),
// and every commit rewrote all of them: about 50 KB of pages written and a
// buffer of that size allocated per commit, a ninth of refundd's
// allocations. A bucket of its own has a root of its own (inline in the
// pending bucket's leaf when small), so a commit writes its own bytes and
// one leaf of small bucket headers. BenchmarkCommitMerchants (64 writers,
// ~48 appends a commit; sixteen runs of the old code, thirteen of this,
// alternated): 194-225 -> 123-147 KB written per commit, 11.3-12.3 ->
// 9.6-10.8 KB allocated per append, the same pages per commit and appends
// per second; refundd's pinned lifecycle allocates 50.5-50.7 KiB instead
// of 54.6-55.1. A pending bucket of small values instead (a sixth of a
// page each) wrote as few bytes but five more pages per commit, and made
// 10% fewer appends per second (docs/BENCHMARKS.md).
func putPending(tx *bolt.Tx, p *pendingChange, values *[]byte) error {
	b := tx.Bucket(bucketPending)
	b.FillPercent = 1.0 // it only grows at its end, until a flush empties it
	n, err := b.NextSequence()
	if err != nil {
		return err
	}
	one, err := b.CreateBucket(be64(n))
	if err != nil {
		return err
	}
	// Encoded at the end of *values, which the transaction's other
	// values may share (DB.values).
	start := len(*values)
	*values = appendPendingValue(*values, p)
	return one.Put(pendingValueKey, (*values)[start:len(*values):len(*values)])
}

// pendingValueKey is the key of the one value of a commit's bucket in the
// pending bucket.
var pendingValueKey = []byte{0}

// markedInTx reads meta "marked" (0 when absent: nothing pending).
func markedInTx(tx *bolt.Tx) (uint64, error) {
	v := tx.Bucket(bucketMeta).Get(metaMarkedKey)
	switch {
	case v == nil:
		return 0, nil
	case len(v) != 8:
		return 0, fmt.Errorf("%w: meta marked is %d bytes, want 8", ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// loadMarkTail reads the pending bucket into t at Open. A writer refuses a
// value that does not decode (its marks and counters would be lost); a
// read-only open, which is how damaged files are examined, skips it and
// counts it.
func loadMarkTail(tx *bolt.Tx, t *markTail, now time.Time, strict bool) (skipped int, err error) {
	base, err := markedInTx(tx)
	if err != nil {
		return 0, err
	}
	t.base, t.tip = base, max(base, tx.Bucket(bucketLog).Sequence())
	b := tx.Bucket(bucketPending)
	if b == nil {
		return 0, nil
	}
	err = b.ForEach(func(k, v []byte) error {
		if v == nil { // a commit's bucket (putPending); older files hold values
			v = b.Bucket(k).Get(pendingValueKey)
		}
		p, err := decodePending(v)
		switch {
		case err == nil:
			t.apply(p, now)
		case strict:
			return fmt.Errorf("pending %x: %w", k, err)
		default:
			skipped++
		}
		return nil
	})
	return skipped, err
}

// markFlushDue reports whether the mark tail should be written now. Only
// the committer calls it.
func (db *DB) markFlushDue(now time.Time) bool {
	t := db.marks
	// WriteMarks and SetCounters reset the tail from other goroutines.
	t.mu.RLock()
	defer t.mu.RUnlock()
	switch {
	case t.changes == 0:
		return false
	case t.changes >= db.opts.MarkFlushEntries:
		return true
	}
	return db.opts.MarkFlushDelay >= 0 && now.Sub(t.since) >= db.opts.MarkFlushDelay
}

// markFlushAt is when the tail is due for a flush by time, if ever.
func (db *DB) markFlushAt() (time.Time, bool) {
	t := db.marks
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.changes == 0 || db.opts.MarkFlushDelay < 0 {
		return time.Time{}, false
	}
	return t.since.Add(db.opts.MarkFlushDelay), true
}

// writeMarkTail applies the whole tail to the marks and counters buckets in
// tx, in key order, empties the pending bucket and sets meta "marked" to
// the tail's tip, which must be the log's end before tx's own appends. The
// caller holds markMu; after tx commits it calls marks.reset(tip).
func (db *DB) writeMarkTail(tx *bolt.Tx, counters bool) (uint64, error) {
	t := db.marks
	mb := tx.Bucket(bucketMarks)
	// New marks go in key order and mostly where the newest rows sort, so
	// bbolt's default split (half-full pages) left every page of the
	// bucket half full. Full pages: BenchmarkMarkFlush 1300 -> 837 pages
	// per flush, 926 -> 567 bytes per reservation on disk, with a tenth of
	// the rows moving later among full pages (0.9 fills: 900, 552).
	mb.FillPercent = 1.0
	// One cursor finds whether a cleared key is there: most of a flush
	// is clears of keys no flush wrote (rows replaced before the flush, an
	// attention kind the refund never had), and Bucket.Delete makes a
	// cursor of its own each call. BenchmarkMarkFlush (a second of the
	// pinned lifecycle, its first form): 42-48 -> 31-40 ms, 139k -> 60k
	// allocations.
	c := mb.Cursor()
	var err error
	t.marks.Ascend(func(e markEntry) bool {
		// The tail's strings are never changed, so the key's bytes are
		// used in place (bbolt keeps a Put key until the commit and never
		// writes to it); a copy per key was a fifth of the flush.
		key := unsafe.Slice(unsafe.StringData(e.key), len(e.key))
		if e.set {
			err = mb.Put(key, []byte{})
		} else if k, _ := c.Seek(key); bytes.Equal(k, key) {
			err = c.Delete()
		}
		return err == nil
	})
	if err != nil {
		return 0, err
	}
	if counters {
		cb := counterBatch{add: t.add, max: t.max}
		if err := cb.write(tx.Bucket(bucketCounters)); err != nil {
			return 0, err
		}
	}
	if err := tx.DeleteBucket(bucketPending); err != nil {
		return 0, err
	}
	if _, err := tx.CreateBucket(bucketPending); err != nil {
		return 0, err
	}
	return t.tip, tx.Bucket(bucketMeta).Put(metaMarkedKey, be64(t.tip))
}

// flushMarks writes the tail in a transaction of its own: when no append
// comes to carry it, and at Close. On failure the tail stays and the
// pending bucket still holds it.
func (db *DB) flushMarks() error {
	db.markMu.Lock()
	defer db.markMu.Unlock()
	if db.marks.changes == 0 {
		return nil
	}
	var w uint64
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		w, err = db.writeMarkTail(tx, true)
		return err
	})
	db.markFlushes.Add(1)
	if err != nil {
		db.log.Error("journal mark flush failed; the pending marks are intact and the flush will be retried", "err", err)
		return err
	}
	db.resetMarks(w)
	return nil
}

func (db *DB) resetMarks(w uint64) {
	db.marks.mu.Lock()
	db.marks.reset(w)
	db.marks.mu.Unlock()
}

// viewMarked runs fn in a read transaction after copy has taken what fn
// needs of the mark tail, such that the buckets fn reads plus the copy are
// the marks and counters as of the copy's tip.
func (db *DB) viewMarked(ctx context.Context, copyTail func(t *markTail), fn func(tx *bolt.Tx, tip uint64) error) error {
	for {
		t := db.marks
		t.mu.RLock()
		base, tip := t.base, t.tip
		copyTail(t)
		t.mu.RUnlock()
		again := false
		err := db.view(ctx, func(tx *bolt.Tx) error {
			w, err := markedInTx(tx)
			if err != nil {
				return err
			}
			if w != base {
				again = true // a flush committed after the copy
				return nil
			}
			return fn(tx, tip)
		})
		if err != nil || !again {
			return err
		}
	}
}

// tailMarks copies the tail's marks that start with prefix and lie in
// [from, to) ("" to: no end), in key order.
func (t *markTail) tailMarks(prefix, from, to string) []markEntry {
	var out []markEntry
	start := max(prefix, from)
	t.marks.AscendGreaterOrEqual(markEntry{key: start}, func(e markEntry) bool {
		if !strings.HasPrefix(e.key, prefix) || (to != "" && e.key >= to) {
			return false
		}
		out = append(out, e)
		return true
	})
	return out
}
