package eventstore

import (
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// The journal's counters (journal.Counter), kept by every append in the
// commit of its events: what refundctl journal stats prints, without
// reading the history. Verify recomputes them from the events.
const (
	CountReservations = "reservations" // registered reservations
	CountCanceled     = "canceled"     // of them, canceled
	CountPaid         = "paid"         // fen paid, over registered reservations
	CountRefunded     = "refunded"     // fen of SUCCEEDED refunds
	CountInFlight     = "in_flight"    // fen held by refunds not yet succeeded
	CountReleased     = "released"     // fen of FAILED refunds
	CountRefunds      = "refunds"      // refunds of registered reservations
	// CountRefundState + state: refunds in that state.
	CountRefundState = "refund_state/"
	// CountEvents + type: records of that event type.
	CountEvents = "events/"
	// CountLatest is the latest decision time of any event, Unix
	// nanoseconds, kept as a maximum.
	CountLatest = "latest"
)

// Tally calls add with one reservation's share of the counters (none for a
// reservation that is not registered), each times sign. Stats and Verify
// fold with it, and appends count with it: one definition of the figures.
func Tally(s *reservation.State, sign int64, add func(key string, n int64)) {
	if !s.Registered() {
		return
	}
	add(CountReservations, sign)
	if s.Status == reservation.StatusCanceled {
		add(CountCanceled, sign)
	}
	add(CountPaid, sign*s.Amount)
	var refunded, inFlight, released int64
	for _, r := range s.Refunds {
		add(CountRefundState+string(r.State), sign)
		switch {
		case r.State == reservation.Succeeded:
			refunded += r.Amount
		case r.State == reservation.Failed:
			released += r.Amount
		case r.State.Holds():
			inFlight += r.Amount
		}
	}
	add(CountRefunds, sign*int64(len(s.Refunds)))
	add(CountRefunded, sign*refunded)
	add(CountInFlight, sign*inFlight)
	add(CountReleased, sign*released)
}

// LatestNanos is an event time as CountLatest keeps it; false for the zero
// time, which is not counted.
func LatestNanos(at time.Time) (int64, bool) {
	if at.IsZero() {
		return 0, false
	}
	return at.UnixNano(), true
}

// CounterChanges adds to dst the counter changes of events decided on
// before (nil for a new reservation): its share after them less its share
// before, one per event type, and the latest decision time. The journal sums
// changes of the same key.
func CounterChanges(dst []journal.Counter, before *reservation.State, events []reservation.Event) []journal.Counter {
	add := func(key string, n int64) {
		if n != 0 {
			dst = append(dst, journal.Counter{Key: key, Add: n})
		}
	}
	after := &reservation.State{}
	if before != nil {
		Tally(before, -1, add)
		after = before.Clone()
	}
	var latest int64
	for _, e := range events {
		reservation.Apply(after, e)
		add(CountEvents+e.Data.EventType(), 1)
		if n, ok := LatestNanos(e.At); ok && n > latest {
			latest = n
		}
	}
	Tally(after, 1, add)
	if latest != 0 {
		dst = append(dst, journal.Counter{Key: CountLatest, Add: latest, Max: true})
	}
	return dst
}
