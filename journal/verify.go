package journal

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Problem is one inconsistency found by Check.
type Problem struct {
	// Global is the record the problem is about; 0 when it is not about
	// one record.
	Global uint64 `json:"global,omitempty"`
	// Kind is what failed: "bbolt" (page structure), "record" (format,
	// checksum, fields), "sequence" (global or per-stream order), "chain"
	// (hash chain), "index" (heads, streams, claims, due), "checkpoint",
	// "head" (a head recorded elsewhere) or "meta".
	Kind    string `json:"kind"`
	Message string `json:"message"`
	err     error
}

// Error implements error; it wraps ErrCorrupt, ErrFormatTooNew or
// ErrSignature.
func (p Problem) Error() string {
	if p.err == nil {
		return "journal: " + p.Message
	}
	return p.err.Error()
}

// Unwrap returns the sentinel the problem wraps.
func (p Problem) Unwrap() error { return errors.Unwrap(p.err) }

// CheckOptions configures Check. The zero value checks the file on its own.
type CheckOptions struct {
	// PublicKey verifies the signatures of stored checkpoints (and of
	// Heads that are signed). Nil means signatures are not checked.
	PublicKey ed25519.PublicKey
	// Heads are heads recorded outside the journal (ChainHead or a
	// checkpoint, saved by an auditor). The chain must pass through each:
	// the chain hash of record Global must equal Hash. Nil means none.
	Heads []Checkpoint
	// Visit, if set, is called with every record that decodes, in global
	// order, inside Check's read transaction (it must not use the DB). An
	// error from it stops Check and is returned.
	Visit func(Record) error
	// Progress, if set, is called with the number of records read so far,
	// every few thousand records.
	Progress func(records uint64)
	// MaxProblems caps the problems kept in the result (the rest are only
	// counted). Zero means 1000.
	MaxProblems int
	// Since, if set, checks only the records after it, in time
	// proportional to them: Since must be a point of the chain (its
	// record's stored chain hash equals Since.Hash, and with PublicKey a
	// signed Since must verify), else Check fails with ErrNotOnChain. The
	// chain, sequences and index entries of each later record are checked
	// and so are the marks after Since; the checks about the whole file
	// (bbolt pages, the streams index and heads as a whole, claims, due
	// keys) are not.
	Since *Checkpoint
	// PagesDone, if set, is called once bbolt's page check is over (at
	// once with Since, which skips it). That check loads bbolt's freelist
	// into a read-only DB unsynchronized with other transactions ending
	// (the race detector shows it): start concurrent reads after it.
	PagesDone func()
	// Archive, if set, holds the records archived out of this file
	// (OpenArchive): Check walks them with the log, in global order, as
	// one chain, and checks the manifests (CheckManifests). A file with
	// archived records checked without it has a problem of kind "archive"
	// and gaps in its log.
	Archive *Archive
}

// CheckResult is what Check found.
type CheckResult struct {
	// Since is CheckOptions.Since: the records checked are those after it.
	Since      *Checkpoint      `json:"since,omitempty"`
	Records    uint64           `json:"records"`     // log entries read
	LastGlobal uint64           `json:"last_global"` // highest global in the log
	Streams    int              `json:"streams"`
	Formats    map[uint8]uint64 `json:"formats"` // records per storage format
	// Head is the chain's end as computed from the records (Time is zero,
	// unsigned). Its Hash is meaningless when a chain problem was found.
	Head              Checkpoint  `json:"head"`
	Epoch             uint64      `json:"epoch"`
	Checkpoints       int         `json:"checkpoints"`
	SignedCheckpoints int         `json:"signed_checkpoints"`
	LastCheckpoint    *Checkpoint `json:"last_checkpoint,omitempty"`
	HeadsMatched      int         `json:"heads_matched"` // of CheckOptions.Heads
	// Archived counts the records read from archive segments (included in
	// Records); Segments the segments.
	Archived uint64    `json:"archived,omitempty"`
	Segments int       `json:"segments,omitempty"`
	Problems []Problem `json:"problems"`
	// Dropped counts problems beyond CheckOptions.MaxProblems.
	Dropped int `json:"dropped,omitempty"`
}

