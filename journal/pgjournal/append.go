package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/internal/groupcommit"
)

// request is what the committer needs of one Append.
type request struct {
	journal.AppendRequest
	epoch uint64 // this DB's epoch for the stream when Append was called
}

// pending is one Append in the committer's hands: the committer (commit)
// sets Last and Err, the loop wakes the caller.
type pending = groupcommit.Call[request]

// Append appends req.Events to req.Stream with Seq req.Expected+1, ...,
// together with req.Claims, req.Dues, req.DropDues, req.Marks and
// req.Counters (counters.go), in one atomic write, provided this DB still holds the epoch it activated for the
// stream. It returns the Seq of the last appended event after the
// transaction holding it committed (synchronous_commit as the server has
// it).
//
// Errors: *FencedError (ErrFenced) if this DB never activated the stream or
// another DB activated it since; *journal.SequenceError if req.Expected is
// not the stream's head; *journal.KeyTakenError if another stream owns a
// claimed key; journal.ErrInvalid for a malformed request; journal.ErrClosed
// after Close. In all of these cases nothing of req was written. Any other
// error means the outcome is unknown to this process: the caller should
// stop and reload the stream (after activating it again).
//
// The epoch checked is the one remembered when Append is called. ctx is
// honoured while waiting for room in the queue, and a request whose ctx is
// done when the committer reaches it is dropped with ctx's error; once in a
// transaction its fate no longer depends on ctx.
func (db *DB) Append(ctx context.Context, req journal.AppendRequest) (uint64, error) {
	if err := validate(&req); err != nil {
		return 0, fmt.Errorf("pgjournal: append to %q: %w", req.Stream, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("pgjournal: append to %q: %w", req.Stream, err)
	}
	epoch := db.ActiveEpoch(req.Stream)
	if epoch == 0 {
		return 0, &FencedError{Stream: req.Stream}
	}
	last, err := db.loop.Do(ctx, request{AppendRequest: req, epoch: epoch})
	var se *journal.SequenceError
	var kt *journal.KeyTakenError
	var fe *FencedError
	switch {
	case err == nil:
		return last, nil
	case errors.As(err, &se), errors.As(err, &kt), errors.As(err, &fe):
		return 0, err // already names the stream and the package
	default:
		return 0, fmt.Errorf("pgjournal: append to %q: %w", req.Stream, err)
	}
}

// commit runs one transaction for live and sets every request's outcome;
// the loop (package groupcommit) then wakes the waiters.
func (db *DB) commit(live []*pending) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), db.opts.CommitTimeout)
	defer cancel()
	rt2, err := db.commitTx(ctx, live)
	db.commits.Add(1)
	if err != nil {
		db.log.Error("journal commit failed", "err", err, "batch", len(live))
		for _, p := range live {
			p.Last, p.Err = 0, err
		}
	}
	if db.opts.OnCommit != nil {
		db.opts.OnCommit(journal.CommitInfo{Batch: len(live), Duration: time.Since(start), Sync: rt2, Err: err})
	}
}

// streamRow is a locked streams row as the batch sees it.
type streamRow struct {
	head, epoch uint64
}

type claimID struct{ namespace, key string }

// writes are the accepted requests' rows, as columns for unnest.
type writes struct {
	accepted   int
	lastGlobal uint64 // the chain's end: log_head after this commit
	lastHash   journal.Hash

	// events
	globals, seqs, epochs []int64
	streams, types, data  [][]byte
	hashes                [][]byte
	versions              []int32
	// claims
	claimNS, claimKeys, claimStreams [][]byte
	// dues: entry -> put (true) or dropped (false), the last in queue order
	// winning; dueOrder keeps first-seen order
	dues     map[dueID]bool
	dueOrder []dueID
	// marks: key -> set (true) or clear (false), the last in queue order
	// winning; markOrder keeps first-seen order
	marks     map[string]bool
	markOrder []string
	// heads: stream -> new head
	heads map[string]uint64
	// counters: the accepted requests' changes, summed per key
	counters counterSums

	// filled by finish
	headStreams           [][]byte
	headSeqs              []int64
	markSet, markCleared  [][]byte
	addKeys, maxKeys      [][]byte
	addVals, maxVals      []int64
	dueAt, dropAt         []int64
	dueStreams, dueKeys   [][]byte
	dropStreams, dropKeys [][]byte
}

