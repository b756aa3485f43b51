//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// BenchmarkCluster_Refunds is one node against three, all in this process,
// on one PostgreSQL journal (a pgjournal.DB per node on a fresh schema, as
// separate machines would have) and one in-memory provider. Each operation
// registers a reservation and refunds it whole through a node picked round
// robin, so with three nodes two calls in three cross the network (gRPC on
// loopback). Needs REFUNDD_TEST_POSTGRES:
//
//	go test -run='^$' -bench=Cluster_Refunds -benchtime=3000x ./actors/cluster/
//
// On one 2-core machine the nodes share the cores: three nodes cannot beat
// one here. What it shows is the cost of routing and the journal's
// behaviour with several writers; the gain of more nodes is more cores.
func BenchmarkCluster_Refunds(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			store := pgtest.New(b)
			provider := simprovider.New(simprovider.Options{})
			ports := freePorts(b, nodes)
			var hosts []string
			for _, p := range ports {
				hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", p))
			}
			var ns []*cluster.Node
			for i := range nodes {
				db := store.Open(b, nil)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				n, err := cluster.Start(ctx, cluster.Config{
					Engine: actors.Config{
						Store: eventstore.New(db), Provider: provider, Encode: simprovider.Encode,
						Policy:      reservation.Policy{RefundNoPrefix: "B", RecheckAfter: time.Minute},
						IdleTimeout: time.Minute,
					},
					Membership: cluster.Automanaged{Hosts: hosts, Port: ports[i], Refresh: 100 * time.Millisecond},
					Name:       "bench", Logger: testLogger().With("node", i), RequestTimeout: 10 * time.Second,
				})
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_ = n.Close(ctx)
				})
				ns = append(ns, n)
			}
			waitFor(b, 15*time.Second, "every node to see the others", func() bool {
				for _, n := range ns {
					if n.Members() != nodes {
						return false
					}
				}
				return true
			})
			const clients = 64
			var next atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []time.Duration
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							break
						}
						id := fmt.Sprintf("c%02d-%07d", c, i)
						t0 := time.Now()
						register(b, ns[int(i)%nodes], id, 10000)
						st, err := refund(ns[int(i+1)%nodes], id, "k", 0)
						if err != nil {
							b.Error(err)
							return
						}
						if len(st.Refunds) != 1 {
							b.Errorf("%s: %d refunds", id, len(st.Refunds))
							return
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "refunds/s")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
