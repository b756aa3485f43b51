package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// grain is a reservation's address in the cluster: protoactor's identity
// lookup activates it on the owning node, and it hands each request to the
// node's engine, whose actor for the reservation serializes them. It keeps
// no state of the reservation, so a grain that moves or stops loses
// nothing. Requests run outside its mailbox, so that a long watch does not
// hold up the next command.
type grain struct {
	n        *Node
	id       string
	last     atomic.Int64 // Unix nanoseconds of the last request
	inflight atomic.Int32
}

// grainIdle asks a grain to stop if it has been idle for the engine's
// IdleTimeout. The node's sweeper sends it (protoactor's ReceiveTimeout is
// not used, as in the engine: its timer races with the mailbox).
type grainIdle struct{}

func (g *grain) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.last.Store(time.Now().UnixNano())
		g.n.grains.add(ctx.ActorSystem(), ctx.Self(), g)
	case *pcluster.ClusterInit:
		g.id = m.Identity.Identity
	case *actor.Stopped:
		g.n.grains.remove(ctx.Self())
	case grainIdle:
		if g.inflight.Load() == 0 && time.Since(time.Unix(0, g.last.Load())) >= g.n.cfg.Engine.IdleTimeout {
			ctx.Stop(ctx.Self())
		}
	case *wrapperspb.BytesValue:
		req := &request{}
		if err := unmarshal(m, req, &req.V); err != nil {
			g.handle(ctx, nil, err)
			return
		}
		g.handle(ctx, req, nil)
	case *request:
		g.handle(ctx, m, nil) // from this process: no encoding
	}
}

func (g *grain) handle(ctx actor.Context, req *request, decodeErr error) {
	sender := ctx.Sender()
	if sender == nil {
		return // only requests are served
	}
	root := ctx.ActorSystem().Root
	local := sender.Address == ctx.Self().Address
	respond := func(r *reply) {
		r.V = wireVersion
		if local {
			root.Send(sender, r)
			return
		}
		w := *r // a de-duplicated answer is shared: encode a copy
		if err := w.wire(); err != nil {
			w = reply{V: wireVersion, Err: encodeError(err)}
		}
		if msg, err := marshal(&w); err == nil {
			root.Send(sender, msg)
		}
	}
	if decodeErr != nil {
		respond(&reply{err: decodeErr})
		return
	}
	if req.ID != g.id {
		respond(&reply{NotOwner: true})
		return
	}
	g.last.Store(time.Now().UnixNano())
	g.inflight.Add(1)
	ok := g.n.spawn(func() {
		defer func() {
			g.last.Store(time.Now().UnixNano())
			g.inflight.Add(-1)
		}()
		respond(g.n.serve(req))
	})
	if !ok {
		g.inflight.Add(-1)
		respond(&reply{NotOwner: true}) // closing
	}
}

// grainRegistry lists the grains live on this node, for the sweeper.
type grainRegistry struct {
	mu     sync.Mutex
	grains map[*actor.PID]grainEntry
}

type grainEntry struct {
	system *actor.ActorSystem
	g      *grain
}

func newGrainRegistry() *grainRegistry {
	return &grainRegistry{grains: map[*actor.PID]grainEntry{}}
}

func (r *grainRegistry) add(system *actor.ActorSystem, pid *actor.PID, g *grain) {
	r.mu.Lock()
	r.grains[pid] = grainEntry{system: system, g: g}
	r.mu.Unlock()
}

func (r *grainRegistry) remove(pid *actor.PID) {
	r.mu.Lock()
	delete(r.grains, pid)
	r.mu.Unlock()
}

func (r *grainRegistry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.grains)
}

// sweep asks idle grains to stop, twice per IdleTimeout.
func (n *Node) sweep() {
	idle := n.cfg.Engine.IdleTimeout
	t := time.NewTicker(idle / 2)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-idle).UnixNano()
		n.grains.mu.Lock()
		for pid, e := range n.grains.grains {
			if e.g.inflight.Load() == 0 && e.g.last.Load() <= cutoff && !e.system.IsStopped() {
				e.system.Root.Send(pid, grainIdle{})
			}
		}
		n.grains.mu.Unlock()
	}
}
