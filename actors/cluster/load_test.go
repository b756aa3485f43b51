//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/internal/reservation"
)

// Three nodes take concurrent refunds for the same reservations through
// any node, duplicates and over-refund attempts included; one node is
// killed mid-load and restarted. At the end every order's money at the
// provider equals refundd's SUCCEEDED total and is at most what was paid,
// no refund number was sent with two bodies, and every stream was written
// under its current epoch only.
func TestNode_ConcurrentRefundsWithAKilledNode(t *testing.T) {
	w := newWorld(t)
	ports := freePorts(t, 3)
	var hosts []string
	for _, p := range ports {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", p))
	}
	member := func(i int) cluster.Membership {
		return cluster.Automanaged{Hosts: hosts, Port: ports[i], Refresh: 100 * time.Millisecond}
	}
	var nodes [3]atomic.Pointer[cluster.Node]
	for i := range nodes {
		nodes[i].Store(w.start(fmt.Sprintf("n%d", i), member(i)))
	}
	waitFor(t, 10*time.Second, "three members", func() bool {
		return nodes[0].Load().Members() == 3 && nodes[1].Load().Members() == 3 && nodes[2].Load().Members() == 3
	})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for i := range nodes {
		go nodes[i].Load().RunScheduler(ctx, 50*time.Millisecond)
	}
	const paid = 10000
	res := ids("L", 24)
	for i, id := range res {
		register(t, nodes[i%3].Load(), id, paid)
	}

	var sent, failed, refused atomic.Int64
	var wg sync.WaitGroup
	work := make(chan int)
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				rng := rand.New(rand.NewPCG(uint64(j), 7))
				id := res[rng.IntN(len(res))]
				k := rng.IntN(6) // six keys of 2,000 or 3,000: 15,000 asked of 10,000 paid
				amount := int64(2000 + 1000*(k%2))
				// Like a client behind a load balancer: an error that is
				// not a rule's answer is retried, through any node.
				var err error
				for try := 0; try < 3; try++ {
					n := nodes[rng.IntN(3)].Load()
					if _, err = refund(n, id, fmt.Sprintf("k%d", k), amount); err == nil || reservation.CodeOf(err) != "" {
						break
					}
				}
				sent.Add(1)
				switch {
				case err == nil:
				case reservation.CodeOf(err) != "":
					refused.Add(1)
				default:
					if failed.Add(1) <= 5 {
						t.Logf("in transit: %v", err)
					}
				}
			}
		}()
	}
	for j := range 600 {
		if j == 200 {
			nodes[2].Load().Kill()
		}
		if j == 400 {
			waitFor(t, 10*time.Second, "the survivors to drop the killed node", func() bool {
				return nodes[0].Load().Members() == 2 && nodes[1].Load().Members() == 2
			})
			n := w.start("n2-restarted", member(2))
			go n.RunScheduler(ctx, 50*time.Millisecond)
			nodes[2].Store(n)
		}
		work <- j
	}
	close(work)
	wg.Wait()
	t.Logf("%d requests: %d refused by the rules, %d failed after three tries", sent.Load(), refused.Load(), failed.Load())

	// Settle: every refund leaves PROCESSING through answers or due times.
	for _, id := range res {
		waitFor(t, 20*time.Second, id+" to settle", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			st, err := nodes[0].Load().Get(ctx, id)
			return err == nil && st.InFlight() == 0
		})
	}
	for _, id := range res {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := nodes[1].Load().Get(ctx, id)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		atProvider := w.provider.Refunded("ORD-" + id)
		if st.Refunded() != atProvider || atProvider > paid {
			t.Errorf("%s: refundd SUCCEEDED %d, provider %d, paid %d", id, st.Refunded(), atProvider, paid)
		}
		keys := map[string]bool{}
		for _, r := range st.Refunds {
			if r.Code == "INVALID_REQUEST" {
				t.Errorf("%s: refund %s was sent with two bodies", id, r.No)
			}
			if keys[r.IdempotencyKey] {
				t.Errorf("%s: two refunds for key %s", id, r.IdempotencyKey)
			}
			keys[r.IdempotencyKey] = true
		}
	}
	if err := w.journal.check(); err != nil {
		t.Fatal(err)
	}
	t.Logf("appends refused for a stale epoch: %d", w.journal.fencedCount())
}
