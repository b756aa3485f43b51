package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// countersJournal is a journal that keeps counters: both do.
type countersJournal interface {
	eventstore.Journal
	eventstore.CounterRanger
	Counters(ctx context.Context) (journal.Counts, error)
	Close() error
}

// TestTotals_EqualBruteForce is the totals' property: for random histories
// (reservations of three merchants, refunds requested over three days,
// moved through random states) and random whole-hour ranges, Between
// equals the sum over every reservation's state of the refunds requested in
// the range, by merchant and state, and every counter equals a fold of the
// events. The journal is closed and opened again halfway (on PostgreSQL,
// another node), so the kept counters are what is read.
func TestTotals_EqualBruteForce(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		t.Parallel()
		path := t.TempDir() + "/j.db"
		testTotalsBruteForce(t, func() countersJournal {
			db, err := journal.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			return db
		})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		st := pgtest.New(t)
		testTotalsBruteForce(t, func() countersJournal { return st.Open(t, nil) })
	})
}

// activated is a Store that activates a stream before its first append on
// a fenced journal, as an actor's Load does.
type activated struct {
	*eventstore.Store
	db   eventstore.Journal
	done map[string]bool
}

func (a *activated) Append(ctx context.Context, id string, before *reservation.State, events []reservation.Event) error {
	if act, ok := a.db.(eventstore.Activator); ok && !a.done[id] {
		if _, err := act.Activate(ctx, id); err != nil {
			return err
		}
		a.done[id] = true
	}
	return a.Store.Append(ctx, id, before, events)
}

func newActivated(db eventstore.Journal) *activated {
	return &activated{Store: eventstore.New(db), db: db, done: map[string]bool{}}
}

// foldCounters is what the counters of a journal holding states should
// be: CounterChanges of each reservation's events, summed (the latest time
// kept as a maximum), zeros left out.
func foldCounters(events map[string][]reservation.Event) map[string]int64 {
	out := map[string]int64{}
	for _, evs := range events {
		for _, c := range eventstore.CounterChanges(nil, nil, evs) {
			if c.Max {
				out[c.Key] = max(out[c.Key], c.Add)
			} else {
				out[c.Key] += c.Add
			}
		}
	}
	maps.DeleteFunc(out, func(_ string, v int64) bool { return v == 0 })
	return out
}

// checkCountersFold fails t unless db's counters are complete and equal
// foldCounters(events).
func checkCountersFold(t *testing.T, db interface {
	Counters(ctx context.Context) (journal.Counts, error)
}, events map[string][]reservation.Event) {
	t.Helper()
	cs, err := db.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !cs.Complete || cs.Generation != journal.CountersGeneration {
		t.Fatalf("counters: complete %v, generation %d", cs.Complete, cs.Generation)
	}
	maps.DeleteFunc(cs.Values, func(_ string, v int64) bool { return v == 0 })
	if want := foldCounters(events); !maps.Equal(cs.Values, want) {
		for k, v := range want {
			if cs.Values[k] != v {
				t.Errorf("counter %s: %d, the events make %d", k, cs.Values[k], v)
			}
		}
		for k, v := range cs.Values {
			if _, ok := want[k]; !ok {
				t.Errorf("counter %s: %d, the events make none", k, v)
			}
		}
	}
}

