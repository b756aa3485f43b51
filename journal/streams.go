package journal

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

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
	db.tail.mu.RLock()
	tailNames := make([]string, 0, len(db.tail.streams))
	tails := make(map[string]tailStream, len(db.tail.streams))
	for s, ts := range db.tail.streams {
		tailNames = append(tailNames, s)
		tails[s] = tailStream{first: ts.first, globals: slices.Clone(ts.globals)}
	}
	db.tail.mu.RUnlock()
	slices.Sort(tailNames)

	err := db.view(ctx, func(tx *bolt.Tx) error {
		logC := tx.Bucket(bucketLog).Cursor()
		var logK, logV []byte
		var cur StreamRecords
		n := 0
		read := func(seq, g uint64) {
			n++
			// A stream's records are often next to each other in the log:
			// step the cursor then, seek only when they are not.
			if logK != nil && len(logK) == 8 && binary.BigEndian.Uint64(logK)+1 == g {
				logK, logV = logC.Next()
			}
			if logK == nil || len(logK) != 8 || binary.BigEndian.Uint64(logK) != g {
				logK, logV = logC.Seek(be64(g))
			}
			var v []byte
			if logK != nil && binary.BigEndian.Uint64(logK) == g {
				v = logV
			}
			r, err := decodeRecord(g, v)
			if err != nil || r.Stream != cur.Stream || r.Seq != seq {
				cur.Unreadable++
				return
			}
			cur.Records = append(cur.Records, r)
		}
		emit := func() error {
			if cur.Stream == "" {
				return nil
			}
			if ts, ok := tails[cur.Stream]; ok {
				last := uint64(0)
				if len(cur.Records) > 0 {
					last = cur.Records[len(cur.Records)-1].Seq
				}
				for i, g := range ts.globals {
					if seq := ts.first + uint64(i); seq > last {
						read(seq, g)
					}
				}
			}
			if n > 4096 {
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
		c := tx.Bucket(bucketStreams).Cursor()
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
			read(seq, binary.BigEndian.Uint64(v))
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

// Reader looks keys up in one consistent snapshot of the indexes.
type Reader struct {
	claims, marks, due *bolt.Bucket
}

// Read calls fn with a Reader over one read transaction; fn must not keep
// it.
func (db *DB) Read(ctx context.Context, fn func(*Reader) error) error {
	return db.view(ctx, func(tx *bolt.Tx) error {
		return fn(&Reader{claims: tx.Bucket(bucketClaims), marks: tx.Bucket(bucketMarks), due: tx.Bucket(bucketDue)})
	})
}

// Owner returns the stream owning the claim (namespace, key), or "".
func (r *Reader) Owner(namespace, key string) string {
	return string(r.claims.Get(claimKey(namespace, key)))
}

// HasMark reports whether the marks index holds key.
func (r *Reader) HasMark(key string) bool {
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
	return n
}

// ScanStreams calls fn with every record in global order, inside one read
// transaction, with the stream's last seq as of that transaction (its
// head): a reader that gathers each stream's records knows the stream is
// complete once it sees its head, and can let go of it. The log is read
// sequentially, in the order it lies in the file: on a file larger than
// the page cache this is what keeps reading fast (ForEachStream visits it
// in stream order, randomly). Memory is the heads of the streams seen but
// not finished. A record that does not decode is passed to bad (with its
// global) and skipped: its stream then never reaches its head. fn owns the
// records it is given; neither fn nor bad may use the DB. An error from
// either stops the walk and is returned.
func (db *DB) ScanStreams(ctx context.Context, fn func(r Record, head uint64) error, bad func(global uint64, err error) error) error {
	db.tail.mu.RLock()
	tailHeads := make(map[string]uint64, len(db.tail.streams))
	for s, ts := range db.tail.streams {
		tailHeads[s] = ts.head()
	}
	db.tail.mu.RUnlock()
	err := db.view(ctx, func(tx *bolt.Tx) error {
		heads := tx.Bucket(bucketHeads)
		open := map[string]uint64{} // streams seen and not finished -> head
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
				if h, inTail := tailHeads[r.Stream]; inTail {
					head = h
				} else if head, err = readHead(heads, r.Stream); err != nil {
					head = 0 // unknown: the stream ends with the walk (Check reports the head)
				}
				open[r.Stream] = head
			}
			if r.Seq >= head {
				delete(open, r.Stream)
			}
			if err := fn(r, head); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("journal: scan streams: %w", err)
	}
	return nil
}
