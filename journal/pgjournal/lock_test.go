package pgjournal_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refundd/refundd/journal/pgjournal"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// The key of a lock never changes: nodes of one cluster running different
// builds must take the same lock.
func TestAdvisoryKey_Stable(t *testing.T) {
	a, b := pgjournal.AdvisoryKey("webhooks", "", "refundd"), pgjournal.AdvisoryKey("webhooks", "public", "refundd")
	if a != b {
		t.Errorf("empty schema %d, public %d: want the same key", a, b)
	}
	// The webhook leader's key as refundd has always computed it.
	if want := int64(-3644184136629354987); a != want {
		t.Errorf("webhook key %d, want %d", a, want)
	}
	if a == pgjournal.AdvisoryKey("webhooks", "public", "other") {
		t.Error("two cluster names share a key")
	}
}

// leaderTerms records the terms of several electors in one test.
type leaderTerms struct {
	mu   sync.Mutex
	list []leaderTerm
	quit map[string]chan struct{} // closing one makes that node's current term return on its own
}

type leaderTerm struct {
	node       string
	start, end time.Time
	cause      error
}

func (ts *leaderTerms) run(node string) func(context.Context) {
	return func(ctx context.Context) {
		ts.mu.Lock()
		ts.list = append(ts.list, leaderTerm{node: node, start: time.Now()})
		i := len(ts.list) - 1
		quit := ts.quit[node]
		ts.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-quit:
		}
		ts.mu.Lock()
		ts.list[i].end, ts.list[i].cause = time.Now(), context.Cause(ctx)
		if ctx.Err() == nil {
			ts.quit[node] = nil // once
		}
		ts.mu.Unlock()
	}
}

// leader waits until exactly one term runs, term number from or later,
// and returns its node and number.
func (ts *leaderTerms) leader(t *testing.T, from int) (string, int) {
	t.Helper()
	var node string
	var num int
	waitFor(t, fmt.Sprintf("one leader in term %d or later", from), func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		var running []int
		for i, l := range ts.list {
			if l.end.IsZero() {
				running = append(running, i)
			}
		}
		if len(running) == 1 && running[0] >= from {
			node, num = ts.list[running[0]].node, running[0]
			return true
		}
		return false
	})
	return node, num
}

func (ts *leaderTerms) last(node string) leaderTerm {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for i := len(ts.list) - 1; i >= 0; i-- {
		if ts.list[i].node == node {
			return ts.list[i]
		}
	}
	return leaderTerm{}
}

// The advisory-lock election (automanaged membership) on PostgreSQL: a
// holder that went quiet loses the lock when the server ends its idle
// session; a holder whose session is terminated ends its term; a holder
// whose work stops, or whose campaign is cancelled, hands over.
func TestLockElector(t *testing.T) {
	dsn := pgtest.DSN(t)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	key := pgjournal.AdvisoryKey("webhooks", "test_"+hex.EncodeToString(rnd[:]), "refundd")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	// A frozen holder: it took the lock on a session that times out after
	// 1s of silence, and says nothing more.
	frozen, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close(context.Background())
	var got bool
	if _, err := frozen.Exec(ctx, "SET idle_session_timeout = 1000"); err != nil {
		t.Fatal(err)
	}
	if err := frozen.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got); err != nil || !got {
		t.Fatalf("frozen holder's lock: %v %v", got, err)
	}

	ts := &leaderTerms{quit: map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}}
	stops := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	defer func() {
		for _, stop := range stops {
			stop()
		}
		wg.Wait()
	}()
	for _, name := range []string{"a", "b"} {
		lctx, stop := context.WithCancel(ctx)
		stops[name] = stop
		el := &pgjournal.LockElector{DSN: dsn, Key: key, Value: name, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			TTL: 2 * time.Second, Poll: 50 * time.Millisecond}
		wg.Go(func() {
			if err := el.Lead(lctx, ts.run(name)); err != nil {
				t.Errorf("lead %s: %v", name, err)
			}
		})
	}
	first, n0 := ts.leader(t, 0)
	if _, err := frozen.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatalf("%s leads while the frozen holder's session is still open", first)
	}

	// The server ends the leader's session: its term ends at once (the
	// node may well win the next one).
	var terminated int
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND classid = (($1::bigint >> 32) & 4294967295)::oid
  AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1`, key).Scan(&terminated); err != nil || terminated != 1 {
		t.Fatalf("terminate the leader's session: %d sessions, %v", terminated, err)
	}
	second, n1 := ts.leader(t, n0+1)
	ts.mu.Lock()
	ended := ts.list[n0]
	ts.mu.Unlock()
	if !errors.Is(ended.cause, pgjournal.ErrLockLost) {
		t.Errorf("%s's term ended with cause %v; want ErrLockLost", first, ended.cause)
	}
	t.Logf("session of %s terminated: its term ended, %s's began %s later", first, second,
		ts.last(second).start.Sub(ended.end).Round(time.Millisecond))

	// The leader's work stops on its own: it releases the lock and the
	// other node takes it.
	ts.mu.Lock()
	close(ts.quit[second])
	ts.mu.Unlock()
	third, n2 := ts.leader(t, n1+1)
	if third == second {
		t.Fatalf("%s resigned and leads again at once", second)
	}
	// The leader's campaign is cancelled: the lock goes with its session.
	stops[third]()
	if fourth, _ := ts.leader(t, n2+1); fourth != second {
		t.Fatalf("after %s stopped, %s leads; want %s", third, fourth, second)
	}
	// No overlap, except possibly right after the termination: the
	// server frees the lock before the holder reads that its session is
	// gone.
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for i := n1 + 1; i < len(ts.list); i++ {
		if ts.list[i].start.Before(ts.list[i-1].end) {
			t.Errorf("term %d (%s) began before term %d (%s) ended", i, ts.list[i].node, i-1, ts.list[i-1].node)
		}
	}
}
