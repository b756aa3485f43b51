package actors

import (
	"context"
	"time"

	"refundd/internal/reservation"
)

// FireDue hands every timer due at or before now to its reservation and
// removes the ones that were handled. A timer that could not be handed over
// stays in the index and fires again on the next pass. It returns how many
// timers were handled.
func (e *Engine) FireDue(ctx context.Context, now time.Time, limit int) (int, error) {
	timers, err := e.cfg.Store.DueBefore(ctx, now, limit)
	if err != nil || len(timers) == 0 {
		return 0, err
	}
	done := make([]Timer, 0, len(timers))
	for _, t := range timers {
		_, err := e.record(ctx, t.ReservationID, EnginePrincipal, reservation.FireTimer{RefundNo: t.RefundNo, DueAt: t.DueAt})
		if err != nil && reservation.CodeOf(err) == "" {
			e.log.Warn("timer not handled; will retry", "reservation", t.ReservationID, "refund_no", t.RefundNo, "err", err)
			continue
		}
		done = append(done, t)
	}
	if len(done) == 0 {
		return 0, nil
	}
	return len(done), e.cfg.Store.DeleteDue(ctx, done)
}

// RunScheduler drains due timers every interval until ctx ends.
func (e *Engine) RunScheduler(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			n, err := e.FireDue(ctx, e.cfg.Now(), 256)
			if err != nil {
				if ctx.Err() == nil {
					e.log.Error("scheduler pass failed", "err", err)
				}
				break
			}
			if n < 256 {
				break
			}
		}
	}
}
