package journal

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// StreamRecords is one stream's records as ForEachStream reads them.
type StreamRecords struct {
	Stream  string
	Records []Record // in seq order
	// Unreadable counts the stream's records that could not be read back
	// through the streams index (missing, not decoding, or another
	// stream's record): Check names them; the stream's state from Records
	// alone is incomplete.
	Unreadable int
	// Archived says the records were read from an archive segment
	// (Archive.ForEachStream), not the hot file.
	Archived bool
}

// ForEachStream calls fn with every stream's records, one stream at a
// time in stream name order, read through the per-stream index (and the
// index tail of records not flushed to it yet) inside one read
// transaction. Memory is one stream's records, whatever the journal's
// size. It reads the file in stream order, which is random reads on a
// file larger than the page cache: the audit tools read with ScanStreams
// (file order), and their reports are tested against this reader's.
// fn owns the records it is given; it must not use the DB. An error from
// fn stops the walk and is returned.
func (db *DB) ForEachStream(ctx context.Context, fn func(StreamRecords) error) error {
	// The tail is small (the flush policy bounds it): copy it, sorted, to
	// merge into the index walk.
	tails := db.tail.snapshot()
	tailNames := make([]string, 0, len(tails))
	for s := range tails {
		tailNames = append(tailNames, s)
	}
	slices.Sort(tailNames)

	err := db.view(ctx, func(tx *bolt.Tx) error {
		sc := newStreamScan(tx, tails)
		var cur StreamRecords
		n := 0
		emit := func() error {
			if cur.Stream == "" {
				return nil
			}
			sc.readTail(&cur)
			if n += len(cur.Records) + cur.Unreadable; n > 4096 {
				n = 0
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			err := fn(cur)
			cur = StreamRecords{}
			return err
		}
		// start begins stream s, first emitting the tail-only streams
		// that sort before it.
		start := func(s string) error {
			for len(tailNames) > 0 && tailNames[0] < s {
				cur = StreamRecords{Stream: tailNames[0]}
				tailNames = tailNames[1:]
				if err := emit(); err != nil {
					return err
				}
			}
			if len(tailNames) > 0 && tailNames[0] == s {
				tailNames = tailNames[1:]
			}
			cur = StreamRecords{Stream: s}
			return nil
		}
		c := sc.streams.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			s, seq, ok := parseStreamKey(k)
			if !ok || len(v) != 8 {
				continue // Check reports malformed index entries
			}
			if s != cur.Stream {
				if err := emit(); err != nil {
					return err
				}
				if err := start(s); err != nil {
					return err
				}
			}
			sc.read(&cur, seq, binary.BigEndian.Uint64(v))
		}
		if err := emit(); err != nil {
			return err
		}
		for _, s := range tailNames { // the tail-only streams after the last indexed one
			cur = StreamRecords{Stream: s}
			if err := emit(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("journal: streams: %w", err)
	}
	return nil
}

// StreamScan reads whole streams through the per-stream index (and the
// index tail) inside the read transaction of a ForEachStream or
// ScanStreams walk, so what it reads is the walk's snapshot. It is only
// valid during the walk.
type StreamScan struct {
	streams, heads *bolt.Bucket
	logC           *bolt.Cursor
	logK, logV     []byte
	tails          map[string]tailStream
}

func newStreamScan(tx *bolt.Tx, tails map[string]tailStream) *StreamScan {
	return &StreamScan{streams: tx.Bucket(bucketStreams), heads: tx.Bucket(bucketHeads), logC: tx.Bucket(bucketLog).Cursor(), tails: tails}
}

// read appends the record at global g to cur if it is cur's record seq,
// else counts it unreadable.
func (sc *StreamScan) read(cur *StreamRecords, seq, g uint64) {
	// A stream's records are often next to each other in the log: step
	// the cursor then, seek only when they are not.
	if sc.logK != nil && len(sc.logK) == 8 && binary.BigEndian.Uint64(sc.logK)+1 == g {
		sc.logK, sc.logV = sc.logC.Next()
	}
	if sc.logK == nil || len(sc.logK) != 8 || binary.BigEndian.Uint64(sc.logK) != g {
		sc.logK, sc.logV = sc.logC.Seek(be64(g))
	}
	var v []byte
	if sc.logK != nil && len(sc.logK) == 8 && binary.BigEndian.Uint64(sc.logK) == g {
		v = sc.logV
	}
	r, err := decodeRecord(g, v)
	if err != nil || r.Stream != cur.Stream || r.Seq != seq {
		cur.Unreadable++
		return
	}
	cur.Records = append(cur.Records, r)
}

// readTail appends cur's records that only the index tail knows.
func (sc *StreamScan) readTail(cur *StreamRecords) {
	ts, ok := sc.tails[cur.Stream]
	if !ok {
		return
	}
	last := uint64(0)
	if len(cur.Records) > 0 {
		last = cur.Records[len(cur.Records)-1].Seq
	}
	for i, g := range ts.globals {
		if seq := ts.first + uint64(i); seq > last {
			sc.read(cur, seq, g)
		}
	}
}

// Stream returns the records of stream as ForEachStream gives them: read
// through the per-stream index, those that cannot be read counted in
// Unreadable.
func (sc *StreamScan) Stream(stream string) StreamRecords {
	cur := StreamRecords{Stream: stream}
	if checkStream(stream) != nil {
		return cur
	}
	prefix := streamPrefix(stream)
	c := sc.streams.Cursor()
	for k, v := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
		s, seq, ok := parseStreamKey(k)
		if !ok || s != stream || len(v) != 8 {
			continue // Check reports malformed index entries
		}
		sc.read(&cur, seq, binary.BigEndian.Uint64(v))
	}
	sc.readTail(&cur)
	return cur
}

// head returns the stream's last seq in the walk's snapshot, 0 if unknown
// or unreadable (Check reports the head).
func (sc *StreamScan) head(stream string) uint64 {
	if ts, ok := sc.tails[stream]; ok {
		return ts.head()
	}
	h, err := readHead(sc.heads, stream)
	if err != nil {
		return 0
	}
	return h
}

// HeadsAt returns, sorted, the streams whose last record (their head, as
// the heads index or the index tail says) is at one of globals. It walks
// the whole streams index: it is for the few records of a damaged journal
// that do not decode, whose streams a reader in file order never sees end.
func (sc *StreamScan) HeadsAt(globals []uint64) []string {
	if len(globals) == 0 {
		return nil
	}
	want := make(map[uint64]bool, len(globals))
	for _, g := range globals {
		want[g] = true
	}
	found := map[string]bool{}
	c := sc.streams.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		s, seq, ok := parseStreamKey(k)
		if ok && len(v) == 8 && want[binary.BigEndian.Uint64(v)] && sc.head(s) == seq {
			found[s] = true
		}
	}
	for s, ts := range sc.tails {
		for i, g := range ts.globals {
			if want[g] && ts.first+uint64(i) == ts.head() {
				found[s] = true
			}
		}
	}
	names := make([]string, 0, len(found))
	for s := range found {
		names = append(names, s)
	}
	slices.Sort(names)
	return names
}

// Reader looks keys up in one consistent snapshot of the indexes.
type Reader struct {
	claims, marks, due *bolt.Bucket
	tail               []markEntry // the mark tail's marks, in key order
}

// Read calls fn with a Reader over one read transaction; fn must not keep
// it.
func (db *DB) Read(ctx context.Context, fn func(*Reader) error) error {
	var tail []markEntry
	copyTail := func(t *markTail) { tail = t.tailMarks("", "", "") }
	return db.viewMarked(ctx, copyTail, func(tx *bolt.Tx, _ uint64) error {
		return fn(&Reader{claims: tx.Bucket(bucketClaims), marks: tx.Bucket(bucketMarks), due: tx.Bucket(bucketDue), tail: tail})
	})
}

// tailMark finds key among the mark tail's marks.
func (r *Reader) tailMark(key string) (markEntry, bool) {
	i, ok := slices.BinarySearchFunc(r.tail, key, func(e markEntry, k string) int { return strings.Compare(e.key, k) })
	if !ok {
		return markEntry{}, false
	}
	return r.tail[i], true
}

// Owner returns the stream owning the claim (namespace, key), or "".
func (r *Reader) Owner(namespace, key string) string {
	return string(r.claims.Get(claimKey(namespace, key)))
}

// HasMark reports whether the marks index holds key.
func (r *Reader) HasMark(key string) bool {
	if e, ok := r.tailMark(key); ok {
		return e.set
	}
	return r.marks != nil && r.marks.Get([]byte(key)) != nil
}

// HasDue reports whether the due index holds d.
func (r *Reader) HasDue(d Due) bool {
	n, ok := dueNanos(d.At)
	return ok && r.due.Get(dueKey(n, d.Stream, d.Key)) != nil
}

// CountClaims returns how many claims namespace holds.
func (r *Reader) CountClaims(namespace string) int {
	prefix := claimKey(namespace, "")
	n := 0
	c := r.claims.Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n
}

// CountMarks returns how many marks start with prefix.
func (r *Reader) CountMarks(prefix string) int {
	if r.marks == nil {
		return 0
	}
	p := []byte(prefix)
	n := 0
	c := r.marks.Cursor()
	for k, _ := c.Seek(p); k != nil && hasPrefix(k, p); k, _ = c.Next() {
		n++
	}
	// The tail's marks of the prefix: a set one the bucket lacks adds one,
	// a cleared one it holds takes one away.
	i, _ := slices.BinarySearchFunc(r.tail, prefix, func(e markEntry, k string) int { return strings.Compare(e.key, k) })
	for _, e := range r.tail[i:] {
		if !strings.HasPrefix(e.key, prefix) {
			break
		}
		switch in := r.marks.Get([]byte(e.key)) != nil; {
		case e.set && !in:
			n++
		case !e.set && in:
			n--
		}
	}
	return n
}

// ScanStreams calls fn with every record in global order, inside one read
// transaction, with the stream's last seq as of that transaction (its
// head): a reader that gathers each stream's records knows the stream is
// complete once it sees its head, and can let go of it; it can read a
// stream it let go of again, whole, through sc (StreamScan.Stream). The
// log is read sequentially, in the order it lies in the file: on a file
// larger than the page cache this is what keeps reading fast
// (ForEachStream visits it in stream order, randomly). Memory is a bounded
// cache of the heads of the streams seen but not finished. A record that
// does not decode is passed to bad (with its global) and skipped: its
// stream then never reaches its head. end, if not nil, is called after the
// last record, in the same transaction (StreamScan.HeadsAt finds the
// streams whose head did not decode). fn owns the records it is given;
// none of the callbacks may use the DB but through sc. An error from one
// stops the walk and is returned.
func (db *DB) ScanStreams(ctx context.Context, fn func(sc *StreamScan, r Record, head uint64) error, bad func(global uint64, err error) error, end func(sc *StreamScan) error) error {
	tails := db.tail.snapshot()
	err := db.view(ctx, func(tx *bolt.Tx) error {
		sc := newStreamScan(tx, tails)
		// open caches the heads of streams seen and not finished. Many
		// reservations can be open at once in a long journal (each lives
		// for days): past scanHeadCache entries it starts over, and a head
		// not cached is read again (one lookup).
		open := map[string]uint64{}
		c := tx.Bucket(bucketLog).Cursor()
		n := 0
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if len(k) != 8 {
				if err := bad(0, fmt.Errorf("%w: log key of %d bytes", ErrCorrupt, len(k))); err != nil {
					return err
				}
				continue
			}
			g := binary.BigEndian.Uint64(k)
			r, err := decodeRecord(g, v)
			if err != nil {
				if err := bad(g, err); err != nil {
					return err
				}
				continue
			}
			head, ok := open[r.Stream]
			if !ok {
				head = sc.head(r.Stream) // 0, unknown: the stream ends with the walk (Check reports the head)
				if len(open) >= scanHeadCache {
					clear(open)
				}
				open[r.Stream] = head
			}
			if r.Seq >= head {
				delete(open, r.Stream)
			}
			if err := fn(sc, r, head); err != nil {
				return err
			}
		}
		if end != nil {
			return end(sc)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("journal: scan streams: %w", err)
	}
	return nil
}

// scanHeadCache bounds ScanStreams' cache of open streams' heads.
const scanHeadCache = 1 << 16
