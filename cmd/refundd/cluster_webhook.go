package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal"
)

// Webhook dispatch in cluster mode (docs/CLUSTER.md, "Webhook dispatch"):
// every node may be given the same --webhooks-file; one node at a time,
// the leader, runs the dispatcher over the shared journal, from the
// cursors stored in the journal's kv area. Leadership is an etcd election
// (cluster.Node.Lead) with etcd membership, and a PostgreSQL advisory lock
// (lockElector) with automanaged membership. A term's context ends as soon
// as the leadership may be lost, and the dispatcher with it; the next
// leader starts a fresh dispatcher, which loads the stored cursors.

// elector runs work on one node of the cluster at a time.
type elector interface {
	// lead campaigns until ctx ends, calling run once per term with a
	// context that ends as soon as the term may be lost. When run returns
	// on its own, the node gives the leadership up for a while.
	lead(ctx context.Context, run func(ctx context.Context)) error
}

// etcdElector is cluster.Node.Lead.
type etcdElector struct {
	node  *cluster.Node
	value string
}

func (e etcdElector) lead(ctx context.Context, run func(context.Context)) error {
	err := e.node.Lead(ctx, "webhooks", e.value, run)
	if errors.Is(err, cluster.ErrClosed) {
		return nil
	}
	return err
}

// clusterWebhooks runs the dispatcher while this node leads, and serves the
// webhook routes (api.Webhooks) on every node.
type clusterWebhooks struct {
	// cfg configures every dispatcher; cfg.DB is the shared journal.
	cfg webhook.Config
	pg  *pgjournal.DB
	log *slog.Logger
	// poll is how often the leader checks the journal's health and looks
	// for replays requested on other nodes.
	poll time.Duration
	// feedPoll is how often the leader's dispatcher, caught up, looks for
	// other nodes' commits (its own wake it at once).
	feedPoll time.Duration
	// giveUp is how long the journal may stay unreachable from the leader
	// before it hands dispatch over to a node that may reach it.
	giveUp time.Duration
	// cur is the leader's running dispatcher; nil on other nodes.
	cur atomic.Pointer[webhook.Dispatcher]
}

// readWebhookEndpoints reads --webhooks-file (as startWebhooks does).
func (m *Main) readWebhookEndpoints() ([]webhook.Endpoint, error) {
	f, err := os.Open(m.Config.WebhooksFile)
	if err != nil {
		return nil, fmt.Errorf("--webhooks-file: %w", err)
	}
	defer f.Close()
	getenv := m.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	eps, err := webhook.ParseEndpoints(f, getenv, os.ReadFile)
	if err != nil {
		return nil, fmt.Errorf("--webhooks-file %s: %w", m.Config.WebhooksFile, err)
	}
	return eps, nil
}

