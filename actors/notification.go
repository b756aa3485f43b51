package actors

import (
	"context"

	"github.com/refundd/refundd/internal/reservation"
)

// Recorder runs commands on reservations and finds the reservation of a
// refund number: an Engine, or a cluster node that forwards the command to
// the reservation's owner.
type Recorder interface {
	Executor
	LookupRefund(ctx context.Context, refundNo string) (string, error)
}

// RecordNotification records a provider notification in the actor of the
// reservation that owns its refund, and returns the events it journaled
// (none for a duplicate or a hint held back). It is the one way a
// notification enters the engine: the API's endpoints and the memory
// provider's pushes alike. The core matches it against the records inside
// the actor, so nothing is compared between a read and a write.
//
// Errors: reservation.ErrNotFound when no reservation owns the number;
// the core's (reservation.ErrOutcomeMismatch for a notification that
// contradicts our records); the engine's (ErrUnavailable, ErrClosed, ctx).
func RecordNotification(ctx context.Context, x Recorder, by string, n reservation.Notification) ([]reservation.Event, error) {
	id, err := x.LookupRefund(ctx, n.RefundNo)
	if err != nil {
		return nil, err
	}
	_, events, err := x.Execute(ctx, id, by, n.Command())
	return events, err
}

// RecordNotification records a provider notification in its refund's
// actor; see the function RecordNotification.
func (e *Engine) RecordNotification(ctx context.Context, by string, n reservation.Notification) ([]reservation.Event, error) {
	return RecordNotification(ctx, e, by, n)
}
