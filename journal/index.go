package journal

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The per-stream index (streams bucket) and the stream heads are derived
// from the log. Writing them in the fsynced commit that acknowledges an
// append dirtied one 4 KiB leaf page per stream per commit
// (BenchmarkLayoutCommit: ~86 pages for a commit of 64 streams against ~10
// for the log alone), and that bounded durable throughput. So an append's
// commit writes the log (and its claims, dues and marks) only; the index
// entries of its records wait in memory, in the tail, and are written
// later, a stream's entries of many commits at once, in a later commit of
// appends (or a transaction of their own when the journal is idle), so a
// stream's page is written once per flush instead of once per event.
//
// The log stays the only truth. meta "indexed" holds a global W such that
// every record at or before W is in the streams index and covered by its
// stream's head; a record after W may or may not be. Open reads the log
// after W and puts every record its stream's stored head does not cover
// back into the tail, so a crash between a commit and a flush loses
// nothing, and boot reads at most the unflushed tail, whose size the
// flush policy bounds (Options.IndexFlushEntries, IndexFlushDelay).

const (
	defaultIndexFlushEntries = 8192
	defaultIndexFlushDelay   = 100 * time.Millisecond
	// indexFlushStreams is the most streams one ordinary flush writes.
	// Under load the flush rides in the commit of appends (no fsync of its
	// own, which a flush transaction of 256 streams cost, 2 to 100 ms on a
	// loaded machine, with every append waiting): few streams per commit
	// keep that commit's extra pages, and so its latency, small. A tail
	// past twice its entry limit is flushed whole.
	indexFlushStreams = 32
)

// metaIndexedKey holds be64(W): every record at or before global W is
// indexed. Absent only in a file written before the tail existed (format 2
// and older), where every record is indexed.
var metaIndexedKey = []byte("indexed")

// tailStream is one stream's records that are not in the streams index yet:
// seqs first, first+1, ... at globals[0], globals[1], ...
type tailStream struct {
	first   uint64
	globals []uint64
	since   time.Time // when its first entry joined the tail
}

func (s *tailStream) head() uint64 { return s.first + uint64(len(s.globals)) - 1 }

// tail holds the index entries of committed records that no index flush
// has written yet. Only the committer changes it (and Open, before the
// committer starts); readers take mu.RLock.
type tail struct {
	mu      sync.RWMutex
	streams map[string]*tailStream
	// order lists the streams in the order they joined the tail: the
	// first one holds the oldest unflushed record, so flushing from the
	// front moves the watermark forward.
	order   []string
	entries int
}

func newTail() *tail { return &tail{streams: map[string]*tailStream{}} }

// add appends an entry; the caller holds mu for writing. seq must follow
// the stream's tail head, or start the stream's tail.
func (t *tail) add(stream string, seq, global uint64, now time.Time) {
	s := t.streams[stream]
	if s == nil {
		s = &tailStream{first: seq, since: now}
		t.streams[stream] = s
		t.order = append(t.order, stream)
	}
	s.globals = append(s.globals, global)
	t.entries++
}

// headOf returns the stream's last seq in the tail. The committer calls it
// without the lock (it is the only writer); others hold mu.
func (t *tail) headOf(stream string) (uint64, bool) {
	if s := t.streams[stream]; s != nil {
		return s.head(), true
	}
	return 0, false
}

// snapshot copies every stream's tail entries, for a reader that merges
// them into a walk of the streams index (the flush policy keeps them few).
func (t *tail) snapshot() map[string]tailStream {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]tailStream, len(t.streams))
	for s, ts := range t.streams {
		out[s] = tailStream{first: ts.first, globals: slices.Clone(ts.globals)}
	}
	return out
}

// entriesAfter copies the stream's tail entries with seq > afterSeq: the
// seq of the first returned global, and the globals.
func (t *tail) entriesAfter(stream string, afterSeq uint64) (uint64, []uint64) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.streams[stream]
	if s == nil || s.head() <= afterSeq {
		return 0, nil
	}
	skip := uint64(0)
	if afterSeq >= s.first {
		skip = afterSeq - s.first + 1
	}
	return s.first + skip, append([]uint64(nil), s.globals[skip:]...)
}

// oldest returns when the oldest unflushed entry joined, and whether there
// is one.
func (t *tail) oldest() (time.Time, bool) {
	if len(t.order) == 0 {
		return time.Time{}, false
	}
	return t.streams[t.order[0]].since, true
}

// watermark is W if the first n streams of order were flushed and the log
// ends at last.
func (t *tail) watermark(n int, last uint64) uint64 {
	if n >= len(t.order) {
		return last
	}
	return t.streams[t.order[n]].globals[0] - 1
}

// pending is what an append's commit adds to the tail once it succeeds.
type tailAdd struct {
	stream      string
	seq, global uint64
}

// indexState is the committer's view of heads while it writes one batch:
// heads changed by earlier requests of the batch, then the tail, then the
// stored heads.
type indexState struct {
	tail  *tail
	heads *bolt.Bucket
	batch map[string]uint64
	adds  []tailAdd
}

func (s *indexState) head(stream string) (uint64, error) {
	if h, ok := s.batch[stream]; ok {
		return h, nil
	}
	if h, ok := s.tail.headOf(stream); ok {
		return h, nil
	}
	return readHead(s.heads, stream)
}