// OK reports whether no problem was found.
func (r CheckResult) OK() bool { return len(r.Problems) == 0 && r.Dropped == 0 }

// Verify checks the whole file in one transaction and returns the
// first problem found, wrapping ErrCorrupt (or ErrFormatTooNew, or
// ErrSignature for a checkpoint signed by Options.SigningKey's key that
// does not verify). See Check for what is checked. It reads everything: use
// it in tests, tools and after a crash, not on a hot path.
func (db *DB) Verify(ctx context.Context) error {
	var opts CheckOptions
	if db.opts.SigningKey != nil {
		opts.PublicKey = db.opts.SigningKey.Public().(ed25519.PublicKey)
	}
	res, err := db.Check(ctx, &opts)
	if err == nil && len(res.Problems) > 0 {
		err = res.Problems[0]
	}
	if err != nil {
		return fmt.Errorf("journal: verify %s: %w", db.path, err)
	}
	return nil
}

// Check reads the whole file in one transaction and reports every
// problem it finds (up to CheckOptions.MaxProblems):
//
//   - bbolt's own page consistency;
//   - every record's format and checksum, and that it is stored under its
//     own global;
//   - globals run 1..N without gaps; each stream's seqs run 1..head without
//     gaps and agree with the streams index and the heads bucket; every
//     claim points to an existing stream; due keys are well formed;
//   - the hash chain: each format 2 record's stored chain hash equals
//     ChainHash of the record before it (format 1 records, which predate
//     the chain, are hashed on the way); after a mismatch the check
//     continues from the stored hash, so each break is reported once, at
//     the first record whose hash does not follow;
//   - every stored checkpoint lies on the chain, in order, and (with
//     PublicKey) is signed by that key; once a signed checkpoint appears,
//     later unsigned ones are problems (signatures were stripped);
//   - every CheckOptions.Heads entry lies on the chain.
//
// On a DB opened for writing, Check holds the write lock for its whole
// run (bbolt's page check is only safe that way), so appends wait: check a
// backup or a read-only DB instead when the service is live.
//
// The returned error is only for failures to read (a closed DB, a done
// ctx, an error from Visit); problems with the data are in the result.
func (db *DB) Check(ctx context.Context, opts *CheckOptions) (CheckResult, error) {
	var o CheckOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxProblems <= 0 {
		o.MaxProblems = 1000
	}
	var res CheckResult
	check := func(tx *bolt.Tx) error {
		c := &checker{ctx: ctx, tx: tx, db: db, opts: o, res: &res, tailSeqs: map[string]uint64{}}
		return c.run()
	}
	var err error
	if db.opts.ReadOnly {
		err = db.view(ctx, check)
	} else {
		// bbolt's page check is not safe beside a concurrent writer unless
		// it runs in the write transaction: hold it (appends wait) and
		// write nothing.
		err = db.exclusive(ctx, check)
	}
	if err != nil {
		return res, fmt.Errorf("journal: check %s: %w", db.path, err)
	}
	return res, nil
}

// checker runs one Check. Its memory does not grow with the journal: the
// per-stream checks read the streams index instead of keeping a map of
// every stream (which at millions of reservations did not fit in memory).
type checker struct {
	ctx  context.Context
	tx   *bolt.Tx
	db   *DB
	opts CheckOptions
	res  *CheckResult
	// tailSeqs is the last seq seen of each stream with records its stored
	// head does not cover (the index tail: bounded by the flush policy).
	tailSeqs map[string]uint64
	// entries reads the streams index beside the log walk (entry).
	entries *bolt.Cursor
	// entryStream and entrySeq are where entries stands when it stands on
	// the index entry of the last record looked up.
	entryStream string
	entrySeq    uint64
	// selfIndexed counts records whose index entry points to them.
	selfIndexed uint64
	// undecodable are the globals of records that do not decode, in order.
	undecodable []uint64
}

func (c *checker) add(kind string, global uint64, sentinel error, format string, args ...any) {
	if len(c.res.Problems) >= c.opts.MaxProblems {
		c.res.Dropped++
		return
	}
	msg := fmt.Sprintf(format, args...)
	c.res.Problems = append(c.res.Problems, Problem{Global: global, Kind: kind, Message: msg,
		err: fmt.Errorf("%w: %s", sentinel, msg)})
}

