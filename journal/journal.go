package journal

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/refundd/refundd/journal/internal/groupcommit"
)

// Options configures Open. The zero value is the production setting.
type Options struct {
	// Timeout is how long Open waits for the file lock before failing with
	// ErrLocked. Zero means 1s.
	Timeout time.Duration
	// NoSync skips fsync on commit, for benchmarks and tests only: a crash
	// may lose or tear acknowledged appends. Zero (false) fsyncs every commit.
	NoSync bool
	// MaxBatch is the most appends committed in one transaction. Zero means
	// 1024.
	MaxBatch int
	// Logger receives commit failures and lifecycle messages. Nil means
	// slog.Default().
	Logger *slog.Logger

	// ReadOnly opens an existing file for reading only, with a shared lock:
	// nothing is ever written, so the file stays byte-identical, and
	// Append, WriteKV, DeleteDue and WriteCheckpoint fail with
	// ErrReadOnly. A file held by a writer (a running refundd) fails with
	// ErrLocked after Timeout. Zero (false) opens for reading and writing,
	// creating the file if needed.
	ReadOnly bool
	// SigningKey, when set, signs every checkpoint and ChainHead with
	// Ed25519. Nil means checkpoints are unsigned.
	SigningKey ed25519.PrivateKey
	// CheckpointEvery writes a checkpoint (global, chain hash, time) in the
	// same transaction as the appends that take the journal this many
	// records past the last checkpoint. Zero means 10000; negative means
	// never by count.
	CheckpointEvery int
	// CheckpointInterval writes a checkpoint with the first commit that
	// comes this long after the last checkpoint. Zero means 10 minutes;
	// negative means never by time. A quiet journal gets no checkpoint
	// until its next append (WriteCheckpoint writes one on demand).
	CheckpointInterval time.Duration
	// Now is the clock for checkpoint times. Nil means time.Now.
	Now func() time.Time
	// IndexFlushEntries and IndexFlushDelay bound the index tail: the
	// per-stream index entries of committed records that are not yet
	// written to the streams index (index.go). The committer flushes part
	// of the tail once it holds IndexFlushEntries entries or its oldest
	// entry is IndexFlushDelay old, and all of it on Close. Smaller means
	// a shorter log read at Open after a crash, larger means fewer index
	// writes. Zero means 8192 entries and 100 ms; a negative delay means
	// flush by count only.
	IndexFlushEntries int
	IndexFlushDelay   time.Duration
	// MarkFlushEntries and MarkFlushDelay bound the mark tail: the marks
	// and counter changes of committed appends that are kept in the
	// pending bucket and in memory, not yet in the marks and counters
	// buckets (marktail.go). The committer writes the whole tail once it
	// holds MarkFlushEntries changes or its oldest is MarkFlushDelay old,
	// and at Close. Larger means fewer, larger flushes and a longer pending
	// bucket to read at Open. Zero means 65536 changes and 1 s; a negative
	// delay means flush by count only.
	MarkFlushEntries int
	MarkFlushDelay   time.Duration
	// OnCommit, when set, is called by the committer after each
	// transaction with its size and timings (metrics). It must return
	// quickly: the next commit waits for it. Nil means none.
	OnCommit func(CommitInfo)
	// ArchiveDir is where the file's archive segments are (archive.go).
	// Empty means ArchiveDir(path): beside the file.
	ArchiveDir string
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Timeout <= 0 {
		v.Timeout = time.Second
	}
	if v.MaxBatch <= 0 {
		v.MaxBatch = 1024
	}
	if v.Logger == nil {
		v.Logger = slog.Default()
	}
	if v.CheckpointEvery == 0 {
		v.CheckpointEvery = defaultCheckpointEvery
	}
	if v.CheckpointInterval == 0 {
		v.CheckpointInterval = defaultCheckpointInterval
	}
	if v.Now == nil {
		v.Now = time.Now
	}
	if v.IndexFlushEntries <= 0 {
		v.IndexFlushEntries = defaultIndexFlushEntries
	}
	if v.IndexFlushDelay == 0 {
		v.IndexFlushDelay = defaultIndexFlushDelay
	}
	if v.MarkFlushEntries <= 0 {
		v.MarkFlushEntries = defaultMarkFlushEntries
	}
	if v.MarkFlushDelay == 0 {
		v.MarkFlushDelay = defaultMarkFlushDelay
	}
	return v
}

