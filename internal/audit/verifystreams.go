package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// Verify checks the journal end to end and reports every problem found:
//
//   - the file: journal.DB.Check (checksums, hash chain, sequences,
//     indexes, checkpoints, recorded heads);
//   - every record decodes as a reservation event this build knows;
//   - every stream replays through the state machine without an event that
//     Decide could not have produced from the state before it;
//   - after every event: refunded + in flight <= paid, and a SUCCEEDED or
//     FAILED refund never changes again;
//   - the indexes kept beside the events agree with them: each refund
//     number and order number is claimed by exactly the stream whose event
//     introduced it; the attention marks are exactly the refunds needing
//     attention; every refund waiting on a due time has its due entry.
//
// Its memory does not grow with the journal: the file is checked in
// global order in one goroutine (the chain) while the log is read again in
// global order, sequentially (gatherStreams), each reservation's records
// gathered until its last one, and workers replay one reservation at a
// time and look its index entries up; nothing is kept per reservation once
// it is checked, and the reservations begun and not ended are held within
// a budget.
//
// With Check.Since (a recorded head or checkpoint) only the records after
// it are checked, and the rules of the events among them, in time
// proportional to them; Since must lie on the chain (else the error wraps
// journal.ErrNotOnChain). The index checks then cover the reservations
// those events touched.
//
// The error is only for failures to read; problems are in the Report.
func Verify(ctx context.Context, db *journal.DB, opts VerifyOptions) (*Report, error) {
	arch := opts.Check.Archive
	return verifyWith(ctx, db, opts, func(ctx context.Context, emit func(journal.StreamRecords) error) error {
		if arch != nil && opts.Check.Since == nil {
			if err := arch.ForEachStream(emit); err != nil {
				return err
			}
		}
		_, err := gatherStreams(ctx, db, gatherBudget, emit)
		return err
	})
}

// verifyWith is Verify reading the reservations with streams.
func verifyWith(ctx context.Context, db *journal.DB, opts VerifyOptions, streams func(context.Context, func(journal.StreamRecords) error) error) (*Report, error) {
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 1000
	}
	if opts.Check.Visit != nil {
		return nil, fmt.Errorf("%w: VerifyOptions.Check.Visit is Verify's own", ErrInvalid)
	}
	v := &verifier{db: db, problems: problemList{max: opts.MaxProblems}, streams: streams}
	rep := &Report{}
	switch _, err := db.Get(ctx, eventstore.ListIndexKey); {
	case err == nil:
		v.lists = true
	case !errors.Is(err, journal.ErrNotFound):
		return nil, err
	}
	if opts.Check.Since != nil {
		if err := v.since(ctx, opts.Check, rep); err != nil {
			return nil, err
		}
	} else if err := v.full(ctx, opts.Check, rep); err != nil {
		return nil, err
	}
	rep.Reservations, rep.Refunds = v.reservations, v.refunds
	rep.Problems, rep.Dropped = v.problems.sorted()
	rep.Range.To = rep.Journal.LastGlobal
	rep.Range.Records = rep.Journal.Records
	return rep, nil
}

// verifier is one Verify's shared state; workers add to it under mu.
type verifier struct {
	db *journal.DB
	// streams reads every reservation's records (gatherStreams; tests
	// compare it with other readers).
	streams  func(ctx context.Context, emit func(journal.StreamRecords) error) error
	mu       sync.Mutex
	problems problemList
	// reservations and refunds count what was replayed.
	reservations, refunds int
	// claimsOwned and marksFound count the index entries the events imply
	// that the journal holds: fewer entries in the journal than that means
	// it holds some no event implies.
	claimsOwned, marksFound int
	// lists says the journal keeps the list index (eventstore.ListIndexKey);
	// listsFound counts the rows the states imply that it holds, and
	// listProblems the rows missing or extra.
	lists                    bool
	listsFound, listProblems int
	// misclaimed are keys already reported as claimed by another stream.
	misclaimed map[string]bool
	// counts are the journal's counters as the replayed events make them;
	// broken counts the reservations whose replay is incomplete (their
	// share cannot be known).
	counts map[string]int64
	broken int
}

