package tally_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/tally"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

func openDB(t *testing.T, path string) *journal.DB {
	t.Helper()
	db, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestStore_SurvivesReopen counts from many goroutines, closes the journal
// and opens it again: every counted change is there, and Close wrote the
// ones only noted.
func TestStore_SurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	db := openDB(t, path)
	s, err := tally.Open(ctx, db, "node-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	want := map[string]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		keys := make([]string, 50)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", r.IntN(5))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, k := range keys {
				if (g+i)%3 == 0 {
					s.Note(map[string]int64{k: 2})
				} else if err := s.Add(ctx, map[string]int64{k: 1, "all": 1}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if (g+i)%3 == 0 {
					want[k] += 2
				} else {
					want[k]++
					want["all"]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if got := s.Own(); !equal(got, want) {
		t.Fatalf("before close: %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, map[string]int64{"x": 1}); !errors.Is(err, tally.ErrClosed) {
		t.Fatalf("Add after Close: %v, want ErrClosed", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, path)
	defer db.Close()
	s2, err := tally.Open(ctx, db, "node-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := s2.Own(); !equal(got, want) {
		t.Fatalf("after reopen: %v, want %v", got, want)
	}
}

// TestStore_ValuesSumOwners: each node writes its own entry, and a reader
// sums them; an owner whose name extends another's is not mistaken for it.
func TestStore_ValuesSumOwners(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "j.db"))
	defer db.Close()
	a, err := tally.Open(ctx, db, "n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tally.Open(ctx, db, "n12", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Add(ctx, map[string]int64{"x": 1, "y": 5}); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(ctx, map[string]int64{"x": 2}); err != nil {
		t.Fatal(err)
	}
	got, err := a.Values(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"x": 3, "y": 5}; !equal(got, want) {
		t.Fatalf("Values = %v, want %v", got, want)
	}
	a2, err := tally.Open(ctx, db, "n1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a2.Own(), map[string]int64{"x": 1, "y": 5}; !equal(got, want) {
		t.Fatalf("reopened n1 = %v, want %v", got, want)
	}
	for _, s := range []*tally.Store{a, b, a2} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStore_PostgresNodes: on the cluster's journal each node keeps its
// own entry, and a node that starts again finds its counts; the sum is
// every node's. Skips without REFUNDD_TEST_POSTGRES (fails under CI).
func TestStore_PostgresNodes(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Open(t)
	a, err := tally.Open(ctx, db, "host-a/127.0.0.1:8080", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tally.Open(ctx, db, "host-b/127.0.0.1:8080", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Add(ctx, map[string]int64{"notify/applied": 2}); err != nil {
		t.Fatal(err)
	}
	b.Note(map[string]int64{"notify/applied": 1, "provider/submit/SUCCEEDED": 1})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := a.Values(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"notify/applied": 3, "provider/submit/SUCCEEDED": 1}; !equal(got, want) {
		t.Fatalf("Values = %v, want %v", got, want)
	}
	b2, err := tally.Open(ctx, db, "host-b/127.0.0.1:8080", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if got, want := b2.Own(), map[string]int64{"notify/applied": 1, "provider/submit/SUCCEEDED": 1}; !equal(got, want) {
		t.Fatalf("node b after its restart: %v, want %v", got, want)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// failingKV fails every write.
type failingKV struct{ tally.KV }

func (failingKV) WriteKV(context.Context, []journal.KV, []string) error {
	return errors.New("disk full")
}

// flakyKV fails the writes while down is set.
type flakyKV struct {
	tally.KV
	mu   sync.Mutex
	down bool
}

func (f *flakyKV) WriteKV(ctx context.Context, put []journal.KV, del []string) error {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return errors.New("disk full")
	}
	return f.KV.WriteKV(ctx, put, del)
}

// TestStore_NotesOutliveAFailedWrite: a noted change whose write failed
// stays queued and goes out with the next write; an Add's is dropped with
// its error (its caller answered a failure).
func TestStore_NotesOutliveAFailedWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	db := openDB(t, path)
	kv := &flakyKV{KV: db, down: true}
	s, err := tally.Open(ctx, kv, "n", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Note(map[string]int64{"noted": 1})
	if err := s.Add(ctx, map[string]int64{"added": 1}); err == nil {
		t.Fatal("Add succeeded on a failing write")
	}
	kv.mu.Lock()
	kv.down = false
	kv.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, path)
	defer db.Close()
	s2, err := tally.Open(ctx, db, "n", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got, want := s2.Own(), map[string]int64{"noted": 1}; !equal(got, want) {
		t.Fatalf("written %v, want %v", got, want)
	}
}

// TestStore_AddFailsWithItsWrite: an Add whose write failed reports it, and
// its change is not counted.
func TestStore_AddFailsWithItsWrite(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "j.db"))
	defer db.Close()
	s, err := tally.Open(ctx, failingKV{db}, "n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, map[string]int64{"x": 1}); err == nil {
		t.Fatal("Add succeeded on a failing write")
	}
	if got := s.Own(); len(got) != 0 {
		t.Fatalf("Own = %v after a failed write, want nothing", got)
	}
}

func TestOpen_RefusesBadOwner(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "j.db"))
	defer db.Close()
	for _, owner := range []string{"", string(make([]byte, 257))} {
		if _, err := tally.Open(context.Background(), db, owner, nil); err == nil {
			t.Errorf("Open(%q) succeeded", owner)
		}
	}
}

func TestCodeClass(t *testing.T) {
	for _, tc := range []struct{ code, want string }{
		{"", tally.CodeNone}, {"HTTP_503", tally.CodeHTTP}, {"CLIENT_NO_SUB_MCHID", tally.CodeClient},
		{"SYSTEM_ERROR", tally.CodeProvider}, {"NOT_ENOUGH", tally.CodeProvider},
	} {
		if got := tally.CodeClass(tc.code); got != tc.want {
			t.Errorf("CodeClass(%q) = %q, want %q", tc.code, got, tc.want)
		}
	}
}

type stubProvider struct{ o reservation.Outcome }

func (p stubProvider) Submit(context.Context, string, []byte, int) reservation.Outcome { return p.o }
func (p stubProvider) Query(context.Context, string) reservation.Outcome               { return p.o }

// TestCountProvider counts each call by op, outcome kind and code class,
// and keeps an outcome kind it does not know out of the key set.
func TestCountProvider(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "j.db"))
	defer db.Close()
	s, err := tally.Open(ctx, db, "n", nil)
	if err != nil {
		t.Fatal(err)
	}
	tally.CountProvider(stubProvider{reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "HTTP_503"}}, s).Submit(ctx, "R-1-1", nil, 1)
	tally.CountProvider(stubProvider{reservation.Outcome{Kind: reservation.OutcomeSucceeded}}, s).Query(ctx, "R-1-1")
	tally.CountProvider(stubProvider{reservation.Outcome{Kind: "WEIRD<b>"}}, s).Query(ctx, "R-1-1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		"provider/submit/UNKNOWN": 1, "provider_code/submit/http": 1,
		"provider/query/SUCCEEDED": 1, "provider/query/OTHER": 1, "provider_code/query/none": 2,
	}
	if got := s.Own(); !equal(got, want) {
		t.Fatalf("counted %v, want %v", got, want)
	}
	if _, ok := tally.CountProvider(stubProvider{}, s).(interface {
		ApplyAbnormal(context.Context, string, reservation.AbnormalApplication) reservation.Outcome
	}); ok {
		t.Fatal("a provider without ApplyAbnormal gained it")
	}
}

func equal(a, b map[string]int64) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// recordingKV records what each write holds.
type recordingKV struct {
	tally.KV
	mu     sync.Mutex
	writes []string
}

func (r *recordingKV) WriteKV(ctx context.Context, put []journal.KV, del []string) error {
	r.mu.Lock()
	for _, e := range put {
		r.writes = append(r.writes, string(e.Value))
	}
	r.mu.Unlock()
	return r.KV.WriteKV(ctx, put, del)
}

func (r *recordingKV) written() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.writes)
}

