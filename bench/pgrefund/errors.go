package pgrefund

import "errors"

// Errors carry the same codes as refundd's API (CodeOf).
var (
	// ErrNotFound is returned when a reservation or refund does not exist
	// (or belongs to another user).
	ErrNotFound = errors.New("pgrefund: not found")
	// ErrConflict is returned when a registration repeats an id with
	// different fields.
	ErrConflict = errors.New("pgrefund: conflict")
	// ErrOutTradeNoTaken is returned when a registration names an order
	// another reservation holds.
	ErrOutTradeNoTaken = errors.New("pgrefund: out_trade_no taken")
	// ErrInsufficient is returned when a refund asks for more than is left.
	ErrInsufficient = errors.New("pgrefund: insufficient refundable amount")
	// ErrCanceled is returned when the reservation is fully refunded.
	ErrCanceled = errors.New("pgrefund: reservation canceled")
	// ErrRefundLimit is returned when the reservation has 50 refunds.
	ErrRefundLimit = errors.New("pgrefund: refund limit reached")
	// ErrIdempotencyKeyReused is returned when a key is reused with a
	// different request.
	ErrIdempotencyKeyReused = errors.New("pgrefund: idempotency key reused")
	// ErrInvalid is returned for a malformed request.
	ErrInvalid = errors.New("pgrefund: invalid request")
)

// CodeOf returns refundd's error code for err and its HTTP status.
func CodeOf(err error) (code string, status int) {
	switch {
	case errors.Is(err, ErrNotFound):
		return "not_found", 404
	case errors.Is(err, ErrConflict):
		return "conflict", 409
	case errors.Is(err, ErrOutTradeNoTaken):
		return "out_trade_no_taken", 409
	case errors.Is(err, ErrInsufficient):
		return "insufficient_refundable", 409
	case errors.Is(err, ErrCanceled):
		return "reservation_canceled", 409
	case errors.Is(err, ErrRefundLimit):
		return "refund_limit_reached", 409
	case errors.Is(err, ErrIdempotencyKeyReused):
		return "idempotency_key_reused", 422
	case errors.Is(err, ErrInvalid):
		return "invalid_argument", 400
	}
	return "internal", 500
}