// dueID is one due entry: the dues table's primary key.
type dueID struct {
	at          int64
	stream, key string
}

// commitTx runs the transaction: lock log_head, the streams' rows, read the
// claimed keys; check every request in order; write the accepted ones;
// commit. It sets each request's last and err for validation outcomes and
// returns an error if the transaction failed (then no request's outcome
// stands). rt2 is the duration of the write-and-commit round trip.
func (db *DB) commitTx(ctx context.Context, live []*pending) (rt2 time.Duration, err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("commit: acquire connection: %w", err)
	}
	defer conn.Release()
	begun := false
	defer func() {
		if err != nil && begun {
			// An open or failed transaction: end it. If that fails too, the
			// pool drops the connection (its status is not idle).
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = conn.Exec(rctx, "ROLLBACK")
		}
	}()

	names := make([]string, 0, len(live))
	var claimIDs []claimID
	for _, p := range live {
		names = append(names, p.Req.Stream)
		for _, c := range p.Req.Claims {
			claimIDs = append(claimIDs, claimID{c.Namespace, c.Key})
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	streamArg := make([][]byte, len(names))
	for i, n := range names {
		streamArg[i] = b(n)
	}

	// Round trip 1: begin, lock log_head (this serializes the commits of all
	// nodes), lock the streams' rows, read the claimed keys' owners.
	batch := &pgx.Batch{}
	batch.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	batch.Queue("SELECT last_global, last_hash FROM log_head FOR UPDATE")
	batch.Queue("SELECT stream, head, epoch FROM streams WHERE stream = ANY($1::bytea[]) ORDER BY stream FOR UPDATE", streamArg)
	if len(claimIDs) > 0 {
		ns := make([][]byte, len(claimIDs))
		keys := make([][]byte, len(claimIDs))
		for i, c := range claimIDs {
			ns[i], keys[i] = b(c.namespace), b(c.key)
		}
		batch.Queue(`SELECT c.namespace, c.key, c.stream FROM claims c
JOIN unnest($1::bytea[], $2::bytea[]) AS q(namespace, key) ON c.namespace = q.namespace AND c.key = q.key`, ns, keys)
	}
	begun = true
	rows := make(map[string]*streamRow, len(names))
	owners := make(map[claimID]string)
	var w writes
	err = func() error {
		br := conn.SendBatch(ctx, batch)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		var lastGlobal int64
		var lastHash []byte
		if err := br.QueryRow().Scan(&lastGlobal, &lastHash); err != nil {
			return fmt.Errorf("read log_head: %w", err)
		}
		if len(lastHash) != len(w.lastHash) || lastGlobal < 0 {
			return fmt.Errorf("%w: log_head holds global %d and a %d-byte hash", journal.ErrCorrupt, lastGlobal, len(lastHash))
		}
		w.lastGlobal = uint64(lastGlobal)
		copy(w.lastHash[:], lastHash)
		r, err := br.Query()
		if err != nil {
			return err
		}
		for r.Next() {
			var name []byte
			var head, epoch int64
			if err := r.Scan(&name, &head, &epoch); err != nil {
				r.Close()
				return err
			}
			rows[string(name)] = &streamRow{head: uint64(head), epoch: uint64(epoch)}
		}
		r.Close()
		if err := r.Err(); err != nil {
			return err
		}
		if len(claimIDs) > 0 {
			r, err := br.Query()
			if err != nil {
				return err
			}
			for r.Next() {
				var ns, key, owner []byte
				if err := r.Scan(&ns, &key, &owner); err != nil {
					r.Close()
					return err
				}
				owners[claimID{string(ns), string(key)}] = string(owner)
			}
			r.Close()
			if err := r.Err(); err != nil {
				return err
			}
		}
		return br.Close()
	}()
	if err != nil {
		return 0, fmt.Errorf("commit: lock and read: %w", err)
	}

	w.marks = make(map[string]bool)
	w.dues = make(map[dueID]bool)
	w.heads = make(map[string]uint64)
	for _, p := range live {
		db.check(p, rows, owners, &w)
	}
	if hook := db.beforeCommit.Load(); hook != nil {
		(*hook)() // tests: a transaction that checked and holds its locks
	}

	// Round trip 2: the writes and COMMIT (or ROLLBACK, releasing the locks,
	// when nothing was accepted).
	if w.accepted == 0 {
		begun = false
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			return 0, fmt.Errorf("commit: rollback: %w", err)
		}
		return 0, nil
	}
	w.finish()
	batch = db.writeBatch(&w)
	batch.Queue("COMMIT")
	t0 := time.Now()
	err = func() error {
		br := conn.SendBatch(ctx, batch)
		defer br.Close()
		for range batch.QueuedQueries {
			tag, err := br.Exec()
			if err != nil {
				return err
			}
			if tag.String() == "ROLLBACK" { // COMMIT of a failed transaction
				return errors.New("transaction rolled back")
			}
		}
		return br.Close()
	}()
	rt2 = time.Since(t0)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) { // the server refused: nothing was committed
		return rt2, fmt.Errorf("commit: write: %w", err)
	}
	if err != nil { // COMMIT may or may not have reached the server
		return rt2, fmt.Errorf("commit: write and commit (outcome unknown): %w", err)
	}
	begun = false
	return rt2, nil
}

