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
	f := figuresOf(s, nil, nil)
	f.emit(sign, add)
}

// The figures of figures.base, and their keys (baseKeys).
const (
	figReservations = iota
	figCanceled
	figPaid
	figRefunds
	figRefunded
	figInFlight
	figReleased
	figCount
)

var baseKeys = [figCount]string{CountReservations, CountCanceled, CountPaid, CountRefunds, CountRefunded, CountInFlight, CountReleased}

// figures is one reservation's share of the counters before any key is
// built: an append's changes are the difference of two of them, and most
// figures of a reservation do not change in an append, so their keys are
// never built (CounterChanges runs on every append).
type figures struct {
	merchant string // MerchantOf; "" when not registered (every figure 0)
	base     [figCount]int64
	// states counts refunds per state, totals the refunds per hour and
	// state.
	states []stateCount
	totals []hourTotal
}

type stateCount struct {
	state reservation.RefundState
	n     int64
}

type hourTotal struct {
	hour  [len(TotalsHourLayout)]byte
	state reservation.RefundState
	fen   int64
	n     int64
}

// figuresOf is s's figures, its states and totals appended to the
// (empty) slices given: the caller's room on the stack.
func figuresOf(s *reservation.State, states []stateCount, totals []hourTotal) figures {
	if s == nil || !s.Registered() {
		return figures{states: states, totals: totals}
	}
	f := figures{merchant: reservation.MerchantOf(s.Merchant)}
	f.base[figReservations] = 1
	if s.Status == reservation.StatusCanceled {
		f.base[figCanceled] = 1
	}
	f.base[figPaid] = s.Amount
	f.base[figRefunds] = int64(len(s.Refunds))
	for _, r := range s.Refunds {
		switch {
		case r.State == reservation.Succeeded:
			f.base[figRefunded] += r.Amount
		case r.State == reservation.Failed:
			f.base[figReleased] += r.Amount
		case r.State.Holds():
			f.base[figInFlight] += r.Amount
		}
		i := stateAt(states, r.State)
		if i < 0 {
			i, states = len(states), append(states, stateCount{state: r.State})
		}
		states[i].n++
		var h [len(TotalsHourLayout)]byte
		r.CreatedAt.UTC().AppendFormat(h[:0], TotalsHourLayout)
		j := totalAt(totals, h, r.State)
		if j < 0 {
			j, totals = len(totals), append(totals, hourTotal{hour: h, state: r.State})
		}
		totals[j].fen += r.Amount
		totals[j].n++
	}
	f.states, f.totals = states, totals
	return f
}

// stateAt is the index of st's entry, or -1.
func stateAt(states []stateCount, st reservation.RefundState) int {
	for i := range states {
		if states[i].state == st {
			return i
		}
	}
	return -1
}

// totalAt is the index of the entry of hour h and state st, or -1.
func totalAt(totals []hourTotal, h [len(TotalsHourLayout)]byte, st reservation.RefundState) int {
	for i := range totals {
		if totals[i].hour == h && totals[i].state == st {
			return i
		}
	}
	return -1
}

// emit calls add with every figure that is not 0, times sign.
func (f *figures) emit(sign int64, add func(key string, n int64)) {
	if f.merchant == "" {
		return
	}
	for i, v := range f.base {
		if v != 0 {
			add(baseKeys[i], sign*v)
			add(string(appendMerchantKey(nil, f.merchant, baseKeys[i])), sign*v)
		}
	}
	for _, c := range f.states {
		add(refundStateKey(c.state), sign*c.n)
	}
	for _, t := range f.totals {
		add(string(appendTotalsKey(nil, t, f.merchant, TotalFen)), sign*t.fen)
		add(string(appendTotalsKey(nil, t, f.merchant, TotalRefunds)), sign*t.n)
	}
}

// appendMerchantKey appends the key of a merchant's share of figure key
// (CountMerchant).
func appendMerchantKey(b []byte, merchant, key string) []byte {
	b = append(b, CountMerchant...)
	b = append(b, merchant...)
	b = append(b, '/')
	return append(b, key...)
}

