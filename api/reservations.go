package api

import (
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"refundd/internal/reservation"
)

// registerRequest is the body of POST /v1/reservations, sent by the trusted
// booking/payment system.
type registerRequest struct {
	ID            string     `json:"id"`
	UserID        string     `json:"user_id"`
	OutTradeNo    string     `json:"out_trade_no"`
	TransactionID string     `json:"transaction_id"`
	Amount        *int64     `json:"amount"`
	Currency      string     `json:"currency"`
	PaidAt        *time.Time `json:"paid_at"`
}

func (s *Server) registerReservation(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if err := decodeStrict(w, r, &req); err != nil {
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
	cmd := reservation.Register{
		ReservationID: req.ID, UserID: req.UserID, OutTradeNo: req.OutTradeNo, TransactionID: req.TransactionID,
		Amount: *req.Amount, Currency: req.Currency,
	}
	if req.PaidAt != nil {
		cmd.PaidAt = req.PaidAt.UTC()
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	st, events, err := s.engine.Execute(ctx, req.ID, s.opts.Principal, cmd)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if len(events) > 0 {
		status = http.StatusCreated
	}
	writeJSON(w, status, viewReservation(st))
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	st, err := s.engine.Get(ctx, mux.Vars(r)["id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewReservation(st))
}