// Event is one event to append. Data is opaque to the journal.
type Event struct {
	Type    string // 1..64 bytes, e.g. "refund.requested"
	Version uint16 // schema version of Data, >= 1
	Data    []byte // at most 16 MiB
}

// Record is a stored event.
type Record struct {
	Global  uint64 // global sequence, 1-based, gap-free
	Stream  string
	Seq     uint64 // per-stream sequence, 1-based, gap-free
	Type    string
	Version uint16
	Data    []byte
	// Hash is the record's chain hash (ChainHash of the previous record's
	// hash and this record), as stored. It is the zero Hash for a format 1
	// record, which predates the chain: Check computes those.
	Hash Hash
	// Format is the storage format the record was written in (1 or 2).
	Format uint8
}

// Claim is a unique key owned by the appending stream. Namespace is 1..64
// bytes without NUL; Key is 1..1024 bytes.
type Claim struct{ Namespace, Key string }

// Due is a due-time index entry. At is kept with nanosecond precision and
// returned in UTC; it must lie between 1970 and 2262. Stream follows the
// stream name rules; Key is 0..1024 bytes. The entry is identified by all
// three fields.
type Due struct {
	At     time.Time
	Stream string
	Key    string
}

// AppendRequest is one atomic append to one stream.
type AppendRequest struct {
	Stream   string  // 1..128 bytes, no NUL
	Expected uint64  // Seq of the stream's last record; 0 = stream must be empty
	Events   []Event // at least one; stored with Seq Expected+1, Expected+2, ...
	Claims   []Claim // claimed atomically with the events; same-stream re-claim is a no-op
	Dues     []Due   // put into the due index atomically with the events; empty Due.Stream means Stream
	// DropDues are deleted from the due index atomically with the events,
	// after Dues are put (the due times the events supersede); empty
	// Due.Stream means Stream, and a missing entry is no error.
	DropDues []Due
	Marks    []Mark // set or cleared in the marks index atomically with the events
	// Counters are changed atomically with the events (counters.go): the
	// writer's running totals of what the events mean.
	Counters []Counter
}

// DB is an open journal file. It is safe for concurrent use.
type DB struct {
	path string
	opts Options
	log  *slog.Logger
	bolt *bolt.DB

	// loop is the group committer (append.go); its Committed signal is
	// broadcast after every commit and stopped at Close (kv.go).
	loop    *groupcommit.Loop[request]
	commits atomic.Uint64 // bbolt write transactions run by the committer, for tests

	// tip is the chain's end as of the last successful commit; only the
	// committer uses it (after Open), and checks it against the log.
	tip tip
	// tail holds index entries not yet in the streams index (index.go).
	tail *tail
	// flushRetry delays the next index flush after a failed one; only the
	// committer uses it.
	flushRetry   time.Time
	flushStreams int           // streams per ordinary flush; tests lower it
	indexFlushes atomic.Uint64 // index flushes (own transactions or in a commit), for tests
	// marks holds the marks and counter changes not yet in their buckets
	// (marktail.go). markMu serialises its writers: the committer from the
	// start of a commit until the tail matches it, WriteMarks and
	// SetCounters.
	marks       *markTail
	markMu      sync.Mutex
	markFlushes atomic.Uint64 // mark flushes (own transactions or in a commit), for tests
	batchMarks  batchMarks    // the commit in progress's; only the committer uses it
	// values holds the encoded records and pending value of the commit in
	// progress. bbolt keeps a Put's value, not a copy, and needs it valid
	// for the life of the transaction only, so each commit's values share
	// one buffer, which the next commit reuses: 50.9 -> 48.3 KiB allocated
	// per pinned lifecycle (docs/BENCHMARKS.md). Only the committer uses it.
	values []byte
	// lastCP is the newest stored checkpoint, guarded by cpMu.
	cpMu   sync.Mutex
	lastCP Checkpoint

	// beforeCommit, when set (by tests, before the first Append), is called
	// by the committer with the batch size just before each transaction.
	beforeCommit func(batch int)
	closeOnce    sync.Once
	closeErr     error
}

