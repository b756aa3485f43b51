package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/refundd/refundd/internal/reservation"
)

// Finder looks ids up in the indexes kept with the journal; the journal's
// reader (eventstore.Reader) implements it for both journals.
type Finder interface {
	// Find returns up to limit reservations and refunds with an id equal
	// to value: a refund number, an order number of one of merchants, a
	// user id, a transaction_id or a WeChat refund_id. Errors are internal.
	Find(ctx context.Context, merchants []string, value string, limit int) ([]reservation.Found, error)
}

const (
	// maxSearchLen bounds q: longer than any id refundd keeps.
	maxSearchLen = 128
)

// searchMatch is one reservation a search found.
type searchMatch struct {
	// By is the kind of id that matched: refund_no, out_trade_no,
	// user_id, transaction_id or refund_id (WeChat's).
	By string `json:"by"`
	// RefundNo is the refund the id names (refund_no, refund_id).
	RefundNo    string          `json:"refund_no,omitempty"`
	Reservation reservationView `json:"reservation"`
}

// search serves GET /v1/search?q=ID: the reservations (and refunds) any
// id names, from the indexes kept with the journal, no scan of the log.
// A scoped token reads only its merchants' index entries (all but the
// refund number's are kept by merchant), and a reservation it may not see
// is left out through its scoped engine, so another merchant's id answers
// exactly as an unknown one.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	value := q.Get("q")
	switch {
	case value == "":
		s.writeError(w, r, badRequest("q", "is required: a refund number, out_trade_no, user_id, transaction_id or WeChat refund_id"))
		return
	case len(value) > maxSearchLen:
		s.writeError(w, r, badRequest("q", "must be at most "+strconv.Itoa(maxSearchLen)+" bytes"))
		return
	}
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			s.writeError(w, r, badRequest("limit", "must be 1..100"))
			return
		}
		limit = n
	}
	p := viewer(r)
	var merchants []string
	for _, m := range s.merchants.sorted() {
		if p.Sees(m) {
			merchants = append(merchants, m)
		}
	}
	engine := s.engineFor(r)
	ctx, cancel := s.ctx(r)
	defer cancel()
	// Only the refund number is not kept by merchant: its one match may be
	// another merchant's. One more than that tells whether there are more.
	found, err := s.opts.Search.Find(ctx, merchants, value, limit+2)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Matches   []searchMatch `json:"matches"`
		Truncated bool          `json:"truncated,omitempty"`
	}{Matches: []searchMatch{}}
	for _, f := range found {
		st, err := engine.Get(ctx, f.ReservationID)
		switch {
		case errors.Is(err, reservation.ErrNotFound):
			continue // another merchant's, for a scoped token
		case err != nil:
			s.writeError(w, r, err)
			return
		}
		if len(out.Matches) == limit {
			out.Truncated = true
			break
		}
		out.Matches = append(out.Matches, searchMatch{By: f.By, RefundNo: f.RefundNo, Reservation: viewReservation(st, s.viewAt(st))})
	}
	writeJSON(w, http.StatusOK, out)
}
