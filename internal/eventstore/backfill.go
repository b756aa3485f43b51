package eventstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal"
)

// ListIndexKey is the journal's kv entry that says every reservation has
// its rows in the list index: put when BackfillLists has written the rows
// of every reservation appended before the index existed (at once for an
// empty journal). Appends keep the rows from then on.
const ListIndexKey = "index/list"

// BackfillJournal is what BackfillLists needs: both journals implement it.
type BackfillJournal interface {
	Journal
	Scan(ctx context.Context, afterGlobal uint64, limit int) ([]journal.Record, error)
	LastGlobal(ctx context.Context) (uint64, error)
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, value []byte) error
	WriteMarks(ctx context.Context, marks []journal.Mark) error
}

// BackfillLists is the upgrade step of the list index: on a journal
// whose appends did not write list rows (ListIndexKey absent), it writes
// the rows of every reservation's current state, then puts ListIndexKey.
// It must run before anything appends (at boot, before the engine
// starts): a row written from a state an append has since changed would
// stay. It logs its progress; a crash part way leaves the key absent, and
// the next boot writes every row again (writing a row is idempotent).
// It returns the number of reservations it indexed.
func BackfillLists(ctx context.Context, db BackfillJournal, log *slog.Logger) (int, error) {
	switch _, err := db.Get(ctx, ListIndexKey); {
	case err == nil:
		return 0, nil
	case !errors.Is(err, journal.ErrNotFound):
		return 0, fmt.Errorf("eventstore: list index: %w", err)
	}
	end, err := db.LastGlobal(ctx)
	if err != nil {
		return 0, err
	}
	if end > 0 {
		log.Info("list index: back-filling the rows of every reservation (a journal written before the list index)", "records", end)
	}
	start := time.Now()
	lastLog := start
	var after uint64
	var marks []journal.Mark
	var rows []reservation.ListRow
	n := 0
	for {
		recs, err := db.Scan(ctx, after, 4096)
		if err != nil {
			return n, fmt.Errorf("eventstore: list index: %w", err)
		}
		if len(recs) == 0 {
			break
		}
		for _, rec := range recs {
			after = rec.Global
			// A reservation's first record is its registration; its rows
			// come from its whole stream, read once.
			if rec.Seq != 1 {
				continue
			}
			events, _, err := Reader{db}.Load(ctx, rec.Stream)
			if err != nil {
				return n, fmt.Errorf("eventstore: list index: %w", err)
			}
			rows = reservation.ListRows(rows[:0], reservation.Replay(events))
			marks = ListMarks(marks, rows)
			n++
			if len(marks) >= 4096 {
				if err := db.WriteMarks(ctx, marks); err != nil {
					return n, fmt.Errorf("eventstore: list index: %w", err)
				}
				marks = marks[:0]
			}
		}
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			log.Info("list index: back-filling", "reservations", n, "record", after, "of", end)
		}
	}
	if len(marks) > 0 {
		if err := db.WriteMarks(ctx, marks); err != nil {
			return n, fmt.Errorf("eventstore: list index: %w", err)
		}
	}
	if err := db.Put(ctx, ListIndexKey, []byte("1")); err != nil {
		return n, fmt.Errorf("eventstore: list index: %w", err)
	}
	if end > 0 {
		log.Info("list index: back-filled", "reservations", n, "took", time.Since(start).Round(time.Millisecond))
	}
	return n, nil
}

// CountersJournal is what BackfillCounters needs: a journal whose counters
// can be completed while other nodes append (*pgjournal.DB).
type CountersJournal interface {
	Journal
	Scan(ctx context.Context, afterGlobal uint64, limit int) ([]journal.Record, error)
	Counters(ctx context.Context) (journal.Counts, error)
	CompleteCounters(ctx context.Context, changes []journal.Counter) error
}

// BackfillCounters is the upgrade step of the counters of a cluster journal
// written before they were kept (pgjournal's migration 2): the appends
// since keep them, the records before are counted here once. It reads the
// counters and the log's end G in one snapshot, folds the records up to G
// (CounterChanges of each reservation's events up to G, the counters the
// appends would have made), and adds the fold less what the counters held
// at G (what the appends since the upgrade counted of those records) in
// one transaction with no append in between (CompleteCounters). Appends
// after G added their own share, so the sum counts the whole log whatever
// the other nodes did meanwhile, and of two nodes back-filling at once the
// second adds nothing (pgjournal.ErrCountersComplete). It reports whether
// it completed them.
func BackfillCounters(ctx context.Context, db CountersJournal, log *slog.Logger) (bool, error) {
	counts, err := db.Counters(ctx)
	if err != nil {
		return false, fmt.Errorf("eventstore: counters back-fill: %w", err)
	}
	if counts.Complete {
		return false, nil
	}
	end := counts.LastGlobal
	log.Info("counters: back-filling the counters and refund totals of the records written before they were kept", "records", end)
	start := time.Now()
	add, maxes := map[string]int64{}, map[string]int64{}
	var changes []journal.Counter
	var events []reservation.Event
	var after uint64
	n := 0
	for after < end {
		recs, err := db.Scan(ctx, after, 4096)
		if err != nil {
			return false, fmt.Errorf("eventstore: counters back-fill: %w", err)
		}
		if len(recs) == 0 {
			return false, fmt.Errorf("eventstore: counters back-fill: the log ends at %d, before %d", after, end)
		}
		for _, rec := range recs {
			if rec.Global > end {
				break
			}
			after = rec.Global
			if rec.Seq != 1 {
				continue
			}
			// A stream's first record: its events up to end, read once.
			all, err := db.Load(ctx, rec.Stream, 0)
			if err != nil {
				return false, fmt.Errorf("eventstore: counters back-fill: %w", err)
			}
			kept := all[:0]
			for _, r := range all {
				if r.Global <= end {
					kept = append(kept, r)
				}
			}
			if events, err = DecodeStream(rec.Stream, kept); err != nil {
				return false, fmt.Errorf("eventstore: counters back-fill: %w", err)
			}
			changes = CounterChanges(changes[:0], nil, events)
			for _, c := range changes {
				if c.Max {
					if v, ok := maxes[c.Key]; !ok || c.Add > v {
						maxes[c.Key] = c.Add
					}
				} else {
					add[c.Key] += c.Add
				}
			}
			n++
		}
	}
	// What the appends since the upgrade counted of the records up to end
	// is in counts: subtract it from the fold.
	var diff []journal.Counter
	for k, v := range counts.Values {
		if k != CountLatest { // the one kept as a maximum (CounterChanges)
			add[k] -= v
		}
	}
	for k, v := range add {
		if v != 0 {
			diff = append(diff, journal.Counter{Key: k, Add: v})
		}
	}
	for k, v := range maxes {
		diff = append(diff, journal.Counter{Key: k, Add: v, Max: true})
	}
	switch err := db.CompleteCounters(ctx, diff); {
	case errors.Is(err, pgjournal.ErrCountersComplete):
		log.Info("counters: another node back-filled them first")
		return false, nil
	case err != nil:
		return false, fmt.Errorf("eventstore: counters back-fill: %w", err)
	}
	log.Info("counters: back-filled", "reservations", n, "records", end, "took", time.Since(start).Round(time.Millisecond))
	return true, nil
}