// Open opens the journal at path, creating the file (mode 0600) and its
// parent directory (0700) if missing. It fails with ErrLocked if another
// process holds the file for longer than opts.Timeout, and with
// ErrFormatTooNew if the file was written by a newer format. A file of an
// older format is upgraded in place (its records stay as they are; new
// records use the current format) unless opts.ReadOnly. opts may be nil.
func Open(path string, opts *Options) (*DB, error) {
	o := opts.withDefaults()
	if o.ReadOnly {
		// bbolt would create a missing file even read-only.
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("journal: open %s: %w", path, err)
		}
	} else if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:  o.Timeout,
		NoSync:   o.NoSync,
		ReadOnly: o.ReadOnly,
		// Freelist settings stay at bbolt's defaults (array, synced):
		// map/NoFreelistSync showed no difference beyond noise for this
		// append-only workload (docs/BENCHMARKS.md, "Journal append"), and a
		// synced freelist keeps reopening after a crash cheap.
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("journal: open %s: %w (still held after %s; is another refundd running on this file?): %w",
			path, ErrLocked, o.Timeout, err)
	}
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
		return nil, fmt.Errorf("journal: open %s: %w: %w", path, ErrCorrupt, err)
	}
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	if err := initBuckets(bdb, o.ReadOnly); err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	db := &DB{
		path:         path,
		opts:         o,
		log:          o.Logger.With("journal", path),
		bolt:         bdb,
		tail:         newTail(),
		flushStreams: indexFlushStreams,
		marks:        newMarkTail(),
	}
	// The committer chains new records onto the current end, and counts
	// checkpoints from the last one. Records the streams index does not
	// hold yet (the tail at a crash) are found in the log after the
	// watermark, read-only too, so reads see every record.
	err = bdb.View(func(tx *bolt.Tx) error {
		if !o.ReadOnly {
			var err error
			if db.tip, err = tipInTx(tx); err != nil {
				return err
			}
			if db.lastCP, _, err = lastCheckpointInTx(tx); err != nil {
				return err
			}
		}
		skipped, _, err := loadTail(tx, db.tail, time.Now(), !o.ReadOnly)
		if skipped > 0 {
			db.log.Warn("journal: records after the index watermark are damaged; reads skip them (run a check)", "skipped", skipped)
		}
		if err != nil {
			return err
		}
		skipped, err = loadMarkTail(tx, db.marks, time.Now(), !o.ReadOnly)
		if skipped > 0 {
			db.log.Warn("journal: pending marks and counter changes are damaged; reads skip them (run a check)", "skipped", skipped)
		}
		return err
	})
	if err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("journal: open %s: %w", path, err)
	}
	db.startLoop()
	db.log.Debug("journal opened", "max_batch", o.MaxBatch, "no_sync", o.NoSync, "read_only", o.ReadOnly)
	return db, nil
}

