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

// scanLimit is how many due timers one pass reads: the owner filter keeps
// about 1/N of them, so a pass reads more than the engine's 256.
const scanLimit = 1024

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
		for {
			handled, err := n.FireDue(ctx, now(), scanLimit)
			if err != nil {
				if ctx.Err() == nil {
					n.log.Error("scheduler pass failed", "err", err)
				}
				break
			}
			if handled < scanLimit/4 {
				break
			}
		}
	}
}
