package eventstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
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