// initBuckets checks the format version, then creates missing buckets and
// upgrades an older format's version number. The check runs in a read
// transaction first so a newer file is never written. Read-only, it only
// checks.
func initBuckets(bdb *bolt.DB, readOnly bool) error {
	fresh := false
	var format uint32
	err := bdb.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			// A file with journal buckets but no meta was not made by us, or
			// lost its meta: refuse rather than guess.
			for _, name := range [][]byte{bucketLog, bucketHeads, bucketStreams, bucketClaims, bucketDue} {
				if tx.Bucket(name) != nil {
					return fmt.Errorf("%w: bucket %q exists without a meta bucket", ErrCorrupt, name)
				}
			}
			if readOnly {
				return fmt.Errorf("%w: not a journal (no meta bucket)", ErrCorrupt)
			}
			fresh = true
			return nil
		}
		v := meta.Get(metaFormatKey)
		if len(v) != 4 {
			return fmt.Errorf("%w: meta format version is %d bytes, want 4", ErrCorrupt, len(v))
		}
		if format = binary.BigEndian.Uint32(v); format > fileFormat && format != archivedFileFormat {
			return fmt.Errorf("%w: file format %d, this build reads up to %d", ErrFormatTooNew, format, archivedFileFormat)
		} else if format == 0 {
			return fmt.Errorf("%w: meta format version 0", ErrCorrupt)
		}
		if readOnly {
			for _, name := range [][]byte{bucketLog, bucketHeads, bucketStreams, bucketClaims, bucketDue} {
				if tx.Bucket(name) == nil {
					return fmt.Errorf("%w: missing bucket %q", ErrCorrupt, name)
				}
			}
		}
		return nil
	})
	if err != nil || readOnly {
		return err
	}
	return bdb.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		for _, name := range [][]byte{bucketLog, bucketHeads, bucketStreams, bucketClaims, bucketDue, bucketMarks, bucketCheckpoints, bucketCounters, bucketPending} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		// Counters kept from the first record on are complete, of this
		// build's generation; a file that has records from before them
		// (or from before its generation) needs SetCounters.
		if tx.Bucket(bucketLog).Sequence() == 0 && countedGeneration(meta.Get(metaCountedKey)) < CountersGeneration {
			if err := meta.Put(metaCountedKey, countedValue(0)); err != nil {
				return err
			}
		}
		if fresh || format < fileFormat {
			// Files before format 3 indexed every record in its commit:
			// their watermark is their end. Format 3 keeps it from now on,
			// and a build that does not know it refuses the file.
			if meta.Get(metaIndexedKey) == nil {
				if err := meta.Put(metaIndexedKey, be64(tx.Bucket(bucketLog).Sequence())); err != nil {
					return err
				}
			}
			v := make([]byte, 4)
			binary.BigEndian.PutUint32(v, fileFormat)
			if err := meta.Put(metaFormatKey, v); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReadOnly reports whether the DB was opened with Options.ReadOnly.
func (db *DB) ReadOnly() bool { return db.opts.ReadOnly }

// Path returns the file path given to Open.
func (db *DB) Path() string { return db.path }

// Close stops accepting appends (they fail with ErrClosed), waits for the
// already queued ones to commit, and closes the file. It is safe to call
// more than once; later calls return the first call's result.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.loop.Close()
		if err := db.bolt.Close(); err != nil {
			db.closeErr = fmt.Errorf("journal: close %s: %w", db.path, err)
		}
		db.log.Debug("journal closed")
	})
	return db.closeErr
}

// view runs fn in a read transaction, mapping bbolt's "not open" to
// ErrClosed.
func (db *DB) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := db.bolt.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// exclusive runs fn in a write transaction that is rolled back: a
// consistent view that no writer changes meanwhile.
func (db *DB) exclusive(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tx, err := db.bolt.Begin(true)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}

