package feed

import (
	"context"
	"fmt"
	"slices"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// Read limits.
const (
	// DefaultLimit is the page size when Read is given limit <= 0.
	DefaultLimit = 100
	// MaxLimit is the largest page; a larger limit is reduced to it.
	MaxLimit = 1000
	// scanBudget bounds the records one Read examines, so a selective type
	// filter over a long journal answers in bounded time; the cursor still
	// advances past everything examined.
	scanBudget = 4096
	// scanBatch is how many records are read from the journal at a time.
	scanBatch = 256
)

// Journal is what the feed reads: *journal.DB and, in cluster mode,
// *pgjournal.DB implement it. Implementations must be safe for concurrent
// use.
type Journal interface {
	// Scan returns up to limit records with Global > afterGlobal in global
	// order (limit <= 0: all).
	Scan(ctx context.Context, afterGlobal uint64, limit int) ([]journal.Record, error)
	// Load returns a stream's records with Seq > afterSeq.
	Load(ctx context.Context, stream string, afterSeq uint64) ([]journal.Record, error)
	// LastGlobal returns the Global of the last committed record.
	LastGlobal(ctx context.Context) (uint64, error)
	// WaitGlobal returns once a record with Global > after is committed,
	// or with ctx's error.
	WaitGlobal(ctx context.Context, after uint64) error
}

// Read returns up to limit events derived from the records with Global >
// after, in global order, keeping only the given types (none means all),
// and the cursor to pass as after next time.
//
// next is the Global of the last record examined: past every returned event
// and past records that produced no event or were filtered out. An empty
// page with next > after means "nothing for you in that stretch, continue
// from next"; next == after means the journal has nothing after the cursor
// yet. Reading from the same cursor always gives the same events, and the
// pages from any cursor, concatenated, equal one long read.
//
// limit <= 0 means DefaultLimit; above MaxLimit it is MaxLimit. A type not
// in Types() fails with ErrUnknownType. A record this build cannot decode
// (written by a newer refundd) fails with reservation.ErrUnknownEvent
// rather than being skipped.
func Read(ctx context.Context, db Journal, after uint64, limit int, types []string) ([]Event, uint64, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	for _, t := range types {
		if !KnownType(t) {
			return nil, after, fmt.Errorf("%w: %q", ErrUnknownType, t)
		}
	}
	want := func(typ string) bool { return len(types) == 0 || slices.Contains(types, typ) }

	events := []Event{}
	cur := after
	c := states{db: db, m: map[string]*stream{}}
	if r, ok := db.(restorable); ok {
		info, err := r.LastRestore(ctx)
		if err != nil {
			return nil, after, fmt.Errorf("feed: read after %d: %w", after, err)
		}
		if info != nil {
			c.rewritten, c.restored = info.RewrittenAfter(), true
		}
	}
	for scanned := 0; scanned < scanBudget; {
		n := min(scanBatch, scanBudget-scanned)
		recs, err := db.Scan(ctx, cur, n)
		if err != nil {
			return nil, after, fmt.Errorf("feed: read after %d: %w", after, err)
		}
		for _, r := range recs {
			ev, ok, err := c.event(ctx, r)
			if err != nil {
				return nil, after, fmt.Errorf("feed: read after %d: %w", after, err)
			}
			cur = r.Global
			if ok && want(ev.Type) {
				events = append(events, ev)
				if len(events) == limit {
					return events, cur, nil
				}
			}
		}
		scanned += len(recs)
		if len(recs) < n {
			break // reached the end of the journal
		}
	}
	return events, cur, nil
}

// states rebuilds, for one Read, the state of each reservation as of the
// record being turned into an event. Scan returns a stream's records in seq
// order, so each stream is loaded once and folded forward.
type states struct {
	db Journal
	m  map[string]*stream
	// restored says the journal was restored from a backup: records after
	// rewritten get ids that name their content too (RewrittenID).
	restored  bool
	rewritten uint64
}

// restorable is a journal that may have been restored from a backup
// (*journal.DB; the PostgreSQL journal has no restore).
type restorable interface {
	LastRestore(ctx context.Context) (*journal.RestoreInfo, error)
}

type stream struct {
	recs    []journal.Record // the stream as loaded, possibly beyond the scan
	applied uint64           // records folded into st
	st      *reservation.State
}

// event returns the consumer event of r, if it has one.
func (c *states) event(ctx context.Context, r journal.Record) (Event, bool, error) {
	e, err := reservation.Decode(r.Type, r.Version, r.Data)
	if err != nil {
		return Event{}, false, fmt.Errorf("record %d (stream %q seq %d): %w", r.Global, r.Stream, r.Seq, err)
	}
	if !candidate(e) {
		return Event{}, false, nil
	}
	st, err := c.stateAt(ctx, r, e)
	if err != nil {
		return Event{}, false, err
	}
	id := ID(r.Global)
	if c.restored && r.Global > c.rewritten {
		id = RewrittenID(r.Global, r.Hash)
	}
	return derive(id, r.Global, e, st)
}

// stateAt returns the state of r's stream with records 1..r.Seq applied; e
// is r decoded.
func (c *states) stateAt(ctx context.Context, r journal.Record, e reservation.Event) (*reservation.State, error) {
	s := c.m[r.Stream]
	if s == nil || s.applied >= r.Seq {
		s = &stream{st: &reservation.State{}}
		c.m[r.Stream] = s
	}
	if uint64(len(s.recs))+1 < r.Seq {
		// Records between those loaded and r: load the stream's rest (it
		// may run past r; later records of the page then need no load).
		more, err := c.db.Load(ctx, r.Stream, uint64(len(s.recs)))
		if err != nil {
			return nil, err
		}
		s.recs = append(s.recs, more...)
	}
	for s.applied+1 < r.Seq {
		if s.applied >= uint64(len(s.recs)) {
			return nil, fmt.Errorf("%w: stream %q has %d records, record %d is seq %d",
				ErrInconsistent, r.Stream, len(s.recs), r.Global, r.Seq)
		}
		p := s.recs[s.applied]
		pe, err := reservation.Decode(p.Type, p.Version, p.Data)
		if err != nil {
			return nil, fmt.Errorf("record %d (stream %q seq %d): %w", p.Global, p.Stream, p.Seq, err)
		}
		reservation.Apply(s.st, pe)
		s.applied++
	}
	reservation.Apply(s.st, e)
	s.applied++
	return s.st, nil
}

// Feed is Read bound to one journal, with waiting for new records: what the
// HTTP feed serves. It is safe for concurrent use.
type Feed struct {
	db Journal
}

// New returns a Feed over db. The caller keeps ownership of db.
func New(db Journal) *Feed { return &Feed{db: db} }

// Read is the package's Read on f's journal.
func (f *Feed) Read(ctx context.Context, after uint64, limit int, types []string) ([]Event, uint64, error) {
	return Read(ctx, f.db, after, limit, types)
}

// Wait returns nil once the journal has a record after the cursor, ctx's
// error if ctx ends first, or an error wrapping journal.ErrClosed.
func (f *Feed) Wait(ctx context.Context, after uint64) error { return f.db.WaitGlobal(ctx, after) }

// Last returns the cursor of the journal's last record (0 when empty).
func (f *Feed) Last(ctx context.Context) (uint64, error) { return f.db.LastGlobal(ctx) }
