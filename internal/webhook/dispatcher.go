package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// idleFlush is how often a cursor that only moved past records producing
// no delivery is persisted. Losing such a move costs a re-read, never a
// duplicate, so it need not cost a write per journal commit.
const idleFlush = time.Second

// Dispatcher delivers the feed to the configured endpoints. Its methods are
// safe for concurrent use; Lag, Parked and Replay work whether or not Run
// is running.
type Dispatcher struct {
	cfg     Config
	log     *slog.Logger
	eps     []*endpoint
	byName  map[string]*endpoint
	running atomic.Bool
}

// ParkedEvent is an event an endpoint did not accept within MaxAttempts, or
// one held behind such an event of the same reservation.
type ParkedEvent struct {
	Event feed.Event `json:"event"`
	// Attempts is the number of POSTs in its last round; 0 for an event
	// parked behind an earlier one without being tried.
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
	ParkedAt  time.Time `json:"parked_at"`
	// Replaying is set once an operator re-queued it: delivery is pending.
	Replaying bool `json:"replaying"`
	// HeldBehind is the id of the oldest parked event of the same
	// reservation when that is not this one: the event this one waits for.
	// Filled in by Parked, not stored.
	HeldBehind string `json:"held_behind,omitempty"`
}

// EndpointLag is how far one endpoint is behind the journal.
type EndpointLag struct {
	Name string
	// Cursor is the global sequence up to which every event has been
	// delivered or parked.
	Cursor uint64
	// EventsBehind is the number of journal records after Cursor. Each
	// produces at most one event, so it bounds the events still to deliver;
	// 0 means caught up.
	EventsBehind uint64
	// Parked is the number of parked events.
	Parked int
	// OldestUndeliveredAge is the age of the oldest event not yet delivered
	// (parked, or the next one after Cursor); 0 when there is none.
	OldestUndeliveredAge time.Duration
	// Delivered and FailedAttempts count POSTs since this process started.
	Delivered      uint64
	FailedAttempts uint64
}

type endpoint struct {
	d     *Dispatcher
	cfg   Endpoint
	log   *slog.Logger
	wake  chan struct{} // poked by Replay
	stats struct{ delivered, failures atomic.Uint64 }

	// mu guards the fields below and the endpoint's kv entries: the
	// endpoint's goroutine and Replay both change parked events.
	mu        sync.Mutex
	loaded    bool
	cursor    uint64 // persisted
	pos       uint64 // read position, >= cursor; ahead only past records without deliveries
	flushedAt time.Time
	holds     map[string]*hold // reservation id -> its parked events
}

// hold is one reservation's parked events, in global order.
type hold struct {
	events    []*ParkedEvent
	replaying bool
}

// New checks cfg and returns a Dispatcher; nothing runs until Run.
func New(cfg Config) (*Dispatcher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Dispatcher{cfg: cfg, log: cfg.Logger, byName: map[string]*endpoint{}}
	for _, e := range cfg.Endpoints {
		e.Secret = append([]byte(nil), e.Secret...)
		e.Types = append([]string(nil), e.Types...)
		e.Merchants = append([]string(nil), e.Merchants...)
		ep := &endpoint{d: d, cfg: e, log: d.log.With("webhook", e.Name), wake: make(chan struct{}, 1)}
		d.eps = append(d.eps, ep)
		d.byName[e.Name] = ep
	}
	return d, nil
}

