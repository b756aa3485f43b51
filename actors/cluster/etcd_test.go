//go:build !race

package cluster_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/internal/devetcd"
)

// proxy forwards TCP to target until cut: then every connection is closed
// and new ones are dropped at once, as if the network to target were down.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}

func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		p.conns = map[net.Conn]bool{}
	}
}

// startEtcd starts an embedded etcd that does not fsync (devetcd.Options.NoFsync):
// these tests are about the nodes' leases, not about etcd on a busy disk.
func startEtcd(t *testing.T) *devetcd.Server {
	t.Helper()
	s, err := devetcd.Start(devetcd.Options{Dir: t.TempDir(), NoFsync: true, Ports: &ports})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Three nodes on an embedded etcd: a killed node's reservations are served
// by the others once its lease expires; a node cut off from etcd fences
// itself (stops its actors, leaves) before the others take over, and
// rejoins under a new member id when etcd is back.
func TestNode_EtcdFailoverAndSelfFencing(t *testing.T) {
	etcd := startEtcd(t)
	px := newProxy(t, etcd.Endpoint())
	w := newWorld(t)
	ttl := 2 * time.Second
	direct := cluster.Etcd{Endpoints: []string{etcd.Endpoint()}, TTL: ttl, DialTimeout: time.Second}
	viaProxy := cluster.Etcd{Endpoints: []string{px.addr()}, TTL: ttl, DialTimeout: time.Second}
	a := w.start("a", direct)
	b := w.start("b", direct)
	c := w.start("c", viaProxy)
	nodes := []*cluster.Node{a, b, c}
	waitFor(t, 10*time.Second, "three members everywhere", func() bool {
		return a.Members() == 3 && b.Members() == 3 && c.Members() == 3
	})
	res := ids("e", 30)
	for i, id := range res {
		register(t, nodes[i%3], id, 10000)
		if _, err := refund(nodes[(i+1)%3], id, "k1", 2500); err != nil {
			t.Fatalf("refund %s: %v", id, err)
		}
	}
	var ofC []string
	for _, id := range res {
		if c.Owns(id) {
			ofC = append(ofC, id)
		}
	}
	if len(ofC) == 0 || c.Engine().Active() == 0 {
		t.Fatalf("c owns %d reservations, %d live; want some", len(ofC), c.Engine().Active())
	}
	oldID := c.MemberID()

	// Cut c off from etcd: it must fence itself.
	cutAt := time.Now()
	px.setCut(true)
	waitFor(t, 2*ttl, "c to fence itself", func() bool { return c.Fences() == 1 })
	fencedIn := time.Since(cutAt)
	if n := c.Engine().Active(); n != 0 {
		t.Fatalf("c fenced with %d live actors; want none", n)
	}
	if c.Owns(ofC[0]) {
		t.Fatal("c still claims ownership while fenced")
	}
	waitFor(t, 3*ttl, "a and b to drop c", func() bool { return a.Members() == 2 && b.Members() == 2 })
	droppedIn := time.Since(cutAt)
	t.Logf("cut off at 0: c fenced itself after %s, the others dropped it after %s", fencedIn.Round(time.Millisecond), droppedIn.Round(time.Millisecond))
	if fencedIn >= droppedIn {
		t.Errorf("c fenced itself after the others dropped it (%s >= %s)", fencedIn, droppedIn)
	}
	for _, id := range ofC {
		st, err := refund(a, id, "k2", 1000)
		if err != nil {
			t.Fatalf("refund %s after c was cut off: %v", id, err)
		}
		if len(st.Refunds) != 2 {
			t.Fatalf("%s: %d refunds, want 2", id, len(st.Refunds))
		}
	}

	// While etcd stays unreachable, c keeps trying to rejoin, and fails.
	waitFor(t, 4*ttl, "a failed rejoin attempt of c", func() bool { return c.RejoinFailures() > 0 })
	if c.MemberID() != "" || c.Owns(ofC[0]) {
		t.Fatal("c joined while cut off from etcd")
	}

	// Heal: c rejoins as a new member and serves again.
	px.setCut(false)
	waitFor(t, 20*time.Second, "c to rejoin", func() bool {
		return c.MemberID() != "" && a.Members() == 3 && b.Members() == 3 && c.Members() == 3
	})
	if c.MemberID() == oldID {
		t.Fatalf("c rejoined under its old member id %s", oldID)
	}
	for _, id := range res {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := c.Get(ctx, id)
		cancel()
		if err != nil {
			t.Fatalf("get %s via c after it rejoined: %v", id, err)
		}
		if want := 1 + btoi(contains(ofC, id)); len(st.Refunds) != want {
			t.Fatalf("%s: %d refunds, want %d", id, len(st.Refunds), want)
		}
	}

	// Kill b: its reservations answer from a and c once its lease expires.
	b.Kill()
	waitFor(t, 4*ttl, "a and c to drop b", func() bool { return a.Members() == 2 && c.Members() == 2 })
	for _, id := range res {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := a.Get(ctx, id)
		cancel()
		if err != nil {
			t.Fatalf("get %s after b died: %v", id, err)
		}
	}
	if err := w.journal.check(); err != nil {
		t.Fatal(err)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A node restarted on its address before its killed incarnation's lease
// expired: the new incarnation removes the old one's record as it joins.
// Otherwise every node sees two members at one address until the lease
// expires, and then protoactor, which keeps one connection per address,
// closes the new incarnation's connection with the old one's, dropping
// the calls in flight to it (they waited out their whole timeout).
func TestNode_EtcdRestartOnSameAddress(t *testing.T) {
	etcd := startEtcd(t)
	w := newWorld(t)
	// A lease that outlives the test: only the restart can remove the
	// killed incarnation's record.
	m := cluster.Etcd{Endpoints: []string{etcd.Endpoint()}, TTL: time.Minute, DialTimeout: time.Second}
	port := freePorts(t, 1)[0]
	a := w.start("a", m)
	c := w.startOn("c", m, port)
	waitFor(t, 10*time.Second, "two members everywhere", func() bool { return a.Members() == 2 && c.Members() == 2 })
	res := ids("r", 12)
	for i, id := range res {
		register(t, []*cluster.Node{a, c}[i%2], id, 10000)
	}
	c.Kill()
	c2 := w.startOn("c2", m, port)
	waitFor(t, 10*time.Second, "a to see c2 in place of the killed c", func() bool { return a.Members() == 2 && c2.Members() == 2 })
	for _, id := range res {
		if _, err := refund(a, id, "k1", 1000); err != nil {
			t.Fatalf("refund %s via a after c restarted: %v", id, err)
		}
	}
	if err := w.journal.check(); err != nil {
		t.Fatal(err)
	}
}