// full checks the whole journal: the chain in one goroutine, the
// reservations in a pool of workers beside it.
func (v *verifier) full(ctx context.Context, check journal.CheckOptions, rep *Report) error {
	var (
		res  journal.CheckResult
		cerr error
		wg   sync.WaitGroup
	)
	if v.db.ReadOnly() {
		pages := make(chan struct{})
		check.PagesDone = func() { close(pages) }
		wg.Go(func() {
			res, cerr = v.db.Check(ctx, &check)
			if check.PagesDone != nil {
				select {
				case <-pages:
				default:
					close(pages) // Check failed before its page check
				}
			}
		})
		<-pages
	} else {
		// On a DB open for writing Check holds a write transaction (rolled
		// back at the end), and bbolt's rollback of it races with read
		// transactions ending beside it (the race detector shows it in
		// the freelist): check first, replay after.
		res, cerr = v.db.Check(ctx, &check)
	}
	err := v.replayAll(ctx, v.streams, nil)
	wg.Wait()
	if err := errors.Join(err, cerr); err != nil {
		return err
	}
	rep.Journal = res
	rep.Range.Streams = v.reservations
	if err := v.extras(ctx); err != nil {
		return err
	}
	switch {
	case !v.lists:
		rep.Lists = "not kept: the journal predates the list index (refundd writes it at its next start)"
	case v.listProblems > 0:
		rep.Lists = fmt.Sprintf("%d differ from the reservations' states", v.listProblems)
	default:
		rep.Lists = "match the reservations' states"
	}
	return v.checkCounters(ctx, rep)
}

// replayAll replays the reservations streams emits in a pool of workers,
// one per core: each takes batches of reservations, so its index lookups
// share a read transaction. What is held is the batches in flight, one
// per worker and one being filled. checkFrom, if not nil, is each
// stream's first seq to check (Verify --since); it is only read.
func (v *verifier) replayAll(ctx context.Context, streams func(context.Context, func(journal.StreamRecords) error) error, checkFrom map[string]uint64) error {
	n := runtime.GOMAXPROCS(0)
	work := make(chan []journal.StreamRecords, n)
	errs := make(chan error, n)
	var workers sync.WaitGroup
	for range n {
		workers.Go(func() {
			w := v.newWorker(0)
			w.checkFrom = checkFrom
			for batch := range work {
				if err := w.batch(ctx, batch); err != nil {
					errs <- err
					for range work { // drain: the producer stops on ctx or the full channel
					}
					return
				}
			}
		})
	}
	const batchRecords = 4096
	var batch []journal.StreamRecords
	size := 0
	err := streams(ctx, func(sr journal.StreamRecords) error {
		batch = append(batch, sr)
		if size += len(sr.Records); size >= batchRecords {
			work <- batch
			batch, size = nil, 0
		}
		return nil
	})
	if len(batch) > 0 {
		work <- batch
	}
	close(work)
	workers.Wait()
	close(errs)
	return errors.Join(err, <-errs)
}

