package cluster

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
