package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var errClosed = errors.New("test: closed")

// harness runs a Loop whose Commit records each batch (the Req values) and
// calls commit, if set, to decide the outcomes; by default call n gets
// Last n+100. hold makes the next Commit block until release.
type harness struct {
	t    *testing.T
	loop *Loop[int]

	mu       sync.Mutex
	batches  [][]int
	events   []string // "commit" and "drained", in order
	hold     chan struct{}
	entered  chan struct{}
	releases []func()
}

func newHarness(t *testing.T, cfg Config[int], commit func([]*Call[int])) *harness {
	t.Helper()
	h := &harness{t: t}
	cfg.Commit = func(batch []*Call[int]) {
		h.mu.Lock()
		hold, entered := h.hold, h.entered
		h.hold, h.entered = nil, nil
		h.mu.Unlock()
		if hold != nil {
			close(entered)
			<-hold
		}
		reqs := make([]int, len(batch))
		for i, c := range batch {
			reqs[i] = c.Req
			c.Last = uint64(c.Req + 100)
		}
		h.mu.Lock()
		h.batches = append(h.batches, reqs)
		h.events = append(h.events, "commit")
		h.mu.Unlock()
		if commit != nil {
			commit(batch)
		}
	}
	cfg.Drained = func() {
		h.mu.Lock()
		h.events = append(h.events, "drained")
		h.mu.Unlock()
	}
	if cfg.Closed == nil {
		cfg.Closed = errClosed
	}
	if cfg.Name == "" {
		cfg.Name = "test"
	}
	h.loop = Start(cfg)
	t.Cleanup(func() {
		h.mu.Lock()
		for _, release := range h.releases {
			release() // a failed test may leave a commit held
		}
		h.mu.Unlock()
		h.loop.Close()
	})
	return h
}

type result struct {
	last uint64
	err  error
}

func (h *harness) do(ctx context.Context, req int) <-chan result {
	ch := make(chan result, 1)
	go func() {
		last, err := h.loop.Do(ctx, req)
		ch <- result{last, err}
	}()
	return ch
}

// holdNext starts call req and returns once its Commit is blocked; release
// lets it go. Calls made meanwhile wait in the queue.
func (h *harness) holdNext(req int) (release func(), res <-chan result) {
	h.t.Helper()
	gate, entered := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	h.mu.Lock()
	h.hold, h.entered = gate, entered
	h.releases = append(h.releases, release)
	h.mu.Unlock()
	res = h.do(context.Background(), req)
	wait(h.t, "the held commit", entered)
	return release, res
}

// queue starts calls reqs one after another, each once the one before
// waits in the queue, so the queue holds them in this order.
func (h *harness) queue(ctx context.Context, reqs ...int) []<-chan result {
	h.t.Helper()
	var out []<-chan result
	for _, r := range reqs {
		n := h.loop.Queued()
		out = append(out, h.do(ctx, r))
		waitFor(h.t, fmt.Sprintf("call %d to queue", r), func() bool { return h.loop.Queued() == n+1 })
	}
	return out
}

func (h *harness) recorded() (batches [][]int, events []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.batches), slices.Clone(h.events)
}

