package audit

import (
	"context"
	"slices"

	"github.com/refundd/refundd/journal"
)

// gatherBudget bounds the bytes of records gatherStreams holds for
// reservations it has not seen the end of.
const gatherBudget = 64 << 20

// maxUndecoded bounds how many globals of records that do not decode
// gatherStreams keeps to find their streams at the end. A journal with
// more is damaged beyond what one report lists (journal.Check names every
// record); past it, the streams whose last record is among the others are
// not replayed.
const maxUndecoded = 1 << 16

// gatherStats is what one gatherStreams held at most: the test that its
// memory does not follow the number of reservations reads it.
type gatherStats struct {
	peakHeld  int // bytes of records held at once
	peakOpen  int // reservations held at once
	peakNames int // names kept in the order they began
	reread    int // reservations let go and read again at their end
}

// gatherStreams calls emit with every stream's records, read in the order
// the log lies in the file (journal.DB.ScanStreams: sequential reads, which
// stay fast on a file larger than the page cache, where reading stream by
// stream through the index is random). A stream is emitted once its last
// record (its head) has been read, so what is held is the streams begun
// and not yet ended. When they pass budget bytes the ones begun first are
// let go, and nothing about them is kept: a later record of a stream that
// is not held and does not begin it (seq > 1) is skipped, and its head is
// where the stream is read again, whole, through the per-stream index
// (journal.StreamScan.Stream). A journal whose reservations live long
// costs some random reads, never memory that grows with it. Streams that
// never reach their head (a record missing or unreadable) are emitted at
// the end with the gap counted as Unreadable, as ForEachStream counts an
// index entry it cannot read; so are the streams whose head does not
// decode (journal.StreamScan.HeadsAt).
func gatherStreams(ctx context.Context, db *journal.DB, budget int, emit func(journal.StreamRecords) error) (gatherStats, error) {
	type open struct {
		sr   journal.StreamRecords
		head uint64
		size int
	}
	var (
		st        gatherStats
		streams   = map[string]*open{}
		order     []string // streams by first record; some already emitted
		held      int
		undecoded []uint64
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
	record := func(sc *journal.StreamScan, r journal.Record, head uint64) error {
		o := streams[r.Stream]
		if o == nil && r.Seq > 1 && head > 0 {
			// Let go (or its first records did not decode): read it
			// whole when its last record goes by.
			if r.Seq < head {
				return nil
			}
			st.reread++
			return emit(sc.Stream(r.Stream))
		}
		if o == nil {
			o = &open{sr: journal.StreamRecords{Stream: r.Stream}, head: head}
			streams[r.Stream] = o
			order = append(order, r.Stream)
		}
		o.sr.Records = append(o.sr.Records, r)
		o.size += size(r)
		held += size(r)
		st.peakHeld = max(st.peakHeld, held)
		st.peakOpen = max(st.peakOpen, len(streams))
		st.peakNames = max(st.peakNames, len(order))
		if r.Seq == o.head {
			return finish(o)
		}
		// Over budget: let go of the streams begun first, all but o (the
		// stream being read), which goes to the back of the order: were it
		// dropped from the order it could never be let go again.
		self := false
		for held > budget && len(order) > 0 {
			name := order[0]
			order = order[1:]
			switch x := streams[name]; {
			case x == o:
				self = true
			case x != nil:
				delete(streams, name)
				held -= x.size
			}
		}
		if self {
			order = append(order, o.sr.Stream)
		}
		if len(order) > 2*len(streams)+1024 { // drop the names of emitted streams
			order = slices.DeleteFunc(order, func(s string) bool { return streams[s] == nil })
		}
		return nil
	}
	bad := func(g uint64, _ error) error { // journal.Check names the record
		if g > 0 && len(undecoded) < maxUndecoded {
			undecoded = append(undecoded, g)
		}
		return nil
	}
	end := func(sc *journal.StreamScan) error {
		// A stream whose head does not decode never ends: the ones still
		// held end here; the ones let go are read again.
		var lost []string
		for _, name := range sc.HeadsAt(undecoded) {
			if streams[name] == nil {
				lost = append(lost, name)
			}
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
		for _, name := range lost {
			st.reread++
			if err := emit(sc.Stream(name)); err != nil {
				return err
			}
		}
		return nil
	}
	err := db.ScanStreams(ctx, record, bad, end)
	return st, err
}
