package pgjournal_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/journal/journaltest"
	"github.com/refundd/refundd/journal/pgjournal"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// cluster is a fresh schema with one node open on it, and the test hooks
// the contract's fencing subtests need.
type cluster struct {
	*pgjournal.DB
	store *pgtest.Store
}

func (c *cluster) OpenNode(t *testing.T) journaltest.Node { return c.store.Open(t, nil) }

func (c *cluster) ErrFenced() error { return pgjournal.ErrFenced }

// nodeDB unwraps the cluster (the first node) to its DB.
func nodeDB(n journaltest.Node) *pgjournal.DB {
	if c, ok := n.(*cluster); ok {
		return c.DB
	}
	return n.(*pgjournal.DB)
}

func (c *cluster) HoldCommit(n journaltest.Node) (<-chan struct{}, func()) {
	db := nodeDB(n)
	held, rel := make(chan struct{}), make(chan struct{})
	var heldOnce, relOnce sync.Once
	pgjournal.SetBeforeCommit(db, func() {
		heldOnce.Do(func() { close(held) })
		<-rel
	})
	return held, func() {
		relOnce.Do(func() {
			pgjournal.SetBeforeCommit(db, nil)
			close(rel)
		})
	}
}

// WaitBlocked polls pg_stat_activity for a session of the node (its
// application_name) waiting on a lock.
func (c *cluster) WaitBlocked(t *testing.T, n journaltest.Node) {
	t.Helper()
	waitBlocked(t, c.store, nodeDB(n).NodeID())
}

func TestContract_Postgres(t *testing.T) {
	journaltest.RunContract(t, func(t *testing.T) journaltest.Journal {
		s := pgtest.New(t)
		return &cluster{DB: s.Open(t, nil), store: s}
	})
}

// waitBlocked returns once a session of node waits for a lock, failing the
// test after 10s.
func waitBlocked(t *testing.T, s *pgtest.Store, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := connect(t, s)
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE application_name = $1 AND wait_event_type = 'Lock'`, "github.com/refundd/refundd/"+node).Scan(&n)
		if err != nil {
			t.Fatalf("waiting for node %s to block on a lock: %v", node, err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %s never waited for a lock", node)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
