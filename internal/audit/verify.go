package audit

import (
	"context"
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
func ReplayCheck(ctx context.Context, db Scanner, maxProblems int, progress func(uint64)) (*Report, error) {
	if maxProblems <= 0 {
		maxProblems = 1000
	}
	rep := &Report{Problems: []Problem{}}
	rp := newReplayer(func(p Problem) {
		if len(rep.Problems) >= maxProblems {
			rep.Dropped++
			return
		}
		rep.Problems = append(rep.Problems, p)
	})
	err := scanAll(ctx, db, progress, func(r journal.Record) error {
		rp.apply(r)
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
	}
	return rep, nil
}

// implied is the journal's indexes as reservation.AppendIndexes, the
// function the event store writes them with, says the events leave them.
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
	m.ix = reservation.AppendIndexes(reservation.IndexChanges{Claims: m.ix.Claims[:0], Dues: m.ix.Dues[:0],
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