// addErr records a decode error, which already wraps its sentinel.
func (c *checker) addErr(kind string, global uint64, err error) {
	sentinel := ErrCorrupt
	if errors.Is(err, ErrFormatTooNew) {
		sentinel = ErrFormatTooNew
	}
	c.add(kind, global, sentinel, "%s", strings.TrimPrefix(err.Error(), sentinel.Error()+": "))
}

// mark is a hash the chain must pass through: a stored checkpoint or a
// head recorded elsewhere.
type mark struct {
	cp     Checkpoint
	stored bool
}

func (m mark) what() string {
	if m.stored {
		return "checkpoint"
	}
	return "head"
}

func (c *checker) run() error {
	tx := c.tx
	since := c.opts.Since
	if since == nil {
		// A read transaction sees the committed meta's txid, the write
		// transaction the next one.
		txid := uint64(tx.ID())
		if tx.Writable() {
			txid--
		}
		if err := checkPages(tx.DB().Path(), txid, func(msg string) {
			c.add("bbolt", 0, ErrCorrupt, "bbolt: %s", msg)
		}); err != nil {
			return err
		}
	}
	if c.opts.PagesDone != nil {
		c.opts.PagesDone()
		c.opts.PagesDone = nil
	}
	b := txBuckets(tx)
	meta := tx.Bucket(bucketMeta)
	if b.log == nil || b.heads == nil || b.streams == nil || b.claims == nil || b.due == nil || meta == nil {
		c.add("meta", 0, ErrCorrupt, "missing bucket")
		return nil
	}
	var fileFormat uint32
	if v := meta.Get(metaFormatKey); len(v) == 4 {
		fileFormat = binary.BigEndian.Uint32(v)
	} else {
		c.add("meta", 0, ErrCorrupt, "meta format version is %d bytes, want 4", len(v))
	}
	if v := meta.Get(metaEpochKey); len(v) == 8 {
		c.res.Epoch = binary.BigEndian.Uint64(v)
	} else if v != nil {
		c.add("meta", 0, ErrCorrupt, "meta epoch is %d bytes, want 8", len(v))
	}

	var (
		last       uint64
		prev       Hash // chain hash of the last record read
		chainKnown = true
		seenV2     bool
	)
	if since != nil {
		if err := c.checkSince(b, *since); err != nil {
			return err
		}
		s := *since
		c.res.Since = &s
		last, prev, seenV2 = since.Global, since.Hash, since.Global > 0
	}
	marks, err := c.marks()
	if err != nil {
		return err
	}
	if since != nil {
		// Marks before Since are about records this check does not read.
		marks = slices.DeleteFunc(marks, func(m mark) bool { return m.cp.Global < since.Global })
	}
	// The streams index and heads may lag the log (index.go): every record
	// at or before the watermark, and every record its stream's stored
	// head covers, must be indexed; no other may be.
	watermark := uint64(math.MaxUint64)
	if v := meta.Get(metaIndexedKey); len(v) == 8 {
		watermark = binary.BigEndian.Uint64(v)
	} else if v != nil {
		c.add("meta", 0, ErrCorrupt, "meta indexed is %d bytes, want 8", len(v))
	}

	// Log: gap-free globals, valid records, each with its index entry, and
	// the chain. That each stream's seqs run 1..head in global order is
	// checked on the streams index (indexes), which holds them in order.
	c.res.Formats = map[uint8]uint64{}
	checkMarks := func(upTo uint64, exact bool) {
		for len(marks) > 0 && marks[0].cp.Global <= upTo {
			m := marks[0]
			marks = marks[1:]
			switch {
			case m.cp.Global != upTo || !exact:
				c.add(m.what(), m.cp.Global, ErrCorrupt, "%s at global %d: no such record in the log", m.what(), m.cp.Global)
			case !chainKnown:
				c.add(m.what(), m.cp.Global, ErrCorrupt, "%s at global %d cannot be checked: the record is unreadable", m.what(), m.cp.Global)
			case m.cp.Hash != prev:
				c.add(m.what(), m.cp.Global, ErrCorrupt, "%s at global %d says hash %s, the chain says %s: records at or before global %d were changed",
					m.what(), m.cp.Global, m.cp.Hash, prev, m.cp.Global)
			case !m.stored:
				c.res.HeadsMatched++
			}
		}
	}
	checkMarks(last, true) // marks at the start: the zero hash, or Since
	// Archived records (archive.go) come from the segments, merged into
	// the log walk in global order.
	applied, err := appliedInTx(tx)
	if err != nil {
		c.addErr("meta", 0, err)
	}
	var arch *merged
	if c.opts.Archive != nil {
		var after uint64
		if since != nil {
			after = since.Global
		}
		// From the start, the walk below tallies each segment's records
		// for its manifest (merged.tallyProblems); after Since it reads
		// only part of them, so the segments are read on their own.
		for _, p := range c.opts.Archive.checkManifests(c.opts.PublicKey, after, since != nil) {
			c.addProblem(p)
		}
		if arch, err = c.opts.Archive.openAfter(after); err != nil {
			c.addErr("archive", 0, err)
			arch = nil
		} else {
			defer arch.Close()
			arch.tally = since == nil
			c.res.Segments = len(arch.readers)
		}
	} else if len(applied) > 0 {
		c.add("archive", 0, ErrCorrupt, "the journal's records up to global %d are partly in %d archive segments: check it with its archive", applied[len(applied)-1].LastGlobal, len(applied))
	}
	archOpen := map[string]uint64{} // archived stream -> its last seq walked
	var archSeg string              // segment and block of the archived record walked last
	var archBlock int64
	archB := tx.Bucket(bucketArchived)
	count := func() error {
		c.res.Records++
		if c.res.Records%4096 == 0 {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			if c.opts.Progress != nil {
				c.opts.Progress(c.res.Records)
			}
		}
		return nil
	}
	// record checks decoded record r, at global g, of the log or (archived)
	// of a segment.
	record := func(g uint64, r Record, archived bool) error {
		c.res.Formats[r.Format]++
		if uint32(r.Format) > fileFormat {
			c.add("meta", g, ErrCorrupt, "global %d has format %d but the file says format %d", g, r.Format, fileFormat)
		}
		if err := checkStream(r.Stream); err != nil {
			c.add("record", g, ErrCorrupt, "global %d: %v", g, err)
		}
		if archived {
			c.checkArchived(b, archB, r, archSeg, archBlock, archOpen)
		} else {
			c.checkIndexed(b, r, watermark)
		}
		computed := ChainHash(prev, r)
		switch {
		case r.Format >= 2:
			if chainKnown && computed != r.Hash {
				c.add("chain", g, ErrCorrupt, "global %d: chain hash mismatch: stored %s, computed %s (this record, or the one before it, was altered, removed or moved)",
					g, r.Hash, computed)
			}
			prev, chainKnown, seenV2 = r.Hash, true, true
		default:
			if seenV2 {
				c.add("chain", g, ErrCorrupt, "global %d: format %d record after format 2 records (a record without a stored hash was put in)", g, r.Format)
			}
			prev = computed // meaningless until a format 2 record resyncs, if !chainKnown
		}
		checkMarks(g, true)
		if c.opts.Visit != nil {
			return c.opts.Visit(r)
		}
		return nil
	}
	// archivedBefore walks the archived records with a global below end.
	archivedBefore := func(end uint64) error {
		for arch != nil {
			i := arch.peek()
			if i < 0 || arch.heads[i].Global >= end {
				return nil
			}
			r, _, seg, _ := arch.next()
			archSeg, archBlock = seg, arch.lastBlock
			g := r.Global
			if g <= last && since != nil {
				continue // before the point checked from
			}
			if err := count(); err != nil {
				return err
			}
			c.res.Archived++
			if g != last+1 {
				c.add("sequence", g, ErrCorrupt, "global %d follows %d", g, last)
				checkMarks(g-1, false)
			}
			last = g
			if err := record(g, r, true); err != nil {
				return err
			}
		}
		return nil
	}
	cur := b.log.Cursor()
	for k, v := cur.Seek(be64(last + 1)); k != nil; k, v = cur.Next() {
		if len(k) == 8 {
			if err := archivedBefore(binary.BigEndian.Uint64(k)); err != nil {
				return err
			}
		}
		if err := count(); err != nil {
			return err
		}
		if len(k) != 8 {
			c.add("record", 0, ErrCorrupt, "log key of %d bytes after global %d", len(k), last)
			continue
		}
		g := binary.BigEndian.Uint64(k)
		if g != last+1 {
			c.add("sequence", g, ErrCorrupt, "global %d follows %d", g, last)
			checkMarks(g-1, false)
		}
		last = g
		r, err := decodeRecordData(g, v, c.opts.Visit != nil)
		if err != nil {
			c.addErr("record", g, err)
			chainKnown = false
			c.undecodable = append(c.undecodable, g)
			checkMarks(g, true)
			continue
		}
		if err := record(g, r, false); err != nil {
			return err
		}
	}
	if err := archivedBefore(math.MaxUint64); err != nil {
		return err
	}
	if arch != nil {
		if err := arch.err(); err != nil {
			c.add("archive", 0, ErrCorrupt, "%v", err)
		}
		if since == nil {
			for _, p := range arch.tallyProblems() {
				c.add("archive", 0, ErrCorrupt, "%s", p)
			}
			for s, seq := range archOpen {
				at, _ := archivedEntry(archB, s)
				c.add("archive", 0, ErrCorrupt, "archived stream %q ends at seq %d in the segments, its archived head is %d", s, seq, at.Head)
			}
			var want uint64
			if archB != nil {
				_ = archB.ForEach(func(k, v []byte) error {
					if len(v) >= 8 {
						want += binary.BigEndian.Uint64(v[:8])
						if _, err := decodeArchived(v); err != nil {
							c.add("archive", 0, ErrCorrupt, "archived entry of %q: %v", k, err)
						}
					} else {
						c.add("archive", 0, ErrCorrupt, "archived entry of %q is %d bytes", k, len(v))
					}
					return nil
				})
			}
			if want != c.res.Archived {
				c.add("archive", 0, ErrCorrupt, "the archived streams' heads add up to %d records, the segments hold %d", want, c.res.Archived)
			}
		}
	}
	c.res.LastGlobal = last
	c.res.Head = Checkpoint{Global: last, Hash: prev}
	for _, m := range marks {
		c.add(m.what(), m.cp.Global, ErrCorrupt, "%s at global %d is beyond the end of the log (global %d): records were removed",
			m.what(), m.cp.Global, last)
	}
	if s := b.log.Sequence(); s != last {
		c.add("sequence", 0, ErrCorrupt, "log sequence is %d but last global is %d", s, last)
	}
	if watermark != math.MaxUint64 && watermark > last {
		c.add("index", 0, ErrCorrupt, "index watermark %d is beyond the end of the log (global %d)", watermark, last)
	}
	if since != nil {
		return nil
	}
	return c.indexes(b, last)
}

