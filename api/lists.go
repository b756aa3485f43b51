package api

import (
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// Lister reads pages of the refund and reservation lists from the list
// index kept with the journal; the journal's reader (eventstore.Reader)
// implements it for both journals. Errors are internal, but for
// reservation.ErrListCursor.
type Lister interface {
	List(ctx context.Context, f reservation.ListFilter, o reservation.ListOptions) (reservation.ListPage, error)
}

// StatesReader is implemented by a Lister that can read the reservations
// of a page in one batch from the journal (eventstore.Reader.States):
// without it, each row's reservation is read through the engine, one actor
// woken (or, in a cluster, one call to its owner) per row.
type StatesReader interface {
	States(ctx context.Context, ids []string) (map[string]*reservation.State, error)
}

const (
	listDefaultLimit = 50
	listMaxLimit     = 200
	// listMaxValues bounds the comma-separated values of one parameter.
	listMaxValues = 16
)

// listParams are the query parameters the lists take, by list; a
// parameter not named here is refused, so that a misspelt filter is not
// silently ignored.
var listParams = map[string][]string{
	reservation.ListRefunds: {"refund_no", "out_trade_no", "transaction_id", "refund_id", "user_id", "merchant", "state",
		"requested_from", "requested_to", "updated_from", "updated_to", "amount_min", "amount_max", "reason_code",
		"order", "limit", "cursor"},
	reservation.ListReservations: {"out_trade_no", "transaction_id", "user_id", "merchant", "status", "refund_state",
		"registered_from", "registered_to", "updated_from", "updated_to", "amount_min", "amount_max",
		"order", "limit", "cursor"},
}

// legacyAttention reports whether a GET /v1/refunds is the attention list
// callers had before the refund list (listAttention): attention=KIND, or
// a lone state naming an attention kind with nothing but the attention
// list's own parameters (limit, after, merchant). It returns the kind.
func legacyAttention(q url.Values) (string, bool) {
	if q.Has("attention") {
		return q.Get("attention"), true
	}
	state := q.Get("state")
	if !slices.Contains(reservation.AttentionKinds, state) || len(q["state"]) != 1 {
		return "", false
	}
	for k := range q {
		if k != "state" && k != "limit" && k != "after" && k != "merchant" {
			return "", false
		}
	}
	return state, true
}

// listedRefund is a refund in GET /v1/refunds: its view and its
// reservation's order.
type listedRefund struct {
	refundView
	OutTradeNo string `json:"out_trade_no"`
}

// listedReservation is a reservation in GET /v1/reservations: its view,
// refunds included.
type listedReservation = reservationView

// listRefunds serves GET /v1/refunds: every refund the token sees, newest
// request first, filtered by ids, merchant, states, time ranges, amount
// and reason code, from the list index (eventstore.Reader.List). The
// attention list it served before answers as it did (legacyAttention).
func (s *Server) listRefunds(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if kind, ok := legacyAttention(q); ok || s.opts.List == nil {
		if !ok {
			kind = q.Get("state")
		}
		s.listAttention(w, r, kind)
		return
	}
	f, o, err := s.parseList(r, reservation.ListRefunds)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Refunds    []listedRefund `json:"refunds"`
		NextCursor string         `json:"next_cursor,omitempty"`
	}{Refunds: []listedRefund{}}
	out.NextCursor, err = s.readList(r, f, o, func(st *reservation.State, row reservation.ListRow) {
		if rf := st.Refund(row.RefundNo); rf != nil {
			out.Refunds = append(out.Refunds, listedRefund{viewRefund(st, rf, s.viewAt(st)), st.OutTradeNo})
		}
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// listReservations serves GET /v1/reservations: every reservation the
// token sees, newest registration first, filtered like GET /v1/refunds.
func (s *Server) listReservations(w http.ResponseWriter, r *http.Request) {
	f, o, err := s.parseList(r, reservation.ListReservations)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Reservations []listedReservation `json:"reservations"`
		NextCursor   string              `json:"next_cursor,omitempty"`
	}{Reservations: []listedReservation{}}
	out.NextCursor, err = s.readList(r, f, o, func(st *reservation.State, _ reservation.ListRow) {
		out.Reservations = append(out.Reservations, viewReservation(st, s.viewAt(st)))
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// readList reads one page and calls add with each row's reservation, and
// returns the page's next cursor. The reservations are read in one batch
// from the journal when the Lister can (StatesReader: a page of cold
// reservations was one actor started per row, 50 in turn), else through
// the engine; either way only those of merchants the token sees (so a row
// of another merchant could not be shown even if the index had one).
func (s *Server) readList(r *http.Request, f reservation.ListFilter, o reservation.ListOptions, add func(*reservation.State, reservation.ListRow)) (string, error) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	page, err := s.opts.List.List(ctx, f, o)
	if err != nil {
		return "", err
	}
	if sr, ok := s.opts.List.(StatesReader); ok {
		ids := make([]string, len(page.Rows))
		for i, row := range page.Rows {
			ids[i] = row.ReservationID
		}
		states, err := sr.States(ctx, ids)
		if err != nil {
			return "", err
		}
		p := viewer(r)
		for _, row := range page.Rows {
			if st := states[row.ReservationID]; st != nil && st.Registered() && p.Sees(st.Merchant) {
				add(st, row)
			}
		}
	} else {
		engine := s.engineFor(r)
		for _, row := range page.Rows {
			st, err := engine.Get(ctx, row.ReservationID)
			switch {
			case errors.Is(err, reservation.ErrNotFound):
				continue
			case err != nil:
				return "", err
			}
			add(st, row)
		}
	}
	if page.Next == "" {
		return "", nil
	}
	return encodeCursor(f.Kind, page.Next), nil
}

// A cursor is the list's kind and a position in it (ListPage.Next),
// base64url: opaque to callers, who pass it back as it is.
func encodeCursor(kind, pos string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + pos))
}

func decodeCursor(kind, c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", reservation.ErrListCursor
	}
	pos, ok := strings.CutPrefix(string(b), kind+":")
	if !ok || pos == "" {
		return "", reservation.ErrListCursor
	}
	return pos, nil
}

// parseList reads a list's query parameters; an error names the field.
func (s *Server) parseList(r *http.Request, kind string) (reservation.ListFilter, reservation.ListOptions, error) {
	f := reservation.ListFilter{Kind: kind}
	o := reservation.ListOptions{Limit: listDefaultLimit}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		// URL.Query drops what it cannot read: a filter would be lost.
		return f, o, badRequest("query", "is not a URL query string")
	}
	known := listParams[kind]
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(known, k) {
			return f, o, badRequest(k, "is not a filter of this list; it takes "+strings.Join(known, ", "))
		}
		if len(q[k]) > 1 {
			return f, o, badRequest(k, "is given more than once; give several values comma separated")
		}
		if len(q.Get(k)) > maxSearchLen*listMaxValues {
			return f, o, badRequest(k, "is too long")
		}
	}
	// Exact ids.
	for _, id := range []struct {
		name string
		dst  *string
	}{{"refund_no", &f.RefundNo}, {"refund_id", &f.ProviderRefundID}, {"out_trade_no", &f.OutTradeNo},
		{"transaction_id", &f.TransactionID}, {"user_id", &f.UserID}} {
		v := q.Get(id.name)
		if len(v) > maxSearchLen {
			return f, o, badRequest(id.name, "must be at most "+strconv.Itoa(maxSearchLen)+" bytes")
		}
		*id.dst = v
	}
	// Merchants: those the token sees, or the named ones, each of which
	// it must see (another is refused exactly like one not configured).
	p := viewer(r)
	if v := q.Get("merchant"); v != "" {
		names, err := values("merchant", v)
		if err != nil {
			return f, o, err
		}
		for _, m := range names {
			if !s.merchants.has(m) || !p.Sees(m) {
				return f, o, badRequest("merchant", "not a merchant this token sees")
			}
			if !slices.Contains(f.Merchants, m) {
				f.Merchants = append(f.Merchants, m)
			}
		}
	} else {
		for _, m := range s.merchants.sorted() {
			if p.Sees(m) {
				f.Merchants = append(f.Merchants, m)
			}
		}
	}
	// States.
	stateParam, allowed := "state", make([]string, len(reservation.ListStates))
	for i, st := range reservation.ListStates {
		allowed[i] = string(st)
	}
	if kind == reservation.ListReservations {
		stateParam, allowed = "status", []string{string(reservation.StatusAccepted), string(reservation.StatusCanceled)}
		if v := q.Get("refund_state"); v != "" {
			names, err := values("refund_state", v)
			if err != nil {
				return f, o, err
			}
			for _, n := range names {
				bit := reservation.StateBit(reservation.RefundState(n))
				if bit == 0 {
					return f, o, badRequest("refund_state", "must be one or more of "+strings.Join(stateNames(), ", "))
				}
				f.RefundStates |= bit
			}
		}
	}
	if v := q.Get(stateParam); v != "" {
		names, err := values(stateParam, v)
		if err != nil {
			return f, o, err
		}
		for _, n := range names {
			if !slices.Contains(allowed, n) {
				return f, o, badRequest(stateParam, "must be one or more of "+strings.Join(allowed, ", ")+", comma separated")
			}
			if !slices.Contains(f.States, n) {
				f.States = append(f.States, n)
			}
		}
	}
	// Time ranges: RFC 3339, from inclusive, to exclusive.
	atName := "requested"
	if kind == reservation.ListReservations {
		atName = "registered"
	}
	for _, tr := range []struct {
		name string
		dst  *time.Time
	}{{atName + "_from", &f.AtFrom}, {atName + "_to", &f.AtTo}, {"updated_from", &f.UpdatedFrom}, {"updated_to", &f.UpdatedTo}} {
		v := q.Get(tr.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || t.UnixNano() <= 0 || t.Year() > 2200 {
			return f, o, badRequest(tr.name, "must be an RFC 3339 time, such as 2026-12-05T08:00:00Z or 2026-12-05T16:00:00+08:00")
		}
		*tr.dst = t
	}
	if !f.AtFrom.IsZero() && !f.AtTo.IsZero() && !f.AtFrom.Before(f.AtTo) {
		return f, o, badRequest(atName+"_to", "must be after "+atName+"_from")
	}
	if !f.UpdatedFrom.IsZero() && !f.UpdatedTo.IsZero() && !f.UpdatedFrom.Before(f.UpdatedTo) {
		return f, o, badRequest("updated_to", "must be after updated_from")
	}
	// Amounts, fen, inclusive.
	for _, a := range []struct {
		name string
		dst  *int64
	}{{"amount_min", &f.AmountMin}, {"amount_max", &f.AmountMax}} {
		v := q.Get(a.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n == math.MaxInt64 {
			return f, o, badRequest(a.name, "must be a whole number of fen, at least 1")
		}
		*a.dst = n
	}
	if f.AmountMax != 0 && f.AmountMin > f.AmountMax {
		return f, o, badRequest("amount_max", "must not be less than amount_min")
	}
	if v := q.Get("reason_code"); v != "" {
		if !reservation.ValidReasonCode(v) {
			return f, o, badRequest("reason_code", "must be one of "+strings.Join(reservation.ReasonCodes(), ", "))
		}
		f.ReasonCode = v
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		o.Oldest = true
	default:
		return f, o, badRequest("order", "must be desc (newest first, the default) or asc")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > listMaxLimit {
			return f, o, badRequest("limit", "must be 1.."+strconv.Itoa(listMaxLimit))
		}
		o.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		pos, err := decodeCursor(kind, v)
		if err != nil {
			return f, o, err
		}
		o.After = pos
	}
	return f, o, nil
}

// values splits a comma-separated parameter.
func values(name, v string) ([]string, error) {
	out := strings.Split(v, ",")
	if len(out) > listMaxValues {
		return nil, badRequest(name, "takes at most "+strconv.Itoa(listMaxValues)+" values")
	}
	for _, x := range out {
		if x == "" {
			return nil, badRequest(name, "has an empty value")
		}
	}
	return out, nil
}

func stateNames() []string {
	out := make([]string, len(reservation.ListStates))
	for i, st := range reservation.ListStates {
		out[i] = string(st)
	}
	return out
}
