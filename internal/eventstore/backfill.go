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

// HeadMarksWriter is implemented by a journal that other processes append
// to while a back-fill runs (*pgjournal.DB): WriteMarksAt writes a
// stream's marks only while its head is the one they were made at, and
// returns the streams that moved.
type HeadMarksWriter interface {
	WriteMarksAt(ctx context.Context, batch []journal.StreamMarks) (moved []string, err error)
}

// BackfillLists is the upgrade step of the list index: on a journal
// whose appends did not write list rows (ListIndexKey absent), it writes
// the rows of every reservation's current state, then puts ListIndexKey.
//
// A row written from a state that an append has since changed would stay
// (the append clears the rows of the state it was decided on, which the
// back-fill had not written yet). On a journal that others append to
// meanwhile (a HeadMarksWriter: the cluster's, whose nodes may all be
// back-filling and appending at once) each reservation's rows are written
// only while its head is still the one they were made at, in a
// transaction that holds off appends to it; a reservation that moved is
// read again and retried. An append after that write finds its state's
// rows and changes them like any other; two back-fills write the same
// rows. On the bbolt journal it runs before anything appends (at boot,
// before the engine starts) and writes the rows as they are.
//
// It logs its progress; a crash part way leaves the key absent, and the
// next boot writes every row again (writing a row is idempotent). It
// returns the number of reservations it indexed.
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
	b := listBackfill{db: db}
	b.heads, _ = db.(HeadMarksWriter)
	start := time.Now()
	lastLog := start
	var after uint64
	for {
		recs, err := db.Scan(ctx, after, 4096)
		if err != nil {
			return b.n, fmt.Errorf("eventstore: list index: %w", err)
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
			if err := b.add(ctx, rec.Stream); err != nil {
				return b.n, fmt.Errorf("eventstore: list index: %w", err)
			}
			b.n++
			if b.size >= 4096 {
				if err := b.flush(ctx); err != nil {
					return b.n, fmt.Errorf("eventstore: list index: %w", err)
				}
			}
		}
		if time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			log.Info("list index: back-filling", "reservations", b.n, "record", after, "of", end)
		}
	}
	if err := b.flush(ctx); err != nil {
		return b.n, fmt.Errorf("eventstore: list index: %w", err)
	}
	if err := db.Put(ctx, ListIndexKey, []byte("1")); err != nil {
		return b.n, fmt.Errorf("eventstore: list index: %w", err)
	}
	if end > 0 {
		log.Info("list index: back-filled", "reservations", b.n, "retried", b.retried, "took", time.Since(start).Round(time.Millisecond))
	}
	return b.n, nil
}

// listBackfill gathers the rows of reservations and writes them in batches.
type listBackfill struct {
	db      BackfillJournal
	heads   HeadMarksWriter // nil: write as they are
	batch   []journal.StreamMarks
	rows    []reservation.ListRow
	size    int // marks in batch
	n       int // reservations indexed
	retried int // reservations read again because an append moved them
}

// add reads stream's state and queues its rows at its head.
func (b *listBackfill) add(ctx context.Context, stream string) error {
	events, head, err := Reader{b.db}.Load(ctx, stream)
	if err != nil {
		return err
	}
	b.rows = reservation.ListRows(b.rows[:0], reservation.Replay(events))
	marks := ListMarks(nil, b.rows)
	b.batch = append(b.batch, journal.StreamMarks{Stream: stream, Head: head, Marks: marks})
	b.size += len(marks)
	return nil
}

// flush writes the queued rows; with a HeadMarksWriter, it reads again the
// reservations that moved and writes theirs until none has.
func (b *listBackfill) flush(ctx context.Context) error {
	for len(b.batch) > 0 {
		if b.heads == nil {
			var marks []journal.Mark
			for _, sm := range b.batch {
				marks = append(marks, sm.Marks...)
			}
			if err := b.db.WriteMarks(ctx, marks); err != nil {
				return err
			}
			b.batch, b.size = b.batch[:0], 0
			return nil
		}
		moved, err := b.heads.WriteMarksAt(ctx, b.batch)
		if err != nil {
			return err
		}
		b.batch, b.size = b.batch[:0], 0
		for _, stream := range moved {
			b.retried++
			if err := b.add(ctx, stream); err != nil {
				return err
			}
		}
	}
	return nil
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