// checkSince makes sure the point to start from is on the chain: its
// record's stored hash is the point's hash.
func (c *checker) checkSince(b buckets, since Checkpoint) error {
	if since.Signed() && c.opts.PublicKey != nil {
		if err := since.VerifySignature(c.opts.PublicKey); err != nil {
			return fmt.Errorf("%w: the head to check from: %w", ErrNotOnChain, err)
		}
	}
	if since.Global == 0 {
		if !since.Hash.IsZero() {
			return fmt.Errorf("%w: global 0 has the zero hash, not %s", ErrNotOnChain, since.Hash)
		}
		return nil
	}
	var r Record
	var err error
	if v := b.log.Get(be64(since.Global)); v != nil {
		r, err = decodeRecord(since.Global, v)
	} else if c.opts.Archive == nil {
		return fmt.Errorf("%w: there is no record %d (the log ends at %d; an archived record is found with the archive)", ErrNotOnChain, since.Global, b.log.Sequence())
	} else {
		// Archived since it was recorded: its segment has it.
		var ok bool
		if r, ok, err = c.opts.Archive.recordAt(since.Global); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("%w: there is no record %d in the log (it ends at %d) or the archive", ErrNotOnChain, since.Global, b.log.Sequence())
		}
	}
	switch {
	case err != nil:
		return fmt.Errorf("%w: record %d does not decode: %w", ErrNotOnChain, since.Global, err)
	case r.Format < 2:
		return fmt.Errorf("%w: record %d predates the hash chain (format %d): check the whole journal", ErrNotOnChain, since.Global, r.Format)
	case r.Hash != since.Hash:
		return fmt.Errorf("%w: record %d has hash %s, not %s: the head is forged, or records up to it were changed since it was recorded; check the whole journal",
			ErrNotOnChain, since.Global, r.Hash, since.Hash)
	}
	return nil
}

