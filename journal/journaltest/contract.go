package journaltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/journal"
)

// Journal is what the contract suite tests: the journal methods refundd
// uses, which both the bbolt journal (*journal.DB) and the PostgreSQL one
// (*pgjournal.DB) implement with the same semantics.
type Journal interface {
	Append(ctx context.Context, req journal.AppendRequest) (uint64, error)
	Load(ctx context.Context, stream string, afterSeq uint64) ([]journal.Record, error)
	LoadStreams(ctx context.Context, streams []string) (map[string][]journal.Record, error)
	Head(ctx context.Context, stream string) (uint64, error)
	Lookup(ctx context.Context, namespace, key string) (string, error)
	Scan(ctx context.Context, afterGlobal uint64, limit int) ([]journal.Record, error)
	LastGlobal(ctx context.Context) (uint64, error)
	DueBefore(ctx context.Context, t time.Time, limit int) ([]journal.Due, error)
	DeleteDue(ctx context.Context, dues []journal.Due) error
	Marks(ctx context.Context, prefix, after string, limit int) ([]string, error)
	MarksDesc(ctx context.Context, prefix, before string, limit int) ([]string, error)
	WriteMarks(ctx context.Context, marks []journal.Mark) error
	Get(ctx context.Context, key string) ([]byte, error)
	List(ctx context.Context, prefix string) ([]journal.KV, error)
	Put(ctx context.Context, key string, value []byte) error
	Delete(ctx context.Context, key string) error
	WriteKV(ctx context.Context, put []journal.KV, del []string) error
	Counters(ctx context.Context) (journal.Counts, error)
	CountersBetween(ctx context.Context, from, to string) (journal.Counts, error)
}

// Activator is implemented by journals that fence appends by ownership
// (pgjournal): a DB appends only to streams it activated, and only until
// another DB activates them. The suite activates every stream it appends
// to on such journals.
type Activator interface {
	Activate(ctx context.Context, stream string) (uint64, error)
}

// Node is one node's handle on a shared, fenced journal.
type Node interface {
	Journal
	Activator
}

// Cluster is implemented by what RunContract's open returns for a backend
// that several nodes share; the fencing subtests run only for it. The
// Cluster itself is the first node.
type Cluster interface {
	Node
	// OpenNode opens another node on the same storage; the test's cleanup
	// closes it.
	OpenNode(t *testing.T) Node
	// HoldCommit makes node's next commit stop inside its transaction once
	// it has taken its locks and checked its requests, before it writes
	// and commits: held is closed when it gets there, and release lets it
	// (and later commits) go on.
	HoldCommit(node Node) (held <-chan struct{}, release func())
	// WaitBlocked returns once node is waiting for a lock held by another
	// node's open transaction, and fails the test if that does not happen
	// within a few seconds.
	WaitBlocked(t *testing.T, node Node)
	// ErrFenced is the sentinel (for errors.Is) of an append by a node that
	// does not own the stream.
	ErrFenced() error
}

