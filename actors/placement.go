package actors

import "context"

// Hooks for a placement layer (cluster mode, package actors/cluster): when a
// reservation's placement moves to another node, or this node loses its
// membership, the actors it still runs must stop so that nothing is decided
// on a state another node now writes. The journal fences such an actor's
// appends anyway; stopping it early avoids deciding on a stale state.

// Passivate stops the reservation's live actor, if there is one, after the
// messages already in its mailbox; the next message activates a fresh one
// that reloads the journal. The returned channel is closed once that actor
// has stopped, at once when none was live.
func (e *Engine) Passivate(id string) <-chan struct{} {
	sh := e.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	en := sh.live[id]
	if en == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	if !en.passivating {
		en.passivating = true
		e.system.Root.Send(en.pid, passivateNow{})
	}
	return en.stopped
}

// LiveIDs returns the reservations that have a live actor now, in no
// particular order.
func (e *Engine) LiveIDs() []string {
	var ids []string
	for i := range e.shards {
		sh := &e.shards[i]
		sh.mu.Lock()
		for id, en := range sh.live {
			if !en.passivating {
				ids = append(ids, id)
			}
		}
		sh.mu.Unlock()
	}
	return ids
}

// PassivateAll stops every live actor, as Passivate does, and waits until
// they stopped or ctx ends. Messages sent meanwhile activate new actors:
// the caller stops routing to this engine first.
func (e *Engine) PassivateAll(ctx context.Context) error {
	var waits []<-chan struct{}
	for _, id := range e.LiveIDs() {
		waits = append(waits, e.Passivate(id))
	}
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