// check validates p against the locked rows, the claims read and what
// earlier requests of the batch did, and if it passes adds its rows to w.
func (db *DB) check(p *pending, rows map[string]*streamRow, owners map[claimID]string, w *writes) {
	req := &p.Req.AppendRequest
	p.Last, p.Err = 0, nil
	row := rows[req.Stream]
	switch {
	case row == nil:
		p.Err = &FencedError{Stream: req.Stream, Epoch: p.Req.epoch}
		return
	case row.epoch != p.Req.epoch:
		p.Err = &FencedError{Stream: req.Stream, Epoch: p.Req.epoch, Current: row.epoch}
		return
	case row.head != req.Expected:
		p.Err = &journal.SequenceError{Stream: req.Stream, Expected: req.Expected, Actual: row.head}
		return
	}
	var fresh []claimID
	for _, c := range req.Claims {
		id := claimID{c.Namespace, c.Key}
		if owner, ok := owners[id]; ok {
			if owner != req.Stream {
				p.Err = &journal.KeyTakenError{Namespace: c.Namespace, Key: c.Key, Owner: owner}
				return
			}
			continue // same-stream re-claim: nothing to write
		}
		if !slices.Contains(fresh, id) {
			fresh = append(fresh, id)
		}
	}

	stream := b(req.Stream)
	seq := row.head
	for _, e := range req.Events {
		w.lastGlobal++
		seq++
		data := nonNil(e.Data)
		w.lastHash = journal.ChainHash(w.lastHash, journal.Record{
			Global: w.lastGlobal, Stream: req.Stream, Seq: seq, Type: e.Type, Version: e.Version, Data: data,
		})
		w.globals = append(w.globals, int64(w.lastGlobal))
		w.streams = append(w.streams, stream)
		w.seqs = append(w.seqs, int64(seq))
		w.types = append(w.types, b(e.Type))
		w.versions = append(w.versions, int32(e.Version))
		w.data = append(w.data, data)
		h := w.lastHash
		w.hashes = append(w.hashes, h[:])
		w.epochs = append(w.epochs, int64(p.Req.epoch))
	}
	row.head = seq
	w.heads[req.Stream] = seq
	for _, id := range fresh {
		owners[id] = req.Stream
		w.claimNS = append(w.claimNS, b(id.namespace))
		w.claimKeys = append(w.claimKeys, b(id.key))
		w.claimStreams = append(w.claimStreams, stream)
	}
	// Dues, then the dropped ones, as the bbolt journal writes them.
	for i, list := range [2][]journal.Due{req.Dues, req.DropDues} {
		for _, d := range list {
			n, _ := dueNanos(d.At) // checked by validate
			id := dueID{at: n, stream: d.Stream, key: d.Key}
			if _, ok := w.dues[id]; !ok {
				w.dueOrder = append(w.dueOrder, id)
			}
			w.dues[id] = i == 0
		}
	}
	for _, m := range req.Marks { // in order: a later mark of the same key wins
		if _, ok := w.marks[m.Key]; !ok {
			w.markOrder = append(w.markOrder, m.Key)
		}
		w.marks[m.Key] = !m.Clear
	}
	w.counters.put(req.Counters)
	p.Last = seq
	w.accepted++
}