// checkIndexed checks record r's entry in the streams index, or, for a
// record its stream's head does not cover yet, that it follows the
// stream's last record.
func (c *checker) checkIndexed(b buckets, r Record, watermark uint64) {
	g := r.Global
	iv := c.entry(b, r.Stream, r.Seq)
	if len(iv) == 8 && binary.BigEndian.Uint64(iv) == g {
		c.selfIndexed++
		if c.opts.Since != nil && r.Seq > 1 {
			// The whole-index pass does not run: the record before this
			// one in its stream must be indexed, and come earlier.
			pv := b.streams.Get(streamKey(r.Stream, r.Seq-1))
			if len(pv) != 8 || binary.BigEndian.Uint64(pv) >= g {
				c.add("sequence", g, ErrCorrupt, "global %d: stream %q seq %d, but seq %d is not indexed before it (entry %x)", g, r.Stream, r.Seq, r.Seq-1, pv)
			}
		}
		return
	}
	head, _ := readHead(b.heads, r.Stream) // a malformed head is reported by indexes
	switch {
	case r.Seq <= head:
		c.add("index", g, ErrCorrupt, "stream %q seq %d: index entry %x does not point to global %d", r.Stream, r.Seq, iv, g)
	case g <= watermark:
		c.add("index", g, ErrCorrupt, "stream %q seq %d at global %d: not covered by its head (%d) though the index watermark is %d",
			r.Stream, r.Seq, g, head, watermark)
	case iv != nil:
		c.add("index", g, ErrCorrupt, "stream %q seq %d: index entry beyond the stream's head %d", r.Stream, r.Seq, head)
	default:
		want := head + 1
		if s, ok := c.tailSeqs[r.Stream]; ok {
			want = s + 1
		} else if c.opts.Since != nil && r.Seq > want {
			// Its tail began before Since: the tail Open loaded knows it.
			if first, globals := c.db.tail.entriesAfter(r.Stream, r.Seq-2); len(globals) > 0 && first == r.Seq-1 && globals[0] < g {
				want = r.Seq
			}
		}
		if r.Seq != want {
			c.add("sequence", g, ErrCorrupt, "global %d: stream %q seq %d, want %d", g, r.Stream, r.Seq, want)
		}
		c.tailSeqs[r.Stream] = r.Seq
	}
}

