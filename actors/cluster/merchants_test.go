//go:build !race

package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/internal/reservation"
)

// Cluster mode with several merchants: whichever node a call enters, the
// reservation is decided under its merchant's policy on its owner (the
// merchant's prefix, the merchant's limits), and an unconfigured merchant
// is refused with its code across the wire. (Like the other two-node tests,
// it does not run under -race: automanagedPair is in node_test.go.)
func TestNode_PolicyPerMerchant(t *testing.T) {
	w := newWorld(t)
	base := reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute}
	a, b := base, base
	a.RefundNoPrefix = "A"
	b.RefundNoPrefix, b.MaxRefunds = "B", 1
	w.policies = map[string]reservation.Policy{"a": a, "b": b}
	n1, n2 := automanagedPair(t, w)
	nodes := []*cluster.Node{n1, n2}
	exec := func(n *cluster.Node, id string, cmd reservation.Command) (*reservation.State, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, _, err := n.Execute(ctx, id, "test", cmd)
		return st, err
	}
	for i, id := range ids("r", 20) {
		merchant, prefix := "a", "A-"
		if i%2 == 1 {
			merchant, prefix = "b", "B-"
		}
		if _, err := exec(nodes[i%2], id, reservation.Register{ReservationID: id, UserID: "u-" + id, OutTradeNo: "ORD-" + id,
			Amount: 1000, Currency: "CNY", Merchant: merchant}); err != nil {
			t.Fatalf("register %s under %s: %v", id, merchant, err)
		}
		st, err := refund(nodes[(i/2)%2], id, "k1", 100)
		if err != nil {
			t.Fatalf("refund %s: %v", id, err)
		}
		if no := st.RefundByKey("k1").No; !strings.HasPrefix(no, prefix) {
			t.Errorf("%s of merchant %s numbered %s, want %s...", id, merchant, no, prefix)
		}
		_, err = refund(nodes[(i/2+1)%2], id, "k2", 100)
		if want := map[string]reservation.Code{"a": "", "b": reservation.CodeRefundLimit}[merchant]; reservation.CodeOf(err) != want {
			t.Errorf("%s's second refund (merchant %s): %v, want code %q", id, merchant, err, want)
		}
	}
	for i, id := range ids("c", 2) {
		_, err := exec(nodes[i], id, reservation.Register{ReservationID: id, UserID: "u", OutTradeNo: "ORD-" + id,
			Amount: 1000, Currency: "CNY", Merchant: "c"})
		if reservation.CodeOf(err) != reservation.CodeMerchantNotConfigured {
			t.Errorf("register under unconfigured merchant c via node %d: %v, want %s", i, err, reservation.CodeMerchantNotConfigured)
		}
	}
	if err := w.journal.check(); err != nil {
		t.Fatal(err)
	}
}
