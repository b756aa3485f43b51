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
	// CountMerchant + merchant + "/" + one of the totals above
	// (reservations, canceled, paid, refunded, in_flight, released,
	// refunds): that merchant's share. Merchant names are the configured
	// ones, so the keys are bounded.
	CountMerchant = "merchant/"
	// CountTotals + hour + "/" + merchant + "/" + state + "/" + TotalFen or
	// TotalRefunds: the amount and the number of the refunds requested in
	// that hour (UTC, TotalsHour) of that merchant now in that state.
	// Keys sort by hour, so a time range reads only its span
	// (journal.DB.CountersBetween, Totals). Counters of generation 2
	// (journal.CountersGeneration); a journal of generation 1 has them only
	// for what it appended since, and journal verify skips them there.
	CountTotals  = "totals/"
	TotalFen     = "fen"
	TotalRefunds = "refunds"
)

// TotalsHourLayout formats the hour of CountTotals keys: fixed width, so
// the keys sort as the hours do.
const TotalsHourLayout = "2006010215"

// TotalsHour is the hour part of the CountTotals keys of a refund
// requested at t.
func TotalsHour(t time.Time) string { return t.UTC().Format(TotalsHourLayout) }

// Tally calls add with one reservation's share of the counters (none for a
// reservation that is not registered), each times sign. Stats and Verify
// fold with it, and appends count with it: one definition of the figures.
func Tally(s *reservation.State, sign int64, add func(key string, n int64)) {
	if !s.Registered() {
		return
	}
	m := CountMerchant + reservation.MerchantOf(s.Merchant) + "/"
	both := func(key string, n int64) {
		if n != 0 {
			add(key, n)
			add(m+key, n)
		}
	}
	both(CountReservations, sign)
	if s.Status == reservation.StatusCanceled {
		both(CountCanceled, sign)
	}
	both(CountPaid, sign*s.Amount)
	var refunded, inFlight, released int64
	merchant := reservation.MerchantOf(s.Merchant)
	for _, r := range s.Refunds {
		add(refundStateKey(r.State), sign)
		// One allocation per key: the hour is formatted on the stack and
		// each key concatenated at once (this runs twice per append).
		var buf [len(TotalsHourLayout)]byte
		hour := r.CreatedAt.UTC().AppendFormat(buf[:0], TotalsHourLayout)
		add(CountTotals+string(hour)+"/"+merchant+"/"+string(r.State)+"/"+TotalFen, sign*r.Amount)
		add(CountTotals+string(hour)+"/"+merchant+"/"+string(r.State)+"/"+TotalRefunds, sign)
		switch {
		case r.State == reservation.Succeeded:
			refunded += r.Amount
		case r.State == reservation.Failed:
			released += r.Amount
		case r.State.Holds():
			inFlight += r.Amount
		}
	}
	both(CountRefunds, sign*int64(len(s.Refunds)))
	both(CountRefunded, sign*refunded)
	both(CountInFlight, sign*inFlight)
	both(CountReleased, sign*released)
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
	if dst == nil {
		dst = make([]journal.Counter, 0, 32) // a refund's typical append: one allocation
	}
	add := func(key string, n int64) {
		if n != 0 {
			dst = append(dst, journal.Counter{Key: key, Add: n})
		}
	}
	after := &reservation.State{}
	if before.Registered() {
		Tally(before, -1, add)
		after = before.Clone()
	}
	var latest int64
	for _, e := range events {
		reservation.Apply(after, e)
		add(eventKey(e.Data.EventType()), 1)
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

// refundStateKey and eventKey name the counters of the known states and
// types with constants: building them on every append cost an allocation
// per key.
func refundStateKey(s reservation.RefundState) string {
	switch s {
	case reservation.Processing:
		return CountRefundState + string(reservation.Processing)
	case reservation.Succeeded:
		return CountRefundState + string(reservation.Succeeded)
	case reservation.Failed:
		return CountRefundState + string(reservation.Failed)
	case reservation.Unknown:
		return CountRefundState + string(reservation.Unknown)
	case reservation.Rejected:
		return CountRefundState + string(reservation.Rejected)
	case reservation.Abnormal:
		return CountRefundState + string(reservation.Abnormal)
	}
	return CountRefundState + string(s)
}

func eventKey(t string) string {
	switch t {
	case reservation.TypeRegistered:
		return CountEvents + reservation.TypeRegistered
	case reservation.TypeCanceled:
		return CountEvents + reservation.TypeCanceled
	case reservation.TypeRefundRequested:
		return CountEvents + reservation.TypeRefundRequested
	case reservation.TypeSubmissionStarted:
		return CountEvents + reservation.TypeSubmissionStarted
	case reservation.TypeQueryStarted:
		return CountEvents + reservation.TypeQueryStarted
	case reservation.TypeProviderResult:
		return CountEvents + reservation.TypeProviderResult
	case reservation.TypeAbandoned:
		return CountEvents + reservation.TypeAbandoned
	case reservation.TypeConflict:
		return CountEvents + reservation.TypeConflict
	case reservation.TypeFlaggedStuck:
		return CountEvents + reservation.TypeFlaggedStuck
	case reservation.TypeSubmissionWaits:
		return CountEvents + reservation.TypeSubmissionWaits
	case reservation.TypeResolved:
		return CountEvents + reservation.TypeResolved
	case reservation.TypeRefundRecovered:
		return CountEvents + reservation.TypeRefundRecovered
	}
	return CountEvents + t
}