func testTotalsBruteForce(t *testing.T, open func() countersJournal) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	db := open()
	defer func() { db.Close() }()
	store := newActivated(db)
	history := map[string][]reservation.Event{}
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	merchants := []string{"default", "hotel-sh", "hotel-bj"}
	states := map[string]*reservation.State{}
	versions := map[string]uint64{}
	appendEvents := func(id string, events ...reservation.Event) {
		t.Helper()
		before := states[id]
		if err := store.Append(ctx, id, before, events); err != nil {
			t.Fatalf("append %s: %v", id, err)
		}
		after := &reservation.State{}
		if before != nil {
			after = before.Clone()
		}
		for _, e := range events {
			reservation.Apply(after, e)
		}
		states[id] = after
		versions[id] += uint64(len(events))
		history[id] = append(history[id], events...)
	}
	moves := []reservation.RefundState{reservation.Succeeded, reservation.Failed, reservation.Unknown,
		reservation.Rejected, reservation.Abnormal, reservation.Processing}
	check := func(round int) {
		t.Helper()
		tot := eventstore.Totals{DB: db}
		for range 40 {
			var from, to time.Time
			if r.IntN(5) > 0 {
				from = start.Add(time.Duration(r.IntN(80)-4) * time.Hour)
			}
			if r.IntN(5) > 0 {
				to = start.Add(time.Duration(r.IntN(80)-4) * time.Hour)
			}
			if !from.IsZero() && !to.IsZero() && to.Before(from) {
				from, to = to, from
			}
			if r.IntN(3) == 0 { // the same instant in Beijing time
				from, to = from.In(time.FixedZone("CST", 8*3600)), to.In(time.FixedZone("CST", 8*3600))
			}
			got, err := tot.Between(ctx, from, to)
			if err != nil {
				t.Fatalf("round %d: Between(%s, %s): %v", round, from, to, err)
			}
			want := map[string]map[reservation.RefundState]eventstore.Total{}
			for _, s := range states {
				for _, rf := range s.Refunds {
					if !from.IsZero() && rf.CreatedAt.Before(from) || !to.IsZero() && !rf.CreatedAt.Before(to) {
						continue
					}
					m := reservation.MerchantOf(s.Merchant)
					if want[m] == nil {
						want[m] = map[reservation.RefundState]eventstore.Total{}
					}
					w := want[m][rf.State]
					w.Refunds++
					w.Amount += rf.Amount
					want[m][rf.State] = w
				}
			}
			if !maps.EqualFunc(got, want, maps.Equal) {
				t.Fatalf("round %d: Between(%s, %s)\n got %v\nwant %v", round, from, to, got, want)
			}
		}
	}
	n := 0
	for round := range 2 {
		for range 60 {
			switch ids := len(states); {
			case ids == 0 || r.IntN(4) == 0: // a new reservation
				n++
				id := fmt.Sprintf("r%d", n)
				at := start.Add(time.Duration(r.IntN(72*60)) * time.Minute)
				appendEvents(id, reservation.Event{At: at, By: "test", Data: reservation.Registered{ReservationID: id, UserID: "u",
					OutTradeNo: "O" + id, Amount: 10_000, Currency: "CNY", Merchant: merchants[r.IntN(len(merchants))]}})
			case r.IntN(2) == 0: // a refund requested on one
				id := fmt.Sprintf("r%d", 1+r.IntN(n))
				s := states[id]
				no := fmt.Sprintf("T-%s-%d", id, len(s.Refunds)+1)
				at := start.Add(time.Duration(r.IntN(72*60)) * time.Minute)
				appendEvents(id, reservation.Event{At: at, By: "test", Data: reservation.RefundRequested{RefundNo: no, Number: len(s.Refunds) + 1,
					IdempotencyKey: no, Fingerprint: "f", Amount: int64(1 + r.IntN(500))}})
			default: // a refund moved to another state
				id := fmt.Sprintf("r%d", 1+r.IntN(n))
				s := states[id]
				if len(s.Refunds) == 0 {
					continue
				}
				rf := s.Refunds[r.IntN(len(s.Refunds))]
				to := moves[r.IntN(len(moves))]
				appendEvents(id, reservation.Event{At: rf.CreatedAt.Add(time.Hour), By: "test", Data: reservation.ProviderResult{
					RefundNo: rf.No, Source: reservation.SourceQuery, Outcome: reservation.OutcomeUnknown, From: rf.State, To: to}})
			}
		}
		check(round)
		checkCountersFold(t, db, history)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = open()
		store = newActivated(db)
		check(round)
	}
}

// TestTotals_Refused: a bound off the hour and a range that ends before it
// starts are refused; a journal whose counters predate the totals says so
// rather than answering partial sums.
func TestTotals_Refused(t *testing.T) {
	ctx := context.Background()
	tot := eventstore.Totals{DB: journaltest.Open(t)}
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ from, to time.Time }{
		{at.Add(time.Minute), time.Time{}},
		{time.Time{}, at.Add(time.Second)},
		{at.In(time.FixedZone("IST", 5*3600+1800)).Add(30 * time.Minute), time.Time{}}, // whole in India, not in UTC
		{at, at.Add(-time.Hour)},
	} {
		if _, err := tot.Between(ctx, tc.from, tc.to); !errors.Is(err, eventstore.ErrTotalsRange) {
			t.Errorf("Between(%s, %s) = %v, want ErrTotalsRange", tc.from, tc.to, err)
		}
	}
	if _, err := tot.Between(ctx, at, at); err != nil {
		t.Errorf("an empty range: %v", err)
	}
	old := eventstore.Totals{DB: generation1{}}
	if _, err := old.Between(ctx, time.Time{}, time.Time{}); !errors.Is(err, eventstore.ErrTotalsNotKept) {
		t.Errorf("generation 1 counters: %v, want ErrTotalsNotKept", err)
	}
}

// generation1 answers as a journal whose counters predate the totals.
type generation1 struct{}

func (generation1) CountersBetween(context.Context, string, string) (journal.Counts, error) {
	return journal.Counts{Values: map[string]int64{}, Complete: true, Generation: 1}, nil
}
