package journal_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/refundd/refundd/journal"
)

// model is the naive in-memory journal the real one is checked against.
type model struct {
	log    []journal.Record         // global order
	heads  map[string]uint64        // stream -> last seq
	claims map[journal.Claim]string // key -> owner
	dues   map[journal.Due]struct{} // At in UTC
	marks  map[string]bool          // the keys set
	counts map[string]int64         // counters
}

// apply returns what Append must return for req, and records it if it
// succeeds.
func (m *model) apply(req journal.AppendRequest) (uint64, error) {
	if h := m.heads[req.Stream]; h != req.Expected {
		return 0, &journal.SequenceError{Stream: req.Stream, Expected: req.Expected, Actual: h}
	}
	for _, c := range req.Claims {
		if o, ok := m.claims[c]; ok && o != req.Stream {
			return 0, &journal.KeyTakenError{Namespace: c.Namespace, Key: c.Key, Owner: o}
		}
	}
	seq := req.Expected
	for _, e := range req.Events {
		seq++
		m.log = append(m.log, journal.Record{Global: uint64(len(m.log) + 1), Stream: req.Stream, Seq: seq,
			Type: e.Type, Version: e.Version, Data: append([]byte{}, e.Data...)})
	}
	m.heads[req.Stream] = seq
	for _, c := range req.Claims {
		m.claims[c] = req.Stream
	}
	for _, d := range req.Dues {
		if d.Stream == "" {
			d.Stream = req.Stream
		}
		d.At = d.At.UTC()
		m.dues[d] = struct{}{}
	}
	m.mark(req.Marks)
	for _, c := range req.Counters {
		if v, ok := m.counts[c.Key]; c.Max && (!ok || c.Add > v) {
			m.counts[c.Key] = c.Add
		} else if !c.Max && c.Add != 0 {
			m.counts[c.Key] = v + c.Add
		}
	}
	return seq, nil
}

func (m *model) mark(marks []journal.Mark) {
	for _, k := range marks {
		if k.Clear {
			delete(m.marks, k.Key)
		} else {
			m.marks[k.Key] = true
		}
	}
}

// The marks and counters an append may carry: few keys, so that sets,
// clears and sums of one key meet across commits and flushes.
var (
	modelMarks    = []string{"a/1", "a/2", "a/3", "ab/1", "b/1", "b/2", "c"}
	modelPrefixes = []string{"", "a", "a/", "ab", "b/", "c", "d"}
	modelCounters = []string{"n", "m/x", "m/y", "t/1", "t/2"}
)

var (
	modelStreams = []string{"a", "b", "c", "d"}
	modelClaims  = []journal.Claim{
		{Namespace: "refund_no", Key: "1"}, {Namespace: "refund_no", Key: "2"}, {Namespace: "refund_no", Key: "3"},
		{Namespace: "out_trade_no", Key: "1"}, {Namespace: "out_trade_no", Key: "2"},
	}
	modelEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
)

func genRequest(t *rapid.T, m *model, stream string, claims []journal.Claim) journal.AppendRequest {
	h := m.heads[stream]
	expected := h
	switch rapid.IntRange(0, 9).Draw(t, "expectedKind") {
	case 0:
		expected = h + 1
	case 1:
		if h > 0 {
			expected = h - 1
		} else {
			expected = 3
		}
	}
	n := rapid.IntRange(1, 3).Draw(t, "events")
	events := make([]journal.Event, n)
	for i := range events {
		events[i] = journal.Event{
			Type:    rapid.SampledFrom([]string{"refund.requested", "refund.sent", "refund.settled"}).Draw(t, "type"),
			Version: uint16(rapid.IntRange(1, 3).Draw(t, "version")),
			Data:    rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "data"),
		}
	}
	var dues []journal.Due
	for range rapid.IntRange(0, 2).Draw(t, "dues") {
		dues = append(dues, journal.Due{
			At:  modelEpoch.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "dueAt")) * time.Second),
			Key: rapid.SampledFrom([]string{"expire", "query"}).Draw(t, "dueKey"),
		})
	}
	var marks []journal.Mark
	for range rapid.IntRange(0, 3).Draw(t, "marks") {
		marks = append(marks, journal.Mark{Key: rapid.SampledFrom(modelMarks).Draw(t, "mark"), Clear: rapid.Bool().Draw(t, "clear")})
	}
	var counters []journal.Counter
	for range rapid.IntRange(0, 3).Draw(t, "counters") {
		k := rapid.SampledFrom(modelCounters).Draw(t, "counter")
		max := k == "n" // one kept as a maximum, like "latest"
		counters = append(counters, journal.Counter{Key: k, Add: int64(rapid.IntRange(-3, 5).Draw(t, "add")), Max: max})
	}
	return journal.AppendRequest{Stream: stream, Expected: expected, Events: events, Claims: claims, Dues: dues,
		Marks: marks, Counters: counters}
}

