package cluster

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/refundd/refundd/internal/devetcd"
)

// A renewer started after part of the lease is spent (registering the
// member, or a slow grant, took that long) renews at once rather than one
// renewal interval later. Before, with less than TTL/3 left before its
// give-up moment, it slept until that moment and then gave up without
// having sent a single renewal, although etcd answered: the node fenced
// itself right after joining.
func TestRenewLease_RenewsAtOnceWhenThePeriodIsPartlySpent(t *testing.T) {
	s, err := devetcd.Start(devetcd.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// margin TTL/4 = 3s, interval TTL/3 = 4s. The time left to renew in is
	// seconds, not tenths: a loaded machine once took longer than 0.3s to
	// renew, and the test failed though the renewer did right.
	ttl := 12 * time.Second
	o := &openedEtcd{cfg: Etcd{TTL: ttl}, client: client, log: slog.New(slog.NewTextHandler(io.Discard, nil))}

	cases := []struct {
		name  string
		spent time.Duration // of the lease, before the renewer starts
	}{
		{"half the interval spent", ttl/4 + ttl/6},
		{"all but 2s of the period spent", ttl - ttl/4 - 2*time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			sent := time.Now()
			grant, err := client.Grant(ctx, int64(ttl/time.Second))
			if err != nil {
				t.Fatal(err)
			}
			// As if the grant had been sent tc.spent ago.
			deadline := sent.Add(ttl - tc.spent)
			giveUp := deadline.Add(-ttl / 4)
			rctx, rcancel := context.WithCancel(context.Background())
			done := make(chan string, 1)
			go func() { done <- renewLease(rctx, o, "test", grant.ID, deadline) }()
			// The give-up moment is a wall-clock one: poll past it.
			for time.Now().Before(giveUp.Add(200 * time.Millisecond)) {
				select {
				case reason := <-done:
					rcancel()
					t.Fatalf("renewLease gave up %s after its first give-up moment: %q; want the lease renewed at once (etcd answers)",
						time.Since(giveUp).Round(time.Millisecond), reason)
				case <-time.After(10 * time.Millisecond):
				}
			}
			rcancel()
			if reason := <-done; reason != "" {
				t.Fatalf("renewLease after its context ended: %q; want \"\"", reason)
			}
		})
	}
}