// TestStore_NotesWaitForAnAdd: a change noted after a write is not written
// on its own at once (a journal commit of its own, one per provider answer
// under load): the writer waits out NoteEvery, and an Add takes the note
// with it.
func TestStore_NotesWaitForAnAdd(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "j.db"))
	defer db.Close()
	kv := &recordingKV{KV: db}
	s, err := tally.Open(ctx, kv, "n", &tally.Options{NoteEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	waits := make(chan time.Duration, 10)
	tally.SetAfter(s, func(d time.Duration) <-chan time.Time {
		waits <- d
		return nil // never fires: only an Add or Close ends the wait
	})
	if err := s.Add(ctx, map[string]int64{"a": 1}); err != nil {
		t.Fatal(err)
	}
	s.Note(map[string]int64{"b": 1})
	select {
	case d := <-waits:
		if d <= 0 || d > time.Hour {
			t.Fatalf("writer waits %s, want up to NoteEvery (1h)", d)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the writer never waited; writes %q", kv.written())
	}
	if got, want := kv.written(), []string{`{"a":1}`}; !slices.Equal(got, want) {
		t.Fatalf("writes while the note waits %q, want %q", got, want)
	}
	if err := s.Add(ctx, map[string]int64{"d": 1}); err != nil {
		t.Fatal(err)
	}
	if got, want := kv.written(), []string{`{"a":1}`, `{"a":1,"b":1,"d":1}`}; !slices.Equal(got, want) {
		t.Fatalf("writes %q, want %q", got, want)
	}
	s.Note(map[string]int64{"e": 1})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := kv.written(), []string{`{"a":1}`, `{"a":1,"b":1,"d":1}`, `{"a":1,"b":1,"d":1,"e":1}`}; !slices.Equal(got, want) {
		t.Fatalf("writes after Close %q, want %q", got, want)
	}
}
