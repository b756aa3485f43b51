package actors

import (
	"context"

	"github.com/refundd/refundd/internal/reservation"
)

// RefundRequest is what a provider needs to build a refund submission.
type RefundRequest struct {
	RefundNo      string
	OutTradeNo    string
	TransactionID string
	Amount        int64 // fen
	Total         int64 // the order's paid total, fen
	Currency      string
	Reason        string
}

// Provider is the payment provider seam. Calls may be slow and run outside
// the actor's mailbox; implementations must be safe for concurrent use.
type Provider interface {
	// RequestBody returns the exact bytes of a refund submission. It is
	// called once per refund; the bytes are journaled and resent unchanged on
	// every retry.
	RequestBody(r RefundRequest) ([]byte, error)
	// Submit sends a refund submission. Anything that is not a definite
	// answer (timeout, 5xx, unverifiable response) must be OutcomeUnknown,
	// never "not refunded".
	Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome
	// Query asks for a refund's outcome by refund number. OutcomeNotFound
	// means the provider has no such refund.
	Query(ctx context.Context, refundNo string) reservation.Outcome
}