// Load returns the records of stream with Seq > afterSeq, in Seq order. An
// unknown stream yields an empty slice. A record failing its checksum yields
// ErrCorrupt.
func (db *DB) Load(ctx context.Context, stream string, afterSeq uint64) ([]Record, error) {
	if err := checkStream(stream); err != nil {
		return nil, fmt.Errorf("journal: load: %w", err)
	}
	recs := []Record{}
	if afterSeq == math.MaxUint64 {
		return recs, nil
	}
	// The tail first: an entry flushed after this copy is in the index
	// the read transaction below sees (the tail drops entries only after
	// their flush commits).
	tailFirst, tailGlobals := db.tail.entriesAfter(stream, afterSeq)
	err := db.view(ctx, func(tx *bolt.Tx) error {
		logB := tx.Bucket(bucketLog)
		want := afterSeq + 1
		read := func(seq, g uint64) error {
			if len(recs)%1024 == 1023 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if seq != want {
				return fmt.Errorf("%w: stream %q: seq %d follows %d", ErrCorrupt, stream, seq, want-1)
			}
			raw := logB.Get(be64(g))
			if raw == nil {
				return fmt.Errorf("%w: stream %q seq %d points to missing global %d", ErrCorrupt, stream, seq, g)
			}
			r, err := decodeRecord(g, raw)
			if err != nil {
				return err
			}
			if r.Stream != stream || r.Seq != seq {
				return fmt.Errorf("%w: stream %q seq %d points to global %d holding stream %q seq %d",
					ErrCorrupt, stream, seq, g, r.Stream, r.Seq)
			}
			recs = append(recs, r)
			want++
			return nil
		}
		prefix := streamPrefix(stream)
		c := tx.Bucket(bucketStreams).Cursor()
		for k, v := c.Seek(streamKey(stream, want)); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
			// Streams have no NUL, so every key under prefix is this stream's.
			if len(k) != len(prefix)+8 {
				return fmt.Errorf("%w: stream %q: index key of %d bytes", ErrCorrupt, stream, len(k))
			}
			_, seq, _ := parseStreamKey(k)
			if len(v) != 8 {
				return fmt.Errorf("%w: stream %q seq %d: index value is %d bytes", ErrCorrupt, stream, seq, len(v))
			}
			if err := read(seq, binary.BigEndian.Uint64(v)); err != nil {
				return err
			}
		}
		for i, g := range tailGlobals {
			if seq := tailFirst + uint64(i); seq >= want { // else flushed and read above
				if err := read(seq, g); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: load %q: %w", stream, err)
	}
	return recs, nil
}

func hasPrefix(b, prefix []byte) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == string(prefix)
}

// Head returns the Seq of the stream's last record, 0 for an unknown or
// empty stream.
func (db *DB) Head(ctx context.Context, stream string) (uint64, error) {
	if err := checkStream(stream); err != nil {
		return 0, fmt.Errorf("journal: head: %w", err)
	}
	db.tail.mu.RLock()
	head, ok := db.tail.headOf(stream)
	db.tail.mu.RUnlock()
	if ok {
		return head, nil
	}
	// Not in the tail: the stored head is current (a flush stores a
	// stream's head before it leaves the tail).
	err := db.view(ctx, func(tx *bolt.Tx) error {
		var err error
		head, err = readHead(tx.Bucket(bucketHeads), stream)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("journal: head %q: %w", stream, err)
	}
	return head, nil
}

func readHead(heads *bolt.Bucket, stream string) (uint64, error) {
	v := heads.Get([]byte(stream))
	switch len(v) {
	case 0:
		if v != nil {
			return 0, fmt.Errorf("%w: head of stream %q is empty", ErrCorrupt, stream)
		}
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	default:
		return 0, fmt.Errorf("%w: head of stream %q is %d bytes", ErrCorrupt, stream, len(v))
	}
}

// Lookup returns the stream that owns key in namespace, or ErrNotFound.
func (db *DB) Lookup(ctx context.Context, namespace, key string) (string, error) {
	if err := checkClaim(Claim{Namespace: namespace, Key: key}); err != nil {
		return "", fmt.Errorf("journal: lookup: %w", err)
	}
	var owner string
	err := db.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketClaims).Get(claimKey(namespace, key))
		if v == nil {
			return ErrNotFound
		}
		owner = string(v)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("journal: lookup %q/%q: %w", namespace, key, err)
	}
	return owner, nil
}

// Scan returns up to limit records with Global > afterGlobal, in global
// order. limit <= 0 means no limit. In a file that archived streams the
// archived records are not returned (Archive.Iter reads them).
func (db *DB) Scan(ctx context.Context, afterGlobal uint64, limit int) ([]Record, error) {
	recs := []Record{}
	if afterGlobal == math.MaxUint64 {
		return recs, nil
	}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLog).Cursor()
		want := afterGlobal + 1
		// A file that archived streams has gaps where their records were
		// (their archive fills them; Check with the archive checks it).
		gaps := tx.Bucket(bucketArchived) != nil
		for k, v := c.Seek(be64(want)); k != nil && (limit <= 0 || len(recs) < limit); k, v = c.Next() {
			if len(recs)%1024 == 1023 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if len(k) != 8 {
				return fmt.Errorf("%w: log key of %d bytes", ErrCorrupt, len(k))
			}
			g := binary.BigEndian.Uint64(k)
			if g != want && !(gaps && g > want) {
				return fmt.Errorf("%w: global %d follows %d", ErrCorrupt, g, want-1)
			}
			r, err := decodeRecord(g, v)
			if err != nil {
				return err
			}
			recs = append(recs, r)
			want = g + 1
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: scan after %d: %w", afterGlobal, err)
	}
	return recs, nil
}

