package audit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// VerifyOptions configures Verify.
type VerifyOptions struct {
	// Check is passed to journal.DB.Check (public key, recorded heads,
	// progress, and Since: check only what was appended after a recorded
	// head). Its Visit is Verify's own and must be nil. With its Archive
	// (journal.OpenArchive), the archived reservations are replayed and
	// checked too, and the counters compared over archive + hot journal.
	Check journal.CheckOptions
	// MaxProblems caps the replay problems kept (the rest are counted).
	// Zero means 1000.
	MaxProblems int
}

// Report is what Verify found.
type Report struct {
	Journal      journal.CheckResult `json:"journal"`
	Reservations int                 `json:"reservations"`
	Refunds      int                 `json:"refunds"`
	Problems     []Problem           `json:"problems"`
	Dropped      int                 `json:"dropped,omitempty"`
	// Range is what was checked: the records after From (0: all) up to
	// To, and how many.
	Range Range `json:"range"`
	// Counters says whether the journal's counters (what journal stats
	// reads) were compared with the ones the events make; a difference is
	// a Problem of kind "counter". Empty with Check.Since: totals need
	// every event.
	Counters string `json:"counters,omitempty"`
	// Lists says whether the list index (GET /v1/refunds, GET
	// /v1/reservations) holds exactly the rows the reservations' states
	// imply; a difference is a Problem of kind "index". Empty with
	// Check.Since.
	Lists string `json:"lists,omitempty"`
}

// Range is the part of the chain a Verify checked.
type Range struct {
	From    uint64 `json:"from"` // the records after this global
	To      uint64 `json:"to"`   // up to and including this one
	Records uint64 `json:"records"`
	// Streams is how many reservations had events in the range; with
	// --since their earlier events were replayed (not checked) for the
	// state the new ones apply to.
	Streams int `json:"streams"`
}

// OK reports whether neither the file nor the replay had a problem.
func (r *Report) OK() bool { return r.Journal.OK() && len(r.Problems) == 0 && r.Dropped == 0 }

