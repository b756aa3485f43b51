//go:build !race

package cluster_test

import (
	"context"
	"testing"
)

// BenchmarkNode_Get measures one routed read through node a: of a
// reservation a owns (its local grain, no network) and of one b owns (a
// gRPC round trip on loopback), against the engine's own Get. Parallel,
// like HTTP requests.
func BenchmarkNode_Get(b *testing.B) {
	w := newWorld(b)
	a, other := automanagedPair(b, w)
	for _, tc := range []struct {
		name   string
		owned  bool
		direct bool // the node's engine itself, no routing: the baseline
	}{{"engine_direct", true, true}, {"owned_here", true, false}, {"owned_by_other_node", false, false}} {
		b.Run(tc.name, func(b *testing.B) {
			var res []string
			for _, id := range ids("b", 200) {
				if a.Owns(id) == tc.owned {
					res = append(res, id)
				}
			}
			for _, id := range res {
				ctx, cancel := context.WithTimeout(context.Background(), 10*1e9)
				if _, err := a.Get(ctx, id); err != nil {
					register(b, other, id, 10000)
				}
				cancel()
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				get := a.Get
				if tc.direct {
					get = a.Engine().Get
				}
				for pb.Next() {
					if _, err := get(context.Background(), res[i%len(res)]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}