// LastGlobal returns the Global of the last record, 0 if the journal is
// empty.
func (db *DB) LastGlobal(ctx context.Context) (uint64, error) {
	var last uint64
	err := db.view(ctx, func(tx *bolt.Tx) error {
		last = tx.Bucket(bucketLog).Sequence()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("journal: last global: %w", err)
	}
	return last, nil
}

// DueBefore returns up to limit due entries with At <= t, oldest first
// (ties ordered by stream, then key). limit <= 0 means no limit.
func (db *DB) DueBefore(ctx context.Context, t time.Time, limit int) ([]Due, error) {
	dues := []Due{}
	if t.Before(time.Unix(0, 0)) {
		return dues, nil
	}
	end, ok := dueNanos(t)
	if !ok { // after 2262: everything is due
		end = 1<<63 - 1
	}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDue).Cursor()
		for k, _ := c.First(); k != nil && (limit <= 0 || len(dues) < limit); k, _ = c.Next() {
			if len(k) < 8 || binary.BigEndian.Uint64(k[:8]) > end {
				break
			}
			d, ok := parseDueKey(k)
			if !ok {
				return fmt.Errorf("%w: malformed due key %x", ErrCorrupt, k)
			}
			dues = append(dues, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: due before %s: %w", t.UTC().Format(time.RFC3339Nano), err)
	}
	return dues, nil
}

// DeleteDue removes the given due entries in one fsynced transaction.
// Removing an entry that does not exist is not an error.
func (db *DB) DeleteDue(ctx context.Context, dues []Due) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.opts.ReadOnly {
		return fmt.Errorf("journal: delete due: %w", ErrReadOnly)
	}
	keys := make([][]byte, 0, len(dues))
	for _, d := range dues {
		if n, ok := dueNanos(d.At); ok { // an unrepresentable At was never stored
			keys = append(keys, dueKey(n, d.Stream, d.Key))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDue)
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = ErrClosed
	}
	if err != nil {
		return fmt.Errorf("journal: delete due: %w", err)
	}
	return nil
}

// OwnedClaim is a claim and the stream that owns it.
type OwnedClaim struct {
	Namespace, Key, Owner string
}

// ForEachClaim calls fn with every claim in namespace ("" for all), in
// key order, inside one read transaction (fn must not use the DB). An
// error from fn stops the walk and is returned.
func (db *DB) ForEachClaim(ctx context.Context, namespace string, fn func(OwnedClaim) error) error {
	var prefix []byte
	if namespace != "" {
		prefix = claimKey(namespace, "")
	}
	err := db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketClaims).Cursor()
		k, v := c.First()
		if prefix != nil {
			k, v = c.Seek(prefix)
		}
		for ; k != nil && hasPrefix(k, prefix); k, v = c.Next() {
			i := 0
			for i < len(k) && k[i] != 0 {
				i++
			}
			if i == len(k) {
				return fmt.Errorf("%w: malformed claim key %x", ErrCorrupt, k)
			}
			if err := fn(OwnedClaim{Namespace: string(k[:i]), Key: string(k[i+1:]), Owner: string(v)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("journal: claims %q: %w", namespace, err)
	}
	return nil
}

// ForEachDue calls fn with every due entry, oldest first, inside one read
// transaction (fn must not use the DB). An error from fn stops the walk
// and is returned.
func (db *DB) ForEachDue(ctx context.Context, fn func(Due) error) error {
	err := db.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDue).ForEach(func(k, _ []byte) error {
			d, ok := parseDueKey(k)
			if !ok {
				return fmt.Errorf("%w: malformed due key %x", ErrCorrupt, k)
			}
			return fn(d)
		})
	})
	if err != nil {
		return fmt.Errorf("journal: due entries: %w", err)
	}
	return nil
}

