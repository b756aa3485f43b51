package api

import (
	"net/http"
	"time"

	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/reservation"
)

// registerRequest is the body of POST /v1/reservations, sent by the trusted
// booking/payment system.
type registerRequest struct {
	ID            string `json:"id"`
	UserID        string `json:"user_id"`
	OutTradeNo    string `json:"out_trade_no"`
	TransactionID string `json:"transaction_id"`
	Amount        *int64 `json:"amount"`
	Currency      string `json:"currency"`
	// PaidAt is parsed by the handler, not the decoder, so that a malformed
	// time is reported as the field "paid_at".
	PaidAt *string `json:"paid_at"`
	// Merchant names the merchant the reservation belongs to; it may be
	// left out while a single one is configured.
	Merchant string `json:"merchant"`
}

func (s *Server) registerReservation(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if err := s.decodeStrict(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Amount == nil {
		s.writeError(w, r, badRequest("amount", "is required (integer fen)"))
		return
	}
	if !reservation.ValidReservationID(req.ID) {
		s.writeError(w, r, badRequest("id", "must be 1..40 characters of [0-9A-Za-z_-]"))
		return
	}
	merchant, err := s.registrationMerchant(req.Merchant, viewer(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := reservation.Register{
		ReservationID: req.ID, UserID: req.UserID, OutTradeNo: req.OutTradeNo, TransactionID: req.TransactionID,
		Amount: *req.Amount, Currency: req.Currency, Merchant: merchant,
	}
	if req.PaidAt != nil {
		var paid time.Time
		// UnmarshalText is the strict RFC 3339 parse JSON uses. An instant
		// whose UTC year leaves 1..9999 cannot be journaled as JSON.
		if err := paid.UnmarshalText([]byte(*req.PaidAt)); err != nil || paid.UTC().Year() < 1 || paid.UTC().Year() > 9999 {
			s.writeError(w, r, badRequest("paid_at", "must be an RFC 3339 time such as 2026-11-30T08:00:00Z"))
			return
		}
		cmd.PaidAt = paid.UTC()
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	st, events, err := s.engineFor(r).Execute(ctx, req.ID, s.principal(r), cmd)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if len(events) > 0 {
		status = http.StatusCreated
	}
	s.writeReservation(w, status, st)
}

// registrationMerchant is the merchant a registration naming name belongs
// to: a configured one, or the only one when it names none. A merchant p
// does not see is answered as one that is not configured.
func (s *Server) registrationMerchant(name string, p auth.Principal) (string, error) {
	switch {
	case name == "" && s.soleMerchant != "":
		name = s.soleMerchant
	case name == "":
		return "", badRequest("merchant", "is required: several merchants are configured")
	}
	if !s.merchants.has(name) || !p.Sees(name) {
		return "", badRequest("merchant", "is not a configured merchant")
	}
	return name, nil
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	st, err := s.engineFor(r).Get(ctx, pathVars(r)["id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeReservation(w, http.StatusOK, st)
}