// Run delivers until ctx ends, one goroutine per endpoint, and returns when
// they have all stopped: nil after ctx ended, or the errors of endpoints
// that had to stop (the journal was closed). A POST in flight when ctx ends
// is abandoned; its event is delivered again by the next Run.
func (d *Dispatcher) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer d.running.Store(false)
	if len(d.eps) == 0 {
		<-ctx.Done()
		return nil
	}
	errs := make([]error, len(d.eps))
	var wg sync.WaitGroup
	for i, ep := range d.eps {
		wg.Go(func() { errs[i] = ep.run(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (d *Dispatcher) endpoint(name string) (*endpoint, error) {
	ep := d.byName[name]
	if ep == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownEndpoint, name)
	}
	return ep, nil
}

// Endpoints returns the configured endpoint names, in configuration order.
func (d *Dispatcher) Endpoints() []string {
	names := make([]string, len(d.eps))
	for i, ep := range d.eps {
		names[i] = ep.cfg.Name
	}
	return names
}

// kv layout, per endpoint:
//
//	webhook/<name>/cursor          decimal global sequence
//	webhook/<name>/parked/<id>     JSON ParkedEvent; ids sort in global order
func (ep *endpoint) prefix() string             { return "webhook/" + ep.cfg.Name + "/" }
func (ep *endpoint) cursorKey() string          { return ep.prefix() + "cursor" }
func (ep *endpoint) parkedPrefix() string       { return ep.prefix() + "parked/" }
func (ep *endpoint) parkedKey(id string) string { return ep.parkedPrefix() + id }

// loadLocked reads the endpoint's cursor and parked events once.
func (ep *endpoint) loadLocked(ctx context.Context) error {
	if ep.loaded {
		return nil
	}
	db := ep.d.cfg.DB
	var cursor uint64
	v, err := db.Get(ctx, ep.cursorKey())
	switch {
	case err == nil:
		if cursor, err = strconv.ParseUint(string(v), 10, 64); err != nil {
			return fmt.Errorf("webhook: %s: stored cursor %q: %w", ep.cfg.Name, v, err)
		}
	case errors.Is(err, journal.ErrNotFound):
		if ep.cfg.FromNow {
			if cursor, err = db.LastGlobal(ctx); err != nil {
				return fmt.Errorf("webhook: %s: %w", ep.cfg.Name, err)
			}
			if err := db.Put(ctx, ep.cursorKey(), []byte(strconv.FormatUint(cursor, 10))); err != nil {
				return fmt.Errorf("webhook: %s: %w", ep.cfg.Name, err)
			}
		}
	default:
		return fmt.Errorf("webhook: %s: %w", ep.cfg.Name, err)
	}
	parked, err := ep.readParked(ctx)
	if err != nil {
		return err
	}
	ep.holds = map[string]*hold{}
	for _, p := range parked {
		h := ep.holds[p.Event.ReservationID]
		if h == nil {
			h = &hold{}
			ep.holds[p.Event.ReservationID] = h
		}
		h.events = append(h.events, p)
		h.replaying = h.replaying || p.Replaying
	}
	ep.cursor, ep.pos, ep.loaded = cursor, cursor, true
	ep.flushedAt = ep.d.cfg.Now()
	return nil
}

// readParked returns the stored parked events in global order, those of
// merchants the endpoint takes. Events parked before its subscription
// narrowed stay stored, untouched, and come back if it widens again; until
// then they are neither listed, counted, replayed nor holding anything
// back.
func (ep *endpoint) readParked(ctx context.Context) ([]*ParkedEvent, error) {
	kvs, err := ep.d.cfg.DB.List(ctx, ep.parkedPrefix())
	if err != nil {
		return nil, fmt.Errorf("webhook: %s: %w", ep.cfg.Name, err)
	}
	out := make([]*ParkedEvent, 0, len(kvs))
	for _, kv := range kvs {
		p := &ParkedEvent{}
		if err := json.Unmarshal(kv.Value, p); err != nil {
			return nil, fmt.Errorf("webhook: %s: stored %s: %w", ep.cfg.Name, kv.Key, err)
		}
		// Parked before events named their merchant: every reservation
		// then belonged to the default one.
		p.Event.Merchant = reservation.MerchantOf(p.Event.Merchant)
		if ep.takes(p.Event.Merchant) {
			out = append(out, p)
		}
	}
	return out, nil
}

// writeLocked persists cursor (if not zero and moved) together with the
// given parked events and deletions, in one transaction, and updates the
// in-memory cursor only once that succeeded.
func (ep *endpoint) writeLocked(ctx context.Context, cursor uint64, put []*ParkedEvent, del []string) error {
	var kvs []journal.KV
	if cursor > ep.cursor {
		kvs = append(kvs, journal.KV{Key: ep.cursorKey(), Value: []byte(strconv.FormatUint(cursor, 10))})
	}
	for _, p := range put {
		v, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("webhook: %s: %w", ep.cfg.Name, err)
		}
		kvs = append(kvs, journal.KV{Key: ep.parkedKey(p.Event.ID), Value: v})
	}
	keys := make([]string, len(del))
	for i, id := range del {
		keys[i] = ep.parkedKey(id)
	}
	if err := ep.d.cfg.DB.WriteKV(ctx, kvs, keys); err != nil {
		return fmt.Errorf("webhook: %s: %w", ep.cfg.Name, err)
	}
	if cursor > ep.cursor {
		ep.cursor = cursor
		ep.pos = max(ep.pos, cursor)
		ep.flushedAt = ep.d.cfg.Now()
	}
	return nil
}

// run is the endpoint's goroutine.
func (ep *endpoint) run(ctx context.Context) error {
	defer ep.flushIdle(true)
	db := ep.d.cfg.DB
	failures := 0 // consecutive journal errors, for backoff
	fail := func(what string, err error) bool {
		if ctx.Err() != nil {
			return false
		}
		failures++
		ep.log.Error("webhook "+what+" failed; retrying", "err", err, "failures", failures)
		return ep.sleep(ctx, ep.d.backoff(failures), 0)
	}
	for ctx.Err() == nil {
		ep.mu.Lock()
		err := ep.loadLocked(ctx)
		ep.mu.Unlock()
		if err == nil {
			break
		}
		if errors.Is(err, journal.ErrClosed) {
			return err
		}
		if !fail("load", err) {
			return nil
		}
	}
	for ctx.Err() == nil {
		if err := ep.replay(ctx); err != nil {
			if errors.Is(err, journal.ErrClosed) {
				return err
			}
			if !fail("replay", err) {
				return nil
			}
			continue
		}
		committed := db.Committed() // before reading, so no commit is missed
		ep.mu.Lock()
		from := ep.pos
		ep.mu.Unlock()
		events, next, err := ep.read(ctx, from, ep.d.cfg.BatchSize)
		what := "feed read"
		if err == nil {
			what = "recording a delivery"
			for _, ev := range events {
				if err = ep.handle(ctx, ev); err != nil {
					break
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if errors.Is(err, journal.ErrClosed) {
				return err
			}
			if !fail(what, err) {
				return nil
			}
			continue
		}
		failures = 0
		ep.mu.Lock()
		ep.pos = max(ep.pos, next)
		ep.mu.Unlock()
		ep.flushIdle(false)
		if len(events) == 0 && next == from {
			select {
			case <-committed:
			case <-ep.wake:
			case <-ctx.Done():
				return nil
			}
		}
	}
	return nil
}

// read is feed.Read with the endpoint's types, keeping only the events of
// its merchants. Skipped events are past next like filtered types, so the
// cursor moves over them without a delivery or a parking.
func (ep *endpoint) read(ctx context.Context, from uint64, limit int) ([]feed.Event, uint64, error) {
	events, next, err := feed.Read(ctx, ep.d.cfg.DB, from, limit, ep.cfg.Types)
	if err != nil || len(ep.cfg.Merchants) == 0 {
		return events, next, err
	}
	return slices.DeleteFunc(events, func(ev feed.Event) bool { return !ep.takes(ev.Merchant) }), next, nil
}

// takes reports whether the endpoint subscribes to merchant's events.
func (ep *endpoint) takes(merchant string) bool {
	return len(ep.cfg.Merchants) == 0 || slices.Contains(ep.cfg.Merchants, merchant)
}

// recordCtx is the context for recording what a delivery attempt did: it
// outlives a stop that began during the attempt, briefly.
func recordCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
}

// flushIdle persists a read position that moved past records without
// deliveries, at most once per idleFlush unless final.
func (ep *endpoint) flushIdle(final bool) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if !ep.loaded || ep.pos <= ep.cursor || (!final && ep.d.cfg.Now().Sub(ep.flushedAt) < idleFlush) {
		return
	}
	// Not the run's ctx: a final flush happens after it ended.
	ctx, cancel := recordCtx(context.Background())
	defer cancel()
	if err := ep.writeLocked(ctx, ep.pos, nil, nil); err != nil && !errors.Is(err, journal.ErrClosed) {
		ep.log.Warn("webhook cursor not persisted; records will be re-read", "err", err)
	}
}

// handle delivers ev or parks it. An error means ev's outcome was not
// recorded; the caller reads from the cursor again (ev may go out twice).
func (ep *endpoint) handle(ctx context.Context, ev feed.Event) error {
	ep.mu.Lock()
	if h := ep.holds[ev.ReservationID]; h != nil {
		// An earlier event of this reservation is parked: this one must not
		// overtake it.
		p := &ParkedEvent{Event: ev, ParkedAt: ep.d.cfg.Now().UTC(), Replaying: h.replaying}
		err := ep.writeLocked(ctx, ev.Global, []*ParkedEvent{p}, nil)
		if err == nil {
			h.events = append(h.events, p)
			ep.log.Info("webhook event held behind a parked one", "event", ev.ID, "type", ev.Type,
				"reservation", ev.ReservationID, "behind", h.events[0].Event.ID)
		}
		ep.mu.Unlock()
		return err
	}
	ep.mu.Unlock()

	attempts, lastErr, ok := ep.deliver(ctx, ev)
	if !ok && ctx.Err() != nil {
		return ctx.Err()
	}
	// Record the outcome even if a stop began meanwhile: a delivery that
	// went out but is not recorded is sent again after the restart.
	wctx, cancel := recordCtx(ctx)
	defer cancel()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ok {
		return ep.writeLocked(wctx, ev.Global, nil, nil)
	}
	p := &ParkedEvent{Event: ev, Attempts: attempts, LastError: lastErr, ParkedAt: ep.d.cfg.Now().UTC()}
	if err := ep.writeLocked(wctx, ev.Global, []*ParkedEvent{p}, nil); err != nil {
		return err
	}
	ep.holds[ev.ReservationID] = &hold{events: []*ParkedEvent{p}}
	ep.note("parked")
	ep.log.Warn("webhook event parked after its last attempt; later events of its reservation are held behind it",
		"event", ev.ID, "type", ev.Type, "reservation", ev.ReservationID, "attempts", attempts, "last_error", lastErr)
	return nil
}

// replay delivers the events of reservations an operator re-queued, each
// reservation in order, oldest reservation first. A reservation whose event
// fails again goes back to parked.
func (ep *endpoint) replay(ctx context.Context) error {
	for ctx.Err() == nil {
		ep.mu.Lock()
		var h *hold
		var res string
		for id, c := range ep.holds {
			if c.replaying && (h == nil || c.events[0].Event.Global < h.events[0].Event.Global) {
				h, res = c, id
			}
		}
		ep.mu.Unlock()
		if h == nil {
			return nil
		}
		for len(h.events) > 0 && ctx.Err() == nil {
			p := h.events[0]
			attempts, lastErr, ok := ep.deliver(ctx, p.Event)
			if !ok && ctx.Err() != nil {
				return nil
			}
			wctx, cancel := recordCtx(ctx)
			ep.mu.Lock()
			if ok {
				err := ep.writeLocked(wctx, 0, nil, []string{p.Event.ID})
				cancel()
				if err != nil {
					ep.mu.Unlock()
					return err
				}
				h.events = h.events[1:]
				if len(h.events) == 0 {
					delete(ep.holds, res)
				}
				ep.mu.Unlock()
				continue
			}
			was := *p
			p.Attempts, p.LastError, p.ParkedAt = attempts, lastErr, ep.d.cfg.Now().UTC()
			for _, q := range h.events {
				q.Replaying = false
			}
			err := ep.writeLocked(wctx, 0, h.events, nil)
			cancel()
			if err != nil {
				*p = was
				for _, q := range h.events {
					q.Replaying = true
				}
				ep.mu.Unlock()
				return err
			}
			h.replaying = false
			ep.mu.Unlock()
			ep.log.Warn("webhook replay failed; event parked again", "event", p.Event.ID,
				"reservation", res, "attempts", attempts, "last_error", lastErr)
			break
		}
	}
	return nil
}

// Replay re-queues a parked event at endpoint name. Per-reservation order
// forbids delivering it alone, so every parked event of its reservation is
// re-queued and delivered in order; then that reservation's new events flow
// again. Replaying an event already re-queued is a no-op.
//
// Errors: ErrUnknownEndpoint, ErrNotParked, or a journal error.
func (d *Dispatcher) Replay(ctx context.Context, name, eventID string) error {
	ep, err := d.endpoint(name)
	if err != nil {
		return err
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if err := ep.loadLocked(ctx); err != nil {
		return err
	}
	for _, h := range ep.holds {
		if slices.ContainsFunc(h.events, func(p *ParkedEvent) bool { return p.Event.ID == eventID }) {
			if err := ep.requeueLocked(ctx, []*hold{h}); err != nil {
				return err
			}
			ep.log.Info("webhook replay requested", "event", eventID, "events", len(h.events))
			return nil
		}
	}
	return fmt.Errorf("%w: %q at %s", ErrNotParked, eventID, name)
}

// ReplayAll re-queues every parked event at endpoint name (after an outage
// is over) and returns how many are now queued for delivery.
//
// Errors: ErrUnknownEndpoint, or a journal error.
func (d *Dispatcher) ReplayAll(ctx context.Context, name string) (int, error) {
	ep, err := d.endpoint(name)
	if err != nil {
		return 0, err
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if err := ep.loadLocked(ctx); err != nil {
		return 0, err
	}
	hs := make([]*hold, 0, len(ep.holds))
	n := 0
	for _, h := range ep.holds {
		hs = append(hs, h)
		n += len(h.events)
	}
	if err := ep.requeueLocked(ctx, hs); err != nil {
		return 0, err
	}
	if n > 0 {
		ep.log.Info("webhook replay of every parked event requested", "events", n)
	}
	return n, nil
}

// requeueLocked marks the holds' events as replaying, persists that, and
// wakes the endpoint's goroutine. Holds already replaying are left alone.
func (ep *endpoint) requeueLocked(ctx context.Context, hs []*hold) error {
	var put []*ParkedEvent
	var changed []*hold
	for _, h := range hs {
		if !h.replaying {
			changed = append(changed, h)
			put = append(put, h.events...)
		}
	}
	if len(put) == 0 {
		return nil
	}
	for _, p := range put {
		p.Replaying = true
	}
	if err := ep.writeLocked(ctx, 0, put, nil); err != nil {
		for _, p := range put {
			p.Replaying = false
		}
		return err
	}
	for _, h := range changed {
		h.replaying = true
	}
	select {
	case ep.wake <- struct{}{}:
	default:
	}
	return nil
}

// Parked returns endpoint name's parked events in global order.
func (d *Dispatcher) Parked(ctx context.Context, name string) ([]ParkedEvent, error) {
	ep, err := d.endpoint(name)
	if err != nil {
		return nil, err
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ps, err := ep.readParked(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ParkedEvent, len(ps))
	first := map[string]string{}
	for i, p := range ps {
		out[i] = *p
		if f, ok := first[p.Event.ReservationID]; ok {
			out[i].HeldBehind = f
		} else {
			first[p.Event.ReservationID] = p.Event.ID
		}
	}
	return out, nil
}

// lagPages bounds the pages nextEvent reads looking past other merchants'
// events, so Lag answers in bounded time behind a long backlog of them.
const lagPages = 4

// nextEvent returns the first event after pos the endpoint would deliver,
// or nil if there is none within lagPages pages.
func (ep *endpoint) nextEvent(ctx context.Context, pos uint64) (*feed.Event, error) {
	limit := 1
	if len(ep.cfg.Merchants) > 0 {
		limit = ep.d.cfg.BatchSize
	}
	for range lagPages {
		events, next, err := ep.read(ctx, pos, limit)
		if err != nil {
			return nil, err
		}
		if len(events) > 0 {
			return &events[0], nil
		}
		if next == pos {
			return nil, nil
		}
		pos = next
	}
	return nil, nil
}

// Lag reports every endpoint's position, in configuration order.
func (d *Dispatcher) Lag(ctx context.Context) ([]EndpointLag, error) {
	last, err := d.cfg.DB.LastGlobal(ctx)
	if err != nil {
		return nil, fmt.Errorf("webhook: lag: %w", err)
	}
	now := d.cfg.Now()
	out := make([]EndpointLag, 0, len(d.eps))
	for _, ep := range d.eps {
		ep.mu.Lock()
		err := ep.loadLocked(ctx)
		pos := ep.pos
		var oldest time.Time
		parked := 0
		for _, h := range ep.holds {
			parked += len(h.events)
			if at := h.events[0].Event.At; oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		}
		ep.mu.Unlock()
		if err != nil {
			return nil, err
		}
		l := EndpointLag{Name: ep.cfg.Name, Cursor: pos, Parked: parked,
			Delivered: ep.stats.delivered.Load(), FailedAttempts: ep.stats.failures.Load()}
		if last > pos {
			l.EventsBehind = last - pos
			next, err := ep.nextEvent(ctx, pos)
			if err != nil {
				return nil, fmt.Errorf("webhook: lag of %s: %w", ep.cfg.Name, err)
			}
			if next != nil && (oldest.IsZero() || next.At.Before(oldest)) {
				oldest = next.At
			}
		}
		if !oldest.IsZero() {
			l.OldestUndeliveredAge = max(now.Sub(oldest), 0)
		}
		out = append(out, l)
	}
	return out, nil
}