// finish turns the per-key maps into statement arguments.
func (w *writes) finish() {
	for s, h := range w.heads {
		w.headStreams = append(w.headStreams, b(s))
		w.headSeqs = append(w.headSeqs, int64(h))
	}
	for _, id := range w.dueOrder {
		if w.dues[id] {
			w.dueAt = append(w.dueAt, id.at)
			w.dueStreams = append(w.dueStreams, b(id.stream))
			w.dueKeys = append(w.dueKeys, b(id.key))
		} else {
			w.dropAt = append(w.dropAt, id.at)
			w.dropStreams = append(w.dropStreams, b(id.stream))
			w.dropKeys = append(w.dropKeys, b(id.key))
		}
	}
	for _, k := range w.markOrder {
		if w.marks[k] {
			w.markSet = append(w.markSet, b(k))
		} else {
			w.markCleared = append(w.markCleared, b(k))
		}
	}
	w.addKeys, w.addVals, w.maxKeys, w.maxVals = w.counters.args()
}

func (db *DB) writeBatch(w *writes) *pgx.Batch {
	batch := &pgx.Batch{}
	batch.Queue(`INSERT INTO events (global, stream, seq, type, version, data, hash, epoch, node)
SELECT g, s, q, t, v, d, h, e, $9
FROM unnest($1::bigint[], $2::bytea[], $3::bigint[], $4::bytea[], $5::integer[], $6::bytea[], $7::bytea[], $8::bigint[])
    AS u(g, s, q, t, v, d, h, e)`,
		w.globals, w.streams, w.seqs, w.types, w.versions, w.data, w.hashes, w.epochs, db.opts.NodeID)
	batch.Queue(`UPDATE streams SET head = u.head
FROM unnest($1::bytea[], $2::bigint[]) AS u(stream, head) WHERE streams.stream = u.stream`,
		w.headStreams, w.headSeqs)
	if len(w.claimNS) > 0 {
		batch.Queue(`INSERT INTO claims (namespace, key, stream)
SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[])`, w.claimNS, w.claimKeys, w.claimStreams)
	}
	if len(w.dueAt) > 0 {
		batch.Queue(`INSERT INTO dues (at, stream, key)
SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bytea[]) ON CONFLICT DO NOTHING`, w.dueAt, w.dueStreams, w.dueKeys)
	}
	if len(w.dropAt) > 0 {
		batch.Queue(`DELETE FROM dues USING unnest($1::bigint[], $2::bytea[], $3::bytea[]) AS u(at, stream, key)
WHERE dues.at = u.at AND dues.stream = u.stream AND dues.key = u.key`, w.dropAt, w.dropStreams, w.dropKeys)
	}
	if len(w.markSet) > 0 {
		batch.Queue(`INSERT INTO marks (key) SELECT * FROM unnest($1::bytea[]) ON CONFLICT DO NOTHING`, w.markSet)
	}
	if len(w.markCleared) > 0 {
		batch.Queue(`DELETE FROM marks WHERE key = ANY($1::bytea[])`, w.markCleared)
	}
	queueCounters(batch, w.addKeys, w.addVals, w.maxKeys, w.maxVals)
	batch.Queue(`UPDATE log_head SET last_global = $1, last_hash = $2`, int64(w.lastGlobal), w.lastHash[:])
	return batch
}

// exec runs fn in a transaction on the pool (the writes that are not
// appends: kv, due deletions), mapping a closed DB to journal.ErrClosed.
func (db *DB) exec(ctx context.Context, fn func(pgx.Tx) error) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, db.pool, fn)
}
