package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// ErrTotalsNotKept is returned by Totals.Between when the journal's
// counters do not hold the per-hour totals for its whole history (a file
// from before them: refundctl journal stats --build-counters rebuilds
// them), or the journal keeps no counters (PostgreSQL).
var ErrTotalsNotKept = errors.New("eventstore: the journal does not keep refund totals for its whole history")

// ErrTotalsRange is returned by Totals.Between for a bound that is not a
// whole UTC hour, or a range that ends before it starts.
var ErrTotalsRange = errors.New("eventstore: a totals range is whole UTC hours, from before to")

// CounterRanger reads a span of the journal's counters: *journal.DB.
type CounterRanger interface {
	CountersBetween(ctx context.Context, from, to string) (journal.Counts, error)
}

// Total is the number and amount (fen) of some refunds.
type Total struct {
	Refunds int64 `json:"refunds"`
	Amount  int64 `json:"amount"`
}

// Totals reads the refund totals kept by the hour with the journal
// (CountTotals): one read of the counters of the range's hours, never the
// log.
type Totals struct{ DB CounterRanger }

// Between returns, for the refunds requested in [from, to), their number
// and amount by merchant and by the state they are in now. A zero from or
// to leaves that side open; a bound must be a whole hour (UTC, or any
// offset of whole hours such as +08:00), the totals' grain. Merchants with
// nothing in the range are absent, and so are states with no refunds.
func (t Totals) Between(ctx context.Context, from, to time.Time) (map[string]map[reservation.RefundState]Total, error) {
	if !wholeHour(from) || !wholeHour(to) {
		return nil, fmt.Errorf("%w: %s to %s", ErrTotalsRange, from, to)
	}
	if !from.IsZero() && !to.IsZero() && to.Before(from) {
		return nil, fmt.Errorf("%w: %s is before %s", ErrTotalsRange, to, from)
	}
	lo, hi := CountTotals, CountTotals[:len(CountTotals)-1]+"0" // "0" follows "/": past every totals key
	if !from.IsZero() {
		lo = CountTotals + TotalsHour(from)
	}
	if !to.IsZero() {
		hi = CountTotals + TotalsHour(to)
	}
	counts, err := t.DB.CountersBetween(ctx, lo, hi)
	if err != nil {
		return nil, err
	}
	if !counts.Complete || counts.Generation < 2 {
		return nil, ErrTotalsNotKept
	}
	out := map[string]map[reservation.RefundState]Total{}
	for k, n := range counts.Values {
		// totals/HOUR/MERCHANT/STATE/WHAT; merchant names and states
		// hold no "/".
		parts := strings.Split(k[len(CountTotals):], "/")
		if len(parts) != 4 || n == 0 {
			continue
		}
		m, st := parts[1], reservation.RefundState(parts[2])
		if out[m] == nil {
			out[m] = map[reservation.RefundState]Total{}
		}
		tot := out[m][st]
		switch parts[3] {
		case TotalFen:
			tot.Amount += n
		case TotalRefunds:
			tot.Refunds += n
		}
		out[m][st] = tot
	}
	for m, states := range out {
		for st, tot := range states {
			if tot == (Total{}) {
				delete(states, st)
			}
		}
		if len(states) == 0 {
			delete(out, m)
		}
	}
	return out, nil
}

func wholeHour(t time.Time) bool {
	return t.IsZero() || t.Truncate(time.Hour).Equal(t)
}
