package cluster

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
)

// Kill stops the node as a crash would: no draining, no leaving the
// membership (the others notice only by the membership's own means: an
// unanswered health check, an expired lease).
func (n *Node) Kill() {
	n.closed.Store(true)
	n.mu.Lock()
	n.cancel()
	m := n.cur.Swap(nil)
	if m != nil {
		m.retired.Store(true)
		if p, ok := m.provider.(*etcdProvider); ok {
			p.lease = 0 // nothing revoked: the lease expires by itself
		}
		m.stopOnce.Do(func() {
			_ = m.provider.Shutdown(false)
			m.cluster.Shutdown(false)
		})
	}
	n.mu.Unlock()
	n.engine.Close(n.ctx)
	n.bgMu.Lock()
	n.bgDone = true
	n.bgMu.Unlock()
	n.bg.Wait()
	_ = n.mem.close()
}

// RejoinFailures counts failed attempts to rejoin after self-fencing.
func (n *Node) RejoinFailures() int64 { return n.failed.Load() }

// Grains is the number of grains live on this node.
func (n *Node) Grains() int { return n.grains.len() }

// ActivationLoss swallows activation requests arriving at a node's
// partition-activator, from itself or from another node: the sender gets no
// answer and no dead letter, as when a flapping connection loses them.
type ActivationLoss struct {
	real    actor.Process
	mu      sync.Mutex
	pending map[string]int // reservation id -> requests still to lose
	lost    map[string]int
}

// LoseActivations puts an ActivationLoss in front of the current
// incarnation's partition-activator; it loses nothing until Lose arms it.
func (n *Node) LoseActivations() *ActivationLoss {
	system := n.cur.Load().system
	name := disthash.PartitionActivatorActorName
	real, ok := system.ProcessRegistry.GetLocal(name)
	if !ok {
		panic("cluster: no partition-activator")
	}
	l := &ActivationLoss{real: real, pending: map[string]int{}, lost: map[string]int{}}
	// Set, not Remove+Add: Remove would mark the real actor dead.
	system.ProcessRegistry.LocalPIDs.GetBucket(name).Set(name, l)
	return l
}

// Lose arms the loss of the next n activation requests for reservation id.
func (l *ActivationLoss) Lose(id string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[id] += n
}

// Lost is how many activation requests for id were lost.
func (l *ActivationLoss) Lost(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost[id]
}

func (l *ActivationLoss) SendUserMessage(pid *actor.PID, message any) {
	if req, ok := actor.UnwrapEnvelopeMessage(message).(*pcluster.ActivationRequest); ok && l.take(req.GetClusterIdentity().GetIdentity()) {
		return
	}
	l.real.SendUserMessage(pid, message)
}

func (l *ActivationLoss) SendSystemMessage(pid *actor.PID, message any) {
	l.real.SendSystemMessage(pid, message)
}

func (l *ActivationLoss) Stop(pid *actor.PID) { l.real.Stop(pid) }

func (l *ActivationLoss) take(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending[id] == 0 {
		return false
	}
	l.pending[id]--
	l.lost[id]++
	return true
}
