//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/internal/simprovider"
)

// Two nodes that both believe they own a reservation (automanaged, cut off
// from each other: "a node cut off from the others keeps its reservations
// (and so do the others)"). The old owner's actor was loaded before the
// refund existed, so its state answers the refund's live timer "refund not
// found". That answer must not delete the timer from the shared index, and
// checking it against the journal must not take the stream from the real
// owner.
func TestNode_StaleOwnerKeepsTheLiveTimerOfARefundItDoesNotKnow(t *testing.T) {
	w := &world{t: t, journal: newMemJournal(), provider: simprovider.New(simprovider.Options{Delay: time.Hour})}
	ports := freePorts(t, 2)
	hA, hB := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	a := w.start("a", cluster.Automanaged{Hosts: []string{hA}, Port: ports[0], Refresh: 100 * time.Millisecond})
	b := w.start("b", cluster.Automanaged{Hosts: []string{hB}, Port: ports[1], Refresh: 100 * time.Millisecond})
	waitFor(t, 10*time.Second, "both nodes joined", func() bool { return a.Members() == 1 && b.Members() == 1 })
	if !a.Owns("r1") || !b.Owns("r1") {
		t.Fatalf("want both partitioned nodes to believe they own r1: a=%v b=%v", a.Owns("r1"), b.Owns("r1"))
	}

	register(t, a, "r1", 10000) // a's actor: version 1, no refunds
	st, err := refund(b, "r1", "k1", 3000)
	if err != nil {
		t.Fatal(err)
	}
	no := st.RefundByKey("k1").No
	ctx := context.Background()
	waitFor(t, 10*time.Second, "PROCESSING with a provider id on b", func() bool {
		st, err := b.Get(ctx, "r1")
		return err == nil && st.Refund(no) != nil && st.Refund(no).ProviderID != ""
	})
	later := time.Now().Add(2 * time.Minute)
	dues, _ := w.journal.node("x").DueBefore(ctx, later, 100)
	if len(dues) != 1 || dues[0].RefundNo != no {
		t.Fatalf("due index %+v, want the recheck of %s", dues, no)
	}

	// a, still believing it owns r1, runs its scheduler pass.
	if n, err := a.FireDue(ctx, later); err != nil || n != 0 {
		t.Fatalf("old owner's FireDue = %d, %v; want the live timer left alone", n, err)
	}
	dues, _ = w.journal.node("x").DueBefore(ctx, later, 100)
	if len(dues) != 1 || dues[0].RefundNo != no {
		t.Fatalf("the old owner deleted the live recheck of %s (due index now %+v): nobody would query or flag it", no, dues)
	}
	// The check read the version without activating the stream: the real
	// owner still appends.
	if _, err := refund(b, "r1", "k2", 1000); err != nil {
		t.Fatalf("the real owner's next refund: %v", err)
	}
	if f := w.journal.fencedCount(); f != 0 {
		t.Fatalf("%d appends fenced", f)
	}
}