// appendTotalsKey appends the key of t's refunds of merchant, what being
// TotalFen or TotalRefunds (CountTotals).
func appendTotalsKey(b []byte, t hourTotal, merchant, what string) []byte {
	b = append(b, CountTotals...)
	b = append(b, t.hour[:]...)
	b = append(b, '/')
	b = append(b, merchant...)
	b = append(b, '/')
	b = append(b, t.state...)
	b = append(b, '/')
	return append(b, what...)
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
	return counterChangesTo(dst, before, reservation.After(before, events), events)
}

// counterChangesTo is CounterChanges given after, the state events lead
// to from before (the append's path computes it once for every index).
// Only the figures that change get a key, and the keys are cut from one
// string: one allocation for all of them.
func counterChangesTo(dst []journal.Counter, before, after *reservation.State, events []reservation.Event) []journal.Counter {
	var wasStates, nowStates [4]stateCount
	var wasTotals, nowTotals [4]hourTotal
	was := figuresOf(before, wasStates[:0], wasTotals[:0])
	now := figuresOf(after, nowStates[:0], nowTotals[:0])
	merchant := now.merchant
	if merchant == "" {
		merchant = was.merchant
	}
	// A change's key is either a constant (key) or bytes [from, to) of buf.
	type change struct {
		key      string
		from, to int
		n        int64
		max      bool
	}
	var room [24]change
	changes := room[:0]
	var bufRoom [512]byte
	buf := bufRoom[:0]
	constant := func(key string, n int64) {
		if n != 0 {
			changes = append(changes, change{key: key, n: n})
		}
	}
	// built records the key appended to buf since from.
	built := func(from int, n int64) {
		changes = append(changes, change{from: from, to: len(buf), n: n})
	}
	for i := range now.base {
		if d := now.base[i] - was.base[i]; d != 0 {
			constant(baseKeys[i], d)
			from := len(buf)
			buf = appendMerchantKey(buf, merchant, baseKeys[i])
			built(from, d)
		}
	}
	for _, c := range now.states {
		d := c.n
		if i := stateAt(was.states, c.state); i >= 0 {
			d -= was.states[i].n
		}
		constant(refundStateKey(c.state), d)
	}
	for _, c := range was.states {
		if stateAt(now.states, c.state) < 0 { // gone: not in the loop above
			constant(refundStateKey(c.state), -c.n)
		}
	}
	total := func(t hourTotal, sign int64) {
		if t.fen != 0 {
			from := len(buf)
			buf = appendTotalsKey(buf, t, merchant, TotalFen)
			built(from, sign*t.fen)
		}
		if t.n != 0 {
			from := len(buf)
			buf = appendTotalsKey(buf, t, merchant, TotalRefunds)
			built(from, sign*t.n)
		}
	}
	for _, t := range now.totals {
		if i := totalAt(was.totals, t.hour, t.state); i >= 0 {
			t.fen -= was.totals[i].fen
			t.n -= was.totals[i].n
		}
		total(t, 1)
	}
	for _, t := range was.totals {
		if totalAt(now.totals, t.hour, t.state) < 0 {
			total(t, -1)
		}
	}
	var latest int64
	for _, e := range events {
		constant(eventKey(e.Data.EventType()), 1)
		if n, ok := LatestNanos(e.At); ok && n > latest {
			latest = n
		}
	}
	if latest != 0 {
		changes = append(changes, change{key: CountLatest, n: latest, max: true})
	}
	if dst == nil {
		dst = make([]journal.Counter, 0, len(changes))
	}
	keys := string(buf)
	for _, c := range changes {
		k := c.key
		if c.to > 0 {
			k = keys[c.from:c.to]
		}
		dst = append(dst, journal.Counter{Key: k, Add: c.n, Max: c.max})
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
	case reservation.PendingApproval:
		return CountRefundState + string(reservation.PendingApproval)
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
