package cluster

import (
	"context"
	"time"

	"refundd/actors"
	"refundd/internal/reservation"
)

// Due times in cluster mode are fired by the node that owns the
// reservation: every node reads the shared due index and fires only the
// timers of reservations it owns, on its own engine, then deletes those.
// When a node dies its reservations, and so their timers, move with the
// placement; two nodes that briefly both believe they own one may both
// fire it, which is harmless: the journal fences the stale owner's
// appends, and an actor answers a timer as stale (so that it is deleted)
// only after checking its state against the journal. docs/CLUSTER.md
// explains why this rather than a leader.

// FireDue fires the timers due at or before now of the reservations this
// node owns and removes the ones handled; it returns how many.
func (n *Node) FireDue(ctx context.Context, now time.Time, limit int) (int, error) {
	timers, err := n.store.DueBefore(ctx, now, limit)
	if err != nil || len(timers) == 0 {
		return 0, err
	}
	done := make([]actors.Timer, 0, len(timers))
	for _, t := range timers {
		if !n.Owns(t.ReservationID) {
			continue
		}
		_, _, err := n.engine.Execute(ctx, t.ReservationID, actors.EnginePrincipal, reservation.FireTimer{RefundNo: t.RefundNo, DueAt: t.DueAt})
		if err != nil && reservation.CodeOf(err) == "" {
			n.log.Warn("timer not handled; will retry", "reservation", t.ReservationID, "refund_no", t.RefundNo, "err", err)
			continue
		}
		done = append(done, t)
	}
	if len(done) == 0 {
		return 0, nil
	}
	return len(done), n.store.DeleteDue(ctx, done)
}

// RunScheduler fires owned due timers every interval until ctx ends.
func (n *Node) RunScheduler(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	now := n.cfg.Engine.Now
	if now == nil {
		now = time.Now
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// One pass over the owned timers, reading past the others' and
		// past owned ones that keep failing (actors.Engine.FirePass).
		if _, err := n.engine.FirePass(ctx, now(), n.Owns); err != nil && ctx.Err() == nil {
			n.log.Error("scheduler pass failed", "err", err)
		}
	}
}
