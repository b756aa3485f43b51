package audit

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// folded is one reservation replayed by foldStreams.
type folded struct {
	Stream  string
	Records []journal.Record
	// State is the state after every event that decoded; nil when none
	// did.
	State *reservation.State
	// Undecoded counts the records that did not decode as events, or
	// could not be read back through the index; Unreadable only the
	// latter (they are not in Records).
	Undecoded, Unreadable int
	// Latest is the latest decision time of its events.
	Latest time.Time
}

// foldStreams replays every reservation, one at a time, in a pool of
// foldWorkers() workers, and calls fn with each from the worker numbered
// worker: fn keeps its sums per worker, and the caller merges them after.
// Memory is a few reservations per worker, whatever the journal's size.
// With archived, the reservations archived out of db (its archive beside
// it, or Options.ArchiveDir) come first: the whole history, as verify
// reads it.
func foldStreams(ctx context.Context, db *journal.DB, archived bool, progress func(uint64), fn func(worker int, f folded)) error {
	n := foldWorkers()
	work := make(chan []journal.StreamRecords, n)
	var records atomic.Uint64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rp := newReplayer(nil)
			rp.foldOnly = true
			for batch := range work {
				for _, sr := range batch {
					rp.reset()
					f := folded{Stream: sr.Stream, Records: sr.Records, Undecoded: sr.Unreadable, Unreadable: sr.Unreadable}
					for _, r := range sr.Records {
						e, _, ok := rp.apply(r)
						if !ok {
							f.Undecoded++
						} else if e.At.After(f.Latest) {
							f.Latest = e.At
						}
					}
					f.State = rp.states[sr.Stream]
					fn(i, f)
					if total := records.Add(uint64(len(sr.Records))); progress != nil && i == 0 {
						progress(total)
					}
				}
			}
		})
	}
	var batch []journal.StreamRecords
	size := 0
	emit := func(sr journal.StreamRecords) error {
		batch = append(batch, sr)
		if size += len(sr.Records); size >= 4096 {
			select {
			case work <- batch:
			case <-ctx.Done():
				return ctx.Err()
			}
			batch, size = nil, 0
		}
		return nil
	}
	var err error
	if archived {
		var arch *journal.Archive
		if arch, err = journal.OpenArchive(db, db.ArchiveDir()); err == nil && len(arch.Applied) > 0 {
			err = arch.ForEachStream(emit)
		}
	}
	if err == nil {
		_, err = gatherStreams(ctx, db, gatherBudget, emit)
	}
	if err == nil && len(batch) > 0 {
		work <- batch
	}
	close(work)
	wg.Wait()
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// foldWorkers is how many workers foldStreams runs.
func foldWorkers() int { return runtime.GOMAXPROCS(0) }
