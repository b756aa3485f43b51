package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/journal"
)

// Webhook dispatch in a cluster (docs/CLUSTER.md, "Webhook dispatch"):
// every node may be given the same endpoints; one node at a time, the
// leader, runs the dispatcher over the shared journal, from the cursors
// stored in the journal's kv area. A term's context ends as soon as the
// leadership may be lost, and the dispatcher with it; the next leader
// starts a fresh dispatcher, which loads the stored cursors.

// Elector runs work on one node of the cluster at a time: an etcd election
// (cluster.Node's) or a PostgreSQL advisory lock (pgjournal.LockElector).
type Elector interface {
	// Lead campaigns until ctx ends, calling run once per term with a
	// context that ends as soon as the term may be lost. When run returns
	// on its own, the node gives the leadership up for a while.
	Lead(ctx context.Context, run func(ctx context.Context)) error
}

// LeaderJournal is the shared journal a Leader dispatches from.
type LeaderJournal interface {
	Journal
	// LastGlobal is the journal's last global position; the leader reads
	// it to prove the journal answers.
	LastGlobal(ctx context.Context) (uint64, error)
}

// Leader runs the dispatcher while this node leads, and serves the webhook
// routes (api.Webhooks) on every node.
type Leader struct {
	// cfg configures every dispatcher; cfg.DB is db.
	cfg Config
	db  LeaderJournal
	el  Elector
	log *slog.Logger
	// poll, feedPoll, giveUp: LeaderTiming's.
	poll, feedPoll, giveUp time.Duration
	// cur is the leader's running dispatcher; nil on other nodes.
	cur atomic.Pointer[Dispatcher]
}

// LeaderTiming tunes a Leader; a zero field takes its default.
type LeaderTiming struct {
	// Poll is how often the leader checks the journal's health and looks
	// for replays requested on other nodes. Zero means 1s.
	Poll time.Duration
	// FeedPoll is how often the leader's dispatcher, caught up, looks for
	// other nodes' commits (its own wake it at once). Zero means 200ms.
	FeedPoll time.Duration
	// GiveUp is how long the journal may stay unreachable from the leader
	// before it hands dispatch over to a node that may reach it. Zero
	// means 15s.
	GiveUp time.Duration
}

// NewLeader checks cfg (as New does) and returns a Leader dispatching from
// db, elected by el. It does nothing until Run; on a node that never
// runs it, it still serves the routes from the stored cursors.
func NewLeader(cfg Config, db LeaderJournal, el Elector, timing LeaderTiming) (*Leader, error) {
	cfg.DB = db
	if _, err := New(cfg); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	w := &Leader{cfg: cfg, db: db, el: el, log: log, poll: timing.Poll, feedPoll: timing.FeedPoll, giveUp: timing.GiveUp}
	if w.poll <= 0 {
		w.poll = time.Second
	}
	if w.feedPoll <= 0 {
		w.feedPoll = 200 * time.Millisecond
	}
	if w.giveUp <= 0 {
		w.giveUp = 15 * time.Second
	}
	return w, nil
}

// Run campaigns until ctx ends, dispatching during each term. Cancel ctx
// before the journal closes.
func (w *Leader) Run(ctx context.Context) error { return w.el.Lead(ctx, w.term) }

// Leading reports whether this node runs dispatch now.
func (w *Leader) Leading() bool { return w.cur.Load() != nil }

// term runs the dispatcher for one leadership term, until ctx ends or the
// journal has been unreachable for giveUp (then it returns, and the
// elector hands the leadership over).
func (w *Leader) term(ctx context.Context) {
	// dctx ends the dispatcher, and its writes, whether the term is lost
	// or this node gives it up.
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	cfg := w.cfg
	cfg.DB = &termJournal{LeaderJournal: w.db, term: dctx, poll: w.feedPoll}
	d, err := New(cfg)
	if err != nil { // validated at start
		w.log.Error("webhook dispatch: cannot start", "err", err)
		return
	}
	w.cur.Store(d)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(dctx) }()
	end := func() {
		w.cur.Store(nil) // the API and the gauge see it at once
		stop()
		<-ran
	}
	t := time.NewTicker(w.poll)
	defer t.Stop()
	var failingSince time.Time
	for {
		select {
		case err := <-ran:
			w.cur.Store(nil)
			if ctx.Err() != nil {
				w.log.Info("webhook dispatch: this node no longer leads; dispatch stopped", "reason", context.Cause(ctx))
			} else {
				w.log.Error("webhook dispatch: dispatcher stopped; giving leadership up", "err", err)
			}
			return
		case <-ctx.Done():
			end()
			w.log.Info("webhook dispatch: this node no longer leads; dispatch stopped", "reason", context.Cause(ctx))
			return
		case <-t.C:
		}
		if err := w.check(dctx, d); err != nil {
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if time.Since(failingSince) >= w.giveUp {
				end()
				w.log.Warn("webhook dispatch: journal unreachable; handing leadership over", "for", time.Since(failingSince).Round(time.Second), "err", err)
				return
			}
			continue
		}
		failingSince = time.Time{}
	}
}

