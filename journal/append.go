package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/refundd/refundd/journal/internal/groupcommit"
)

// pending is one call in the committer's hands: the committer (commit)
// sets Last and Err, the loop wakes the caller.
type pending = groupcommit.Call[request]

// request is an Append, or, when kv is set, a WriteKV: key-value writes
// ride in the next commit of appends rather than paying a transaction and
// an fsync of their own. bbolt has one writer, so a WriteKV in its own
// transaction held every append back for one commit; with the durable
// counters (package tally) writing after each provider answer, that halved
// the lifecycle throughput (docs/BENCHMARKS.md, "Key-value writes").
type request struct {
	AppendRequest
	kv *kvWrite
}

type kvWrite struct {
	put []KV
	del []string
}

// Append appends req.Events to req.Stream with Seq req.Expected+1,
// req.Expected+2, ..., together with req.Claims, req.Dues, req.DropDues and
// req.Marks, in one atomic write. It returns the Seq of the last appended
// event only after the commit holding it has been fsynced (unless
// Options.NoSync).
//
// Errors: *SequenceError (ErrSequenceMismatch) if req.Expected is not the
// stream's head; *KeyTakenError (ErrKeyTaken) if another stream owns a
// claimed key; ErrInvalid for a malformed request; ErrClosed after Close.
// In all of these cases nothing of req was written. Any other error (a
// failed commit or fsync) means the outcome is unknown to this process:
// the caller should stop and reload the stream.
//
// ctx is honoured while waiting for room in the queue, and a request whose
// ctx is done when the committer reaches it is dropped with ctx's error.
// Once the committer has taken it into a transaction its fate no longer
// depends on ctx: a cancel then may still commit, and Append waits for and
// reports the real outcome rather than guessing.
//
// Append does not retain req or its slices after it returns.
func (db *DB) Append(ctx context.Context, req AppendRequest) (uint64, error) {
	if err := validate(&req); err != nil {
		return 0, fmt.Errorf("journal: append to %q: %w", req.Stream, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("journal: append to %q: %w", req.Stream, err)
	}
	if db.opts.ReadOnly {
		return 0, fmt.Errorf("journal: append to %q: %w", req.Stream, ErrReadOnly)
	}
	last, err := db.loop.Do(ctx, request{AppendRequest: req})
	var se *SequenceError
	var kt *KeyTakenError
	switch {
	case err == nil:
		return last, nil
	case errors.As(err, &se), errors.As(err, &kt):
		return 0, err // already names the stream and says "journal:"
	default:
		return 0, fmt.Errorf("journal: append to %q: %w", req.Stream, err)
	}
}

func checkStream(s string) error {
	if len(s) == 0 || len(s) > maxStreamLen {
		return fmt.Errorf("%w: stream name must be 1..%d bytes, got %d", ErrInvalid, maxStreamLen, len(s))
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: stream name %q contains NUL", ErrInvalid, s)
	}
	return nil
}

func checkClaim(c Claim) error {
	if len(c.Namespace) == 0 || len(c.Namespace) > maxNamespaceLen || strings.IndexByte(c.Namespace, 0) >= 0 {
		return fmt.Errorf("%w: claim namespace must be 1..%d bytes without NUL", ErrInvalid, maxNamespaceLen)
	}
	if len(c.Key) == 0 || len(c.Key) > maxKeyLen {
		return fmt.Errorf("%w: claim key must be 1..%d bytes, got %d", ErrInvalid, maxKeyLen, len(c.Key))
	}
	return nil
}

// validate checks everything that does not depend on stored state, and
// fills Due.Stream defaults (req is Append's own copy, but its due slices
// are the caller's, so they are copied before being changed).
func validate(req *AppendRequest) error {
	if err := checkStream(req.Stream); err != nil {
		return err
	}
	if len(req.Events) == 0 {
		return fmt.Errorf("%w: no events", ErrInvalid)
	}
	if req.Expected+uint64(len(req.Events)) < req.Expected {
		return fmt.Errorf("%w: sequence overflow", ErrInvalid)
	}
	for i, e := range req.Events {
		if len(e.Type) == 0 || len(e.Type) > maxTypeLen {
			return fmt.Errorf("%w: event %d: type must be 1..%d bytes, got %d", ErrInvalid, i, maxTypeLen, len(e.Type))
		}
		if e.Version == 0 {
			return fmt.Errorf("%w: event %d (%s): version must be >= 1", ErrInvalid, i, e.Type)
		}
		if len(e.Data) > maxDataLen {
			return fmt.Errorf("%w: event %d (%s): data is %d bytes, limit %d", ErrInvalid, i, e.Type, len(e.Data), maxDataLen)
		}
	}
	for i, c := range req.Claims {
		if err := checkClaim(c); err != nil {
			return fmt.Errorf("claim %d: %w", i, err)
		}
	}
	for i, c := range req.Counters {
		if err := checkCounter(c); err != nil {
			return fmt.Errorf("counter %d: %w", i, err)
		}
	}
	for i, m := range req.Marks {
		if err := ValidateMark(m); err != nil {
			return fmt.Errorf("mark %d: %w", i, err)
		}
	}
	var err error
	if req.Dues, err = checkDues("due", req.Stream, req.Dues); err != nil {
		return err
	}
	req.DropDues, err = checkDues("dropped due", req.Stream, req.DropDues)
	return err
}

// checkDues validates due entries and fills their Stream default, in a copy
// when one needs filling: the slice is the caller's.
func checkDues(what, stream string, dues []Due) ([]Due, error) {
	copied := false
	for i := range dues {
		if dues[i].Stream == "" {
			if !copied {
				dues, copied = append([]Due(nil), dues...), true
			}
			dues[i].Stream = stream
		}
		d := dues[i]
		if err := checkStream(d.Stream); err != nil {
			return nil, fmt.Errorf("%s %d: %w", what, i, err)
		}
		if len(d.Key) > maxKeyLen {
			return nil, fmt.Errorf("%w: %s %d: key must be 0..%d bytes, got %d", ErrInvalid, what, i, maxKeyLen, len(d.Key))
		}
		if _, ok := dueNanos(d.At); !ok {
			return nil, fmt.Errorf("%w: %s %d: time %s outside 1970..2262", ErrInvalid, what, i, d.At.UTC().Format(time.RFC3339))
		}
	}
	return dues, nil
}

// startLoop starts the single committer (package groupcommit). A due part
// of the index tail (index.go) rides in the next commit of appends; when no
// append comes, the loop waits no longer than the tail's flush delay
// (flushAt) and flushes on its own. After Close, once everything queued
// before it has been committed, it flushes the whole tail.
func (db *DB) startLoop() {
	cfg := groupcommit.Config[request]{
		Commit:   db.commit,
		MaxBatch: db.opts.MaxBatch,
		QueueLen: min(db.opts.MaxBatch, maxQueue),
		Closed:   ErrClosed,
		// Let writers woken by the last commit queue their next append
		// before the drain: at 64 writers this raised events per commit
		// from ~32 to ~44 and events/s by 6-13% (A/B, same run).
		Yield: true,
		Name:  "journal",
		Log:   db.log,
	}
	if !db.opts.ReadOnly {
		cfg.Idle, cfg.Tick = db.nextFlush, db.maybeFlush
		cfg.Drained = func() {
			_ = db.flushAll()
			_ = db.flushMarks()
		}
	}
	db.loop = groupcommit.Start(cfg)
}

// flushAt reports when the index tail's oldest entry is due for a flush of
// its own, if it holds any and flushing by time is on.
func (db *DB) flushAt() (time.Time, bool) {
	since, waiting := db.tail.oldest()
	if !waiting || db.opts.IndexFlushDelay < 0 {
		return time.Time{}, false
	}
	if since.Before(db.flushRetry) {
		since = db.flushRetry
	}
	return since.Add(db.opts.IndexFlushDelay), true
}

// nextFlush is the earlier of the index tail's and the mark tail's flush
// times, for the idle committer.
func (db *DB) nextFlush() (time.Time, bool) {
	at, ok := db.flushAt()
	mat, mok := db.markFlushAt()
	if mok && (!ok || mat.Before(at)) {
		if mat.Before(db.flushRetry) {
			mat = db.flushRetry
		}
		return mat, true
	}
	return at, ok
}

func (db *DB) maybeFlush() {
	now := time.Now()
	if now.Before(db.flushRetry) {
		return
	}
	if n, due := db.flushDue(now); due {
		if err := db.flushIndex(n); err != nil {
			// Logged by flushIndex. Appends go on; the tail waits.
			db.flushRetry = now.Add(time.Second)
			return
		}
	}
	if db.markFlushDue(now) {
		if err := db.flushMarks(); err != nil {
			db.flushRetry = now.Add(time.Second) // logged by flushMarks
		}
	}
}

// batchMarks is what a commit did to the mark tail, for the committer to
// apply once it has committed.
type batchMarks struct {
	flushed bool   // the whole tail was written to the buckets,
	base    uint64 // up to this global
	change  *pendingChange
}

// applyBatchMarks brings the mark tail up to a commit that ended at global
// end, before any waiter wakes: a read after Append returns sees its
// marks. The caller holds markMu.
func (db *DB) applyBatchMarks(end uint64) {
	bm := db.batchMarks
	db.batchMarks = batchMarks{}
	t := db.marks
	t.mu.Lock()
	if bm.flushed {
		t.reset(bm.base)
		db.markFlushes.Add(1)
	}
	if bm.change != nil {
		t.apply(bm.change, time.Now())
	}
	t.tip = max(t.tip, end)
	t.mu.Unlock()
}

// internalError marks a failure inside the transaction that is specific to
// one request but was not caught by validation (a bbolt Put refusing).
// bbolt has no savepoints, so the transaction is rolled back and retried
// without that request.
type internalError struct {
	i   int
	err error
}

func (e *internalError) Error() string { return e.err.Error() }

// commit writes live in as few bbolt transactions as possible (normally
// one) and sets every request's outcome; the loop then wakes the waiters.
// bbolt rolls the transaction back on a panic, and the loop fails the batch
// (after a commit nothing here panics: the observer's panics are caught by
// observe).
func (db *DB) commit(live []*pending) {
	for len(live) > 0 {
		if db.beforeCommit != nil {
			db.beforeCommit(len(live))
		}
		var end tip
		var cp *Checkpoint
		var adds []tailAdd
		var flushed int
		obs := db.startCommit(len(live))
		db.markMu.Lock()
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			var err error
			end, cp, adds, flushed, err = db.writeBatch(tx, live)
			return obs.wrote(tx, err)
		})
		db.commits.Add(1)
		if err == nil {
			db.applyBatchMarks(end.global)
		}
		db.markMu.Unlock()
		if err == nil {
			db.tip = end
			// The streams this commit wrote to the index leave the tail
			// first (their entries from before this batch), then the
			// batch's records join it, before any waiter wakes: a Load
			// after Append returns must find them.
			if flushed > 0 {
				db.dropFlushed(flushed)
				db.indexFlushes.Add(1)
			}
			now := time.Now()
			db.tail.mu.Lock()
			for _, a := range adds {
				db.tail.add(a.stream, a.seq, a.global, now)
			}
			db.tail.mu.Unlock()
			if cp != nil {
				db.cpMu.Lock()
				if cp.Global >= db.lastCP.Global {
					db.lastCP = *cp
				}
				db.cpMu.Unlock()
			}
		}
		// Observed once the in-memory state matches the file: a panic
		// in the observer must not leave committed records out of the tail.
		db.observe(obs, err)
		var ie *internalError
		if errors.As(err, &ie) {
			if r := live[ie.i].Req; r.kv != nil {
				db.log.Error("journal kv write failed inside transaction; retrying batch without it", "err", ie.err)
			} else {
				db.log.Error("journal append failed inside transaction; retrying batch without it",
					"stream", r.Stream, "err", ie.err)
			}
			p := live[ie.i]
			p.Last, p.Err = 0, ie.err
			// A new slice: the loop's batch keeps every request, to wake it.
			live = slices.Concat(live[:ie.i], live[ie.i+1:])
			continue
		}
		if err != nil {
			if errors.Is(err, berrors.ErrDatabaseNotOpen) {
				err = ErrClosed
			}
			err = fmt.Errorf("commit failed: %w", err)
			db.log.Error("journal commit failed", "err", err, "batch", len(live))
			for _, p := range live {
				p.Last, p.Err = 0, err
			}
		}
		break
	}
}

