package actors

import (
	"context"
	"time"

	"github.com/refundd/refundd/internal/reservation"
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
	done, _ := e.fire(ctx, timers, nil, nil)
	if len(done) == 0 {
		return 0, nil
	}
	return len(done), e.cfg.Store.DeleteDue(ctx, done)
}

// fire hands each timer to its reservation, except those in failed and
// those of reservations owns refuses (owns nil: none), and returns the ones
// handled and how many were tried. A timer that fails is added to failed
// (when not nil) and stays in the index.
func (e *Engine) fire(ctx context.Context, timers []reservation.Timer, failed map[timerKey]bool, owns func(string) bool) (done []reservation.Timer, tried int) {
	for _, t := range timers {
		k := timerKey{t.ReservationID, t.RefundNo, t.DueAt.UnixNano()}
		if failed[k] || owns != nil && !owns(t.ReservationID) {
			continue
		}
		tried++
		if _, err := e.record(ctx, t.ReservationID, EnginePrincipal, reservation.FireTimer{RefundNo: t.RefundNo, DueAt: t.DueAt}); err != nil && reservation.CodeOf(err) == "" {
			e.log.Warn("timer not handled; will retry", "reservation", t.ReservationID, "refund_no", t.RefundNo, "err", err)
			if failed != nil {
				failed[k] = true
			}
			continue
		}
		done = append(done, t)
	}
	return done, tried
}

// Scheduler passes read the due index in batches of schedulerBatch timers,
// and up to schedulerMaxScan at once past timers that keep failing.
const (
	schedulerBatch   = 256
	schedulerMaxScan = 1 << 16
)

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
		if _, err := e.FirePass(ctx, e.cfg.Now(), nil); err != nil && ctx.Err() == nil {
			e.log.Error("scheduler pass failed", "err", err)
		}
	}
}

// FirePass fires every timer due at or before now of the reservations
// owns accepts (nil: all; a cluster node passes the ones it owns), in one
// pass that reads past timers that keep failing or are not its own
// (firePass). It returns how many timers were handled.
func (e *Engine) FirePass(ctx context.Context, now time.Time, owns func(reservationID string) bool) (int, error) {
	return e.firePass(ctx, now, schedulerBatch, schedulerMaxScan, owns)
}

// timerKey identifies a timer within one pass.
type timerKey struct {
	id, no string
	at     int64
}

// firePass fires every timer due at or before now (of the reservations
// owns accepts), reading the index from its start (oldest first) batch
// timers at a time, and returns how many were handled. A timer that fails
// stays in the index for the next pass and is not tried again in this one.
// When a read holds only timers that failed in this pass or are not this
// scheduler's, the next asks for twice as many, up to maxScan: the index
// has no cursor, and a block of timers that keep failing (say,
// reservations that cannot be loaded) would otherwise hide every timer
// behind it, and the refunds waiting on them would never be resumed.
func (e *Engine) firePass(ctx context.Context, now time.Time, batch, maxScan int, owns func(string) bool) (int, error) {
	failed := map[timerKey]bool{}
	limit, handled := batch, 0
	for {
		timers, err := e.cfg.Store.DueBefore(ctx, now, limit)
		if err != nil {
			return handled, err
		}
		done, tried := e.fire(ctx, timers, failed, owns)
		if len(done) > 0 {
			if err := e.cfg.Store.DeleteDue(ctx, done); err != nil {
				return handled, err
			}
			handled += len(done)
		}
		switch {
		case len(timers) < limit:
			return handled, nil // everything due was read
		case tried == 0 && limit >= maxScan:
			e.log.Error("scheduler: the oldest due timers keep failing; later ones wait for them to be fixed",
				"failing", len(failed))
			return handled, nil
		case tried == 0:
			limit = min(2*limit, maxScan)
		}
	}
}