// RunContract runs the journal contract against journals made by open,
// which must return a fresh, empty journal each call and close it when the
// test ends. Every subtest runs in parallel with its own journal. If the
// journal implements Cluster, the fencing subtests run too.
func RunContract(t *testing.T, open func(t *testing.T) Journal) {
	tests := []struct {
		name string
		run  func(t *testing.T, j Journal)
	}{
		{"AppendLoadHead", testAppendLoadHead},
		{"Invalid", testInvalid},
		{"SequenceMismatch", testSequenceMismatch},
		{"ConcurrentSameExpected", testConcurrentSameExpected},
		{"Claims", testClaims},
		{"DuesAndMarksAtomic", testDuesAndMarks},
		{"DropDues", testDropDues},
		{"MarksBothWays", testMarksBothWays},
		{"FailureIsolation", testFailureIsolation},
		{"ScanGapFree", testScanGapFree},
		{"KV", testKV},
		{"CountersKept", testCountersKept},
		{"LoadStreams", testLoadStreams},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, open(t))
		})
	}
	fencing := []struct {
		name string
		run  func(t *testing.T, c Cluster)
	}{
		{"Fencing/NotActivated", testNotActivated},
		{"Fencing/StaleEpoch", testStaleEpoch},
		{"Fencing/TakeoverDuringInflightWrite", testTakeoverInflight},
		{"Fencing/Contention", testFencingContention},
		{"Fencing/ScanAcrossNodes", testScanAcrossNodes},
	}
	for _, tc := range fencing {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, ok := open(t).(Cluster)
			if !ok {
				t.Skip("journaltest: backend has a single writer (no Cluster): fencing does not apply")
			}
			tc.run(t, c)
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// activate activates stream on j if j fences appends.
func activate(t *testing.T, j Journal, stream string) {
	t.Helper()
	if a, ok := j.(Activator); ok {
		if _, err := a.Activate(ctxT(t), stream); err != nil {
			t.Fatalf("activate %q: %v", stream, err)
		}
	}
}

func ev(typ string, data string) journal.Event {
	return journal.Event{Type: typ, Version: 1, Data: []byte(data)}
}

func mustAppend(t *testing.T, j Journal, req journal.AppendRequest) uint64 {
	t.Helper()
	last, err := j.Append(ctxT(t), req)
	if err != nil {
		t.Fatalf("append to %q after %d: %v", req.Stream, req.Expected, err)
	}
	return last
}

func mustHead(t *testing.T, j Journal, stream string) uint64 {
	t.Helper()
	h, err := j.Head(ctxT(t), stream)
	if err != nil {
		t.Fatalf("head %q: %v", stream, err)
	}
	return h
}

func mustLast(t *testing.T, j Journal) uint64 {
	t.Helper()
	g, err := j.LastGlobal(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// checkLog scans the whole journal and checks globals 1..N in order, the
// chain hash of every record, and that per-stream seqs are gap-free.
func checkLog(t *testing.T, j Journal) []journal.Record {
	t.Helper()
	recs, err := j.Scan(ctxT(t), 0, 0)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	var prev journal.Hash
	seqs := map[string]uint64{}
	for i, r := range recs {
		if r.Global != uint64(i+1) {
			t.Fatalf("scan: record %d has global %d", i, r.Global)
		}
		if h := journal.ChainHash(prev, r); h != r.Hash {
			t.Fatalf("global %d: stored chain hash %s, computed %s", r.Global, r.Hash, h)
		}
		prev = r.Hash
		if r.Seq != seqs[r.Stream]+1 {
			t.Fatalf("global %d: stream %q seq %d follows %d", r.Global, r.Stream, r.Seq, seqs[r.Stream])
		}
		seqs[r.Stream] = r.Seq
	}
	if last := mustLast(t, j); last != uint64(len(recs)) {
		t.Fatalf("LastGlobal = %d, scan found %d records", last, len(recs))
	}
	for s, seq := range seqs {
		if h := mustHead(t, j, s); h != seq {
			t.Fatalf("Head(%q) = %d, log ends at seq %d", s, h, seq)
		}
	}
	return recs
}

func testAppendLoadHead(t *testing.T, j Journal) {
	ctx := ctxT(t)
	activate(t, j, "a")
	activate(t, j, "b")
	if h := mustHead(t, j, "a"); h != 0 {
		t.Fatalf("Head of a new stream = %d", h)
	}
	if last := mustAppend(t, j, journal.AppendRequest{Stream: "a", Events: []journal.Event{ev("one", "1"), ev("two", "")}}); last != 2 {
		t.Fatalf("first append returned %d, want 2", last)
	}
	if last := mustAppend(t, j, journal.AppendRequest{Stream: "b", Events: []journal.Event{{Type: "b1", Version: 7, Data: []byte{0, 1, 2, 0xff}}}}); last != 1 {
		t.Fatalf("append to b returned %d, want 1", last)
	}
	if last := mustAppend(t, j, journal.AppendRequest{Stream: "a", Expected: 2, Events: []journal.Event{ev("three", "3")}}); last != 3 {
		t.Fatalf("third append returned %d, want 3", last)
	}
	recs, err := j.Load(ctx, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		global, seq uint64
		typ, data   string
	}{{1, 1, "one", "1"}, {2, 2, "two", ""}, {4, 3, "three", "3"}}
	if len(recs) != len(want) {
		t.Fatalf("Load(a) = %d records, want %d", len(recs), len(want))
	}
	for i, w := range want {
		r := recs[i]
		if r.Stream != "a" || r.Global != w.global || r.Seq != w.seq || r.Type != w.typ || r.Version != 1 || string(r.Data) != w.data {
			t.Fatalf("record %d = %+v, want %+v", i, r, w)
		}
	}
	if recs, err := j.Load(ctx, "a", 2); err != nil || len(recs) != 1 || recs[0].Seq != 3 {
		t.Fatalf("Load(a, after 2) = %+v, %v", recs, err)
	}
	if recs, err := j.Load(ctx, "a", 3); err != nil || len(recs) != 0 {
		t.Fatalf("Load(a, after 3) = %+v, %v", recs, err)
	}
	if recs, err := j.Load(ctx, "nobody", 0); err != nil || recs == nil || len(recs) != 0 {
		t.Fatalf("Load(unknown) = %#v, %v; want an empty slice", recs, err)
	}
	if b, err := j.Load(ctx, "b", 0); err != nil || len(b) != 1 || b[0].Version != 7 || !bytes.Equal(b[0].Data, []byte{0, 1, 2, 0xff}) {
		t.Fatalf("Load(b) = %+v, %v", b, err)
	}
	if h := mustHead(t, j, "a"); h != 3 {
		t.Fatalf("Head(a) = %d", h)
	}
	if h := mustHead(t, j, "nobody"); h != 0 {
		t.Fatalf("Head(unknown) = %d", h)
	}
	recs = checkLog(t, j)
	if len(recs) != 4 {
		t.Fatalf("scan found %d records", len(recs))
	}
	if page, err := j.Scan(ctx, 1, 2); err != nil || len(page) != 2 || page[0].Global != 2 || page[1].Global != 3 {
		t.Fatalf("Scan(after 1, limit 2) = %+v, %v", page, err)
	}
	if page, err := j.Scan(ctx, 4, 0); err != nil || len(page) != 0 {
		t.Fatalf("Scan past the end = %+v, %v", page, err)
	}
}

func testInvalid(t *testing.T, j Journal) {
	ctx := ctxT(t)
	activate(t, j, "s")
	long := string(make([]byte, 129))
	for name, req := range map[string]journal.AppendRequest{
		"empty stream":     {Events: []journal.Event{ev("t", "")}},
		"long stream":      {Stream: "x" + long, Events: []journal.Event{ev("t", "")}},
		"NUL in stream":    {Stream: "a\x00b", Events: []journal.Event{ev("t", "")}},
		"no events":        {Stream: "s"},
		"empty type":       {Stream: "s", Events: []journal.Event{{Version: 1}}},
		"version 0":        {Stream: "s", Events: []journal.Event{{Type: "t"}}},
		"empty claim key":  {Stream: "s", Events: []journal.Event{ev("t", "")}, Claims: []journal.Claim{{Namespace: "n"}}},
		"NUL in namespace": {Stream: "s", Events: []journal.Event{ev("t", "")}, Claims: []journal.Claim{{Namespace: "n\x00", Key: "k"}}},
		"empty mark":       {Stream: "s", Events: []journal.Event{ev("t", "")}, Marks: []journal.Mark{{}}},
		"due before 1970":  {Stream: "s", Events: []journal.Event{ev("t", "")}, Dues: []journal.Due{{At: time.Unix(-1, 0)}}},
		"dropped due before 1970": {Stream: "s", Events: []journal.Event{ev("t", "")},
			DropDues: []journal.Due{{At: time.Unix(-1, 0)}}},
		"dropped due NUL stream": {Stream: "s", Events: []journal.Event{ev("t", "")},
			DropDues: []journal.Due{{At: time.Unix(1, 0), Stream: "a\x00b"}}},
		"empty counter key": {Stream: "s", Events: []journal.Event{ev("t", "")}, Counters: []journal.Counter{{Add: 1}}},
		"NUL in counter key": {Stream: "s", Events: []journal.Event{ev("t", "")},
			Counters: []journal.Counter{{Key: "a\x00b", Add: 1}}},
	} {
		if _, err := j.Append(ctx, req); !errors.Is(err, journal.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := j.Lookup(ctx, "", "k"); !errors.Is(err, journal.ErrInvalid) {
		t.Errorf("Lookup with empty namespace: %v", err)
	}
	if err := j.Put(ctx, "", nil); !errors.Is(err, journal.ErrInvalid) {
		t.Errorf("Put with empty key: %v", err)
	}
	if err := j.Put(ctx, "k", make([]byte, 1<<20+1)); !errors.Is(err, journal.ErrInvalid) {
		t.Errorf("Put of 1 MiB + 1: %v", err)
	}
	if last := mustLast(t, j); last != 0 {
		t.Fatalf("invalid requests wrote %d records", last)
	}
}

// testCountersKept: the counter changes appends carry are summed (Max
// keeps the largest) in the commit of their events, also when appends of
// several streams race into shared commits; a refused append changes
// nothing; Counters and CountersBetween read them with the last global
// they include, complete from a fresh journal's first record.
func testCountersKept(t *testing.T, j Journal) {
	ctx := ctxT(t)
	const streams, appends = 4, 12
	for i := range streams {
		activate(t, j, fmt.Sprintf("s%d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("s%d", i)
			for n := range appends {
				_, err := j.Append(ctx, journal.AppendRequest{Stream: stream, Expected: uint64(n),
					Events: []journal.Event{ev("t", "x")},
					Counters: []journal.Counter{{Key: "all", Add: 1}, {Key: "by/" + stream, Add: int64(n + 1)},
						{Key: "latest", Add: int64(i*100 + n), Max: true}, {Key: "zero", Add: 0}}})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Refused (a stale Expected): its counters are not kept.
	_, err := j.Append(ctx, journal.AppendRequest{Stream: "s0", Expected: 0, Events: []journal.Event{ev("t", "y")},
		Counters: []journal.Counter{{Key: "all", Add: 1000}}})
	var se *journal.SequenceError
	if !errors.As(err, &se) {
		t.Fatalf("stale append: %v, want a SequenceError", err)
	}
	want := map[string]int64{"all": streams * appends, "latest": (streams-1)*100 + appends - 1}
	for i := range streams {
		want[fmt.Sprintf("by/s%d", i)] = appends * (appends + 1) / 2
	}
	cs, err := j.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !cs.Complete || cs.Generation != journal.CountersGeneration || cs.LastGlobal != streams*appends {
		t.Errorf("Counters: complete %v, generation %d, last global %d; want true, %d, %d",
			cs.Complete, cs.Generation, cs.LastGlobal, journal.CountersGeneration, streams*appends)
	}
	delete(cs.Values, "zero") // an addition of 0 may or may not leave a key at 0
	if !maps.Equal(cs.Values, want) {
		t.Errorf("Counters: %v, want %v", cs.Values, want)
	}
	part, err := j.CountersBetween(ctx, "by/s1", "by/s3")
	if err != nil {
		t.Fatal(err)
	}
	if w := map[string]int64{"by/s1": want["by/s1"], "by/s2": want["by/s2"]}; !maps.Equal(part.Values, w) || part.LastGlobal != cs.LastGlobal {
		t.Errorf("CountersBetween(by/s1, by/s3): %v at %d, want %v at %d", part.Values, part.LastGlobal, w, cs.LastGlobal)
	}
	if open, err := j.CountersBetween(ctx, "by/s3", ""); err != nil || len(open.Values) != 2 {
		t.Errorf("CountersBetween(by/s3, \"\"): %v %v, want by/s3 and latest", open.Values, err)
	}
}

// testLoadStreams: LoadStreams returns for each stream what Load does,
// interleaved appends of several streams and several commits included; an
// unknown stream maps to an empty slice; a name given twice is read once.
func testLoadStreams(t *testing.T, j Journal) {
	ctx := ctxT(t)
	names := []string{"c", "a", "b"}
	for _, s := range names {
		activate(t, j, s)
	}
	heads := map[string]uint64{}
	for n := range 5 {
		for i, s := range names {
			if n <= i*2 {
				heads[s] += 2
				mustAppend(t, j, journal.AppendRequest{Stream: s, Expected: heads[s] - 2,
					Events: []journal.Event{ev("t", fmt.Sprintf("%s%d", s, n)), ev("u", fmt.Sprintf("%s%d'", s, n))}})
			}
		}
	}
	got, err := j.LoadStreams(ctx, []string{"b", "nobody", "a", "c", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("LoadStreams: %d streams, want 4", len(got))
	}
	for _, s := range append(names, "nobody") {
		want, err := j.Load(ctx, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got[s] == nil || len(got[s]) != len(want) {
			t.Fatalf("LoadStreams[%s]: %d records, Load: %d", s, len(got[s]), len(want))
		}
		for i := range want {
			g, w := got[s][i], want[i]
			if g.Global != w.Global || g.Stream != w.Stream || g.Seq != w.Seq || g.Type != w.Type || !bytes.Equal(g.Data, w.Data) || g.Hash != w.Hash {
				t.Errorf("LoadStreams[%s][%d] = %+v, Load: %+v", s, i, g, w)
			}
		}
	}
	if got, err := j.LoadStreams(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("LoadStreams(nil) = %v, %v", got, err)
	}
	if _, err := j.LoadStreams(ctx, []string{""}); !errors.Is(err, journal.ErrInvalid) {
		t.Errorf("LoadStreams of an empty name: %v, want ErrInvalid", err)
	}
}

func testSequenceMismatch(t *testing.T, j Journal) {
	ctx := ctxT(t)
	activate(t, j, "s")
	mustAppend(t, j, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("t", "1")}})
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, expected := range []uint64{0, 2, 1 << 40} {
		_, err := j.Append(ctx, journal.AppendRequest{
			Stream: "s", Expected: expected, Events: []journal.Event{ev("t", "x")},
			Claims: []journal.Claim{{Namespace: "n", Key: "k"}},
			Dues:   []journal.Due{{At: at, Key: "d"}},
			Marks:  []journal.Mark{{Key: "m"}},
		})
		var se *journal.SequenceError
		if !errors.As(err, &se) || !errors.Is(err, journal.ErrSequenceMismatch) {
			t.Fatalf("expected %d: err = %v, want *SequenceError", expected, err)
		}
		if se.Stream != "s" || se.Expected != expected || se.Actual != 1 {
			t.Fatalf("SequenceError = %+v", se)
		}
	}
	// Nothing of the refused requests was written.
	if h := mustHead(t, j, "s"); h != 1 {
		t.Fatalf("head moved to %d", h)
	}
	if _, err := j.Lookup(ctx, "n", "k"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("refused claim is visible: %v", err)
	}
	if d, err := j.DueBefore(ctx, at, 0); err != nil || len(d) != 0 {
		t.Fatalf("refused due entry is visible: %+v, %v", d, err)
	}
	if m, err := j.Marks(ctx, "", "", 0); err != nil || len(m) != 0 {
		t.Fatalf("refused mark is visible: %v, %v", m, err)
	}
	checkLog(t, j)
}

func testConcurrentSameExpected(t *testing.T, j Journal) {
	ctx := ctxT(t)
	activate(t, j, "s")
	const writers, rounds = 8, 5
	for round := range rounds {
		expected := uint64(round)
		var wg sync.WaitGroup
		errs := make([]error, writers)
		lasts := make([]uint64, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lasts[w], errs[w] = j.Append(ctx, journal.AppendRequest{Stream: "s", Expected: expected,
					Events: []journal.Event{ev("t", fmt.Sprintf("round %d writer %d", round, w))}})
			}()
		}
		wg.Wait()
		wins := 0
		for w, err := range errs {
			switch {
			case err == nil:
				wins++
				if lasts[w] != expected+1 {
					t.Fatalf("round %d: winner got seq %d", round, lasts[w])
				}
			case !errors.Is(err, journal.ErrSequenceMismatch):
				t.Fatalf("round %d writer %d: %v", round, w, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d appends with expected %d succeeded, want exactly 1", round, wins, expected)
		}
	}
	if h := mustHead(t, j, "s"); h != rounds {
		t.Fatalf("head = %d, want %d", h, rounds)
	}
	checkLog(t, j)
}

func testClaims(t *testing.T, j Journal) {
	ctx := ctxT(t)
	for _, s := range []string{"a", "b"} {
		activate(t, j, s)
	}
	k := journal.Claim{Namespace: "refund_no", Key: "R-1"}
	mustAppend(t, j, journal.AppendRequest{Stream: "a", Events: []journal.Event{ev("t", "")}, Claims: []journal.Claim{k, k}})
	if owner, err := j.Lookup(ctx, k.Namespace, k.Key); err != nil || owner != "a" {
		t.Fatalf("Lookup = %q, %v", owner, err)
	}
	_, err := j.Append(ctx, journal.AppendRequest{Stream: "b", Events: []journal.Event{ev("t", "")},
		Claims: []journal.Claim{{Namespace: "refund_no", Key: "R-2"}, k}, Marks: []journal.Mark{{Key: "mb"}}})
	var kt *journal.KeyTakenError
	if !errors.As(err, &kt) || !errors.Is(err, journal.ErrKeyTaken) || kt.Owner != "a" || kt.Key != "R-1" || kt.Namespace != "refund_no" {
		t.Fatalf("claim of a taken key: %v", err)
	}
	if h := mustHead(t, j, "b"); h != 0 {
		t.Fatalf("refused append moved b to %d", h)
	}
	if _, err := j.Lookup(ctx, "refund_no", "R-2"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("the refused request's other claim is visible: %v", err)
	}
	// Same-stream re-claim is fine; the same key in another namespace is
	// another key.
	mustAppend(t, j, journal.AppendRequest{Stream: "a", Expected: 1, Events: []journal.Event{ev("t", "")}, Claims: []journal.Claim{k}})
	mustAppend(t, j, journal.AppendRequest{Stream: "b", Events: []journal.Event{ev("t", "")}, Claims: []journal.Claim{{Namespace: "out_trade_no", Key: "R-1"}}})
	if owner, err := j.Lookup(ctx, "out_trade_no", "R-1"); err != nil || owner != "b" {
		t.Fatalf("Lookup(out_trade_no) = %q, %v", owner, err)
	}
	if owner, _ := j.Lookup(ctx, k.Namespace, k.Key); owner != "a" {
		t.Fatalf("owner changed to %q", owner)
	}

	// Many streams racing for one key: exactly one owns it.
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		activate(t, j, fmt.Sprintf("r%d", i))
	}
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = j.Append(ctx, journal.AppendRequest{Stream: fmt.Sprintf("r%d", i), Events: []journal.Event{ev("t", "")},
				Claims: []journal.Claim{{Namespace: "refund_no", Key: "contested"}}})
		}()
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		switch {
		case err == nil:
			if winner != "" {
				t.Fatalf("both %s and r%d claimed the key", winner, i)
			}
			winner = fmt.Sprintf("r%d", i)
		case !errors.Is(err, journal.ErrKeyTaken):
			t.Fatalf("r%d: %v", i, err)
		}
	}
	if owner, err := j.Lookup(ctx, "refund_no", "contested"); err != nil || owner != winner || winner == "" {
		t.Fatalf("contested key owned by %q (%v), winner %q", owner, err, winner)
	}
	checkLog(t, j)
}

// testDropDues: dropped dues leave the index in the same write as the
// events, after the request's own dues are put; a refused append drops
// nothing.
func testDropDues(t *testing.T, j Journal) {
	ctx := ctxT(t)
	activate(t, j, "s")
	activate(t, j, "t")
	t0 := time.Date(2031, 1, 2, 3, 4, 5, 987654321, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	mustAppend(t, j, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("t", "")},
		Dues: []journal.Due{{At: at(1), Key: "r1"}, {At: at(2), Key: "r2"}, {At: at(3), Key: "r3"}}})
	mustAppend(t, j, journal.AppendRequest{Stream: "t", Events: []journal.Event{ev("t", "")},
		Dues: []journal.Due{{At: at(1), Key: "r1"}}})
	list := func() []journal.Due {
		t.Helper()
		d, err := j.DueBefore(ctx, at(100), 0)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// A refused append drops nothing.
	_, err := j.Append(ctx, journal.AppendRequest{Stream: "s", Expected: 7, Events: []journal.Event{ev("t", "")},
		DropDues: []journal.Due{{At: at(1), Key: "r1"}}})
	if !errors.Is(err, journal.ErrSequenceMismatch) {
		t.Fatalf("append at the wrong head: %v", err)
	}
	if d := list(); len(d) != 4 {
		t.Fatalf("after a refused append: %+v", d)
	}
	// r1 moves from minute 1 to 4; r2 is put and dropped in one request
	// (the drop wins); r3 stays; a missing entry is no error; the other
	// stream's r1 is untouched; an explicit stream is honoured.
	mustAppend(t, j, journal.AppendRequest{Stream: "s", Expected: 1, Events: []journal.Event{ev("t", "")},
		Dues: []journal.Due{{At: at(4), Key: "r1"}, {At: at(5), Key: "r2"}},
		DropDues: []journal.Due{{At: at(1), Key: "r1"}, {At: at(2), Key: "r2"}, {At: at(5), Key: "r2"},
			{At: at(9), Key: "never"}, {At: at(3), Stream: "s", Key: "nope"}}})
	want := []journal.Due{{At: at(1), Stream: "t", Key: "r1"}, {At: at(3), Stream: "s", Key: "r3"}, {At: at(4), Stream: "s", Key: "r1"}}
	if d := list(); !slices.Equal(d, want) {
		t.Fatalf("after the drops: %+v,\nwant %+v", d, want)
	}
	// Another stream's append may drop this stream's entry when it names it.
	mustAppend(t, j, journal.AppendRequest{Stream: "t", Expected: 1, Events: []journal.Event{ev("t", "")},
		DropDues: []journal.Due{{At: at(3), Stream: "s", Key: "r3"}}})
	if d := list(); !slices.Equal(d, []journal.Due{want[0], want[2]}) {
		t.Fatalf("after dropping another stream's entry: %+v", d)
	}
}

func testDuesAndMarks(t *testing.T, j Journal) {
	ctx := ctxT(t)
	activate(t, j, "s")
	activate(t, j, "t")
	t0 := time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.FixedZone("CST", 8*3600))
	mustAppend(t, j, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("t", "")},
		Dues:  []journal.Due{{At: t0.Add(time.Minute), Key: "late"}, {At: t0, Key: "k2"}, {At: t0, Key: "k1"}},
		Marks: []journal.Mark{{Key: "attention/x/s/1"}, {Key: "attention/x/s/2"}, {Key: "attention/y/s/1"}, {Key: "attention/x/s/2", Clear: true}, {Key: "gone"}, {Key: "gone", Clear: true}}})
	mustAppend(t, j, journal.AppendRequest{Stream: "t", Events: []journal.Event{ev("t", "")},
		Dues:  []journal.Due{{At: t0, Stream: "s", Key: "k0"}, {At: t0, Key: ""}},
		Marks: []journal.Mark{{Key: "attention/x/t/1"}, {Key: "attention/x/t/2"}}})

	dues, err := j.DueBefore(ctx, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []journal.Due{{At: t0.UTC(), Stream: "s", Key: "k0"}, {At: t0.UTC(), Stream: "s", Key: "k1"},
		{At: t0.UTC(), Stream: "s", Key: "k2"}, {At: t0.UTC(), Stream: "t", Key: ""}}
	if !slices.Equal(dues, want) {
		t.Fatalf("DueBefore = %+v,\nwant %+v", dues, want)
	}
	if d, err := j.DueBefore(ctx, t0.Add(-time.Nanosecond), 0); err != nil || len(d) != 0 {
		t.Fatalf("due early: %+v, %v", d, err)
	}
	if d, err := j.DueBefore(ctx, t0.Add(time.Hour), 2); err != nil || !slices.Equal(d, want[:2]) {
		t.Fatalf("DueBefore limit 2 = %+v, %v", d, err)
	}
	if err := j.DeleteDue(ctx, []journal.Due{want[1], {At: t0, Stream: "s", Key: "never"}, {At: time.Unix(-5, 0), Stream: "s"}}); err != nil {
		t.Fatal(err)
	}
	if d, _ := j.DueBefore(ctx, t0.Add(time.Hour), 0); len(d) != 4 || d[1] != want[2] || d[3].Key != "late" {
		t.Fatalf("after DeleteDue: %+v", d)
	}

	marks := func(prefix, after string, limit int) []string {
		t.Helper()
		m, err := j.Marks(ctx, prefix, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := marks("attention/x/", "", 0); !slices.Equal(m, []string{"attention/x/s/1", "attention/x/t/1", "attention/x/t/2"}) {
		t.Fatalf("marks = %v", m)
	}
	if m := marks("attention/x/", "attention/x/s/1", 1); !slices.Equal(m, []string{"attention/x/t/1"}) {
		t.Fatalf("marks after s/1, limit 1 = %v", m)
	}
	if m := marks("attention/x/", "attention/x/t/2", 0); len(m) != 0 {
		t.Fatalf("marks after the last = %v", m)
	}
	if m := marks("", "", 0); len(m) != 4 {
		t.Fatalf("all marks = %v", m)
	}
	// Clearing is atomic with the next event too.
	mustAppend(t, j, journal.AppendRequest{Stream: "t", Expected: 1, Events: []journal.Event{ev("t", "")},
		Marks: []journal.Mark{{Key: "attention/x/t/1", Clear: true}, {Key: "never-set", Clear: true}}})
	if m := marks("attention/x/t/", "", 0); !slices.Equal(m, []string{"attention/x/t/2"}) {
		t.Fatalf("marks after clear = %v", m)
	}
	checkLog(t, j)
}

func testFailureIsolation(t *testing.T, j Journal) {
	ctx := ctxT(t)
	for _, s := range []string{"owner", "good1", "good2", "stale", "thief", "same"} {
		activate(t, j, s)
	}
	mustAppend(t, j, journal.AppendRequest{Stream: "owner", Events: []journal.Event{ev("t", "")}, Claims: []journal.Claim{{Namespace: "n", Key: "taken"}}})
	mustAppend(t, j, journal.AppendRequest{Stream: "stale", Events: []journal.Event{ev("t", "")}})
	for round := range 3 {
		pre := fmt.Sprintf("r%d-", round)
		base := uint64(round)
		reqs := []journal.AppendRequest{
			{Stream: "good1", Expected: base, Events: []journal.Event{ev("t", "")}, Claims: []journal.Claim{{Namespace: "n", Key: pre + "g1"}},
				Marks: []journal.Mark{{Key: pre + "g1"}}},
			{Stream: "stale", Expected: 0, Events: []journal.Event{ev("t", "")}, Claims: []journal.Claim{{Namespace: "n", Key: pre + "stale"}},
				Marks: []journal.Mark{{Key: pre + "stale"}}},
			{Stream: "thief", Expected: 0, Events: []journal.Event{ev("t", "")}, Claims: []journal.Claim{{Namespace: "n", Key: pre + "thief"}, {Namespace: "n", Key: "taken"}},
				Marks: []journal.Mark{{Key: pre + "thief"}}},
			{Stream: "same", Expected: base, Events: []journal.Event{{Type: "t"}}}, // version 0: invalid
			{Stream: "good2", Expected: 2 * base, Events: []journal.Event{ev("t", ""), ev("t", "")},
				Dues: []journal.Due{{At: time.Unix(int64(round), 0), Key: pre + "g2"}}},
		}
		errs := make([]error, len(reqs))
		var wg sync.WaitGroup
		for i, r := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = j.Append(ctx, r)
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[4] != nil {
			t.Fatalf("round %d: good requests failed: %v, %v", round, errs[0], errs[4])
		}
		if !errors.Is(errs[1], journal.ErrSequenceMismatch) || !errors.Is(errs[2], journal.ErrKeyTaken) || !errors.Is(errs[3], journal.ErrInvalid) {
			t.Fatalf("round %d: errors %v / %v / %v", round, errs[1], errs[2], errs[3])
		}
		for _, k := range []string{"stale", "thief"} {
			if _, err := j.Lookup(ctx, "n", pre+k); !errors.Is(err, journal.ErrNotFound) {
				t.Fatalf("round %d: claim of failed request %s visible: %v", round, k, err)
			}
		}
		if owner, err := j.Lookup(ctx, "n", pre+"g1"); err != nil || owner != "good1" {
			t.Fatalf("round %d: good claim: %q, %v", round, owner, err)
		}
		if m, _ := j.Marks(ctx, pre, "", 0); !slices.Equal(m, []string{pre + "g1"}) {
			t.Fatalf("round %d: marks %v", round, m)
		}
	}
	for s, want := range map[string]uint64{"good1": 3, "good2": 6, "stale": 1, "thief": 0, "same": 0} {
		if h := mustHead(t, j, s); h != want {
			t.Fatalf("Head(%s) = %d, want %d", s, h, want)
		}
	}
	if d, _ := j.DueBefore(ctx, time.Unix(10, 0), 0); len(d) != 3 {
		t.Fatalf("dues = %+v", d)
	}
	checkLog(t, j)
}

func testScanGapFree(t *testing.T, j Journal) {
	scanWhileWriting(t, j, []Journal{j})
}

// testScanAcrossNodes: commits of two nodes interleave, and a reader on
// either still never sees a global before every smaller one.
func testScanAcrossNodes(t *testing.T, c Cluster) {
	scanWhileWriting(t, c, []Journal{c, c.OpenNode(t)})
}

// scanWhileWriting has 8 writers, spread over nodes, append 25 events each
// to their own stream while a reader on r follows the log: every page it
// reads must start right after what it has and be contiguous.
func scanWhileWriting(t *testing.T, r Journal, nodes []Journal) {
	ctx := ctxT(t)
	const writers, perWriter = 8, 25
	for w := range writers {
		activate(t, nodes[w%len(nodes)], fmt.Sprintf("w%d", w))
	}
	total := uint64(writers * perWriter)
	readerErr := make(chan error, 1)
	go func() {
		var after uint64
		for after < total {
			recs, err := r.Scan(ctx, after, 7)
			if err != nil {
				readerErr <- err
				return
			}
			for i, rec := range recs {
				if rec.Global != after+uint64(i)+1 {
					readerErr <- fmt.Errorf("after %d, record %d has global %d", after, i, rec.Global)
					return
				}
			}
			after += uint64(len(recs))
		}
		readerErr <- nil
	}()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream, node := fmt.Sprintf("w%d", w), nodes[w%len(nodes)]
			for i := range perWriter {
				if _, err := node.Append(ctx, journal.AppendRequest{Stream: stream, Expected: uint64(i),
					Events: []journal.Event{ev("t", fmt.Sprint(i))}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := <-readerErr; err != nil {
		t.Fatalf("reader: %v", err)
	}
	if recs := checkLog(t, r); uint64(len(recs)) != total {
		t.Fatalf("scan found %d records, want %d", len(recs), total)
	}
}

func testKV(t *testing.T, j Journal) {
	ctx := ctxT(t)
	if _, err := j.Get(ctx, "missing"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("Get(missing): %v", err)
	}
	if err := j.Put(ctx, "webhook/a/cursor", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := j.Put(ctx, "webhook/a/cursor", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := j.Put(ctx, "webhook/b", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := j.Get(ctx, "webhook/a/cursor"); err != nil || string(v) != "2" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if v, err := j.Get(ctx, "webhook/b"); err != nil || len(v) != 0 {
		t.Fatalf("Get(empty value) = %q, %v", v, err)
	}
	err := j.WriteKV(ctx, []journal.KV{{Key: "webhook/c", Value: []byte("x")}, {Key: "webhook/c", Value: []byte("y")},
		{Key: "webhook/d", Value: []byte("d")}, {Key: "other", Value: []byte{0xff}}}, []string{"webhook/d", "webhook/b", "never"})
	if err != nil {
		t.Fatal(err)
	}
	list, err := j.List(ctx, "webhook/")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Key != "webhook/a/cursor" || string(list[0].Value) != "2" || list[1].Key != "webhook/c" || string(list[1].Value) != "y" {
		t.Fatalf("List = %+v", list)
	}
	if all, _ := j.List(ctx, ""); len(all) != 3 || all[0].Key != "other" {
		t.Fatalf("List(all) = %+v", all)
	}
	if err := j.Delete(ctx, "webhook/a/cursor"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Get(ctx, "webhook/a/cursor"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if err := j.WriteKV(ctx, []journal.KV{{Key: "ok", Value: []byte("v")}}, []string{""}); !errors.Is(err, journal.ErrInvalid) {
		t.Fatalf("WriteKV with an invalid delete: %v", err)
	}
	if _, err := j.Get(ctx, "ok"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("a refused WriteKV wrote its put: %v", err)
	}
	if last := mustLast(t, j); last != 0 {
		t.Fatalf("kv writes added %d records", last)
	}
}

// --- fencing ---

func testNotActivated(t *testing.T, c Cluster) {
	ctx := ctxT(t)
	b := c.OpenNode(t)
	if _, err := c.Append(ctx, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("t", "")}}); !errors.Is(err, c.ErrFenced()) {
		t.Fatalf("append to a stream nobody activated: %v", err)
	}
	// Another node's activation does not let this one write.
	if _, err := b.Activate(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("t", "")}}); !errors.Is(err, c.ErrFenced()) {
		t.Fatalf("append to a stream another node activated: %v", err)
	}
	if last := mustLast(t, c); last != 0 {
		t.Fatalf("fenced appends wrote %d records", last)
	}
}

func testStaleEpoch(t *testing.T, c Cluster) {
	ctx := ctxT(t)
	a, b := Node(c), c.OpenNode(t)
	e1, err := a.Activate(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, a, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("by a", "1")}})
	e2, err := b.Activate(ctx, "s")
	if err != nil || e2 <= e1 {
		t.Fatalf("B's activation: epoch %d after %d, %v", e2, e1, err)
	}
	// A's expected sequence is right, its epoch is not.
	_, err = a.Append(ctx, journal.AppendRequest{Stream: "s", Expected: 1, Events: []journal.Event{ev("stale a", "")},
		Claims: []journal.Claim{{Namespace: "n", Key: "k"}}, Marks: []journal.Mark{{Key: "m"}}})
	if !errors.Is(err, c.ErrFenced()) {
		t.Fatalf("stale owner's append: %v, want fenced", err)
	}
	if h := mustHead(t, b, "s"); h != 1 {
		t.Fatalf("fenced append moved the head to %d", h)
	}
	if _, err := b.Lookup(ctx, "n", "k"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("fenced append's claim is visible: %v", err)
	}
	if m, _ := b.Marks(ctx, "", "", 0); len(m) != 0 {
		t.Fatalf("fenced append's mark is visible: %v", m)
	}
	recs, err := b.Load(ctx, "s", 0)
	if err != nil || len(recs) != 1 || string(recs[0].Data) != "1" {
		t.Fatalf("B loads %+v, %v", recs, err)
	}
	mustAppend(t, b, journal.AppendRequest{Stream: "s", Expected: 1, Events: []journal.Event{ev("by b", "2")}})
	// A takes it back: now B is the stale one.
	e3, err := a.Activate(ctx, "s")
	if err != nil || e3 <= e2 {
		t.Fatalf("A's reactivation: epoch %d after %d, %v", e3, e2, err)
	}
	if _, err := b.Append(ctx, journal.AppendRequest{Stream: "s", Expected: 2, Events: []journal.Event{ev("stale b", "")}}); !errors.Is(err, c.ErrFenced()) {
		t.Fatalf("B after A took over: %v, want fenced", err)
	}
	mustAppend(t, a, journal.AppendRequest{Stream: "s", Expected: 2, Events: []journal.Event{ev("by a", "3")}})
	// Fencing is per stream: B still owns what it activated.
	if _, err := b.Activate(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, b, journal.AppendRequest{Stream: "other", Events: []journal.Event{ev("by b", "")}})
	checkLog(t, c)
}

func testTakeoverInflight(t *testing.T, c Cluster) {
	ctx := ctxT(t)
	a, b := Node(c), c.OpenNode(t)
	if _, err := a.Activate(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, a, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("by a", "1")}})

	held, release := c.HoldCommit(a)
	defer release()
	type result struct {
		n   uint64
		err error
	}
	aDone := make(chan result, 1)
	go func() {
		n, err := a.Append(ctx, journal.AppendRequest{Stream: "s", Expected: 1, Events: []journal.Event{ev("in flight", "2")}})
		aDone <- result{n, err}
	}()
	select {
	case <-held:
	case r := <-aDone:
		t.Fatalf("A's append finished without reaching the hold: %+v", r)
	case <-ctx.Done():
		t.Fatal("A's append never reached the hold")
	}
	bDone := make(chan result, 1)
	go func() {
		e, err := b.Activate(ctx, "s")
		bDone <- result{e, err}
	}()
	c.WaitBlocked(t, b)
	select {
	case r := <-bDone:
		t.Fatalf("B's activation finished (%+v) while A's write was in flight", r)
	default:
	}
	release()
	ra := <-aDone
	if ra.err != nil || ra.n != 2 {
		t.Fatalf("A's in-flight append: %d, %v; want it to commit as seq 2", ra.n, ra.err)
	}
	rb := <-bDone
	if rb.err != nil {
		t.Fatalf("B's activation: %v", rb.err)
	}
	recs, err := b.Load(ctx, "s", 0)
	if err != nil || len(recs) != 2 || string(recs[1].Data) != "2" {
		t.Fatalf("B loads %+v, %v; want A's in-flight event", recs, err)
	}
	if _, err := a.Append(ctx, journal.AppendRequest{Stream: "s", Expected: 2, Events: []journal.Event{ev("stale a", "")}}); !errors.Is(err, c.ErrFenced()) {
		t.Fatalf("A after the takeover: %v, want fenced", err)
	}
	mustAppend(t, b, journal.AppendRequest{Stream: "s", Expected: 2, Events: []journal.Event{ev("by b", "3")}})
	checkLog(t, c)
}

// testFencingContention has two nodes take a few streams from each other
// over and over, each appending at the head it loaded until it is fenced.
// Every success must be in the log exactly once, in order; the backend's
// own consistency check at cleanup sees the epochs.
func testFencingContention(t *testing.T, c Cluster) {
	ctx := ctxT(t)
	nodes := []Node{c, c.OpenNode(t)}
	streams := []string{"x", "y", "z"}
	const rounds = 15
	var mu sync.Mutex
	written := map[string]map[uint64]string{} // stream -> seq -> data of the successful append
	for _, s := range streams {
		written[s] = map[uint64]string{}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	for n, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				s := streams[(r+n)%len(streams)]
				if _, err := node.Activate(ctx, s); err != nil {
					errs <- err
					return
				}
				recs, err := node.Load(ctx, s, 0)
				if err != nil {
					errs <- err
					return
				}
				head := uint64(len(recs))
				for i := range 3 {
					data := fmt.Sprintf("n%d r%d i%d", n, r, i)
					last, err := node.Append(ctx, journal.AppendRequest{Stream: s, Expected: head, Events: []journal.Event{ev("t", data)}})
					if errors.Is(err, c.ErrFenced()) || errors.Is(err, journal.ErrSequenceMismatch) {
						break // lost the stream: the next round takes another
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					prev, dup := written[s][last]
					written[s][last] = data
					mu.Unlock()
					if dup {
						errs <- fmt.Errorf("%s seq %d: appends %q and %q both succeeded", s, last, prev, data)
						return
					}
					head = last
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range streams {
		recs, err := c.Load(ctx, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(written[s]) {
			t.Fatalf("stream %s holds %d events, %d appends succeeded", s, len(recs), len(written[s]))
		}
		for _, r := range recs {
			if want := written[s][r.Seq]; string(r.Data) != want {
				t.Fatalf("stream %s seq %d holds %q, the successful append wrote %q", s, r.Seq, r.Data, want)
			}
		}
	}
	checkLog(t, c)
}

// testMarksBothWays: MarksDesc reads the marks index from the other end
// with the same prefix and bound rules as Marks, and WriteMarks sets and
// clears marks without a record.
func testMarksBothWays(t *testing.T, j Journal) {
	ctx := ctxT(t)
	activate(t, j, "s")
	mustAppend(t, j, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("t", "")},
		Marks: []journal.Mark{{Key: "l/a/1"}, {Key: "l/a/2"}, {Key: "l/a/3"}, {Key: "l/b/1"}, {Key: "l/\xff\xff"}, {Key: "m"}}})
	desc := func(prefix, before string, limit int) []string {
		t.Helper()
		m, err := j.MarksDesc(ctx, prefix, before, limit)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	cases := []struct {
		prefix, before string
		limit          int
		want           []string
	}{
		{"l/a/", "", 0, []string{"l/a/3", "l/a/2", "l/a/1"}},
		{"l/a/", "", 2, []string{"l/a/3", "l/a/2"}},
		{"l/a/", "l/a/3", 0, []string{"l/a/2", "l/a/1"}},
		{"l/a/", "l/a/2x", 0, []string{"l/a/2", "l/a/1"}},
		{"l/a/", "l/a/1", 0, []string{}},
		{"l/a/", "l/b/", 1, []string{"l/a/3"}},    // a bound past the prefix
		{"l/a/", "l/", 0, []string{}},             // a bound before it
		{"l/\xff", "", 0, []string{"l/\xff\xff"}}, // a prefix with no end
		{"l/", "", 0, []string{"l/\xff\xff", "l/b/1", "l/a/3", "l/a/2", "l/a/1"}},
		{"", "", 0, []string{"m", "l/\xff\xff", "l/b/1", "l/a/3", "l/a/2", "l/a/1"}},
		{"n", "", 0, []string{}},
	}
	for _, c := range cases {
		if got := desc(c.prefix, c.before, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("MarksDesc(%q, %q, %d) = %q, want %q", c.prefix, c.before, c.limit, got, c.want)
		}
	}
	if err := j.WriteMarks(ctx, []journal.Mark{{Key: "l/a/2", Clear: true}, {Key: "l/a/9"}, {Key: "never", Clear: true}}); err != nil {
		t.Fatal(err)
	}
	if got := desc("l/a/", "", 0); !slices.Equal(got, []string{"l/a/9", "l/a/3", "l/a/1"}) {
		t.Fatalf("after WriteMarks: %q", got)
	}
	if err := j.WriteMarks(ctx, []journal.Mark{{Key: ""}}); !errors.Is(err, journal.ErrInvalid) {
		t.Fatalf("WriteMarks of an empty key: %v, want ErrInvalid", err)
	}
	if last, err := j.LastGlobal(ctx); err != nil || last != 1 {
		t.Fatalf("WriteMarks appended a record: last global %d, %v", last, err)
	}
}
