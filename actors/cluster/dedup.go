package cluster

import "sync"

// dedup remembers the answers to the last commands by command id, so that
// a command delivered twice runs once and both deliveries get the first
// answer. It is node-local and bounded: it covers re-deliveries while the
// same node owns the reservation; the commands' own idempotency (keys,
// states, due times) covers the rest (docs/CLUSTER.md).
type dedup struct {
	mu    sync.Mutex
	max   int
	byID  map[string]*dedupEntry
	order []string // ring of completed ids, oldest first
	next  int
}

type dedupEntry struct {
	done  chan struct{}
	reply *reply
}

func newDedup(max int) *dedup {
	return &dedup{max: max, byID: map[string]*dedupEntry{}, order: make([]string, 0, max)}
}

// do runs f once per id and returns its reply to every caller with that id.
// An empty id always runs f.
func (d *dedup) do(id string, f func() *reply) *reply {
	if id == "" {
		return f()
	}
	d.mu.Lock()
	if e, ok := d.byID[id]; ok {
		d.mu.Unlock()
		<-e.done
		return e.reply
	}
	e := &dedupEntry{done: make(chan struct{})}
	d.byID[id] = e
	d.mu.Unlock()

	e.reply = f()
	close(e.done)

	d.mu.Lock()
	defer d.mu.Unlock()
	if e.reply.NotOwner {
		delete(d.byID, id) // nothing ran: a later delivery may run it
		return e.reply
	}
	if len(d.order) < d.max {
		d.order = append(d.order, id)
	} else {
		delete(d.byID, d.order[d.next])
		d.order[d.next] = id
		d.next = (d.next + 1) % d.max
	}
	return e.reply
}
