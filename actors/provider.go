package actors

import (
	"context"

	"github.com/refundd/refundd/internal/reservation"
)

// Provider is the payment provider's IO. Calls may be slow and run outside
// the actor's mailbox; implementations must be safe for concurrent use.
// Encoding a submission is pure and goes to the core instead
// (Config.Encode, reservation.Env.Encode).
type Provider interface {
	// Submit sends a refund submission. Anything that is not a definite
	// answer (timeout, 5xx, unverifiable response) must be OutcomeUnknown,
	// never "not refunded".
	Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome
	// Query asks for a refund's outcome by refund number. OutcomeNotFound
	// means the provider has no such refund.
	Query(ctx context.Context, refundNo string) reservation.Outcome
}

// AbnormalProvider is a Provider that can pay an ABNORMAL refund out to
// another account (WeChat Pay's apply-abnormal-refund). Its answer is the
// refund object, as a query's; anything else (a refusal, no answer) is
// OutcomeRejected or OutcomeUnknown and changes nothing.
type AbnormalProvider interface {
	ApplyAbnormal(ctx context.Context, refundNo string, app reservation.AbnormalApplication) reservation.Outcome
}
