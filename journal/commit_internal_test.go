package journal

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// These tests drive the committer into known batches by holding bbolt's
// writer lock: the committer takes one request and blocks in Update, the
// test queues more, then releases the lock so the next batch holds exactly
// what was queued.

func openInternal(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "j.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Verify(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("verify: %v", err)
		}
		_ = db.Close()
	})
	return db
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

type result struct {
	last uint64
	err  error
}

// holdCommitter blocks the committer just before the commit of a warm-up
// append and returns a function that lets it go and waits for the warm-up
// result. Everything appended meanwhile waits in the queue.
func holdCommitter(t *testing.T, db *DB) (release func()) {
	t.Helper()
	entered := make(chan struct{})
	gate := make(chan struct{})
	var once sync.Once
	db.beforeCommit = func(int) {
		once.Do(func() {
			close(entered)
			<-gate
		})
	}
	warm := appendAsync(db, context.Background(), AppendRequest{Stream: "warm-up", Events: []Event{ev("t")}})
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("committer never reached the warm-up commit")
	}
	return func() {
		close(gate)
		if r := <-warm; r.err != nil {
			t.Fatalf("warm-up append: %v", r.err)
		}
	}
}

func appendAsync(db *DB, ctx context.Context, req AppendRequest) <-chan result {
	ch := make(chan result, 1)
	go func() {
		last, err := db.Append(ctx, req)
		ch <- result{last, err}
	}()
	return ch
}

func ev(typ string) Event { return Event{Type: typ, Version: 1, Data: []byte(typ)} }

func TestCommit_SameKeyInOneBatch(t *testing.T) {
	db := openInternal(t)
	release := holdCommitter(t, db)
	claim := []Claim{{Namespace: "refund_no", Key: "R1"}}
	a := appendAsync(db, context.Background(), AppendRequest{Stream: "a", Events: []Event{ev("x")}, Claims: claim})
	waitFor(t, "a queued", func() bool { return db.loop.Queued() == 1 })
	b := appendAsync(db, context.Background(), AppendRequest{Stream: "b", Events: []Event{ev("x")}, Claims: claim})
	waitFor(t, "b queued", func() bool { return db.loop.Queued() == 2 })
	release()
	ra, rb := <-a, <-b

	// Queue order decides: a was first in the batch.
	if ra.err != nil || ra.last != 1 {
		t.Fatalf("a: got (%d, %v), want (1, nil)", ra.last, ra.err)
	}
	var kt *KeyTakenError
	if !errors.As(rb.err, &kt) || kt.Owner != "a" || !errors.Is(rb.err, ErrKeyTaken) {
		t.Fatalf("b: got %v, want KeyTakenError owned by a", rb.err)
	}
	ctx := context.Background()
	if h, _ := db.Head(ctx, "b"); h != 0 {
		t.Fatalf("failed request wrote events: head of b = %d", h)
	}
	if owner, err := db.Lookup(ctx, "refund_no", "R1"); err != nil || owner != "a" {
		t.Fatalf("lookup: %q %v", owner, err)
	}
	// warm-up (1) + a (1): b consumed no global.
	if g, _ := db.LastGlobal(ctx); g != 2 {
		t.Fatalf("last global = %d, want 2", g)
	}
}