// entry returns the streams index entry of stream's seq, or nil. A
// reservation's records mostly follow one another in the log, and so do
// their entries in the index: the entry after the last one looked up is
// the cursor's next, which costs no descent from the root. A Get per
// record took 6 s of verify's 65 s of CPU at 10.8M events.
func (c *checker) entry(b buckets, stream string, seq uint64) []byte {
	if c.entries == nil {
		c.entries = b.streams.Cursor()
	}
	key := streamKey(stream, seq)
	var k, v []byte
	if c.entrySeq > 0 && c.entryStream == stream && c.entrySeq+1 == seq {
		k, v = c.entries.Next()
	} else {
		k, v = c.entries.Seek(key)
	}
	if !bytes.Equal(k, key) {
		c.entrySeq = 0 // the cursor stands elsewhere: seek next time
		return nil
	}
	c.entryStream, c.entrySeq = stream, seq
	return v
}

// marks loads the stored checkpoints and the given heads in global order,
// checking the checkpoints' own order and signatures on the way.
func (c *checker) marks() ([]mark, error) {
	var marks []mark
	if cb := c.tx.Bucket(bucketCheckpoints); cb != nil {
		var prev *Checkpoint
		signedSeen := false
		err := cb.ForEach(func(k, v []byte) error {
			cp, err := decodeCheckpoint(k, v)
			if err != nil {
				c.addErr("checkpoint", 0, err)
				return nil
			}
			c.res.Checkpoints++
			if cp.Signed() {
				c.res.SignedCheckpoints++
			}
			if prev != nil && cp.Time.Before(prev.Time) {
				c.add("checkpoint", cp.Global, ErrCorrupt, "checkpoint at global %d is dated %s, before the one at global %d (%s)",
					cp.Global, cp.Time.UTC().Format("2006-01-02T15:04:05Z07:00"), prev.Global, prev.Time.UTC().Format("2006-01-02T15:04:05Z07:00"))
			}
			if c.opts.PublicKey != nil {
				switch {
				case cp.Signed():
					if err := cp.VerifySignature(c.opts.PublicKey); err != nil {
						c.add("checkpoint", cp.Global, ErrSignature, "%s", strings.TrimPrefix(err.Error(), ErrSignature.Error()+": "))
					}
				case signedSeen:
					c.add("checkpoint", cp.Global, ErrSignature, "checkpoint at global %d is not signed, but an earlier one is (signature removed?)", cp.Global)
				}
			}
			signedSeen = signedSeen || cp.Signed()
			marks = append(marks, mark{cp: cp, stored: true})
			p := cp
			prev = &p
			return nil
		})
		if err != nil {
			return nil, err
		}
		if prev != nil {
			c.res.LastCheckpoint = prev
		}
	}
	for _, h := range c.opts.Heads {
		if h.Signed() && c.opts.PublicKey != nil {
			if err := h.VerifySignature(c.opts.PublicKey); err != nil {
				c.add("head", h.Global, ErrSignature, "recorded head: %s", strings.TrimPrefix(err.Error(), ErrSignature.Error()+": "))
			}
		}
		marks = append(marks, mark{cp: h})
	}
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].cp.Global < marks[j].cp.Global })
	return marks, nil
}

