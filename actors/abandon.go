package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// Executor runs a command on a reservation: an Engine, or a cluster node
// that forwards it to the reservation's owner.
type Executor interface {
	Execute(ctx context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error)
}

// QueryFunc asks the provider about a refund, as Provider.Query does.
type QueryFunc func(ctx context.Context, refundNo string) reservation.Outcome

// AbandonChecked abandons a refund the one way its amount may be released:
// with a provider query made just before, whose "not found" the core
// journals together with the release. The command is first decided without
// the query, so that a refund that cannot be abandoned anyway (not REJECTED,
// an attempt that may still land, a bad reason) is refused without asking
// WeChat Pay. When the provider has the refund, its answer is recorded as a
// query's and the abandon is refused with reservation.ErrProviderHasRefund.
func AbandonChecked(ctx context.Context, ex Executor, query QueryFunc, now func() time.Time, id, by string, c reservation.Abandon) (*reservation.State, []reservation.Event, error) {
	c.Check = nil
	st, events, err := ex.Execute(ctx, id, by, c)
	if !errors.Is(err, reservation.ErrReleaseUnconfirmed) {
		return st, events, err
	}
	o := query(ctx, c.RefundNo)
	c.Check = &reservation.ProviderCheck{Outcome: o, At: now().UTC()}
	st, events, err = ex.Execute(ctx, id, by, c)
	if errors.Is(err, reservation.ErrProviderHasRefund) {
		// WeChat Pay's answer is news like any query's: apply it.
		rec := reservation.RecordOutcome{RefundNo: c.RefundNo, Source: reservation.SourceQuery, Outcome: o}
		if _, _, rerr := ex.Execute(ctx, id, ProviderPrincipal, rec); rerr != nil {
			return st, events, errors.Join(err, fmt.Errorf("actors: record the provider's answer about %s: %w", c.RefundNo, rerr))
		}
	}
	return st, events, err
}

// Abandon abandons a REJECTED refund after asking the provider, bounded by
// the provider timeout; see AbandonChecked.
func (e *Engine) Abandon(ctx context.Context, id, by string, c reservation.Abandon) (*reservation.State, []reservation.Event, error) {
	query := func(ctx context.Context, no string) reservation.Outcome {
		ctx, cancel := context.WithTimeout(ctx, e.cfg.ProviderTimeout)
		defer cancel()
		return e.cfg.Provider.Query(ctx, no)
	}
	return AbandonChecked(ctx, e, query, e.cfg.Now, id, by, c)
}