// writeBatch validates and writes each request in order, so a request sees
// the heads and claims left by earlier requests of the same batch, chains
// each record onto the one before it, and writes a checkpoint when one is
// due. It only sets fields of live entries from scratch, and the chain end
// it returns is adopted only after the commit succeeds, so the transaction
// may run again.
func (db *DB) writeBatch(tx *bolt.Tx, live []*pending) (end tip, cp *Checkpoint, adds []tailAdd, flushed int, err error) {
	db.batchMarks = batchMarks{}
	if cap(db.values) > maxReusedValues {
		db.values = nil // an outsized batch's buffer is not kept
	}
	db.values = db.values[:0]
	b := txBuckets(tx)
	// The log only ever grows at its end: full pages waste nothing. The
	// setting lasts for this transaction's bucket handle only.
	b.log.FillPercent = 1.0
	cur := db.tip
	if cur.global != b.log.Sequence() {
		// The cached end is not this file's (the first commit after a
		// failed one): read it from the log.
		if cur, err = tipInTx(tx); err != nil {
			return tip{}, nil, nil, 0, err
		}
	}
	// Part of the index tail rides in this commit when it is due: its
	// pages cost no fsync of their own. Written before this batch's
	// records, which are not in the tail yet.
	if n, due := db.flushDue(time.Now()); due && db.tip.global == cur.global {
		if err := db.writeIndex(tx, n); err != nil {
			return tip{}, nil, nil, 0, err
		}
		flushed = n
	}
	// So does the mark tail, all of it: written before this batch's
	// changes, which join the tail after the commit.
	if db.markFlushDue(time.Now()) && db.marks.tip == cur.global {
		w, err := db.writeMarkTail(tx, true)
		if err != nil {
			return tip{}, nil, nil, 0, err
		}
		db.batchMarks.flushed, db.batchMarks.base = true, w
	}
	idx := &indexState{tail: db.tail, heads: b.heads, batch: map[string]uint64{}}
	change := &pendingChange{}
	counts := &change.counts
	for i, p := range live {
		p.Last, p.Err = 0, nil
		if p.Req.kv != nil {
			if err := writeKV(tx, p.Req.kv); err != nil {
				return tip{}, nil, nil, 0, &internalError{i: i, err: err}
			}
			continue
		}
		last, verr, err := writeOne(b, idx, &p.Req.AppendRequest, &cur, &change.marks, &db.values)
		if err != nil {
			return tip{}, nil, nil, 0, &internalError{i: i, err: err}
		}
		p.Last, p.Err = last, verr
		if verr == nil {
			counts.put(p.Req.Counters)
		}
	}
	if change.tip = cur.global; !change.empty() {
		if err := putPending(tx, change, &db.values); err != nil {
			return tip{}, nil, nil, 0, err
		}
		db.batchMarks.change = change
	}
	db.cpMu.Lock()
	last := db.lastCP
	db.cpMu.Unlock()
	now := db.opts.Now()
	if now.Before(last.Time) {
		now = last.Time // a clock stepped back: checkpoint times never do
	}
	if !db.checkpointDue(cur, last, now) {
		return cur, nil, idx.adds, flushed, nil
	}
	c := db.newCheckpoint(cur, now)
	if err := putCheckpoint(tx, c); err != nil {
		return tip{}, nil, nil, 0, err
	}
	return cur, &c, idx.adds, flushed, nil
}

