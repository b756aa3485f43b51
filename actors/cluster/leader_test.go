//go:build !race

package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/refundd/refundd/actors/cluster"
)

// terms records every leadership term of a test's nodes.
type terms struct {
	mu      sync.Mutex
	list    []term
	stopped map[string]bool // nodes whose stop channel has been used
}

type term struct {
	node       string
	start, end time.Time // end is zero while the term runs
	cause      error
}

// run returns a Lead run function for node that holds its term until the
// term's context ends, or, once, until stop is closed (then it returns on
// its own, as work that cannot go on would).
func (ts *terms) run(node string, stop <-chan struct{}) func(context.Context) {
	return func(ctx context.Context) {
		ts.mu.Lock()
		ts.list = append(ts.list, term{node: node, start: time.Now()})
		i := len(ts.list) - 1
		if ts.stopped[node] {
			stop = nil
		}
		ts.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-stop:
		}
		ts.mu.Lock()
		ts.list[i].end, ts.list[i].cause = time.Now(), context.Cause(ctx)
		if ctx.Err() == nil {
			ts.stopped[node] = true
		}
		ts.mu.Unlock()
	}
}

// current returns the node whose term runs ("" for none) and how many
// terms run.
func (ts *terms) current() (string, int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	node, n := "", 0
	for _, t := range ts.list {
		if t.end.IsZero() {
			node, n = t.node, n+1
		}
	}
	return node, n
}

func (ts *terms) snapshot() []term {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.list)
}

// checkNoOverlap fails the test if two terms ever ran at once.
func (ts *terms) checkNoOverlap(t *testing.T) {
	t.Helper()
	list := ts.snapshot()
	slices.SortFunc(list, func(a, b term) int { return a.start.Compare(b.start) })
	for i := 1; i < len(list); i++ {
		prev := list[i-1]
		if prev.end.IsZero() || list[i].start.Before(prev.end) {
			t.Errorf("term of %s began at %s while %s's (from %s) ran until %v", list[i].node, list[i].start.Format("15:04:05.000"),
				prev.node, prev.start.Format("15:04:05.000"), prev.end.Format("15:04:05.000"))
		}
	}
}

// Three nodes campaign on an embedded etcd: one leads at a time. The
// leader cut off from etcd ends its term (cause ErrLeadershipLost) before
// another begins; a killed leader is replaced once its lease expires; a
// leader whose work stops resigns and the next candidate leads at once;
// a leader whose Lead context ends hands over at once too.
func TestNode_LeadOneAtATime(t *testing.T) {
	etcd := startEtcd(t)
	px := newProxy(t, etcd.Endpoint())
	w := newWorld(t)
	ttl := 2 * time.Second
	direct := cluster.Etcd{Endpoints: []string{etcd.Endpoint()}, TTL: ttl, DialTimeout: time.Second}
	viaProxy := cluster.Etcd{Endpoints: []string{px.addr()}, TTL: ttl, DialTimeout: time.Second}
	ts := &terms{stopped: map[string]bool{}}
	stops := map[string]chan struct{}{}
	cancels := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		for _, c := range cancels {
			c()
		}
		wg.Wait()
	})
	nodes := map[string]*cluster.Node{}
	lead := func(name string, n *cluster.Node) {
		ctx, cancel := context.WithCancel(context.Background())
		stops[name], cancels[name], nodes[name] = make(chan struct{}), cancel, n
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Lead(ctx, "work", "node "+name, ts.run(name, stops[name])); err != nil && !errors.Is(err, cluster.ErrClosed) {
				t.Errorf("Lead on %s: %v", name, err)
			}
		}()
	}
	leader := func() string {
		t.Helper()
		var node string
		waitFor(t, 6*ttl, "one leader", func() bool {
			name, n := ts.current()
			node = name
			return n == 1
		})
		return node
	}

	// c starts alone, so it leads.
	lead("c", w.start("c", viaProxy))
	if got := leader(); got != "c" {
		t.Fatalf("leader %s, want c", got)
	}
	lead("a", w.start("a", direct))
	lead("b", w.start("b", direct))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	v, err := nodes["a"].Leader(ctx, "work")
	cancel()
	if err != nil || v != "node c" {
		t.Fatalf("Leader via a: %q %v; want \"node c\"", v, err)
	}

	// c is cut off from etcd: its term ends before another begins.
	cutAt := time.Now()
	px.setCut(true)
	waitFor(t, 4*ttl, "another leader than c", func() bool { name, n := ts.current(); return n == 1 && name != "c" })
	list := ts.snapshot()
	if !errors.Is(list[0].cause, cluster.ErrLeadershipLost) {
		t.Errorf("c's term ended with cause %v; want ErrLeadershipLost", list[0].cause)
	}
	t.Logf("cut off at 0: c's term ended after %s, the next began after %s",
		list[0].end.Sub(cutAt).Round(time.Millisecond), list[1].start.Sub(cutAt).Round(time.Millisecond))
	px.setCut(false)

	// The leader is killed: the other one of a and b leads once the lease
	// expired (c is queued behind it, having campaigned after the heal).
	second := leader()
	nodes[second].Kill()
	third := leader()
	if third == second {
		t.Fatalf("killed %s still leads", second)
	}

	// The leader's work stops on its own: it resigns and another node
	// leads without waiting for a lease to expire (once c, back from its
	// retries, is a candidate again).
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	waitFor(t, 10*time.Second, "two candidates", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, "/refundd/test/leaders/work/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	})
	resignAt := time.Now()
	close(stops[third])
	waitFor(t, 3*ttl, "a leader other than the one that resigned", func() bool {
		name, n := ts.current()
		return n == 1 && name != third
	})
	if d := time.Since(resignAt); d > ttl {
		t.Errorf("handover after a resignation took %s; want well under the TTL %s", d, ttl)
	}

	// A Lead context that ends hands over at once as well.
	fourth, _ := ts.current()
	cancelAt := time.Now()
	cancels[fourth]()
	waitFor(t, 3*ttl, "the resigned node to lead again", func() bool {
		name, n := ts.current()
		return n == 1 && name == third
	})
	if d := time.Since(cancelAt); d > 3*ttl/2 {
		// The resigned node waits one TTL before campaigning again.
		t.Errorf("handover after Lead's context ended took %s; want about the TTL %s", d, ttl)
	}
	ts.checkNoOverlap(t)
	if len(ts.snapshot()) != 5 {
		t.Errorf("terms %+v; want 5", ts.snapshot())
	}
}

// Automanaged membership has no lease to lead by: Lead says so at once.
func TestNode_LeadNeedsEtcd(t *testing.T) {
	w := newWorld(t)
	ports := freePorts(t, 1)
	n := w.start("a", cluster.Automanaged{Hosts: []string{fmt.Sprintf("127.0.0.1:%d", ports[0])}, Port: ports[0], Refresh: 100 * time.Millisecond})
	ran := false
	if err := n.Lead(context.Background(), "work", "a", func(context.Context) { ran = true }); !errors.Is(err, cluster.ErrNoElection) || ran {
		t.Fatalf("Lead on automanaged: %v (ran %v); want ErrNoElection", err, ran)
	}
	if _, err := n.Leader(context.Background(), "work"); !errors.Is(err, cluster.ErrNoElection) {
		t.Fatalf("Leader on automanaged: %v; want ErrNoElection", err)
	}
}
