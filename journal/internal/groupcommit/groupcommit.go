// Package groupcommit is the group-commit loop the bbolt journal (package
// journal) and the PostgreSQL journal (package journal/pgjournal) share.
//
// One committer goroutine owns every call. It takes the first queued call,
// then everything else already queued (up to Config.MaxBatch) without
// waiting, and hands the batch to the backend's Config.Commit, which writes
// it in one transaction and sets each call's own result. There is no
// timer: a lone caller pays one commit, and many callers share one.
//
// What the loop guarantees around Commit, for every backend:
//
//   - A call whose context is done when the loop reaches it is dropped
//     with the context's error before Commit sees it; once it is in a batch
//     its fate no longer depends on its context, and Do waits for the real
//     outcome.
//   - A batch whose Commit panics fails each of its calls with an internal
//     error instead of leaving their callers blocked.
//   - The Committed signal is broadcast after each Commit, before any
//     caller of that batch wakes, so a reader woken by it sees the commit.
//   - Close makes later calls fail with Config.Closed, lets every call
//     queued before it commit, and returns once the loop has stopped.
package groupcommit

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/refundd/refundd/internal/broadcast"
)

// Call is one request waiting in a Loop. Commit sets Last and Err; the loop
// then wakes the caller.
type Call[R any] struct {
	Req  R
	Last uint64 // the result on success (a journal: the last Seq written)
	Err  error  // the call's own outcome

	ctx  context.Context
	done chan struct{}
}

// Config is a Loop's backend and settings.
type Config[R any] struct {
	// Commit writes batch (1..MaxBatch calls, in queue order) and sets each
	// call's Last and Err: a failure of the whole batch is set on each
	// call. It runs on the loop's goroutine, one batch at a time.
	Commit func(batch []*Call[R])
	// MaxBatch is the most calls one Commit gets (at least 1).
	MaxBatch int
	// QueueLen is the queue's buffer: a caller waits for room beyond it.
	QueueLen int
	// Closed is the error Do returns after Close.
	Closed error
	// Yield lets callers woken by the last commit queue their next call
	// before the loop drains the queue (runtime.Gosched, not a timer: a
	// lone caller is not delayed).
	Yield bool
	// Idle, when set, is asked whenever the queue is empty; if it returns
	// ok, the loop waits for a call no longer than until at, and calls Tick
	// when none came by then. Both run on the loop's goroutine.
	Idle func() (at time.Time, ok bool)
	Tick func()
	// Drained, when set, runs on the loop's goroutine once after Close,
	// when every call queued before it has been committed.
	Drained func()
	// Name starts the error of a panicked batch ("journal"); Log logs it.
	Name string
	Log  *slog.Logger
}

// Loop is a running committer. Its methods are safe for concurrent use.
type Loop[R any] struct {
	cfg Config[R]

	// mu guards closed and sends on queue, so Close can close queue without
	// racing a sender.
	mu     sync.RWMutex
	closed bool
	queue  chan *Call[R]

	stopped   chan struct{}
	committed broadcast.Signal
}

// Start starts the committer goroutine.
func Start[R any](cfg Config[R]) *Loop[R] {
	cfg.MaxBatch = max(cfg.MaxBatch, 1)
	cfg.QueueLen = max(cfg.QueueLen, 0)
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	l := &Loop[R]{
		cfg:     cfg,
		queue:   make(chan *Call[R], cfg.QueueLen),
		stopped: make(chan struct{}),
	}
	go l.run()
	return l
}

// Do queues req and waits for its batch's commit. It returns Config.Closed
// after Close, and ctx's error if ctx ends while waiting for room in the
// queue or before the loop takes req into a batch. Otherwise it returns the
// Last and Err that Commit set.
func (l *Loop[R]) Do(ctx context.Context, req R) (uint64, error) {
	c := &Call[R]{Req: req, ctx: ctx, done: make(chan struct{})}
	if err := l.enqueue(ctx, c); err != nil {
		return 0, err
	}
	<-c.done
	return c.Last, c.Err
}

func (l *Loop[R]) enqueue(ctx context.Context, c *Call[R]) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return l.cfg.Closed
	}
	select {
	case l.queue <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close refuses new calls, waits until the queued ones are committed and
// Drained has run, and stops the loop. Later calls only wait for that.
func (l *Loop[R]) Close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.queue)
	}
	l.mu.Unlock()
	<-l.stopped
}

// Closed reports whether Close was called.
func (l *Loop[R]) Closed() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.closed
}

// Queued returns how many calls wait in the queue (for tests).
func (l *Loop[R]) Queued() int { return len(l.queue) }

// Committed returns a channel closed after the next Commit (successful or
// not) or when the loop stops, and whether the loop has stopped already.
func (l *Loop[R]) Committed() (<-chan struct{}, bool) { return l.committed.Wait() }

func (l *Loop[R]) run() {
	defer close(l.stopped)
	batch := make([]*Call[R], 0, min(l.cfg.MaxBatch, max(l.cfg.QueueLen, 1)))
	var timer *time.Timer
	if l.cfg.Idle != nil {
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	for {
		var first *Call[R]
		ok := true
		select {
		case first, ok = <-l.queue: // a call waits: no idle work first
		default:
			var at time.Time
			idle := false
			if l.cfg.Idle != nil {
				at, idle = l.cfg.Idle()
			}
			if idle {
				timer.Reset(time.Until(at))
				select {
				case first, ok = <-l.queue:
				case <-timer.C:
					l.cfg.Tick()
					continue
				}
			} else {
				first, ok = <-l.queue
			}
		}
		if !ok {
			if l.cfg.Drained != nil {
				l.cfg.Drained()
			}
			l.committed.Stop()
			return
		}
		batch = append(batch[:0], first)
		if l.cfg.Yield {
			runtime.Gosched()
		}
	drain:
		for len(batch) < l.cfg.MaxBatch {
			select {
			case c, ok := <-l.queue:
				if !ok {
					break drain
				}
				batch = append(batch, c)
			default:
				break drain
			}
		}
		l.commit(batch)
		clear(batch)
	}
}

// commit drops the calls whose context is done, commits the rest and wakes
// every caller.
func (l *Loop[R]) commit(batch []*Call[R]) {
	live := batch[:0:len(batch)] // filtered in place; run clears batch after
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.Last, c.Err = 0, err
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			// The backend's transaction did not finish; fail the batch
			// rather than leave its callers blocked forever.
			err := fmt.Errorf("%s: internal error during commit: %v", l.cfg.Name, r)
			l.cfg.Log.Error("journal commit panicked", "err", err, "batch", len(live))
			for _, c := range live {
				c.Last, c.Err = 0, err
			}
		}
		l.committed.Broadcast() // after the transaction: readers woken now see it
		for _, c := range live {
			close(c.done)
		}
	}()
	l.cfg.Commit(live)
}
