package audit

import (
	"context"
	"errors"
	"slices"

	"github.com/refundd/refundd/journal"
)

// gatherBudget bounds the bytes of records gatherStreams holds for
// reservations it has not seen the end of.
const gatherBudget = 64 << 20

// gatherStreams calls emit with every stream's records, read in the order
// the log lies in the file (journal.DB.ScanStreams: sequential reads, which
// stay fast on a file larger than the page cache, where reading stream by
// stream through the index is random). A stream is emitted once its last
// record (its head) has been read, so what is held is the streams begun
// and not yet ended. When they pass budget bytes the ones begun first are
// let go (their later records are skipped) and read again at the end
// through the per-stream index, one by one: a journal whose reservations
// live long costs some random reads, never unbounded memory. Streams that
// never reach their head (a record missing or unreadable) are emitted at
// the end with the gap counted as Unreadable, as ForEachStream counts an
// index entry it cannot read.
func gatherStreams(ctx context.Context, db *journal.DB, budget int, emit func(journal.StreamRecords) error) error {
	type open struct {
		sr   journal.StreamRecords
		head uint64
		size int
	}
	var (
		streams  = map[string]*open{}
		order    []string // streams by first record; some already emitted
		deferred = map[string]bool{}
		held     int
	)
	size := func(r journal.Record) int { return len(r.Data) + len(r.Stream) + len(r.Type) + 96 }
	finish := func(o *open) error {
		delete(streams, o.sr.Stream)
		held -= o.size
		expected := o.head
		if n := len(o.sr.Records); n > 0 && o.sr.Records[n-1].Seq > expected {
			expected = o.sr.Records[n-1].Seq
		}
		if missing := int(expected) - len(o.sr.Records); missing > 0 {
			o.sr.Unreadable += missing
		}
		return emit(o.sr)
	}
	err := db.ScanStreams(ctx, func(r journal.Record, head uint64) error {
		if deferred[r.Stream] {
			return nil
		}
		o := streams[r.Stream]
		if o == nil {
			o = &open{sr: journal.StreamRecords{Stream: r.Stream}, head: head}
			streams[r.Stream] = o
			order = append(order, r.Stream)
		}
		o.sr.Records = append(o.sr.Records, r)
		o.size += size(r)
		held += size(r)
		if r.Seq == o.head {
			return finish(o)
		}
		for held > budget && len(order) > 0 {
			name := order[0]
			order = order[1:]
			if x := streams[name]; x != nil && x != o {
				delete(streams, name)
				held -= x.size
				deferred[name] = true
			}
		}
		if len(order) > 2*len(streams)+1024 { // drop the names of emitted streams
			order = slices.DeleteFunc(order, func(s string) bool { return streams[s] == nil })
		}
		return nil
	}, func(uint64, error) error { return nil }) // journal.Check names the record
	if err != nil {
		return err
	}
	rest := make([]string, 0, len(streams))
	for name := range streams {
		rest = append(rest, name)
	}
	slices.Sort(rest)
	for _, name := range rest {
		if err := finish(streams[name]); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(deferred))
	for name := range deferred {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		recs, err := db.Load(ctx, name, 0)
		if err != nil && !errors.Is(err, journal.ErrCorrupt) {
			return err
		}
		sr := journal.StreamRecords{Stream: name, Records: recs}
		if err != nil {
			sr.Unreadable = 1 // Check names the record
		}
		if err := emit(sr); err != nil {
			return err
		}
	}
	return nil
}
