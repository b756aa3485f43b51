package audit

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// VerifyOptions configures Verify.
type VerifyOptions struct {
	// Check is passed to journal.DB.Check (public key, recorded heads,
	// progress). Its Visit is Verify's own and must be nil.
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
}

// OK reports whether neither the file nor the replay had a problem.
func (r *Report) OK() bool { return r.Journal.OK() && len(r.Problems) == 0 && r.Dropped == 0 }

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
// The error is only for failures to read; problems are in the Report.
func Verify(ctx context.Context, db *journal.DB, opts VerifyOptions) (*Report, error) {
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 1000
	}
	rep := &Report{Problems: []Problem{}}
	add := func(p Problem) {
		if len(rep.Problems) >= opts.MaxProblems {
			rep.Dropped++
			return
		}
		rep.Problems = append(rep.Problems, p)
	}
	rp := newReplayer(add)
	rp.indexes = newImplied()
	check := opts.Check
	check.Visit = func(r journal.Record) error {
		rp.apply(r)
		return nil
	}
	res, err := db.Check(ctx, &check)
	if err != nil {
		return nil, err
	}
	rep.Journal = res
	rep.Reservations = len(rp.states)
	for _, s := range rp.states {
		rep.Refunds += len(s.Refunds)
	}
	if err := checkIndexes(ctx, db, rp, add); err != nil {
		return nil, err
	}
	return rep, nil
}

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

// checkIndexes compares the claims, attention marks and due entries with
// what the events imply.
func checkIndexes(ctx context.Context, db *journal.DB, rp *replayer, add func(Problem)) error {
	ids := make([]string, 0, len(rp.states))
	for id := range rp.states {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	im := rp.indexes

	// Claims, both ways.
	wantClaims := im.claims // namespace \x00 key -> stream
	seen := map[string]bool{}
	err := db.ForEachClaim(ctx, "", func(c journal.OwnedClaim) error {
		if c.Namespace != reservation.ClaimOutTradeNo && c.Namespace != reservation.ClaimRefundNo {
			return nil
		}
		k := c.Namespace + "\x00" + c.Key
		seen[k] = true
		switch want, ok := wantClaims[k]; {
		case !ok:
			add(Problem{Stream: c.Owner, Kind: "index", Message: fmt.Sprintf("%s %s is claimed by %s but no event introduced it", c.Namespace, c.Key, c.Owner)})
		case want != c.Owner:
			add(Problem{Stream: want, Kind: "index", Message: fmt.Sprintf("%s %s is claimed by %s, its events are in %s", c.Namespace, c.Key, c.Owner, want)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	var missing []string
	for k := range wantClaims {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		ns, key, _ := strings.Cut(k, "\x00")
		add(Problem{Stream: wantClaims[k], Kind: "index", Message: fmt.Sprintf("%s %s has no claim: a second stream could take it", ns, key)})
	}

	// Attention marks: exactly the refunds needing attention.
	want := map[string]bool{}
	for _, id := range ids {
		if rp.broken[id] {
			continue
		}
		for k := range im.marks[id] {
			want[k] = true
		}
	}
	marks, err := db.Marks(ctx, eventstore.AttentionPrefix, "", 0)
	if err != nil {
		return err
	}
	for _, k := range marks {
		if !want[k] {
			add(Problem{Kind: "index", Message: fmt.Sprintf("attention mark %s does not match the refund's state", k)})
		}
		delete(want, k)
	}
	var left []string
	for k := range want {
		left = append(left, k)
	}
	sort.Strings(left)
	for _, k := range left {
		add(Problem{Kind: "index", Message: fmt.Sprintf("attention mark %s is missing", k)})
	}

	// Due entries: every refund waiting on a due time has one, or no timer
	// would ever act on it again. Extra entries are normal (stale timers
	// are dropped when they fire), and so is a missing one of a refund
	// that no timer acts on (final or REJECTED: its timer fired already).
	dues := map[dueKey][]journal.Due{}
	if err := db.ForEachDue(ctx, func(d journal.Due) error {
		k := dueKey{d.Stream, d.Key}
		dues[k] = append(dues[k], d)
		return nil
	}); err != nil {
		return err
	}
	for _, id := range ids {
		if rp.broken[id] {
			continue
		}
		for _, r := range rp.states[id].Refunds {
			if r.State.Terminal() || r.State == reservation.Rejected {
				continue
			}
			for _, at := range im.dues[dueKey{id, r.No}] {
				found := false
				for _, d := range dues[dueKey{id, r.No}] {
					found = found || d.At.Equal(at)
				}
				if !found {
					add(Problem{Stream: id, Kind: "index", Message: fmt.Sprintf("refund %s (%s) is due at %s but has no due entry: no timer will act on it",
						r.No, r.State, at.UTC().Format("2006-01-02T15:04:05.000Z07:00"))})
				}
			}
		}
	}
	return nil
}