func TestCommit_FailedRequestDoesNotAffectOthers(t *testing.T) {
	db := openInternal(t)
	ctx := context.Background()
	if _, err := db.Append(ctx, AppendRequest{Stream: "s", Events: []Event{ev("one")}}); err != nil {
		t.Fatal(err)
	}
	release := holdCommitter(t, db)
	reqs := []AppendRequest{
		{Stream: "s", Expected: 1, Events: []Event{ev("two")}},                                                    // ok
		{Stream: "s", Expected: 1, Events: []Event{ev("stale")}, Claims: []Claim{{Namespace: "n", Key: "k"}}},     // stale after the first
		{Stream: "s", Expected: 2, Events: []Event{ev("three"), ev("four")}},                                      // sees the first
		{Stream: "t", Expected: 0, Events: []Event{ev("t1")}, Dues: []Due{{At: time.Unix(5, 0), Key: "timer"}}},   // ok
		{Stream: "u", Expected: 3, Events: []Event{ev("ahead")}, Dues: []Due{{At: time.Unix(1, 0), Key: "nope"}}}, // ahead
	}
	var chans []<-chan result
	for i, r := range reqs {
		chans = append(chans, appendAsync(db, ctx, r))
		waitFor(t, "request queued", func() bool { return db.loop.Queued() == i+1 })
	}
	release()
	want := []struct {
		last uint64
		err  error
	}{{2, nil}, {0, ErrSequenceMismatch}, {4, nil}, {1, nil}, {0, ErrSequenceMismatch}}
	for i, ch := range chans {
		r := <-ch
		if r.last != want[i].last || !errors.Is(r.err, want[i].err) || (want[i].err == nil && r.err != nil) {
			t.Errorf("request %d: got (%d, %v), want (%d, %v)", i, r.last, r.err, want[i].last, want[i].err)
		}
	}
	recs, err := db.Load(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, r := range recs {
		types = append(types, r.Type)
	}
	if got := len(types); got != 4 || types[1] != "two" || types[2] != "three" || types[3] != "four" {
		t.Fatalf("stream s = %v, want [one two three four]", types)
	}
	if _, err := db.Lookup(ctx, "n", "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("failed request's claim was written: %v", err)
	}
	dues, err := db.DueBefore(ctx, time.Unix(100, 0), 0)
	if err != nil || len(dues) != 1 || dues[0].Stream != "t" {
		t.Fatalf("dues = %v, %v; want only t's", dues, err)
	}
}

func TestCommit_CancelledWhileQueued(t *testing.T) {
	db := openInternal(t)
	release := holdCommitter(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	ch := appendAsync(db, ctx, AppendRequest{Stream: "c", Events: []Event{ev("x")}})
	waitFor(t, "queued", func() bool { return db.loop.Queued() == 1 })
	cancel()
	release()
	r := <-ch
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("got (%d, %v), want context.Canceled", r.last, r.err)
	}
	if h, _ := db.Head(context.Background(), "c"); h != 0 {
		t.Fatalf("cancelled append was written: head %d", h)
	}
}

func TestClose_DrainsQueued(t *testing.T) {
	db := openInternal(t)
	release := holdCommitter(t, db)
	const n = 20
	var chans []<-chan result
	for i := range n {
		chans = append(chans, appendAsync(db, context.Background(),
			AppendRequest{Stream: "d", Expected: uint64(i), Events: []Event{ev("x")}}))
		waitFor(t, "queued", func() bool { return db.loop.Queued() == i+1 })
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	waitFor(t, "close to stop accepting", db.loop.Closed)
	if _, err := db.Append(context.Background(), AppendRequest{Stream: "late", Events: []Event{ev("x")}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v, want ErrClosed", err)
	}
	release()
	for i, ch := range chans {
		if r := <-ch; r.err != nil || r.last != uint64(i+1) {
			t.Fatalf("queued append %d: got (%d, %v)", i, r.last, r.err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	db2, err := Open(db.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if h, err := db2.Head(context.Background(), "d"); err != nil || h != n {
		t.Fatalf("after reopen head = %d, %v; want %d", h, err, n)
	}
	if err := db2.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestCommit_ManyWaitersOneBatch(t *testing.T) {
	db := openInternal(t)
	release := holdCommitter(t, db)
	var wg sync.WaitGroup
	const n = 50
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = db.Append(context.Background(), AppendRequest{Stream: "m" + string(rune('A'+i)), Events: []Event{ev("x")}})
		}()
	}
	waitFor(t, "all queued", func() bool { return db.loop.Queued() == n })
	txBefore := db.commits.Load()
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	// warm-up commit + one commit for all fifty.
	if got := db.commits.Load() - txBefore; got != 2 {
		t.Fatalf("write transactions for the batch = %d, want 2 (warm-up + one group commit)", got)
	}
}

// TestCommit_KVWriteRidesWithAppends: a WriteKV queued behind a running
// commit goes out in the next commit of appends, not in a transaction of
// its own (each of which cost an fsync while holding appends back).
func TestCommit_KVWriteRidesWithAppends(t *testing.T) {
	db := openInternal(t)
	bg := context.Background()
	release := holdCommitter(t, db)
	a := appendAsync(db, bg, AppendRequest{Stream: "a", Events: []Event{ev("x")}})
	waitFor(t, "a queued", func() bool { return db.loop.Queued() == 1 })
	kv := make(chan error, 1)
	go func() { kv <- db.WriteKV(bg, []KV{{Key: "tally/n", Value: []byte("1")}}, nil) }()
	waitFor(t, "kv write queued", func() bool { return db.loop.Queued() == 2 })
	b := appendAsync(db, bg, AppendRequest{Stream: "b", Events: []Event{ev("y")}})
	waitFor(t, "b queued", func() bool { return db.loop.Queued() == 3 })
	txBefore := db.commits.Load()
	release()
	for _, ch := range []<-chan result{a, b} {
		if r := <-ch; r.err != nil {
			t.Fatalf("append: %v", r.err)
		}
	}
	if err := <-kv; err != nil {
		t.Fatalf("WriteKV: %v", err)
	}
	if got := db.commits.Load() - txBefore; got != 2 {
		t.Fatalf("write transactions = %d, want 2 (warm-up + one commit of a, the kv write and b)", got)
	}
	if v, err := db.Get(bg, "tally/n"); err != nil || string(v) != "1" {
		t.Fatalf("kv after the commit = %q, %v; want 1", v, err)
	}
}

// TestCommit_ValuesBufferBounded: the committer reuses one buffer for each
// commit's encoded values (DB.values), and does not keep an outsized one
// after the commit that needed it. The records of both commits read back
// whole, the second written into the reused buffer.
func TestCommit_ValuesBufferBounded(t *testing.T) {
	db := openInternal(t)
	ctx := context.Background()
	big := make([]byte, 2*maxReusedValues)
	for i := range big {
		big[i] = byte(i)
	}
	appendOne := func(stream string, expected uint64, data []byte) {
		t.Helper()
		if _, err := db.Append(ctx, AppendRequest{Stream: stream, Expected: expected, Events: []Event{{Type: "t", Version: 1, Data: data}}}); err != nil {
			t.Fatal(err)
		}
	}
	appendOne("big", 0, big)
	// Append returns after the committer is done with the commit.
	if c := cap(db.values); c < len(big) {
		t.Fatalf("after a %d-byte record the buffer holds %d bytes", len(big), c)
	}
	appendOne("small", 0, []byte("small"))
	if c := cap(db.values); c > maxReusedValues {
		t.Fatalf("the next commit kept the outsized buffer: %d bytes, bound %d", c, maxReusedValues)
	}
	appendOne("small", 1, []byte("again"))
	for stream, want := range map[string][][]byte{"big": {big}, "small": {[]byte("small"), []byte("again")}} {
		recs, err := db.Load(ctx, stream, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(want) {
			t.Fatalf("%s: %d records, want %d", stream, len(recs), len(want))
		}
		for i, r := range recs {
			if !bytes.Equal(r.Data, want[i]) {
				t.Fatalf("%s record %d: %d bytes differ from the %d appended", stream, i, len(r.Data), len(want[i]))
			}
		}
	}
}
