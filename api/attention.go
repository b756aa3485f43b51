package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/refundd/refundd/internal/reservation"
)

// listAttention serves GET /v1/refunds?attention=KIND (and the older
// ?state=KIND, legacyAttention), KIND one of UNKNOWN, REJECTED, ABNORMAL,
// stuck, conflict: the refunds an operator should look at, from an index
// kept with the journal (no scan), each with its current state;
// &merchant=NAME keeps one merchant's.
func (s *Server) listAttention(w http.ResponseWriter, r *http.Request, kind string) {
	q := r.URL.Query()
	if !slices.Contains(reservation.AttentionKinds, kind) {
		field := "state"
		if q.Has("attention") {
			field = "attention"
		}
		s.writeError(w, r, badRequest(field, "must be one of "+strings.Join(reservation.AttentionKinds, ", ")))
		return
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.writeError(w, r, badRequest("limit", "must be 1..1000"))
			return
		}
		limit = n
	}
	after := q.Get("after")
	if len(after) > 200 {
		s.writeError(w, r, badRequest("after", "too long"))
		return
	}
	engine, _, err := s.filteredEngine(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	refs, err := engine.Attention(ctx, kind, after, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Refunds []refundView `json:"refunds"`
		Next    string       `json:"next,omitempty"`
	}{Refunds: []refundView{}}
	for _, ref := range refs {
		st, err := engine.Get(ctx, ref.ReservationID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if rf := st.Refund(ref.RefundNo); rf != nil {
			out.Refunds = append(out.Refunds, viewRefund(st, rf, s.viewAt(st)))
		}
	}
	if len(refs) == limit {
		last := refs[len(refs)-1]
		out.Next = last.ReservationID + "/" + last.RefundNo
	}
	writeJSON(w, http.StatusOK, out)
}