func wait[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// waitFor polls cond: a queued call has no event to wait on.
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

func TestBatching(t *testing.T) {
	tests := []struct {
		name     string
		maxBatch int
		queued   []int // queued while call 0 is being committed
		want     [][]int
	}{
		{"a lone call commits alone", 8, nil, [][]int{{0}}},
		{"queued calls share one commit, in queue order", 8, []int{1, 2, 3}, [][]int{{0}, {1, 2, 3}}},
		{"MaxBatch splits the queue", 2, []int{1, 2, 3, 4, 5}, [][]int{{0}, {1, 2}, {3, 4}, {5}}},
		{"MaxBatch 1 commits each call alone", 1, []int{1, 2, 3}, [][]int{{0}, {1}, {2}, {3}}},
		{"MaxBatch 0 means 1", 0, []int{1, 2}, [][]int{{0}, {1}, {2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config[int]{MaxBatch: tt.maxBatch, QueueLen: 16, Yield: tt.maxBatch%2 == 0}, nil)
			release, first := h.holdNext(0)
			res := h.queue(context.Background(), tt.queued...)
			release()
			res = append([]<-chan result{first}, res...)
			for i, ch := range res {
				r := wait(t, "a result", ch)
				req := slices.Concat([]int{0}, tt.queued)[i]
				if r.err != nil || r.last != uint64(req+100) {
					t.Errorf("call %d = (%d, %v), want (%d, nil)", req, r.last, r.err, req+100)
				}
			}
			if got, _ := h.recorded(); !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Errorf("batches = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOutcomes(t *testing.T) {
	errBatch := errors.New("batch failed")
	errOdd := errors.New("odd refused")
	tests := []struct {
		name   string
		commit func([]*Call[int])
		// want returns the outcome call req must see.
		want func(req int) (last uint64, err string)
	}{
		{
			name: "a failed batch fails each of its calls",
			commit: func(b []*Call[int]) {
				for _, c := range b {
					c.Last, c.Err = 0, errBatch
				}
			},
			want: func(int) (uint64, string) { return 0, errBatch.Error() },
		},
		{
			name: "each call keeps its own outcome",
			commit: func(b []*Call[int]) {
				for _, c := range b {
					if c.Req%2 == 1 {
						c.Last, c.Err = 0, fmt.Errorf("call %d: %w", c.Req, errOdd)
					}
				}
			},
			want: func(req int) (uint64, string) {
				if req%2 == 1 {
					return 0, fmt.Sprintf("call %d: %v", req, errOdd)
				}
				return uint64(req + 100), ""
			},
		},
		{
			name:   "a panic fails each call of the batch",
			commit: func([]*Call[int]) { panic("boom") },
			want: func(int) (uint64, string) {
				return 0, "test: internal error during commit: boom"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			fail := true
			h := newHarness(t, Config[int]{MaxBatch: 8, QueueLen: 8}, func(b []*Call[int]) {
				mu.Lock()
				f := fail
				mu.Unlock()
				if f {
					tt.commit(b)
				}
			})
			release, first := h.holdNext(0)
			res := append([]<-chan result{first}, h.queue(context.Background(), 1, 2, 3)...)
			release()
			for req, ch := range res {
				r := wait(t, "a result", ch)
				wantLast, wantErr := tt.want(req)
				gotErr := ""
				if r.err != nil {
					gotErr = r.err.Error()
				}
				if r.last != wantLast || gotErr != wantErr {
					t.Errorf("call %d = (%d, %q), want (%d, %q)", req, r.last, gotErr, wantLast, wantErr)
				}
			}
			// The loop goes on committing after the batch.
			mu.Lock()
			fail = false
			mu.Unlock()
			if last, err := h.loop.Do(context.Background(), 7); err != nil || last != 107 {
				t.Errorf("call after the batch = (%d, %v), want (107, nil)", last, err)
			}
		})
	}
}

func TestContext(t *testing.T) {
	tests := []struct {
		name string
		// run makes call 1 with a context it cancels somewhere; the held
		// call 0 is being committed meanwhile. It returns call 1's result.
		run      func(h *harness, ctx context.Context, cancel context.CancelFunc) <-chan result
		queueLen int
		// early: call 1 ends while call 0 is still held (it never
		// reached the queue); otherwise it ends when the loop reaches it.
		early      bool
		wantErr    error // for call 1
		wantBatchs [][]int
	}{
		{
			name:     "cancelled while queued: dropped, not committed",
			queueLen: 4,
			run: func(h *harness, ctx context.Context, cancel context.CancelFunc) <-chan result {
				res := h.queue(ctx, 1)
				h.queue(context.Background(), 2)
				cancel()
				return res[0]
			},
			wantErr:    context.Canceled,
			wantBatchs: [][]int{{0}, {2}},
		},
		{
			name:     "cancelled while waiting for room in the queue",
			queueLen: 1,
			early:    true,
			run: func(h *harness, ctx context.Context, cancel context.CancelFunc) <-chan result {
				h.queue(context.Background(), 2) // fills the queue
				res := h.do(ctx, 1)
				cancel()
				return res
			},
			wantErr:    context.Canceled,
			wantBatchs: [][]int{{0}, {2}},
		},
		{
			name:     "done before the call: dropped",
			queueLen: 4,
			run: func(h *harness, ctx context.Context, cancel context.CancelFunc) <-chan result {
				cancel()
				return h.do(ctx, 1)
			},
			wantErr:    context.Canceled,
			wantBatchs: [][]int{{0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config[int]{MaxBatch: 8, QueueLen: tt.queueLen}, nil)
			release, first := h.holdNext(0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := tt.run(h, ctx, cancel)
			var r result
			if tt.early {
				r = wait(t, "call 1", res)
				release()
			} else {
				release()
				r = wait(t, "call 1", res)
			}
			if !errors.Is(r.err, tt.wantErr) || r.last != 0 {
				t.Errorf("call 1 = (%d, %v), want (0, %v)", r.last, r.err, tt.wantErr)
			}
			if r := wait(t, "call 0", first); r.err != nil {
				t.Errorf("call 0: %v", r.err)
			}
			h.loop.Close() // every other call is committed by then
			if got, _ := h.recorded(); !slices.EqualFunc(got, tt.wantBatchs, slices.Equal) {
				t.Errorf("batches = %v, want %v", got, tt.wantBatchs)
			}
		})
	}
}

// A call the loop has taken into a batch reports the commit's outcome even
// when its context ends during the commit.
func TestContextAfterTaken(t *testing.T) {
	h := newHarness(t, Config[int]{MaxBatch: 8, QueueLen: 4}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	gate, entered := make(chan struct{}), make(chan struct{})
	h.mu.Lock()
	h.hold, h.entered = gate, entered
	h.mu.Unlock()
	res := h.do(ctx, 5)
	wait(t, "the commit", entered)
	cancel()
	close(gate)
	if r := wait(t, "the result", res); r.err != nil || r.last != 105 {
		t.Fatalf("call = (%d, %v), want (105, nil)", r.last, r.err)
	}
}

func TestClose(t *testing.T) {
	tests := []struct {
		name   string
		queued []int
	}{
		{"nothing pending", nil},
		{"queued calls commit before Close returns", []int{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config[int]{MaxBatch: 8, QueueLen: 8}, nil)
			release, first := h.holdNext(0)
			res := append([]<-chan result{first}, h.queue(context.Background(), tt.queued...)...)
			sig, stopped := h.loop.Committed()
			if stopped {
				t.Fatal("Committed reports a stopped loop before Close")
			}
			closed := make(chan struct{})
			go func() { h.loop.Close(); close(closed) }()
			waitFor(t, "Close to refuse calls", h.loop.Closed)
			if _, err := h.loop.Do(context.Background(), 99); !errors.Is(err, errClosed) {
				t.Errorf("call after Close: %v, want %v", err, errClosed)
			}
			select {
			case <-closed:
				t.Fatal("Close returned while a commit was in progress")
			default:
			}
			release()
			wait(t, "Close", closed)
			for i, ch := range res {
				if r := wait(t, "a queued result", ch); r.err != nil {
					t.Errorf("queued call %d: %v", i, r.err)
				}
			}
			wait(t, "the commit signal", sig)
			if _, stopped := h.loop.Committed(); !stopped {
				t.Error("Committed does not report a stopped loop after Close")
			}
			want := []string{"commit", "drained"}
			if len(tt.queued) > 0 {
				want = []string{"commit", "commit", "drained"}
			}
			if _, events := h.recorded(); !slices.Equal(events, want) {
				t.Errorf("events = %v, want %v", events, want)
			}
			h.loop.Close() // again: returns at once
		})
	}
}

// The commit signal fires after the commit, not during it, and before its
// callers wake.
func TestCommittedAfterCommit(t *testing.T) {
	var mu sync.Mutex
	var sig <-chan struct{}
	early := 0
	h := newHarness(t, Config[int]{MaxBatch: 8, QueueLen: 8}, func([]*Call[int]) {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-sig:
			early++
		default:
		}
	})
	for i := range 3 {
		mu.Lock()
		sig, _ = h.loop.Committed()
		s := sig
		mu.Unlock()
		if _, err := h.loop.Do(context.Background(), i); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s:
		default:
			t.Fatalf("commit %d: caller woke before the commit signal", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if early > 0 {
		t.Errorf("the commit signal fired during %d commits", early)
	}
}

func TestIdle(t *testing.T) {
	tests := []struct {
		name  string
		due   bool // whether Idle has work
		ticks int  // wanted before the test goes on
	}{
		{"idle work due: Tick runs without a call", true, 1},
		{"no idle work: no Tick", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			due, ticks := tt.due, 0
			ticked := make(chan struct{}, 1)
			h := newHarness(t, Config[int]{
				MaxBatch: 8, QueueLen: 8,
				Idle: func() (time.Time, bool) {
					mu.Lock()
					defer mu.Unlock()
					return time.Now().Add(-time.Second), due // overdue: no wait
				},
				Tick: func() {
					mu.Lock()
					due = false
					ticks++
					mu.Unlock()
					ticked <- struct{}{}
				},
			}, nil)
			if tt.ticks > 0 {
				wait(t, "Tick", ticked)
			}
			// Calls still commit, and the idle work ran only while due.
			for i := range 3 {
				if last, err := h.loop.Do(context.Background(), i); err != nil || last != uint64(i+100) {
					t.Fatalf("call %d = (%d, %v)", i, last, err)
				}
			}
			h.loop.Close()
			mu.Lock()
			defer mu.Unlock()
			if ticks != tt.ticks {
				t.Errorf("Tick ran %d times, want %d", ticks, tt.ticks)
			}
		})
	}
}

// A panic message names the backend: the journals' errors start with it.
func TestPanicNamesBackend(t *testing.T) {
	h := newHarness(t, Config[int]{MaxBatch: 8, QueueLen: 8, Name: "pgjournal"}, func([]*Call[int]) { panic("x") })
	_, err := h.loop.Do(context.Background(), 1)
	if err == nil || !strings.HasPrefix(err.Error(), "pgjournal: internal error during commit: x") {
		t.Fatalf("err = %v", err)
	}
}