func (s *indexState) put(stream string, seq, global uint64) {
	s.batch[stream] = seq
	s.adds = append(s.adds, tailAdd{stream: stream, seq: seq, global: global})
}

// flushDue reports whether part of the tail should be written now, and
// how many streams.
func (db *DB) flushDue(now time.Time) (int, bool) {
	t := db.tail
	since, ok := t.oldest()
	switch {
	case !ok:
		return 0, false
	case t.entries >= 2*db.opts.IndexFlushEntries:
		return len(t.order), true
	case t.entries >= db.opts.IndexFlushEntries, db.opts.IndexFlushDelay >= 0 && now.Sub(since) >= db.opts.IndexFlushDelay:
		return min(db.flushStreams, len(t.order)), true
	}
	return 0, false
}

// writeIndex writes the first n streams of the tail to the streams index
// and heads in tx, with the watermark that holds once they are out of the
// tail. db.tip must still be the log's end before tx's own appends (which
// are not in the tail yet). Only the committer calls it.
func (db *DB) writeIndex(tx *bolt.Tx, n int) error {
	t := db.tail
	streams := tx.Bucket(bucketStreams)
	heads := tx.Bucket(bucketHeads)
	for _, name := range t.order[:n] {
		s := t.streams[name]
		for i, g := range s.globals {
			if err := streams.Put(streamKey(name, s.first+uint64(i)), be64(g)); err != nil {
				return err
			}
		}
		if err := heads.Put([]byte(name), be64(s.head())); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Put(metaIndexedKey, be64(t.watermark(n, db.tip.global)))
}

// dropFlushed removes the first n streams from the tail once the
// transaction that wrote them has committed.
func (db *DB) dropFlushed(n int) {
	t := db.tail
	t.mu.Lock()
	for _, name := range t.order[:n] {
		t.entries -= len(t.streams[name].globals)
		delete(t.streams, name)
	}
	t.order = append(t.order[:0:0], t.order[n:]...)
	t.mu.Unlock()
}

// flushIndex writes the first n streams of the tail in a transaction of its
// own: when no append is coming to carry them (the committer is idle), and
// at Close. Under load the commits carry the flush (writeBatch). On
// failure the tail is kept and a later flush tries again: nothing is lost,
// the log holds it all.
func (db *DB) flushIndex(n int) error {
	n = min(n, len(db.tail.order))
	if n == 0 {
		return nil
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error { return db.writeIndex(tx, n) })
	db.indexFlushes.Add(1)
	if err != nil {
		db.log.Error("journal index flush failed; the log is intact and the flush will be retried", "err", err, "streams", n)
		return err
	}
	db.dropFlushed(n)
	return nil
}

// flushAll flushes the whole tail (at Close).
func (db *DB) flushAll() error {
	for len(db.tail.order) > 0 {
		if err := db.flushIndex(len(db.tail.order)); err != nil {
			return err
		}
	}
	return nil
}

// indexedInTx reads W; a file without it indexes every record.
func indexedInTx(tx *bolt.Tx) (uint64, error) {
	v := tx.Bucket(bucketMeta).Get(metaIndexedKey)
	switch {
	case v == nil:
		return tx.Bucket(bucketLog).Sequence(), nil
	case len(v) != 8:
		return 0, fmt.Errorf("%w: meta indexed is %d bytes, want 8", ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// loadTail rebuilds the tail from the log after W: each record whose
// stream's stored head does not cover it. Every stream must continue
// gap-free from its stored head. A writer refuses a log that does not (an
// append on top would reuse a seq); a read-only open, which is how damaged
// files are examined, skips what it cannot take and counts it (Check
// reports the details).
//
// covered counts the records after W that a younger flush already indexed.
func loadTail(tx *bolt.Tx, t *tail, now time.Time, strict bool) (skipped, covered int, err error) {
	w, err := indexedInTx(tx)
	if err != nil {
		return 0, 0, err
	}
	heads := tx.Bucket(bucketHeads)
	c := tx.Bucket(bucketLog).Cursor()
	for k, v := c.Seek(be64(w + 1)); k != nil; k, v = c.Next() {
		added, err := tailRecord(heads, t, k, v, now)
		switch {
		case err == nil && !added:
			covered++
		case err == nil:
		case strict:
			return skipped, covered, err
		default:
			skipped++
		}
	}
	return skipped, covered, nil
}

// tailRecord puts one log record into the tail unless its stream's stored
// head covers it (added = false).
func tailRecord(heads *bolt.Bucket, t *tail, k, v []byte, now time.Time) (added bool, err error) {
	if len(k) != 8 {
		return false, fmt.Errorf("%w: log key of %d bytes", ErrCorrupt, len(k))
	}
	g := binary.BigEndian.Uint64(k)
	r, err := decodeRecord(g, v)
	if err != nil {
		return false, err
	}
	head, inTail := t.headOf(r.Stream)
	if !inTail {
		if head, err = readHead(heads, r.Stream); err != nil {
			return false, err
		}
		if r.Seq <= head {
			return false, nil // flushed with a younger stream before the crash
		}
	}
	if r.Seq != head+1 {
		return false, fmt.Errorf("%w: global %d: stream %q seq %d follows %d", ErrCorrupt, g, r.Stream, r.Seq, head)
	}
	t.add(r.Stream, r.Seq, g, now)
	return true, nil
}
