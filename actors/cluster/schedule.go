package cluster

import (
	"context"
	"time"
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
// node owns, in one pass of the engine's scheduler (actors.Engine.FirePass:
// it reads past other nodes' timers and past owned ones that keep
// failing), and removes the ones handled; it returns how many.
func (n *Node) FireDue(ctx context.Context, now time.Time) (int, error) {
	return n.engine.FirePass(ctx, now, n.Owns)
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
		if _, err := n.FireDue(ctx, now()); err != nil && ctx.Err() == nil {
			n.log.Error("scheduler pass failed", "err", err)
		}
	}
}