// checkCounters compares the journal's counters with the ones the events
// make (the replay's tally). A journal without complete counters, or with
// events that do not decode, is not compared, and the report says why.
func (v *verifier) checkCounters(ctx context.Context, rep *Report) error {
	counts, err := v.db.Counters(ctx)
	if err != nil {
		return err
	}
	switch {
	case !counts.Complete:
		rep.Counters = "not kept: the journal predates them (refundctl journal stats --build-counters stores them)"
		return nil
	case v.broken > 0:
		rep.Counters = "not compared: some events do not decode"
		return nil
	case counts.LastGlobal != rep.Journal.LastGlobal:
		rep.Counters = "not compared: the journal moved on while it was verified"
		return nil
	}
	keys := make([]string, 0, len(counts.Values)+len(v.counts))
	for k := range counts.Values {
		keys = append(keys, k)
	}
	for k := range v.counts {
		if _, ok := counts.Values[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	bad, skipped := 0, false
	for _, k := range keys {
		if counts.Generation < 2 && strings.HasPrefix(k, eventstore.CountTotals) {
			// Kept since the upgrade only: they cannot match a replay
			// of the whole history until they are rebuilt.
			skipped = true
			continue
		}
		if got, want := counts.Values[k], v.counts[k]; got != want {
			bad++
			v.problems.add(Problem{Kind: "counter", Message: fmt.Sprintf("counter %s is %d, the events make it %d", k, got, want)})
		}
	}
	rep.Counters = "match the events"
	if bad > 0 {
		rep.Counters = fmt.Sprintf("%d differ from the events", bad)
	}
	if skipped {
		rep.Counters += "; the per-hour totals predate this journal's counters and were not compared (refundctl journal stats --build-counters rebuilds them)"
	}
	return nil
}

// since checks what was appended after check.Since: the chain from there
// (Check), then the reservations with events in that range, each replayed
// from its start with only the new events checked.
func (v *verifier) since(ctx context.Context, check journal.CheckOptions, rep *Report) error {
	first := map[string]uint64{} // stream -> its first seq after Since
	check.Visit = func(r journal.Record) error {
		if _, ok := first[r.Stream]; !ok {
			first[r.Stream] = r.Seq
		}
		return nil
	}
	res, err := v.db.Check(ctx, &check)
	if err != nil {
		return err
	}
	rep.Journal = res
	rep.Range.From = check.Since.Global
	rep.Range.Streams = len(first)
	ids := make([]string, 0, len(first))
	for id := range first {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return v.replayAll(ctx, func(ctx context.Context, emit func(journal.StreamRecords) error) error {
		for _, id := range ids {
			recs, err := v.db.Load(ctx, id, 0)
			if err != nil && !errors.Is(err, journal.ErrCorrupt) {
				return err
			}
			sr := journal.StreamRecords{Stream: id, Records: recs}
			if err == nil && len(recs) == 0 && check.Archive != nil {
				// Archived since: its records are in a segment.
				at, ok, aerr := v.db.ArchivedStream(id)
				if aerr != nil {
					return aerr
				}
				if ok {
					sr.Archived = true
					recs, err = check.Archive.Load(id, at)
					if err != nil && !errors.Is(err, journal.ErrCorrupt) {
						return err
					}
					sr.Records = recs
				}
			}
			if err != nil {
				sr.Unreadable = 1 // Check names the record
			}
			if err := emit(sr); err != nil {
				return err
			}
		}
		return nil
	}, first)
}

// worker replays reservations one at a time.
type worker struct {
	v     *verifier
	rp    *replayer
	found []Problem
	// counts sums the counters of one batch; latest is the latest event
	// time of the stream replay last folded.
	counts map[string]int64
	latest time.Time
	// checkFrom, if not nil, is each stream's first seq to check; the
	// events before it only build the state (Verify --since).
	checkFrom map[string]uint64
}

func (v *verifier) newWorker(checkFrom uint64) *worker {
	w := &worker{v: v}
	w.rp = newReplayer(func(p Problem) { w.found = append(w.found, p) })
	w.rp.indexes = newImplied()
	w.rp.checkFrom = checkFrom
	return w
}

// batch replays each stream of the batch and checks its index entries in
// one read transaction.
func (w *worker) batch(ctx context.Context, batch []journal.StreamRecords) error {
	var reservations, refunds, claims, marks, rows, missingRows, brokenN int
	var misclaimed []string
	if w.counts == nil {
		w.counts = map[string]int64{}
	}
	clear(w.counts)
	err := w.v.db.Read(ctx, func(rd *journal.Reader) error {
		for _, sr := range batch {
			st, broken := w.replay(sr)
			if st != nil {
				reservations++
				refunds += len(st.Refunds)
			}
			if broken {
				brokenN++
			}
			tally(w.counts, sr.Records, st, w.latest)
			c, m, mis := w.checkIndexes(rd, sr.Stream, st, broken)
			claims += c
			marks += m
			switch {
			case sr.Archived && st != nil:
				missingRows += w.checkNoListRows(rd, sr.Stream, st)
			case w.v.lists && st != nil && !broken:
				r, miss := w.checkListRows(rd, sr.Stream, st)
				rows += r
				missingRows += miss
			}
			misclaimed = append(misclaimed, mis...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	v := w.v
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reservations += reservations
	v.refunds += refunds
	v.claimsOwned += claims
	v.marksFound += marks
	v.listsFound += rows
	v.listProblems += missingRows
	v.broken += brokenN
	if v.counts == nil {
		v.counts = map[string]int64{}
	}
	mergeCounts(v.counts, w.counts)
	for _, k := range misclaimed {
		if v.misclaimed == nil {
			v.misclaimed = map[string]bool{}
		}
		v.misclaimed[k] = true
	}
	for _, p := range w.found {
		v.problems.add(p)
	}
	w.found = w.found[:0]
	return nil
}

// replay folds one stream and returns its state (nil when no event
// decoded) and whether it is broken (an event that does not decode or a
// record that cannot be read: its state is incomplete).
func (w *worker) replay(sr journal.StreamRecords) (*reservation.State, bool) {
	w.rp.reset()
	w.latest = time.Time{}
	if w.checkFrom != nil {
		w.rp.checkFrom = w.checkFrom[sr.Stream]
	}
	if sr.Unreadable > 0 {
		w.rp.broken[sr.Stream] = true
	}
	for _, r := range sr.Records {
		if e, _, ok := w.rp.apply(r); ok && e.At.After(w.latest) {
			w.latest = e.At
		}
	}
	return w.rp.states[sr.Stream], w.rp.broken[sr.Stream]
}

// checkIndexes looks up the entries the stream's events imply: each claim
// is owned by the stream, each attention mark is there, each refund waiting
// on a due time has its due entry. It returns how many claims and marks
// were found as implied (Verify compares them with the journal's totals)
// and the keys found claimed by another stream.
func (w *worker) checkIndexes(rd *journal.Reader, id string, st *reservation.State, broken bool) (claims, marks int, misclaimed []string) {
	im := w.rp.indexes
	add := func(format string, args ...any) {
		w.found = append(w.found, Problem{Stream: id, Kind: "index", Message: fmt.Sprintf(format, args...)})
	}
	keys := make([]string, 0, len(im.claims))
	for k := range im.claims {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ns, key, _ := strings.Cut(k, "\x00")
		switch owner := rd.Owner(ns, key); owner {
		case id:
			claims++
		case "":
			add("%s %s has no claim: a second stream could take it", ns, key)
		default:
			add("%s %s is claimed by %s, its events are in %s", ns, key, owner, id)
			misclaimed = append(misclaimed, k)
		}
	}
	if broken || st == nil {
		return claims, 0, misclaimed
	}
	mk := make([]string, 0, len(im.marks[id]))
	for k := range im.marks[id] {
		mk = append(mk, k)
	}
	slices.Sort(mk)
	for _, k := range mk {
		if rd.HasMark(k) {
			marks++
		} else {
			add("attention mark %s is missing", k)
		}
	}
	// Due entries: every refund waiting on a due time has one, or no timer
	// would ever act on it again. Extra entries are normal (stale timers
	// are dropped when they fire), and so is a missing one of a refund
	// that no timer acts on (final or REJECTED: its timer fired already).
	for _, r := range st.Refunds {
		if r.State.Terminal() || r.State == reservation.Rejected {
			continue
		}
		for _, at := range im.dues[dueKey{id, r.No}] {
			if !rd.HasDue(journal.Due{At: at, Stream: id, Key: r.No}) {
				add("refund %s (%s) is due at %s but has no due entry: no timer will act on it",
					r.No, r.State, at.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
			}
		}
	}
	return claims, marks, misclaimed
}

// checkListRows looks up the list index rows st implies (one per
// reservation and per refund, keyed by every field a list filters by): a
// missing one is a reservation or refund a list does not show as it is.
// It returns how many were found and how many are missing.
func (w *worker) checkListRows(rd *journal.Reader, id string, st *reservation.State) (found, missing int) {
	for _, row := range reservation.ListRows(nil, st) {
		k := eventstore.ListMarkKey(row)
		if rd.HasMark(k) {
			found++
			continue
		}
		missing++
		what := "reservation"
		if row.RefundNo != "" {
			what = "refund " + row.RefundNo
		}
		w.found = append(w.found, Problem{Stream: id, Kind: "index",
			Message: fmt.Sprintf("list row %s is missing: lists do not show the %s as it is (%s)", k, what, row.State)})
	}
	return found, missing
}

// extras finds claims and attention marks no event implies. The workers
// found the implied ones; when the journal holds more, the extra ones are
// looked for entry by entry (only then: a sound journal costs two counts).
// checkNoListRows reports the list rows of an archived reservation that
// are still in the hot journal (archival removes them), and returns how
// many.
func (w *worker) checkNoListRows(rd *journal.Reader, id string, st *reservation.State) (extra int) {
	for _, row := range reservation.ListRows(nil, st) {
		if k := eventstore.ListMarkKey(row); rd.HasMark(k) {
			extra++
			w.found = append(w.found, Problem{Stream: id, Kind: "index",
				Message: fmt.Sprintf("list row %s of an archived reservation is still in the hot journal", k)})
		}
	}
	return extra
}

func (v *verifier) extras(ctx context.Context) error {
	var claims, marks, rows int
	if err := v.db.Read(ctx, func(rd *journal.Reader) error {
		claims = rd.CountClaims(reservation.ClaimOutTradeNo) + rd.CountClaims(reservation.ClaimRefundNo)
		marks = rd.CountMarks(eventstore.AttentionPrefix)
		if v.lists {
			rows = rd.CountMarks(eventstore.ListPrefix)
		}
		return nil
	}); err != nil {
		return err
	}
	w := v.newWorker(0)
	owner := "" // the stream w last replayed
	var ownerState *reservation.State
	var ownerBroken bool
	replayOwner := func(id string) error {
		if id == owner {
			return nil
		}
		recs, err := v.db.Load(ctx, id, 0)
		if err != nil && !errors.Is(err, journal.ErrCorrupt) {
			return err
		}
		sr := journal.StreamRecords{Stream: id, Records: recs}
		if err != nil {
			sr.Unreadable = 1
		}
		ownerState, ownerBroken = w.replay(sr)
		owner = id
		return nil
	}
	if extra := claims - v.claimsOwned; extra > 0 {
		for _, ns := range []string{reservation.ClaimOutTradeNo, reservation.ClaimRefundNo} {
			err := v.db.ForEachClaim(ctx, ns, func(c journal.OwnedClaim) error {
				if extra == 0 {
					return errDone
				}
				k := c.Namespace + "\x00" + c.Key
				if err := replayOwner(c.Owner); err != nil {
					return err
				}
				if w.rp.indexes.claims[k] == c.Owner {
					return nil
				}
				extra--
				if !v.misclaimed[k] {
					v.problems.add(Problem{Stream: c.Owner, Kind: "index", Message: fmt.Sprintf("%s %s is claimed by %s but no event introduced it", c.Namespace, c.Key, c.Owner)})
				}
				return nil
			})
			if err != nil && !errors.Is(err, errDone) {
				return err
			}
		}
	}
	if extra := marks - v.marksFound; extra > 0 {
		after := ""
		for extra > 0 {
			keys, err := v.db.Marks(ctx, eventstore.AttentionPrefix, after, 1024)
			if err != nil {
				return err
			}
			for _, k := range keys {
				id := markStream(k)
				if err := replayOwner(id); err != nil {
					return err
				}
				if ownerState != nil && !ownerBroken && w.rp.indexes.marks[id][k] {
					continue
				}
				extra--
				v.problems.add(Problem{Kind: "index", Message: fmt.Sprintf("attention mark %s does not match the refund's state", k)})
			}
			if len(keys) < 1024 {
				break
			}
			after = keys[len(keys)-1]
		}
	}
	if extra := rows - v.listsFound; v.lists && extra > 0 {
		var implied map[string]bool // the rows of owner's state
		impliedOf := ""
		after := ""
		for extra > 0 {
			keys, err := v.db.Marks(ctx, eventstore.ListPrefix, after, 1024)
			if err != nil {
				return err
			}
			for _, k := range keys {
				id, ok := eventstore.ListKeyReservation(k)
				if ok {
					if err := replayOwner(id); err != nil {
						return err
					}
					if ownerBroken {
						continue // its state is unknown: so are its rows
					}
					if impliedOf != id {
						implied, impliedOf = map[string]bool{}, id
						if ownerState != nil {
							for _, row := range reservation.ListRows(nil, ownerState) {
								implied[eventstore.ListMarkKey(row)] = true
							}
						}
					}
					if implied[k] {
						continue
					}
				}
				extra--
				v.listProblems++
				v.problems.add(Problem{Stream: id, Kind: "index", Message: fmt.Sprintf("list row %s matches no reservation's state: lists show what is not so", k)})
			}
			if len(keys) < 1024 {
				break
			}
			after = keys[len(keys)-1]
		}
	}
	return nil
}

var errDone = errors.New("done")

// markStream returns the reservation of an attention mark
// (attention/KIND/RESERVATION/REFUND_NO), or "" when it has none.
func markStream(key string) string {
	rest := strings.TrimPrefix(key, eventstore.AttentionPrefix)
	_, rest, _ = strings.Cut(rest, "/")
	if i := strings.LastIndexByte(rest, '/'); i > 0 {
		return rest[:i]
	}
	return ""
}

// problemList keeps the first max problems in (global, stream) order,
// whatever order the workers find them in, and counts the rest.
type problemList struct {
	max     int
	list    []Problem
	dropped int
}

func (l *problemList) add(p Problem) {
	l.list = append(l.list, p)
	if len(l.list) >= 2*l.max {
		l.trim()
	}
}

func (l *problemList) trim() {
	slices.SortStableFunc(l.list, compareProblems)
	if len(l.list) > l.max {
		l.dropped += len(l.list) - l.max
		l.list = l.list[:l.max]
	}
}

func (l *problemList) sorted() ([]Problem, int) {
	l.trim()
	if l.list == nil {
		l.list = []Problem{}
	}
	return l.list, l.dropped
}

// compareProblems orders problems of records by global, then the index
// problems (global 0) by stream.
func compareProblems(a, b Problem) int {
	if (a.Global == 0) != (b.Global == 0) {
		if a.Global == 0 {
			return 1
		}
		return -1
	}
	return cmp.Or(cmp.Compare(a.Global, b.Global), cmp.Compare(a.Stream, b.Stream), cmp.Compare(a.Seq, b.Seq))
}