// ReplayCheck is the part of Verify that any journal allows: every record,
// read in global order from db, decodes, replays through the state machine
// without an event Decide could not have produced, and keeps refunded + in
// flight <= paid with terminal refunds unchanged. The storage checks
// (checksums, chain, sequences, epochs) are the journal's own: for the
// PostgreSQL journal, pgjournal.DB.Verify. Report.Journal stays zero but for
// Records and LastGlobal.
//
// On a journal that keeps counters and a list index (KeptChecker: the
// PostgreSQL one), it also compares them with what the replayed events
// make, as Verify does (Report.Counters, Report.Lists; a difference is a
// Problem of kind "counter" or "index"), unless the journal moved on while
// it was read: a live cluster is then checked again later.
func ReplayCheck(ctx context.Context, db Scanner, maxProblems int, progress func(uint64)) (*Report, error) {
	if maxProblems <= 0 {
		maxProblems = 1000
	}
	rep := &Report{Problems: []Problem{}}
	report := func(p Problem) {
		if len(rep.Problems) >= maxProblems {
			rep.Dropped++
			return
		}
		rep.Problems = append(rep.Problems, p)
	}
	rp := newReplayer(report)
	want := map[string]int64{}
	var latest time.Time
	err := scanAll(ctx, db, progress, func(r journal.Record) error {
		if e, _, ok := rp.apply(r); ok && e.At.After(latest) {
			latest = e.At
		}
		want[eventstore.CountEvents+r.Type]++
		rep.Journal.Records++
		rep.Journal.LastGlobal = r.Global
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.Reservations = len(rp.states)
	for _, s := range rp.states {
		rep.Refunds += len(s.Refunds)
		eventstore.Tally(s, 1, func(k string, n int64) { want[k] += n })
	}
	if n, ok := eventstore.LatestNanos(latest); ok {
		want[eventstore.CountLatest] = n
	}
	if kc, ok := db.(KeptChecker); ok {
		if err := checkKept(ctx, kc, rep, rp, want, report); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// KeptChecker is a journal whose counters and list index ReplayCheck
// compares with the events: *pgjournal.DB.
type KeptChecker interface {
	Counters(ctx context.Context) (journal.Counts, error)
	Marks(ctx context.Context, prefix, after string, limit int) ([]string, error)
	Get(ctx context.Context, key string) ([]byte, error)
	LastGlobal(ctx context.Context) (uint64, error)
}

// checkKept compares db's counters with want (the replay's) and its list
// rows with the replayed states' (both ways), setting rep.Counters and
// rep.Lists.
func checkKept(ctx context.Context, db KeptChecker, rep *Report, rp *replayer, want map[string]int64, report func(Problem)) error {
	moved := "not compared: the journal moved on while it was verified"
	counts, err := db.Counters(ctx)
	if err != nil {
		return err
	}
	switch {
	case !counts.Complete:
		rep.Counters = "not kept for the whole history yet (a refundd node back-fills them when it starts)"
	case len(rp.broken) > 0:
		rep.Counters = "not compared: some events do not decode"
	case counts.LastGlobal != rep.Journal.LastGlobal:
		rep.Counters = moved
	default:
		bad := 0
		keys := slices.Sorted(maps.Keys(want))
		for k := range counts.Values {
			if _, ok := want[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			if got, w := counts.Values[k], want[k]; got != w {
				bad++
				report(Problem{Kind: "counter", Message: fmt.Sprintf("counter %s is %d, the events make it %d", k, got, w)})
			}
		}
		rep.Counters = "match the events"
		if bad > 0 {
			rep.Counters = fmt.Sprintf("%d differ from the events", bad)
		}
	}

	switch _, err := db.Get(ctx, eventstore.ListIndexKey); {
	case errors.Is(err, journal.ErrNotFound):
		rep.Lists = "not kept: the journal predates the list index (refundd writes it at its next start)"
		return nil
	case err != nil:
		return err
	}
	implied := map[string]string{} // key -> reservation
	for id, s := range rp.states {
		if rp.broken[id] {
			continue
		}
		for _, row := range reservation.ListRows(nil, s) {
			implied[eventstore.ListMarkKey(row)] = id
		}
	}
	held := map[string]bool{}
	after := ""
	for {
		keys, err := db.Marks(ctx, eventstore.ListPrefix, after, 4096)
		if err != nil {
			return err
		}
		for _, k := range keys {
			held[k] = true
		}
		if len(keys) < 4096 {
			break
		}
		after = keys[len(keys)-1]
	}
	if last, err := db.LastGlobal(ctx); err != nil {
		return err
	} else if last != rep.Journal.LastGlobal {
		rep.Lists = moved
		return nil
	}
	diff := 0
	for _, k := range slices.Sorted(maps.Keys(implied)) {
		if !held[k] {
			diff++
			report(Problem{Stream: implied[k], Kind: "index", Message: fmt.Sprintf("list row %s is missing: lists do not show the reservation as it is", k)})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(held)) {
		if _, ok := implied[k]; ok {
			continue
		}
		id, _ := eventstore.ListKeyReservation(k)
		if rp.broken[id] {
			continue // its state is not known: neither are its rows
		}
		diff++
		report(Problem{Stream: id, Kind: "index", Message: fmt.Sprintf("list row %s matches no reservation's state: lists show what is not so", k)})
	}
	rep.Lists = "match the reservations' states"
	if diff > 0 {
		rep.Lists = fmt.Sprintf("%d differ from the reservations' states", diff)
	}
	return nil
}

// implied is the journal's indexes as reservation.AppendIndexes, the
// function the event store writes them with, says the events leave them
// (AppendKeyIndexes: the list rows are checked against the final states).
// It is fed one event at a time: the entries an append implies do not
// depend on how the events were batched into appends, but for due times
// put and superseded in one append, which leave the index as they found it.
type implied struct {
	claims map[string]string          // namespace \x00 key -> stream
	marks  map[string]map[string]bool // stream -> attention key
	dues   map[dueKey][]time.Time
	one    [1]reservation.Event
	ix     reservation.IndexChanges // reused
}

type dueKey struct{ stream, no string }

func newImplied() *implied {
	return &implied{claims: map[string]string{}, marks: map[string]map[string]bool{}, dues: map[dueKey][]time.Time{}}
}

func (m *implied) reset() {
	clear(m.claims)
	clear(m.marks)
	clear(m.dues)
}

// add folds in the entries of e, decided on s (before e is applied).
func (m *implied) add(stream string, s *reservation.State, e reservation.Event) {
	m.one[0] = e
	m.ix = reservation.AppendKeyIndexes(reservation.IndexChanges{Claims: m.ix.Claims[:0], Dues: m.ix.Dues[:0],
		Dropped: m.ix.Dropped[:0], Marks: m.ix.Marks[:0]}, s, m.one[:])
	for _, c := range m.ix.Claims {
		m.claims[c.Namespace+"\x00"+c.Key] = stream
	}
	for _, d := range m.ix.Dues {
		k := dueKey{stream, d.RefundNo}
		if !slices.ContainsFunc(m.dues[k], d.At.Equal) {
			m.dues[k] = append(m.dues[k], d.At)
		}
	}
	for _, d := range m.ix.Dropped {
		k := dueKey{stream, d.RefundNo}
		m.dues[k] = slices.DeleteFunc(m.dues[k], d.At.Equal)
	}
	for _, mk := range m.ix.Marks {
		key := eventstore.AttentionKey(mk.Kind, stream, mk.RefundNo)
		switch {
		case mk.Clear:
			delete(m.marks[stream], key)
		case m.marks[stream] == nil:
			m.marks[stream] = map[string]bool{key: true}
		default:
			m.marks[stream][key] = true
		}
	}
}
