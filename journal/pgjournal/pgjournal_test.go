package pgjournal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func one(stream string, expected uint64, data string) journal.AppendRequest {
	return journal.AppendRequest{Stream: stream, Expected: expected, Events: []journal.Event{{Type: "t", Version: 1, Data: []byte(data)}}}
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling interval, not a wait for an event
	}
}

// TestAppend_OneBatch holds the committer so that requests queue, then
// checks they commit in one transaction, in queue order, each with its own
// outcome.
func TestAppend_OneBatch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	db := pgtest.Open(t)
	for _, s := range []string{"h", "s", "t", "u"} {
		if _, err := db.Activate(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pgjournal.SetBeforeCommit(db, func() {
		once.Do(func() { close(held) })
		<-release
	})
	type res struct {
		last uint64
		err  error
	}
	commits0 := pgjournal.Commits(db)
	first := make(chan res, 1)
	go func() {
		n, err := db.Append(ctx, one("h", 0, "holder"))
		first <- res{n, err}
	}()
	<-held
	reqs := []journal.AppendRequest{
		one("s", 0, "s1"),
		one("s", 1, "s2"), // sees the head left by the request before it
		{Stream: "t", Events: []journal.Event{{Type: "t", Version: 1}}, Claims: []journal.Claim{{Namespace: "n", Key: "k"}},
			Marks: []journal.Mark{{Key: "m1"}, {Key: "m2"}}},
		{Stream: "u", Events: []journal.Event{{Type: "t", Version: 1}}, Claims: []journal.Claim{{Namespace: "n", Key: "k"}}},
		one("s", 0, "stale"),
		{Stream: "s", Expected: 2, Events: []journal.Event{{Type: "t", Version: 1}}, Marks: []journal.Mark{{Key: "m1", Clear: true}}},
	}
	results := make([]chan res, len(reqs))
	for i, r := range reqs {
		results[i] = make(chan res, 1)
		go func() {
			n, err := db.Append(ctx, r)
			results[i] <- res{n, err}
		}()
		waitFor(t, fmt.Sprintf("request %d to queue", i), func() bool { return pgjournal.Queued(db) == i+1 })
	}
	pgjournal.SetBeforeCommit(db, nil)
	close(release)
	if r := <-first; r.err != nil || r.last != 1 {
		t.Fatalf("holder: %+v", r)
	}
	got := make([]res, len(reqs))
	for i := range reqs {
		got[i] = <-results[i]
	}
	if c := pgjournal.Commits(db) - commits0; c != 2 {
		t.Fatalf("the holder and the queued requests took %d commits, want 2", c)
	}
	for i, want := range []uint64{1, 2, 1, 0, 0, 3} {
		if got[i].last != want {
			t.Fatalf("request %d: %+v, want last %d", i, got[i], want)
		}
	}
	if got[0].err != nil || got[1].err != nil || got[2].err != nil || got[5].err != nil ||
		!errors.Is(got[3].err, journal.ErrKeyTaken) || !errors.Is(got[4].err, journal.ErrSequenceMismatch) {
		t.Fatalf("results: %+v", got)
	}
	if m, err := db.Marks(ctx, "", "", 0); err != nil || len(m) != 1 || m[0] != "m2" {
		t.Fatalf("marks = %v, %v (m1 set then cleared in one commit)", m, err)
	}
}

// TestAppend_EventsCarryEpochAndNode checks the columns a cluster test
// reads to prove every event was written under its owner's current epoch.
func TestAppend_EventsCarryEpochAndNode(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := pgtest.New(t)
	a := s.Open(t, &pgjournal.Options{NodeID: "node-a"})
	b := s.Open(t, &pgjournal.Options{NodeID: "node-b"})
	if _, err := a.Activate(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, one("r", 0, "a1")); err != nil {
		t.Fatal(err)
	}
	if e, err := b.Activate(ctx, "r"); err != nil || e != 2 || b.ActiveEpoch("r") != 2 || a.ActiveEpoch("r") != 1 {
		t.Fatalf("b activated epoch %d (%v); a remembers %d", e, err, a.ActiveEpoch("r"))
	}
	if _, err := b.Append(ctx, one("r", 1, "b2")); err != nil {
		t.Fatal(err)
	}
	_, err := a.Append(ctx, one("r", 2, "a3"))
	var fe *pgjournal.FencedError
	if !errors.As(err, &fe) || fe.Epoch != 1 || fe.Current != 2 || fe.Stream != "r" {
		t.Fatalf("stale append: %v", err)
	}
	rows, err := connect(t, s).Query(ctx, "SELECT seq, epoch, node FROM events WHERE stream = 'r' ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var seq, epoch int64
		var node string
		if err := rows.Scan(&seq, &epoch, &node); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d/%d/%s", seq, epoch, node))
	}
	if rows.Err() != nil || fmt.Sprint(got) != "[1/1/node-a 2/2/node-b]" {
		t.Fatalf("events (seq/epoch/node) = %v, %v", got, rows.Err())
	}
	// Release forgets the epoch: the node must activate again to write.
	b.Release("r")
	if _, err := b.Append(ctx, one("r", 2, "b3")); !errors.Is(err, pgjournal.ErrFenced) {
		t.Fatalf("append after Release: %v", err)
	}
}

func TestOpen_Migrations(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := pgtest.New(t)
	// Nodes starting together on a fresh schema.
	const nodes = 6
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	dbs := make([]*pgjournal.DB, nodes)
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dbs[i], errs[i] = pgjournal.Open(ctx, s.DSN, &pgjournal.Options{Schema: s.Schema})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		_ = dbs[i].Close()
	}
	conn := connect(t, s)
	var n, maxV int
	if err := conn.QueryRow(ctx, "SELECT count(*), max(version) FROM schema_migrations").Scan(&n, &maxV); err != nil {
		t.Fatal(err)
	}
	if n != maxV || n < 1 {
		t.Fatalf("schema_migrations: %d rows, max version %d", n, maxV)
	}
	// Reopening applies nothing new and keeps the data.
	db := s.Open(t, nil)
	if _, err := db.Activate(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(ctx, one("s", 0, "x")); err != nil {
		t.Fatal(err)
	}
	again := s.Open(t, nil)
	if h, err := again.Head(ctx, "s"); err != nil || h != 1 {
		t.Fatalf("head after reopen: %d, %v", h, err)
	}
	// A schema migrated by a newer build is refused.
	if _, err := conn.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", maxV+1); err != nil {
		t.Fatal(err)
	}
	if _, err := pgjournal.Open(ctx, s.DSN, &pgjournal.Options{Schema: s.Schema}); !errors.Is(err, journal.ErrFormatTooNew) {
		t.Fatalf("open of a newer schema: %v", err)
	}
	if _, err := conn.Exec(ctx, "DELETE FROM schema_migrations WHERE version = $1", maxV+1); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_InvalidOptions(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]pgjournal.Options{
		"NUL in node id":  {NodeID: "a\x00b"},
		"long node id":    {NodeID: string(make([]byte, 65))},
		"NUL in schema":   {Schema: "s\x00"},
		"invalid UTF-8":   {NodeID: "\xff"},
		"schema too long": {Schema: string(make([]byte, 64))},
	} {
		if _, err := pgjournal.Open(context.Background(), "postgres://127.0.0.1:1/x", &o); !errors.Is(err, journal.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestVerify_DetectsTampering(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := pgtest.New(t)
	db := s.Open(t, nil)
	if _, err := db.Activate(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := db.Append(ctx, one("s", uint64(i), fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, s)
	for _, tc := range []struct{ name, do, undo string }{
		{"changed data", "UPDATE events SET data = 'X' WHERE global = 2", "UPDATE events SET data = '1' WHERE global = 2"},
		{"event under a foreign node", "UPDATE events SET node = 'intruder' WHERE global = 3", "UPDATE events SET node = $$" + db.NodeID() + "$$ WHERE global = 3"},
		{"head moved", "UPDATE streams SET head = 5", "UPDATE streams SET head = 3"},
		{"epoch bumped without activation", "UPDATE streams SET epoch = 7", "UPDATE streams SET epoch = 1"},
		{"orphan claim", "INSERT INTO claims VALUES ('n', 'k', 'nobody')", "DELETE FROM claims"},
	} {
		if _, err := conn.Exec(ctx, tc.do); err != nil {
			t.Fatal(err)
		}
		if err := db.Verify(ctx); !errors.Is(err, journal.ErrCorrupt) {
			t.Errorf("%s: Verify = %v, want ErrCorrupt", tc.name, err)
		}
		if _, err := conn.Exec(ctx, tc.undo); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Verify(ctx); err != nil {
		t.Fatalf("after undoing: %v", err)
	}
}

// TestAppend_LostConnection ends the committer's session inside a
// transaction: the batch fails, nothing is written, and the next append
// works on a new connection.
func TestAppend_LostConnection(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := pgtest.New(t)
	db := s.Open(t, nil)
	if _, err := db.Activate(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pgjournal.SetBeforeCommit(db, func() {
		once.Do(func() { close(held) })
		<-release
	})
	done := make(chan error, 1)
	go func() {
		_, err := db.Append(ctx, one("s", 0, "lost"))
		done <- err
	}()
	<-held
	var killed bool
	err := connect(t, s).QueryRow(ctx, `SELECT bool_or(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = $1 AND state = 'idle in transaction'`, "github.com/refundd/refundd/"+db.NodeID()).Scan(&killed)
	if err != nil || !killed {
		t.Fatalf("terminate the committer's session: %v, %v", killed, err)
	}
	pgjournal.SetBeforeCommit(db, nil)
	close(release)
	if err := <-done; err == nil || errors.Is(err, journal.ErrSequenceMismatch) || errors.Is(err, pgjournal.ErrFenced) {
		t.Fatalf("append on a killed session: %v", err)
	}
	if h, err := db.Head(ctx, "s"); err != nil || h != 0 {
		t.Fatalf("head %d, %v: the killed transaction wrote", h, err)
	}
	if n, err := db.Append(ctx, one("s", 0, "again")); err != nil || n != 1 {
		t.Fatalf("append after the lost connection: %d, %v", n, err)
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	db := pgtest.Open(t)
	if _, err := db.Activate(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := db.Append(ctx, one("s", 0, "")); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := db.Load(ctx, "s", 0); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("Load after Close: %v", err)
	}
	if _, err := db.Activate(ctx, "s"); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("Activate after Close: %v", err)
	}
	if err := db.WaitGlobal(ctx, 0); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("WaitGlobal after Close: %v", err)
	}
}

func TestWaitGlobal_SeesOtherNodes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := pgtest.New(t)
	a, b := s.Open(t, nil), s.Open(t, nil)
	if _, err := a.Activate(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.WaitGlobal(ctx, 0) }()
	if _, err := a.Append(ctx, one("s", 0, "")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.WaitGlobal(short, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitGlobal past the end: %v", err)
	}
}