// Size returns the size in bytes of the file as bbolt sees it now.
func (db *DB) Size(ctx context.Context) (int64, error) {
	var n int64
	err := db.view(ctx, func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	if err != nil {
		return 0, fmt.Errorf("journal: size: %w", err)
	}
	return n, nil
}

// LoadStreams returns the records of each of streams (duplicates are read
// once), as Load would, in one read transaction: the streams' index
// entries in key order, then their records in global order, the order they
// lie in the file, so that the reads of many cold streams (a page of a
// list) go forward through the file once instead of seeking back and forth.
// An unknown stream maps to an empty slice.
func (db *DB) LoadStreams(ctx context.Context, streams []string) (map[string][]Record, error) {
	for _, s := range streams {
		if err := checkStream(s); err != nil {
			return nil, fmt.Errorf("journal: load streams: %w", err)
		}
	}
	names := slices.Clone(streams)
	slices.Sort(names)
	names = slices.Compact(names)
	type tailed struct {
		first   uint64
		globals []uint64
	}
	// The tail first, as Load does.
	tails := make([]tailed, len(names))
	for i, s := range names {
		tails[i].first, tails[i].globals = db.tail.entriesAfter(s, 0)
	}
	type ref struct {
		stream int // index in names
		seq, g uint64
	}
	out := make(map[string][]Record, len(names))
	err := db.view(ctx, func(tx *bolt.Tx) error {
		var refs []ref
		c := tx.Bucket(bucketStreams).Cursor()
		for i, s := range names {
			prefix := streamPrefix(s)
			want := uint64(1)
			for k, v := c.Seek(streamKey(s, 1)); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
				if len(k) != len(prefix)+8 || len(v) != 8 {
					return fmt.Errorf("%w: stream %q: index entry of %d+%d bytes", ErrCorrupt, s, len(k), len(v))
				}
				_, seq, _ := parseStreamKey(k)
				if seq != want {
					return fmt.Errorf("%w: stream %q: seq %d follows %d", ErrCorrupt, s, seq, want-1)
				}
				refs = append(refs, ref{i, seq, binary.BigEndian.Uint64(v)})
				want++
			}
			for j, g := range tails[i].globals {
				if seq := tails[i].first + uint64(j); seq >= want { // else flushed and read above
					if seq != want {
						return fmt.Errorf("%w: stream %q: seq %d follows %d", ErrCorrupt, s, seq, want-1)
					}
					refs = append(refs, ref{i, seq, g})
					want++
				}
			}
		}
		byStream := make([][]Record, len(names))
		slices.SortFunc(refs, func(a, b ref) int { return cmp.Compare(a.g, b.g) })
		logB := tx.Bucket(bucketLog)
		recs := make([]Record, 0, len(refs))
		for n, rf := range refs {
			if n%1024 == 1023 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			raw := logB.Get(be64(rf.g))
			if raw == nil {
				return fmt.Errorf("%w: stream %q seq %d points to missing global %d", ErrCorrupt, names[rf.stream], rf.seq, rf.g)
			}
			r, err := decodeRecord(rf.g, raw)
			if err != nil {
				return err
			}
			if r.Stream != names[rf.stream] || r.Seq != rf.seq {
				return fmt.Errorf("%w: stream %q seq %d points to global %d holding stream %q seq %d",
					ErrCorrupt, names[rf.stream], rf.seq, rf.g, r.Stream, r.Seq)
			}
			recs = append(recs, r)
		}
		// A stream's globals ascend with its seqs: in global order, each
		// stream's records come in seq order.
		for i, r := range recs {
			byStream[refs[i].stream] = append(byStream[refs[i].stream], r)
		}
		for i, s := range names {
			if byStream[i] == nil {
				byStream[i] = []Record{}
			}
			out[s] = byStream[i]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: load streams: %w", err)
	}
	return out, nil
}