// check proves the journal answers and picks up replays of parked events
// requested on other nodes: they are stored (Replaying), but only this
// dispatcher's Replay wakes delivery. A replay already queued is a no-op.
func (w *Leader) check(ctx context.Context, d *Dispatcher) error {
	ctx, cancel := context.WithTimeout(ctx, max(w.poll, 2*time.Second))
	defer cancel()
	if _, err := w.db.LastGlobal(ctx); err != nil {
		return err
	}
	for _, name := range d.Endpoints() {
		parked, err := d.Parked(ctx, name)
		if err != nil {
			return err
		}
		for _, p := range parked {
			if p.Replaying {
				if err := d.Replay(ctx, name, p.Event.ID); err != nil && !errors.Is(err, ErrNotParked) {
					return err
				}
			}
		}
	}
	return nil
}

// dispatcher is the leader's running dispatcher, or on other nodes a fresh
// one that reads the stored cursors and parked events (it is not run).
func (w *Leader) dispatcher() (*Dispatcher, error) {
	if d := w.cur.Load(); d != nil {
		return d, nil
	}
	return New(w.cfg)
}

// Lag is every endpoint's position; on a node that does not lead, from the
// stored cursors (its delivery counters are 0).
func (w *Leader) Lag(ctx context.Context) ([]EndpointLag, error) {
	d, err := w.dispatcher()
	if err != nil {
		return nil, err
	}
	return d.Lag(ctx)
}

// LeaderLag is Lag on the leader and nothing elsewhere: the lag metrics
// come from the node that dispatches.
func (w *Leader) LeaderLag(ctx context.Context) ([]EndpointLag, error) {
	if d := w.cur.Load(); d != nil {
		return d.Lag(ctx)
	}
	return nil, nil
}

// Parked lists an endpoint's parked events from the journal.
func (w *Leader) Parked(ctx context.Context, endpoint string) ([]ParkedEvent, error) {
	d, err := w.dispatcher()
	if err != nil {
		return nil, err
	}
	return d.Parked(ctx, endpoint)
}

// Replay re-queues a parked event. On a node that does not lead it is
// stored, and the leader starts delivering it within its poll interval.
func (w *Leader) Replay(ctx context.Context, endpoint, eventID string) error {
	d, err := w.dispatcher()
	if err != nil {
		return err
	}
	return d.Replay(ctx, endpoint, eventID)
}

// ReplayAll re-queues every parked event of an endpoint (see Replay).
func (w *Leader) ReplayAll(ctx context.Context, endpoint string) (int, error) {
	d, err := w.dispatcher()
	if err != nil {
		return 0, err
	}
	return d.ReplayAll(ctx, endpoint)
}

// errTermOver is returned by a term's journal once the term has ended.
var errTermOver = errors.New("webhook dispatch: leadership term over; not recording")

// termJournal is the journal as one leadership term's dispatcher sees it.
// It refuses writes once the term is over: a dispatcher still recording
// the outcome of its last POST must not move the cursor under the next
// leader (the unrecorded event is delivered again instead). Committed
// also fires every poll, because other nodes' commits do not wake it.
type termJournal struct {
	LeaderJournal
	term context.Context
	poll time.Duration
}

func (j *termJournal) over() error {
	if j.term.Err() != nil {
		return fmt.Errorf("%w (%v)", errTermOver, context.Cause(j.term))
	}
	return nil
}

func (j *termJournal) Put(ctx context.Context, key string, value []byte) error {
	if err := j.over(); err != nil {
		return err
	}
	return j.LeaderJournal.Put(ctx, key, value)
}

func (j *termJournal) WriteKV(ctx context.Context, put []journal.KV, del []string) error {
	if err := j.over(); err != nil {
		return err
	}
	return j.LeaderJournal.WriteKV(ctx, put, del)
}

func (j *termJournal) Committed() <-chan struct{} {
	ch := make(chan struct{})
	own := j.LeaderJournal.Committed()
	go func() {
		t := time.NewTimer(j.poll)
		defer t.Stop()
		select {
		case <-own:
		case <-t.C:
		case <-j.term.Done():
		}
		close(ch)
	}()
	return ch
}