func checkResult(t *rapid.T, req journal.AppendRequest, gotLast uint64, gotErr error, wantLast uint64, wantErr error) {
	t.Helper()
	switch want := wantErr.(type) {
	case nil:
		if gotErr != nil || gotLast != wantLast {
			t.Fatalf("append %+v: got (%d, %v), want (%d, nil)", req, gotLast, gotErr, wantLast)
		}
	case *journal.SequenceError:
		var se *journal.SequenceError
		if !errors.As(gotErr, &se) || *se != *want {
			t.Fatalf("append %+v: got %v, want %v", req, gotErr, want)
		}
	case *journal.KeyTakenError:
		var kt *journal.KeyTakenError
		if !errors.As(gotErr, &kt) || *kt != *want {
			t.Fatalf("append %+v: got %v, want %v", req, gotErr, want)
		}
	}
}

func TestJournal_MatchesModel(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		path := filepath.Join(dir, fmt.Sprintf("run-%d.db", run))
		// The index tail flushed after every commit, every few entries, or
		// (by count only, never reached) only at Close: reads must not
		// depend on where the index stands.
		// So is the mark tail (marks and counters), and reads must not
		// depend on where it stands either.
		opts := &journal.Options{NoSync: true, IndexFlushDelay: -1,
			IndexFlushEntries: rapid.SampledFrom([]int{1, 3, 1 << 20}).Draw(rt, "indexFlushEntries"),
			MarkFlushDelay:    -1,
			MarkFlushEntries:  rapid.SampledFrom([]int{1, 4, 1 << 20}).Draw(rt, "markFlushEntries")}
		db, err := journal.Open(path, opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		m := &model{heads: map[string]uint64{}, claims: map[journal.Claim]string{}, dues: map[journal.Due]struct{}{},
			marks: map[string]bool{}, counts: map[string]int64{}}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(t *rapid.T) {
				stream := rapid.SampledFrom(modelStreams).Draw(t, "stream")
				claims := rapid.SliceOfN(rapid.SampledFrom(modelClaims), 0, 2).Draw(t, "claims")
				req := genRequest(t, m, stream, claims)
				last, err := db.Append(bg, req)
				wantLast, wantErr := m.apply(req)
				checkResult(t, req, last, err, wantLast, wantErr)
			},
			// Requests to distinct streams with disjoint claim keys do not
			// interact, so the model's answer does not depend on how the
			// committer orders or batches them.
			"concurrent": func(t *rapid.T) {
				n := rapid.IntRange(2, 4).Draw(t, "n")
				streams := rapid.Permutation(modelStreams).Draw(t, "streams")[:n]
				keys := rapid.Permutation(modelClaims).Draw(t, "keys")
				reqs := make([]journal.AppendRequest, n)
				for i, s := range streams {
					var claims []journal.Claim
					if i < len(keys) && rapid.Bool().Draw(t, "claim") {
						claims = []journal.Claim{keys[i]}
					}
					reqs[i] = genRequest(t, m, s, claims)
				}
				type res struct {
					last uint64
					err  error
				}
				got := make([]res, n)
				var wg sync.WaitGroup
				for i := range reqs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						got[i].last, got[i].err = db.Append(bg, reqs[i])
					}()
				}
				wg.Wait()
				// The journal chose some commit order; replay the successes
				// in its global order so the model's globals match.
				order := make([]int, n)
				for i := range order {
					order[i] = i
				}
				first := map[int]uint64{}
				for i := range reqs {
					if got[i].err == nil {
						recs, err := db.Load(bg, reqs[i].Stream, got[i].last-uint64(len(reqs[i].Events)))
						if err != nil || len(recs) == 0 {
							t.Fatalf("load %s: %v", reqs[i].Stream, err)
						}
						first[i] = recs[0].Global
					}
				}
				sort.SliceStable(order, func(a, b int) bool { return first[order[a]] < first[order[b]] })
				for _, i := range order {
					wantLast, wantErr := m.apply(reqs[i])
					checkResult(t, reqs[i], got[i].last, got[i].err, wantLast, wantErr)
				}
			},
			// WriteMarks writes past the mark tail: a later read must see
			// its marks over older pending ones of the same keys.
			"writeMarks": func(t *rapid.T) {
				var marks []journal.Mark
				for range rapid.IntRange(1, 3).Draw(t, "n") {
					marks = append(marks, journal.Mark{Key: rapid.SampledFrom(modelMarks).Draw(t, "mark"), Clear: rapid.Bool().Draw(t, "clear")})
				}
				if err := db.WriteMarks(bg, marks); err != nil {
					t.Fatal(err)
				}
				m.mark(marks)
			},
			// SetCounters replaces the counters, pending changes included.
			"setCounters": func(t *rapid.T) {
				values := map[string]int64{}
				for _, k := range modelCounters {
					if rapid.Bool().Draw(t, "has") {
						values[k] = int64(rapid.IntRange(-5, 5).Draw(t, "value"))
					}
				}
				if err := db.SetCounters(bg, uint64(len(m.log)), values); err != nil {
					t.Fatal(err)
				}
				m.counts = values
			},
			"deleteDue": func(t *rapid.T) {
				var all []journal.Due
				for d := range m.dues {
					all = append(all, d)
				}
				sortDues(all)
				var del []journal.Due
				for _, d := range all {
					if rapid.Bool().Draw(t, "delete") {
						del = append(del, d)
					}
				}
				del = append(del, journal.Due{At: modelEpoch, Stream: "a", Key: "missing"})
				if err := db.DeleteDue(bg, del); err != nil {
					t.Fatal(err)
				}
				for _, d := range del {
					delete(m.dues, d)
				}
			},
			// A crash: a consistent copy of the live file (the index tail
			// unflushed in it) becomes the journal; Open must find the
			// tail's records in the log.
			"crash": func(t *rapid.T) {
				run++
				copyPath := filepath.Join(dir, fmt.Sprintf("run-%d-crashed.db", run))
				if _, err := db.BackupFile(bg, copyPath); err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				path = copyPath
				db, err = journal.Open(path, opts)
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Verify(bg); err != nil {
					t.Fatalf("verify after crash: %v", err)
				}
			},
			"reopen": func(t *rapid.T) {
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				db, err = journal.Open(path, opts)
				if err != nil {
					t.Fatal(err)
				}
			},
			"": func(t *rapid.T) {
				checkAgainstModel(t, db, m)
			},
		})
		if err := db.Verify(bg); err != nil {
			rt.Fatal(err)
		}
	})
}