// indexes checks the streams index, heads, claims and due entries against
// what the log walk found. It walks the streams index and the heads
// together, both in stream order, so it holds one stream at a time.
func (c *checker) indexes(b buckets, last uint64) error {
	// Streams index: each stream's entries run 1..head, at increasing
	// globals. With every record pointed to by its own entry (the log
	// walk) and as many entries as records covered, the entries and the
	// covered records correspond one to one: each stream's covered records
	// are its seqs 1..head, in global order.
	var indexed, covered, toUndecodable uint64
	hc := b.heads.Cursor()
	hk, _ := hc.First()
	// headsBefore reports the heads of streams that sort before s and
	// have no index entries, and returns whether s has a head.
	headsBefore := func(s string, all bool) (uint64, bool) {
		for hk != nil && (all || string(hk) < s) {
			if h, err := readHead(b.heads, string(hk)); err != nil {
				c.addErr("index", 0, err)
			} else {
				c.add("index", 0, ErrCorrupt, "head of stream %q is %d, the streams index has no entry of it", hk, h)
			}
			hk, _ = hc.Next()
		}
		if hk == nil || string(hk) != s {
			return 0, false
		}
		h, err := readHead(b.heads, s)
		if err != nil {
			c.addErr("index", 0, err)
		}
		hk, _ = hc.Next()
		return h, err == nil
	}
	var stream string
	var lastSeq, lastG uint64
	endStream := func() {
		h, _ := headsBefore(stream, false)
		covered += h
		switch {
		case h < lastSeq:
			c.add("index", 0, ErrCorrupt, "stream %q seqs %d..%d are indexed but not covered by its head (%d)", stream, h+1, lastSeq, h)
		case h > lastSeq:
			c.add("index", 0, ErrCorrupt, "head of stream %q is %d, the streams index holds seqs up to %d", stream, h, lastSeq)
		}
	}
	streams := 0
	cur := b.streams.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		s, seq, ok := parseStreamKey(k)
		if !ok || len(v) != 8 {
			c.add("index", 0, ErrCorrupt, "malformed stream index entry %x: %x", k, v)
			continue
		}
		indexed++
		if s != stream {
			if stream != "" {
				endStream()
			}
			stream, lastSeq, lastG = s, 0, 0
			streams++
		}
		g := binary.BigEndian.Uint64(v)
		switch {
		case seq != lastSeq+1:
			c.add("sequence", g, ErrCorrupt, "stream index has seq %d of stream %q (global %d) after seq %d", seq, s, g, lastSeq)
		case g <= lastG:
			c.add("sequence", g, ErrCorrupt, "stream %q seq %d is at global %d, before seq %d at global %d", s, seq, g, lastSeq, lastG)
		case g > last:
			c.add("index", 0, ErrCorrupt, "stream %q seq %d points to global %d beyond the end of the log (global %d)", s, seq, g, last)
		}
		if _, bad := slices.BinarySearch(c.undecodable, g); bad {
			toUndecodable++
		}
		lastSeq, lastG = seq, g
	}
	if stream != "" {
		endStream()
	}
	headsBefore("", true)
	for s := range c.tailSeqs {
		if h, _ := readHead(b.heads, s); h == 0 {
			streams++ // its records are all in the tail
		}
	}
	c.res.Streams = streams
	if indexed != covered {
		c.add("index", 0, ErrCorrupt, "stream index has %d entries for the %d records the heads cover", indexed, covered)
	}
	if c.selfIndexed+toUndecodable != indexed {
		c.add("index", 0, ErrCorrupt, "stream index has %d entries, but only %d records are pointed to by their own entry", indexed, c.selfIndexed+toUndecodable)
	}

	// Claims: owned by a stream that exists.
	if err := b.claims.ForEach(func(k, v []byte) error {
		if _, ok := c.tailSeqs[string(v)]; !ok && b.heads.Get(v) == nil && !isArchived(b.archived, v) {
			c.add("index", 0, ErrCorrupt, "claim %q owned by unknown stream %q", k, v)
		}
		return nil
	}); err != nil {
		return err
	}

	// Due: well-formed keys.
	return b.due.ForEach(func(k, _ []byte) error {
		if _, ok := parseDueKey(k); !ok {
			c.add("index", 0, ErrCorrupt, "malformed due key %x", k)
		}
		return nil
	})
}

