package cluster

import (
	"context"
	"fmt"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/reservation"
)

// guard is the engine's Store on a node: it refuses to load (activate) a
// reservation that this node does not own in its view. Without it, a
// provider answer that comes back after the reservation moved would
// activate it here and take the journal's epoch from the owner. The answer
// is not lost: the refund's journaled due time makes the owner query again.
type guard struct {
	actors.Store
	n *Node
}

func (g guard) Load(ctx context.Context, id string) ([]reservation.Event, uint64, error) {
	if !g.n.Owns(id) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotOwner, id)
	}
	return g.Store.Load(ctx, id)
}