func sortDues(d []journal.Due) {
	slices.SortFunc(d, func(a, b journal.Due) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		if a.Stream != b.Stream {
			return bytes.Compare([]byte(a.Stream), []byte(b.Stream))
		}
		return bytes.Compare([]byte(a.Key), []byte(b.Key))
	})
}

func checkAgainstModel(t *rapid.T, db *journal.DB, m *model) {
	t.Helper()
	checkMarksAgainstModel(t, db, m)
	if g, err := db.LastGlobal(bg); err != nil || g != uint64(len(m.log)) {
		t.Fatalf("LastGlobal = %d, %v; model %d", g, err, len(m.log))
	}
	all, err := db.Scan(bg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !recordsEqual(all, m.log) {
		t.Fatalf("Scan = %+v\nmodel = %+v", all, m.log)
	}
	for _, s := range modelStreams {
		if h, err := db.Head(bg, s); err != nil || h != m.heads[s] {
			t.Fatalf("Head(%s) = %d, %v; model %d", s, h, err, m.heads[s])
		}
		recs, err := db.Load(bg, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		var want []journal.Record
		for _, r := range m.log {
			if r.Stream == s {
				want = append(want, r)
			}
		}
		if !recordsEqual(recs, want) {
			t.Fatalf("Load(%s) = %+v\nmodel = %+v", s, recs, want)
		}
	}
	for _, c := range modelClaims {
		owner, err := db.Lookup(bg, c.Namespace, c.Key)
		if want, ok := m.claims[c]; ok {
			if err != nil || owner != want {
				t.Fatalf("Lookup(%v) = %q, %v; model %q", c, owner, err, want)
			}
		} else if !errors.Is(err, journal.ErrNotFound) {
			t.Fatalf("Lookup(%v) = %q, %v; model has none", c, owner, err)
		}
	}
	var wantDues []journal.Due
	for d := range m.dues {
		wantDues = append(wantDues, d)
	}
	sortDues(wantDues)
	gotDues, err := db.DueBefore(bg, modelEpoch.Add(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(gotDues) != len(wantDues) {
		t.Fatalf("DueBefore = %v; model %v", gotDues, wantDues)
	}
	for i := range gotDues {
		g, w := gotDues[i], wantDues[i]
		if !g.At.Equal(w.At) || g.At.Location() != time.UTC || g.Stream != w.Stream || g.Key != w.Key {
			t.Fatalf("DueBefore[%d] = %v; model %v", i, gotDues[i], wantDues[i])
		}
	}
}

func recordsEqual(a, b []journal.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Global != y.Global || x.Stream != y.Stream || x.Seq != y.Seq || x.Type != y.Type ||
			x.Version != y.Version || !bytes.Equal(x.Data, y.Data) {
			return false
		}
	}
	return true
}

// checkMarksAgainstModel reads the marks and counters every way there is,
// whether they are in their buckets, in the mark tail, or both.
func checkMarksAgainstModel(t *rapid.T, db *journal.DB, m *model) {
	t.Helper()
	var all []string
	for k := range m.marks {
		all = append(all, k)
	}
	slices.Sort(all)
	for _, prefix := range modelPrefixes {
		var want []string
		for _, k := range all {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		for _, bound := range append([]string{""}, modelMarks...) {
			for _, limit := range []int{0, 1, 2} {
				got, err := db.Marks(bg, prefix, bound, limit)
				if err != nil {
					t.Fatal(err)
				}
				var asc []string
				for _, k := range want {
					if (bound == "" || k > bound) && (limit <= 0 || len(asc) < limit) {
						asc = append(asc, k)
					}
				}
				if !slices.Equal(got, asc) && len(got)+len(asc) > 0 {
					t.Fatalf("Marks(%q, %q, %d) = %q; model %q", prefix, bound, limit, got, asc)
				}
				got, err = db.MarksDesc(bg, prefix, bound, limit)
				if err != nil {
					t.Fatal(err)
				}
				var desc []string
				for _, k := range slices.Backward(want) {
					if (bound == "" || k < bound) && (limit <= 0 || len(desc) < limit) {
						desc = append(desc, k)
					}
				}
				if !slices.Equal(got, desc) && len(got)+len(desc) > 0 {
					t.Fatalf("MarksDesc(%q, %q, %d) = %q; model %q", prefix, bound, limit, got, desc)
				}
			}
		}
		err := db.Read(bg, func(r *journal.Reader) error {
			if n := r.CountMarks(prefix); n != len(want) {
				t.Fatalf("CountMarks(%q) = %d; model %d", prefix, n, len(want))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := db.Read(bg, func(r *journal.Reader) error {
		for _, k := range modelMarks {
			if r.HasMark(k) != m.marks[k] {
				t.Fatalf("HasMark(%q) = %v; model %v", k, r.HasMark(k), m.marks[k])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := db.Counters(bg)
	if err != nil {
		t.Fatal(err)
	}
	// A counter at 0 may be stored or absent (a commit's sum of 0 is not
	// written): the same to every reader.
	nonZero := func(c map[string]int64) map[string]int64 {
		out := maps.Clone(c)
		maps.DeleteFunc(out, func(_ string, v int64) bool { return v == 0 })
		return out
	}
	if !maps.Equal(nonZero(cs.Values), nonZero(m.counts)) || cs.LastGlobal != uint64(len(m.log)) {
		t.Fatalf("Counters = %v at %d; model %v at %d", cs.Values, cs.LastGlobal, m.counts, len(m.log))
	}
	between, err := db.CountersBetween(bg, "m/", "t/2")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for k, v := range m.counts {
		if k >= "m/" && k < "t/2" {
			want[k] = v
		}
	}
	if !maps.Equal(nonZero(between.Values), nonZero(want)) {
		t.Fatalf("CountersBetween(m/, t/2) = %v; model %v", between.Values, want)
	}
}