// addProblem keeps p as Check's own problems, within MaxProblems.
func (c *checker) addProblem(p Problem) {
	if len(c.res.Problems) >= c.opts.MaxProblems {
		c.res.Dropped++
		return
	}
	c.res.Problems = append(c.res.Problems, p)
}

// checkArchived checks an archived record r, read from the block at
// offset block of segment: its stream is in the archived bucket, which
// names that segment and block, and no longer hot, and its seqs run
// 1..head in global order (open holds the last seq walked of each stream
// not finished).
func (c *checker) checkArchived(b buckets, archB *bolt.Bucket, r Record, segment string, block int64, open map[string]uint64) {
	g := r.Global
	at, ok := archivedEntry(archB, r.Stream)
	if !ok {
		c.add("archive", g, ErrCorrupt, "global %d: stream %q is in a segment but not in the journal's archived streams", g, r.Stream)
		return
	}
	head := at.Head
	if at.Segment != segment {
		c.add("archive", g, ErrCorrupt, "global %d: archived stream %q is in segment %s, its archived entry names %s", g, r.Stream, segment, at.Segment)
	} else if _, listed := slices.BinarySearch(at.Blocks, block); len(at.Blocks) > 0 && !listed {
		c.add("archive", g, ErrCorrupt, "global %d: archived stream %q has a record in the block at offset %d of %s, which its archived entry does not list (a read of the stream would fail)", g, r.Stream, block, segment)
	}
	if r.Seq == 1 && b.heads.Get([]byte(r.Stream)) != nil {
		c.add("archive", g, ErrCorrupt, "stream %q is archived and still has a head in the hot journal", r.Stream)
	}
	if c.opts.Since != nil {
		return // its earlier records are not walked
	}
	if want := open[r.Stream] + 1; r.Seq != want {
		c.add("sequence", g, ErrCorrupt, "global %d: archived stream %q seq %d, want %d", g, r.Stream, r.Seq, want)
	}
	if r.Seq >= head {
		delete(open, r.Stream)
	} else {
		open[r.Stream] = r.Seq
	}
}

func isArchived(b *bolt.Bucket, stream []byte) bool {
	_, ok := archivedEntry(b, string(stream))
	return ok
}
