//go:build !race

package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/internal/reservation"
)

func automanagedPair(t testing.TB, w *world) (a, b *cluster.Node) {
	ports := freePorts(t, 2)
	hosts := []string{fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])}
	a = w.start("a", cluster.Automanaged{Hosts: hosts, Port: ports[0], Refresh: 100 * time.Millisecond})
	b = w.start("b", cluster.Automanaged{Hosts: hosts, Port: ports[1], Refresh: 100 * time.Millisecond})
	waitFor(t, 10*time.Second, "both nodes to see two members", func() bool { return a.Members() == 2 && b.Members() == 2 })
	return a, b
}

// A call on either node is served by the reservation's owner: its actor is
// live there and nowhere else; when the owner dies, the survivor serves it.
func TestNode_RoutesByOwnerAndFailsOver_Automanaged(t *testing.T) {
	w := newWorld(t)
	a, b := automanagedPair(t, w)
	res := ids("r", 40)
	for i, id := range res {
		entry := []*cluster.Node{a, b}[i%2]
		register(t, entry, id, 10000)
		if _, err := refund([]*cluster.Node{b, a}[i%2], id, "k1", 3000); err != nil {
			t.Fatalf("refund %s: %v", id, err)
		}
	}
	ownedByB := 0
	liveA, liveB := a.Engine().LiveIDs(), b.Engine().LiveIDs()
	for _, id := range res {
		if a.Owns(id) == b.Owns(id) {
			t.Fatalf("%s: owned by a=%v b=%v; want exactly one", id, a.Owns(id), b.Owns(id))
		}
		owner, liveOwner, liveOther := a, liveA, liveB
		if b.Owns(id) {
			owner, liveOwner, liveOther = b, liveB, liveA
			ownedByB++
		}
		if !contains(liveOwner, id) || contains(liveOther, id) {
			t.Fatalf("%s: live on its owner %v, on the other %v; want only on the owner (%s)", id, contains(liveOwner, id), contains(liveOther, id), owner.Address())
		}
	}
	if ownedByB == 0 || ownedByB == len(res) {
		t.Fatalf("b owns %d of %d reservations; want a share", ownedByB, len(res))
	}

	b.Kill()
	waitFor(t, 10*time.Second, "a to see b gone", func() bool { return a.Members() == 1 })
	for _, id := range res {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := a.Get(ctx, id)
		cancel()
		if err != nil {
			t.Fatalf("get %s after b died: %v", id, err)
		}
		if st.Refunded()+st.InFlight() != 3000 || len(st.Refunds) != 1 {
			t.Fatalf("%s: refunded %d in flight %d refunds %d; want the one refund of 3000", id, st.Refunded(), st.InFlight(), len(st.Refunds))
		}
		if !a.Owns(id) {
			t.Fatalf("%s: a does not own it after b died", id)
		}
	}
	if err := w.journal.check(); err != nil {
		t.Fatal(err)
	}
}

// Domain errors and states survive the trip between nodes.
func TestNode_RemoteErrorsAndStates(t *testing.T) {
	w := newWorld(t)
	a, b := automanagedPair(t, w)
	// Find a reservation owned by b and call it from a.
	var id string
	for _, c := range ids("x", 50) {
		if b.Owns(c) {
			id = c
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.Get(ctx, id); !errors.Is(err, reservation.ErrNotFound) {
		t.Fatalf("get unknown: %v, want not found", err)
	}
	register(t, a, id, 10000)
	st, err := refund(a, id, "k1", 4000)
	if err != nil {
		t.Fatal(err)
	}
	no := st.Refunds[0].No
	if st.RefundByKey("k1") == nil || st.Refund(no) == nil || st.Refund(no).Amount != 4000 {
		t.Fatalf("state from the owner lost its indexes: %+v", st)
	}
	if _, err := refund(a, id, "k2", 7000); !errors.Is(err, reservation.ErrInsufficientRefundable) {
		t.Fatalf("over-refund: %v, want insufficient_refundable", err)
	}
	if _, err := refund(a, id, "k1", 5000); !errors.Is(err, reservation.ErrIdempotencyKeyReused) {
		t.Fatalf("key reuse: %v, want idempotency_key_reused", err)
	}
	again, err := refund(a, id, "k1", 4000)
	if err != nil || again.Refunds[0].No != no || len(again.Refunds) != 1 {
		t.Fatalf("replay: %v %+v, want the same refund", err, again)
	}
	// Await returns once the provider's answer is journaled on the owner.
	done, err := a.Await(ctx, id, func(s *reservation.State) bool { return s.Refund(no).State == reservation.Succeeded })
	if err != nil || done.Refund(no).State != reservation.Succeeded {
		t.Fatalf("await: %v %+v", err, done)
	}
	if owner, err := a.LookupRefund(ctx, no); err != nil || owner != id {
		t.Fatalf("lookup %s: %q %v", no, owner, err)
	}
	// The one notification call finds the refund's reservation from any
	// node; what a hint reports crosses to the owner, whose core matches it.
	hint := func(refund int64) reservation.Notification {
		return reservation.Notification{RefundNo: no, Hint: true,
			Outcome: reservation.Outcome{OutTradeNo: done.OutTradeNo, RefundAmount: refund, TotalAmount: done.Amount}}
	}
	for _, tc := range []struct {
		name string
		n    reservation.Notification
		want error
	}{
		{"matching hint on a settled refund", hint(4000), nil},
		{"hint with another amount", hint(3999), reservation.ErrOutcomeMismatch},
		{"unknown refund number", reservation.Notification{RefundNo: "T-nobody-1", Hint: true}, reservation.ErrNotFound},
		// The notification's merchant crosses to the owner too: another
		// merchant's is refused there, the reservation's own is not.
		{"matching hint naming the default merchant", func() reservation.Notification {
			n := hint(4000)
			n.Merchant = reservation.DefaultMerchant
			return n
		}(), nil},
		{"matching hint of another merchant", func() reservation.Notification {
			n := hint(4000)
			n.Merchant = "hotel-sh"
			return n
		}(), reservation.ErrOutcomeMismatch},
		{"outcome of another merchant", reservation.Notification{RefundNo: no, Merchant: "hotel-sh", Outcome: reservation.Outcome{
			Kind: reservation.OutcomeSucceeded, ProviderID: done.Refund(no).ProviderID, OutTradeNo: done.OutTradeNo, RefundAmount: 4000,
			TotalAmount: done.Amount}}, reservation.ErrOutcomeMismatch},
	} {
		events, err := a.RecordNotification(ctx, "wechatpay:notification", tc.n)
		if !errors.Is(err, tc.want) || len(events) != 0 {
			t.Fatalf("notification, %s: events %d, err %v; want none and %v", tc.name, len(events), err, tc.want)
		}
	}
}
