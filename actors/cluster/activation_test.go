//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/internal/reservation"
)

// An activation request the owner's partition-activator never gets
// (a connection to a rejoining node flapping) must cost one short attempt,
// not the caller's whole deadline: the call resends it and completes.
func TestNode_LostActivationRequestIsResentWithinTheDeadline(t *testing.T) {
	w := newWorld(t)
	ports := freePorts(t, 2)
	hosts := []string{fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])}
	a := w.start("a", cluster.Automanaged{Hosts: hosts, Port: ports[0], Refresh: 100 * time.Millisecond})
	b := w.start("b", cluster.Automanaged{Hosts: hosts, Port: ports[1], Refresh: 100 * time.Millisecond})
	waitFor(t, 10*time.Second, "both nodes to see two members", func() bool { return a.Members() == 2 && b.Members() == 2 })
	losses := map[*cluster.Node]*cluster.ActivationLoss{a: a.LoseActivations(), b: b.LoseActivations()}

	// ownedBy picks a reservation id the node owns.
	ownedBy := func(n *cluster.Node, prefix string) string {
		for _, id := range ids(prefix, 100) {
			if n.Owns(id) {
				return id
			}
		}
		t.Fatalf("no id with prefix %s owned by %s", prefix, n.Address())
		return ""
	}
	tests := []struct {
		name   string
		owner  *cluster.Node
		exists bool // registered through b first: a's lookup is the first
		op     func(ctx context.Context, id string) error
	}{
		{"execute, owner is the calling node", a, false, func(ctx context.Context, id string) error {
			_, _, err := a.Execute(ctx, id, "test", reservation.Register{ReservationID: id, UserID: "u-" + id, OutTradeNo: "ORD-" + id, Amount: 100, Currency: "CNY"})
			return err
		}},
		{"execute, owner is the other node", b, false, func(ctx context.Context, id string) error {
			_, _, err := a.Execute(ctx, id, "test", reservation.Register{ReservationID: id, UserID: "u-" + id, OutTradeNo: "ORD-" + id, Amount: 100, Currency: "CNY"})
			return err
		}},
		{"await, owner is the other node", b, true, func(ctx context.Context, id string) error {
			_, err := a.Await(ctx, id, func(*reservation.State) bool { return true })
			return err
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := ownedBy(tt.owner, fmt.Sprintf("act%d-", i))
			if tt.exists {
				register(t, b, id, 100)
			}
			loss := losses[tt.owner]
			loss.Lose(id, 1)
			// Shorter than protoactor's own 5s activation timeout, so a
			// lookup that waits that out cannot pass.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := tt.op(ctx, id); err != nil {
				t.Fatalf("%s with its first activation request lost: %v", id, err)
			}
			if got := loss.Lost(id); got != 1 {
				t.Fatalf("%d activation requests for %s lost; the test meant to lose one", got, id)
			}
			if !contains(tt.owner.Engine().LiveIDs(), id) {
				t.Fatalf("%s not live on its owner %s", id, tt.owner.Address())
			}
		})
	}
}