type buckets struct {
	log, heads, streams, claims, due *bolt.Bucket
	archived                         *bolt.Bucket // nil in a file never archived
}

func txBuckets(tx *bolt.Tx) buckets {
	return buckets{
		log:      tx.Bucket(bucketLog),
		heads:    tx.Bucket(bucketHeads),
		streams:  tx.Bucket(bucketStreams),
		claims:   tx.Bucket(bucketClaims),
		due:      tx.Bucket(bucketDue),
		archived: tx.Bucket(bucketArchived),
	}
}

// maxReusedValues bounds the buffer of a commit's values kept for the next
// commit (DB.values): a typical commit's records take a few tens of KiB.
const maxReusedValues = 1 << 20

// writeOne validates req against the stored state and, if it passes, writes
// it. verr is a validation failure (nothing written); err is an unexpected
// failure after writing may have started (the transaction must be dropped).
// The records are encoded at the end of *values, which must stay untouched
// until the transaction ends.
func writeOne(b buckets, idx *indexState, req *AppendRequest, chain *tip, marks *[]Mark, values *[]byte) (last uint64, verr, err error) {
	head, err := idx.head(req.Stream)
	if err != nil {
		return 0, nil, err
	}
	if head == 0 {
		if at, ok := archivedEntry(b.archived, req.Stream); ok {
			return 0, &ArchivedError{Stream: req.Stream, Segment: at.Segment}, nil
		}
	}
	if head != req.Expected {
		return 0, &SequenceError{Stream: req.Stream, Expected: req.Expected, Actual: head}, nil
	}
	claimKeys := make([][]byte, 0, len(req.Claims))
	for _, c := range req.Claims {
		k := claimKey(c.Namespace, c.Key)
		if owner := b.claims.Get(k); owner != nil {
			if string(owner) != req.Stream {
				return 0, &KeyTakenError{Namespace: c.Namespace, Key: c.Key, Owner: string(owner)}, nil
			}
			continue // same-stream re-claim: nothing to write
		}
		claimKeys = append(claimKeys, k)
	}

	seq := head
	for _, e := range req.Events {
		g, err := b.log.NextSequence()
		if err != nil {
			return 0, nil, err
		}
		seq++
		gk := be64(g)
		start := len(*values)
		var h Hash
		*values, h = appendRecord(*values, g, req.Stream, seq, e, chain.hash)
		// Capped, so that no later append can write into this value.
		rec := (*values)[start:len(*values):len(*values)]
		if err := b.log.Put(gk, rec); err != nil {
			return 0, nil, err
		}
		*chain = tip{global: g, hash: h}
		idx.put(req.Stream, seq, g) // indexed later, by an index flush
	}
	stream := []byte(req.Stream)
	for _, k := range claimKeys {
		// Put of an already written key (a claim repeated in one request)
		// is harmless.
		if err := b.claims.Put(k, stream); err != nil {
			return 0, nil, err
		}
	}
	for _, d := range req.Dues {
		n, _ := dueNanos(d.At) // checked by validate
		if err := b.due.Put(dueKey(n, d.Stream, d.Key), []byte{}); err != nil {
			return 0, nil, err
		}
	}
	for _, d := range req.DropDues {
		n, _ := dueNanos(d.At) // checked by validate
		if err := b.due.Delete(dueKey(n, d.Stream, d.Key)); err != nil {
			return 0, nil, err
		}
	}
	// The marks wait in the mark tail (marktail.go), in order: a later
	// mark of the same key wins.
	*marks = append(*marks, req.Marks...)
	return seq, nil, nil
}
