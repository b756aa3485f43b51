package cluster_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/internal/freeport"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

// testLogger is quiet unless CLUSTER_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("CLUSTER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// freePorts returns n ports free on loopback right now, below the
// ephemeral range (an outgoing connection could take one from it before
// the node binds it) and never handed out twice in this test binary.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	out := make([]int, n)
	for i := range out {
		p, err := ports.Port()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = p
	}
	return out
}

// ports hands out every port of this test binary's nodes.
var ports freeport.Picker

// world is what the nodes of a test share: the journal and the provider.
type world struct {
	t        testing.TB
	journal  *memJournal
	provider *simprovider.Provider
	// policies is every node's actors.Config.Policies; nil: none.
	policies map[string]reservation.Policy
}

func newWorld(t testing.TB) *world {
	return &world{t: t, journal: newMemJournal(), provider: simprovider.New(simprovider.Options{})}
}

func (w *world) start(name string, m cluster.Membership) *cluster.Node {
	w.t.Helper()
	return w.startOn(name, m, 0)
}

// startOn starts a node whose actors listen on port (0 picks one).
func (w *world) startOn(name string, m cluster.Membership, port int) *cluster.Node {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := cluster.Start(ctx, cluster.Config{
		Engine: actors.Config{
			Store: w.journal.node(name), Provider: w.provider, Encode: simprovider.Encode,
			Policy:      reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute},
			Policies:    actors.NewPolicySet(w.policies),
			IdleTimeout: time.Minute,
		},
		Membership: m, Name: "test", Port: port, Logger: testLogger().With("node", name),
		RequestTimeout: 10 * time.Second,
	})
	if err != nil {
		w.t.Fatalf("start %s: %v", name, err)
	}
	w.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func register(t testing.TB, n *cluster.Node, id string, amount int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := n.Execute(ctx, id, "test", reservation.Register{
		ReservationID: id, UserID: "u-" + id, OutTradeNo: "ORD-" + id, Amount: amount, Currency: "CNY",
	}); err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
}

func refund(n *cluster.Node, id, key string, amount int64) (*reservation.State, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var a *int64
	if amount > 0 {
		a = &amount
	}
	st, _, err := n.Execute(ctx, id, "test", reservation.RequestRefund{UserID: "u-" + id, IdempotencyKey: key, Amount: a})
	return st, err
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
