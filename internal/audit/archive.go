package audit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// ArchiveOptions says which reservations PlanArchive selects.
type ArchiveOptions struct {
	// Now is the moment eligibility is decided at.
	Now time.Time
	// RefundWindow is refundd's refund window (zero: the policy default);
	// Retention how long after payment a reservation stays hot (zero:
	// reservation.DefaultArchiveRetention). Retention shorter than the
	// window is refused.
	RefundWindow, Retention time.Duration
	// Progress, if set, is called with the records read so far.
	Progress func(records uint64)
}

// ArchiveSelection is what PlanArchive found.
type ArchiveSelection struct {
	// Streams are the eligible reservations, sorted; ListRows their list
	// rows (marks-index keys), which leave the hot journal with them.
	Streams  []string
	ListRows []string
	// Totals go into the segment's manifest: "reservations", "refunds",
	// "paid/CURRENCY", "refunded/CURRENCY".
	Totals map[string]int64
	// Kept counts the reservations not eligible, by the first reason.
	Kept map[string]int
}

// PlanArchive replays every reservation of db and selects those that can
// never change again (reservation.State.ArchiveBlocker) and that the
// indexes agree are finished: no due time, no attention mark. A reservation
// with an event that does not decode is kept.
func PlanArchive(ctx context.Context, db *journal.DB, opts ArchiveOptions) (*ArchiveSelection, error) {
	window := opts.RefundWindow
	if window <= 0 {
		window = 365 * 24 * time.Hour
	}
	if opts.Retention > 0 && opts.Retention < window {
		return nil, fmt.Errorf("%w: retention %s is shorter than the refund window %s", ErrInvalid, opts.Retention, window)
	}
	withDue := map[string]bool{}
	if err := db.ForEachDue(ctx, func(d journal.Due) error { withDue[d.Stream] = true; return nil }); err != nil {
		return nil, err
	}
	sel := &ArchiveSelection{Totals: map[string]int64{}, Kept: map[string]int{}}
	var mu sync.Mutex
	var candidates []*reservation.State
	// Only the hot reservations are candidates: the archived are moved.
	err := foldStreams(ctx, db, false, opts.Progress, func(_ int, f folded) {
		why := ""
		switch {
		case f.Undecoded > 0 || f.State == nil:
			why = "events that do not decode"
		case withDue[f.Stream]:
			why = "a due time is pending"
		default:
			why = f.State.ArchiveBlocker(opts.Now, opts.RefundWindow, opts.Retention)
		}
		mu.Lock()
		defer mu.Unlock()
		if why != "" {
			sel.Kept[reasonKind(why)]++
			return
		}
		candidates = append(candidates, f.State)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(candidates, func(a, b *reservation.State) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	err = db.Read(ctx, func(rd *journal.Reader) error {
		for _, st := range candidates {
			if hasAttention(rd, st) {
				sel.Kept["an attention mark is set"]++
				continue
			}
			sel.Streams = append(sel.Streams, st.ID)
			for _, row := range reservation.ListRows(nil, st) {
				if k := eventstore.ListMarkKey(row); rd.HasMark(k) {
					sel.ListRows = append(sel.ListRows, k)
				}
			}
			sel.Totals["reservations"]++
			sel.Totals["refunds"] += int64(len(st.Refunds))
			sel.Totals["paid/"+st.Currency] += st.Amount
			sel.Totals["refunded/"+st.Currency] += st.Refunded()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sel, nil
}

func hasAttention(rd *journal.Reader, st *reservation.State) bool {
	for _, r := range st.Refunds {
		for _, kind := range reservation.AttentionKinds {
			if rd.HasMark(eventstore.AttentionKey(kind, st.ID, r.No)) {
				return true
			}
		}
	}
	return false
}

// reasonKind is a reason without its details (refund numbers, times), to
// count reservations kept by kind.
func reasonKind(why string) string {
	for _, p := range []string{"refund window open", "retained until", "payment time unknown", "not registered"} {
		if len(why) >= len(p) && why[:len(p)] == p {
			return p
		}
	}
	if len(why) > 7 && why[:7] == "refund " {
		return "a refund is not finished"
	}
	return why
}