// startClusterWebhooks validates the endpoints, registers the leader gauge
// and starts campaigning; Close stops it (m.hooksStop) before the node and
// the journal close.
func (m *Main) startClusterWebhooks(node *cluster.Node, pg *pgjournal.DB, membership cluster.Membership, nodeID, httpAddr string) (*clusterWebhooks, error) {
	eps, err := m.readWebhookEndpoints()
	if err != nil {
		return nil, err
	}
	w := &clusterWebhooks{
		cfg: webhook.Config{DB: pg, Endpoints: eps, Logger: m.log.With("component", "webhook")},
		pg:  pg, log: m.log.With("component", "webhook"), poll: time.Second, feedPoll: 200 * time.Millisecond,
		giveUp: 15 * time.Second,
	}
	if _, err := webhook.New(w.cfg); err != nil {
		return nil, fmt.Errorf("--webhooks-file %s: %w", m.Config.WebhooksFile, err)
	}
	value := nodeID + " " + httpAddr
	var el elector
	switch membership.(type) {
	case cluster.Etcd, *cluster.Etcd:
		el = etcdElector{node: node, value: value}
	default:
		cc := m.Config.Cluster
		el = &lockElector{dsn: cc.Journal, key: advisoryKey(cc.JournalSchema, cc.Name), value: value, log: w.log}
	}
	if err := m.metrics.Registry().Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "refundd", Name: "webhook_leader",
		Help: "1 while this node runs webhook dispatch (the cluster's webhook leader), else 0.",
	}, func() float64 {
		if w.cur.Load() != nil {
			return 1
		}
		return 0
	})); err != nil {
		return nil, fmt.Errorf("webhook leader gauge: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	m.hooksStop, m.hooksDone = stop, done
	go func() {
		defer close(done)
		if err := el.lead(ctx, w.term); err != nil {
			w.log.Error("webhook dispatch: leader election stopped; this node will not dispatch", "err", err)
		}
	}()
	w.log.Info("webhook dispatch: campaigning for leadership", "endpoints", len(eps), "node", value)
	return w, nil
}

// term runs the dispatcher for one leadership term, until ctx ends or the
// journal has been unreachable for giveUp (then it returns, and the
// elector hands the leadership over).
func (w *clusterWebhooks) term(ctx context.Context) {
	// dctx ends the dispatcher, and its writes, whether the term is lost
	// or this node gives it up.
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	cfg := w.cfg
	cfg.DB = &termJournal{DB: w.pg, term: dctx, poll: w.feedPoll}
	d, err := webhook.New(cfg)
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
func (w *clusterWebhooks) check(ctx context.Context, d *webhook.Dispatcher) error {
	ctx, cancel := context.WithTimeout(ctx, max(w.poll, 2*time.Second))
	defer cancel()
	if _, err := w.pg.LastGlobal(ctx); err != nil {
		return err
	}
	for _, name := range d.Endpoints() {
		parked, err := d.Parked(ctx, name)
		if err != nil {
			return err
		}
		for _, p := range parked {
			if p.Replaying {
				if err := d.Replay(ctx, name, p.Event.ID); err != nil && !errors.Is(err, webhook.ErrNotParked) {
					return err
				}
			}
		}
	}
	return nil
}

// dispatcher is the leader's running dispatcher, or on other nodes a fresh
// one that reads the stored cursors and parked events (it is not run).
func (w *clusterWebhooks) dispatcher() (*webhook.Dispatcher, error) {
	if d := w.cur.Load(); d != nil {
		return d, nil
	}
	return webhook.New(w.cfg)
}

// Lag is every endpoint's position; on a node that does not lead, from the
// stored cursors (its delivery counters are 0).
func (w *clusterWebhooks) Lag(ctx context.Context) ([]webhook.EndpointLag, error) {
	d, err := w.dispatcher()
	if err != nil {
		return nil, err
	}
	return d.Lag(ctx)
}

// leaderLag is Lag on the leader and nothing elsewhere: the lag metrics
// come from the node that dispatches.
func (w *clusterWebhooks) leaderLag(ctx context.Context) ([]webhook.EndpointLag, error) {
	if d := w.cur.Load(); d != nil {
		return d.Lag(ctx)
	}
	return nil, nil
}

// Parked lists an endpoint's parked events from the journal.
func (w *clusterWebhooks) Parked(ctx context.Context, endpoint string) ([]webhook.ParkedEvent, error) {
	d, err := w.dispatcher()
	if err != nil {
		return nil, err
	}
	return d.Parked(ctx, endpoint)
}

// Replay re-queues a parked event. On a node that does not lead it is
// stored, and the leader starts delivering it within its poll interval.
func (w *clusterWebhooks) Replay(ctx context.Context, endpoint, eventID string) error {
	d, err := w.dispatcher()
	if err != nil {
		return err
	}
	return d.Replay(ctx, endpoint, eventID)
}

// ReplayAll re-queues every parked event of an endpoint (see Replay).
func (w *clusterWebhooks) ReplayAll(ctx context.Context, endpoint string) (int, error) {
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
	*pgjournal.DB
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
	return j.DB.Put(ctx, key, value)
}

func (j *termJournal) WriteKV(ctx context.Context, put []journal.KV, del []string) error {
	if err := j.over(); err != nil {
		return err
	}
	return j.DB.WriteKV(ctx, put, del)
}

func (j *termJournal) Committed() <-chan struct{} {
	ch := make(chan struct{})
	own := j.DB.Committed()
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
