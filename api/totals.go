package api

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
)

// TotalsReader reads the refund totals kept with the journal
// (eventstore.Totals). Between returns, for refunds requested in
// [from, to) (a zero bound is open; bounds on whole UTC hours), their
// number and amount by merchant and current state; errors wrap
// eventstore.ErrTotalsRange for a bad range and eventstore.ErrTotalsNotKept
// when the journal does not keep them for its whole history.
type TotalsReader interface {
	Between(ctx context.Context, from, to time.Time) (map[string]map[reservation.RefundState]eventstore.Total, error)
}

// merchantTotals is one merchant's row of GET /v1/totals.
type merchantTotals struct {
	Merchant string                                       `json:"merchant"`
	States   map[reservation.RefundState]eventstore.Total `json:"states"`
	// InFlight: refunds holding money not yet refunded (every state but
	// SUCCEEDED and FAILED); Refunded: SUCCEEDED; Released: FAILED.
	InFlight eventstore.Total `json:"in_flight"`
	Refunded eventstore.Total `json:"refunded"`
	Released eventstore.Total `json:"released"`
}

// totalsView is GET /v1/totals' answer.
type totalsView struct {
	From      *time.Time       `json:"from"` // null: from the first refund
	To        *time.Time       `json:"to"`   // null: to the last
	Merchants []merchantTotals `json:"merchants"`
	InFlight  eventstore.Total `json:"in_flight"`
	Refunded  eventstore.Total `json:"refunded"`
	Released  eventstore.Total `json:"released"`
}

// totals serves GET /v1/totals: money in flight, refunded and released, by
// merchant and state, for the refunds requested in [from, to). It is its
// own route rather than more of GET /v1/summary: it takes a range, answers
// a scoped token with its merchants' rows (the summary drops everything
// but attention counts for one), and reads one span of counters kept in
// the appends' commits, never the log. ?merchant= narrows it to one
// merchant the token sees, refused like an unknown one otherwise.
func (s *Server) totals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var from, to time.Time
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"from", &from}, {"to", &to}} {
		v := q.Get(b.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil || !t.Truncate(time.Hour).Equal(t) {
			s.writeError(w, r, badRequest(b.name, "an RFC 3339 time on a whole hour (UTC, or an offset of whole hours such as +08:00)"))
			return
		}
		*b.t = t
	}
	if !from.IsZero() && !to.IsZero() && to.Before(from) {
		s.writeError(w, r, badRequest("to", "before from"))
		return
	}
	p := viewer(r)
	only := q.Get("merchant")
	if only != "" && (!s.merchants.has(only) || !p.Sees(only)) {
		s.writeError(w, r, badRequest("merchant", "not a merchant this token sees"))
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	byMerchant, err := s.opts.Totals.Between(ctx, from, to)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := totalsView{Merchants: []merchantTotals{}}
	if !from.IsZero() {
		f := from.UTC()
		out.From = &f
	}
	if !to.IsZero() {
		t := to.UTC()
		out.To = &t
	}
	names := make([]string, 0, len(byMerchant))
	for m := range byMerchant {
		// A merchant no longer configured is still seen by an unscoped
		// token: its money is still somewhere.
		if p.Sees(m) && (only == "" || m == only) {
			names = append(names, m)
		}
	}
	slices.Sort(names)
	for _, m := range names {
		row := merchantTotals{Merchant: m, States: byMerchant[m]}
		for st, t := range row.States {
			sum := &row.InFlight
			switch st {
			case reservation.Succeeded:
				sum = &row.Refunded
			case reservation.Failed:
				sum = &row.Released
			}
			sum.Refunds += t.Refunds
			sum.Amount += t.Amount
		}
		for _, pair := range []struct{ all, one *eventstore.Total }{
			{&out.InFlight, &row.InFlight}, {&out.Refunded, &row.Refunded}, {&out.Released, &row.Released}} {
			pair.all.Refunds += pair.one.Refunds
			pair.all.Amount += pair.one.Amount
		}
		out.Merchants = append(out.Merchants, row)
	}
	writeJSON(w, http.StatusOK, out)
}
