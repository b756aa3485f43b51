package actors

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/refundd/refundd/internal/reservation"
)

// Config wires an Engine.
type Config struct {
	Store    Store    // required
	Provider Provider // required
	// Encode returns the exact bytes of a refund submission (the
	// provider's encoder, e.g. wechatpay.Client.RequestBody); required.
	// It is pure, so the core calls it (reservation.Env.Encode): a new
	// refund is journaled with its first submission in one append, and the
	// bytes are resent unchanged on every retry.
	Encode func(reservation.RefundRequest) ([]byte, error)
	// Policy is every reservation's policy when Policies is nil (the
	// engine does not check merchants: one merchant, or tests). With
	// Policies set it is only the policy of reservations whose merchant is
	// not in Policies (see Policies).
	Policy reservation.Policy
	// Policies are the configured merchants' policies by merchant name
	// (reservation.State.Merchant); each carries the merchant's
	// refund-number prefix. cmd/refundd always sets it, with the one
	// reservation.DefaultMerchant when there is no merchants file.
	//
	// A merchant added while the engine runs is added to the set
	// (PolicySet.Add).
	//
	// A reservation whose merchant is not configured (taken out of the
	// merchants file) is decided under Policy with
	// reservation.Env.Unconfigured: registrations, new refunds and
	// resubmissions are refused with reservation.ErrMerchantNotConfigured,
	// while its timers, queries and outcomes go on, so what is in flight
	// settles as far as the Provider can still answer for it.
	Policies *PolicySet
	// IdleTimeout passivates an actor that received nothing for this long;
	// zero means 2 minutes.
	IdleTimeout time.Duration
	// MaxActive bounds the live actors: past it, the sweep passivates the
	// least recently used idle ones down to 7/8 of it, checked every
	// second. Zero means 20,000; negative means no bound (IdleTimeout
	// only).
	//
	// A live actor is a cache of its journal (activation replays it), and
	// an unbounded cache cost more than the replays it saves: at 2,700
	// lifecycles/s two minutes of actors held 1.1 GB of heap, 6 GB resident
	// under --gc-percent 400, and the lifecycle lost 45% of its throughput
	// to fresh memory by the fifth 20 s round (docs/BENCHMARKS.md).
	MaxActive int
	// ProviderTimeout bounds one provider call; zero means 10 seconds.
	ProviderTimeout time.Duration
	// DeliverTimeout bounds handing a provider result back to an actor,
	// and an actor's journal reads and appends; zero means 30 seconds. A
	// result that cannot be delivered is recovered by the refund's
	// journaled due time.
	//
	// Calls started close together share one deadline (see
	// sharedDeadline), so these timeouts may run up to 1/32 longer.
	DeliverTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Merchant is the WeChat Pay merchant id refunds are made under (one
	// per deployment), logged with the lines about refunds; empty leaves
	// it out.
	Merchant string
}

func (c *Config) validate() error {
	if c.Store == nil || c.Provider == nil || c.Encode == nil {
		return errors.New("actors: Config needs a Store, a Provider and an Encode")
	}
	if err := c.Policy.Validate(); err != nil {
		return fmt.Errorf("actors: policy: %w", err)
	}
	for name, p := range c.Policies.all() {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("actors: policy of merchant %q: %w", name, err)
		}
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 2 * time.Minute
	}
	if c.MaxActive == 0 {
		c.MaxActive = 20000
	}
	if c.ProviderTimeout <= 0 {
		c.ProviderTimeout = 10 * time.Second
	}
	if c.DeliverTimeout <= 0 {
		c.DeliverTimeout = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// policyOf returns the policy of merchant's reservations, and whether
// the merchant is configured (Policies).
func (c *Config) policyOf(merchant string) (reservation.Policy, bool) {
	return PolicyOf(c.Policies, c.Policy, merchant)
}

const shardCount = 64

// mailboxWorkers is the goroutines kept for running mailboxes: more than
// the actors a busy node has running at once (each run waits for its
// append's fsync), so that few runs start a goroutine of their own.
// mailboxThroughput is protoactor's default: messages per run.
const (
	mailboxWorkers    = 256
	mailboxThroughput = 300
)

// Engine routes messages to reservation actors by id, activating them on
// demand.
type Engine struct {
	cfg       Config
	log       *slog.Logger
	system    *actor.ActorSystem
	seed      maphash.Seed
	epoch     time.Time // the monotonic origin of entry.active
	shards    [shardCount]shard
	gen       atomic.Uint64
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	// waiting counts the Await calls parked on actors (Waiting).
	waiting atomic.Int64

	// envelopes holds envelopes free for reuse (newEnvelope).
	envelopes sync.Pool
	// dispatcher runs the actors' mailboxes (poolDispatcher).
	dispatcher *poolDispatcher

	// work tracks provider calls and result deliveries in flight, so that
	// Close can let them finish and journal their results.
	work    tracker
	baseCtx context.Context
	cancel  context.CancelFunc

	// Deadlines of the actors' journal calls and of provider calls (both
	// ending with baseCtx), and of deliveries (which do not).
	journalDeadline  *sharedDeadline
	providerDeadline *sharedDeadline
	deliverDeadline  *sharedDeadline
}

type shard struct {
	mu   sync.Mutex
	live map[string]*entry
}

// entry is one activation of a reservation actor. Once passivating is set
// (under the shard lock) nothing more is sent to it; the next message for
// the reservation waits for stopped and activates a new one.
type entry struct {
	pid         *actor.PID
	passivating bool
	stopped     chan struct{}
	// active is when the actor last had work (Engine.since): the sweep
	// asks only actors idle for IdleTimeout, so that a busy or recently
	// used one costs it nothing.
	active atomic.Int64
}

// New starts an engine.
func New(cfg Config) (*Engine, error) { return newEngine(cfg, true) }

// newEngine starts an engine, with its sweep unless tests drive it by hand
// (askIdle, trim).
func newEngine(cfg Config, sweep bool) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return log.With("component", "protoactor")
	}))
	e := &Engine{cfg: cfg, log: log, system: system, seed: maphash.MakeSeed(), epoch: time.Now()}
	for i := range e.shards {
		e.shards[i].live = make(map[string]*entry)
	}
	e.baseCtx, e.cancel = context.WithCancel(context.Background())
	e.dispatcher = newPoolDispatcher(e.baseCtx, mailboxWorkers, mailboxThroughput)
	e.journalDeadline = newSharedDeadline(e.baseCtx, cfg.DeliverTimeout)
	e.providerDeadline = newSharedDeadline(e.baseCtx, cfg.ProviderTimeout)
	e.deliverDeadline = newSharedDeadline(context.Background(), cfg.DeliverTimeout)
	if sweep {
		go e.sweep()
	}
	return e, nil
}

// since is the time since the engine started, on the monotonic clock: the
// unit of entry.active.
func (e *Engine) since() int64 { return int64(time.Since(e.epoch)) }

// sweep asks the live actors that have been idle for IdleTimeout to
// passivate, twice per IdleTimeout, and every second trims the live actors
// to MaxActive. It reads each actor's last activity instead of asking every
// actor: with hundreds of thousands of live actors a message to each took
// ~10% of the CPU of a 20 s profile that held one sweep. The actor decides
// again on its own state (a message may be queued, or a waiter pending), so
// a stale reading here only costs a message.
func (e *Engine) sweep() {
	every := min(e.cfg.IdleTimeout/2, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	var lastIdle int64
	var buf []int64
	for {
		select {
		case <-e.baseCtx.Done():
			return
		case <-t.C:
		}
		if now := e.since(); now-lastIdle >= int64(e.cfg.IdleTimeout/2) {
			e.askIdle()
			lastIdle = now
		}
		buf, _ = e.trim(buf)
	}
}

// askIdle sends idleCheck to every live actor idle for IdleTimeout and
// returns how many it asked.
func (e *Engine) askIdle() int {
	return e.askBefore(e.since() - int64(e.cfg.IdleTimeout))
}

// trim asks the least recently used live actors to passivate when more
// than MaxActive are live, down to 7/8 of MaxActive (a margin, so that a
// steady load does not trim a few actors every second), and returns buf
// for reuse. Those with waiters or queued work stay (idleCheck): the bound
// is on idle actors, and the sweep's second later tries again. It
// returns how many it asked.
func (e *Engine) trim(buf []int64) ([]int64, int) {
	if e.cfg.MaxActive < 0 {
		return buf, 0
	}
	buf = buf[:0]
	for i := range e.shards {
		sh := &e.shards[i]
		sh.mu.Lock()
		for _, en := range sh.live {
			if !en.passivating {
				buf = append(buf, en.active.Load())
			}
		}
		sh.mu.Unlock()
	}
	if len(buf) <= e.cfg.MaxActive {
		return buf, 0
	}
	slices.Sort(buf)
	return buf, e.askBefore(buf[len(buf)-e.cfg.MaxActive*7/8-1])
}

// askBefore sends idleCheck to every live actor whose last activity is at
// or before the given time (Engine.since) and returns how many it asked.
func (e *Engine) askBefore(before int64) int {
	asked := 0
	for i := range e.shards {
		sh := &e.shards[i]
		sh.mu.Lock()
		for _, en := range sh.live {
			if !en.passivating && en.active.Load() <= before {
				e.system.Root.Send(en.pid, idleCheck{before: before})
				asked++
			}
		}
		sh.mu.Unlock()
	}
	return asked
}

// envelope carries one request to an actor and its replies. Envelopes are
// reused (Engine.envelopes): an asker puts one back only once it received
// every reply the actor will send on it, and the actor touches an envelope
// only until it has answered it.
type envelope struct {
	ctx  context.Context
	kind askKind
	// askCmd: the command, the principal, and quiet when the caller reads
	// only the events and the error (the reply then carries no state).
	cmd   reservation.Command
	by    string
	quiet bool
	// askAwait: the condition.
	done func(*reservation.State) bool
	// reply is buffered (2) so that the actor never blocks on it: every
	// request gets one reply, and an await that waits gets one more, when
	// its condition holds or the actor stops (see waiter).
	reply chan reply
}

type askKind uint8

const (
	askGet askKind = iota + 1
	askCmd
	askAwait
)

type reply struct {
	state  *reservation.State
	events []reservation.Event
	done   bool // askAwait: the condition holds for state
	err    error
}

// Messages an actor understands, besides *envelope.
type (
	passivateNow struct{}
	// idleCheck asks an actor to passivate if it has had no work since
	// before (Engine.since) and nobody waits on it. The engine's sweeper
	// sends it instead of protoactor's ReceiveTimeout, whose timer races
	// with the mailbox (go test -race).
	idleCheck struct{ before int64 }
)

// newEnvelope returns an envelope for ctx, reused when one is free: an ask
// allocates nothing of its own.
func (e *Engine) newEnvelope(ctx context.Context, kind askKind) *envelope {
	env, _ := e.envelopes.Get().(*envelope)
	if env == nil {
		env = &envelope{reply: make(chan reply, 2)}
	}
	env.ctx, env.kind = ctx, kind
	return env
}

// freeEnvelope makes env reusable. Only an asker that received every reply
// the actor sends on env may call it; an asker that gave up leaves env to
// the garbage collector, since a late reply may still arrive.
func (e *Engine) freeEnvelope(env *envelope) {
	*env = envelope{reply: env.reply}
	e.envelopes.Put(env)
}

func (e *Engine) shard(id string) *shard {
	return &e.shards[maphash.String(e.seed, id)%shardCount]
}

// send enqueues msg for the reservation's live actor, activating one if
// needed. Sending under the shard lock is what makes passivation lossless:
// once an actor is marked passivating nothing else reaches its mailbox.
func (e *Engine) send(ctx context.Context, id string, msg any) error {
	sh := e.shard(id)
	for {
		sh.mu.Lock()
		en := sh.live[id]
		if en != nil && en.passivating {
			wait := en.stopped
			sh.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if en == nil {
			if e.closed.Load() {
				sh.mu.Unlock()
				return ErrClosed
			}
			en = &entry{stopped: make(chan struct{})}
			en.active.Store(e.since())
			name := "reservation/" + id + "/" + strconv.FormatUint(e.gen.Add(1), 10)
			pid, err := e.system.Root.SpawnNamed(actor.PropsFromProducerWithActorSystem(func(*actor.ActorSystem) actor.Actor {
				return &reservationActor{e: e, id: id, entry: en}
			}, actor.WithDispatcher(e.dispatcher)), name)
			if err != nil {
				sh.mu.Unlock()
				return fmt.Errorf("actors: spawn %s: %w", id, err)
			}
			en.pid = pid
			sh.live[id] = en
		}
		e.system.Root.Send(en.pid, msg)
		sh.mu.Unlock()
		return nil
	}
}

// markPassivating stops new sends to en. The caller then sends itself
// passivateNow, which arrives after everything already queued.
func (e *Engine) markPassivating(id string, en *entry) {
	sh := e.shard(id)
	sh.mu.Lock()
	en.passivating = true
	sh.mu.Unlock()
}

func (e *Engine) removeEntry(id string, en *entry) {
	sh := e.shard(id)
	sh.mu.Lock()
	if sh.live[id] == en {
		delete(sh.live, id)
	}
	sh.mu.Unlock()
	close(en.stopped)
}

// ask sends env to the reservation's actor and waits for its first reply.
// sent is false when env never reached the actor; an env that was sent but
// not answered (ctx ended first) may still get a reply and must not be
// reused.
func (e *Engine) ask(ctx context.Context, id string, env *envelope) (r reply, sent bool, err error) {
	if !reservation.ValidReservationID(id) {
		return reply{}, false, reservation.ErrNotFound
	}
	if err := e.send(ctx, id, env); err != nil {
		return reply{}, false, err
	}
	select {
	case r := <-env.reply:
		return r, true, r.err
	case <-ctx.Done():
		return reply{}, true, ctx.Err()
	}
}

// do asks a command or a snapshot: one reply, after which env is free.
func (e *Engine) do(ctx context.Context, id string, env *envelope) (reply, error) {
	r, sent, err := e.ask(ctx, id, env)
	if !sent || err == nil || r.err != nil {
		e.freeEnvelope(env)
	}
	return r, err
}

// Execute runs one command on a reservation and returns the state after it
// and the events it journaled (none for a duplicate). by is the principal
// recorded with the events.
//
// The state returned by Execute, Get and Await is shared with the
// reservation's actor and other callers, and is never changed once
// returned (the actor changes a copy): callers must only read it.
func (e *Engine) Execute(ctx context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error) {
	env := e.newEnvelope(ctx, askCmd)
	env.cmd, env.by = cmd, by
	r, err := e.do(ctx, id, env)
	return r.state, r.events, err
}

// Get returns a snapshot of a reservation, or reservation.ErrNotFound. The
// snapshot is shared and must only be read (see Execute).
func (e *Engine) Get(ctx context.Context, id string) (*reservation.State, error) {
	r, err := e.do(ctx, id, e.newEnvelope(ctx, askGet))
	return r.state, err
}

// Await waits until done(state) holds or ctx ends, and returns the last
// state seen (shared, to be read only: see Execute). done runs on the
// reservation's actor, at once and after every change, so a waiting caller
// costs nothing until it is answered: it must be quick, must not block or
// call the Engine, and must not keep or modify the state it is given.
func (e *Engine) Await(ctx context.Context, id string, done func(*reservation.State) bool) (*reservation.State, error) {
	var last *reservation.State
	for {
		env := e.newEnvelope(ctx, askAwait)
		env.done = done
		r, sent, err := e.ask(ctx, id, env)
		if err != nil {
			if !sent || r.err != nil {
				e.freeEnvelope(env) // not sent, or answered with an error: no waiter was kept
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return last, nil
			}
			return last, err
		}
		last = r.state
		if r.done {
			e.freeEnvelope(env)
			return last, nil
		}
		// The actor keeps a waiter that answers once more on env.reply.
		select {
		case r := <-env.reply:
			e.freeEnvelope(env)
			if r.err != nil {
				return last, r.err
			}
			if r.state != nil {
				last = r.state
			}
			if r.done {
				return last, nil
			}
			// The actor stopped (passivation) before done held: ask the
			// next activation.
		case <-ctx.Done():
			return last, nil
		}
	}
}

// Attention lists refunds needing attention of one kind; see Store.
func (e *Engine) Attention(ctx context.Context, kind, after string, limit int) ([]reservation.RefundRef, error) {
	return e.cfg.Store.Attention(ctx, kind, after, limit)
}

// LookupRefund returns the reservation that owns a refund number.
func (e *Engine) LookupRefund(ctx context.Context, refundNo string) (string, error) {
	return e.cfg.Store.LookupRefund(ctx, refundNo)
}

// record runs a command whose caller needs only the events and the error:
// the reply carries no state.
func (e *Engine) record(ctx context.Context, id, by string, cmd reservation.Command) ([]reservation.Event, error) {
	env := e.newEnvelope(ctx, askCmd)
	env.cmd, env.by, env.quiet = cmd, by, true
	r, err := e.do(ctx, id, env)
	return r.events, err
}

// deliver hands a provider result or timer back to the reservation's actor.
func (e *Engine) deliver(id string, cmd reservation.Command, by string) error {
	_, err := e.record(e.deliverDeadline.context(), id, by, cmd)
	return err
}

// Close lets in-flight provider calls finish and journal their results
// (bounded by ctx), then stops every actor. The caller closes the Store
// afterwards.
// Calling it again returns the first call's result.
func (e *Engine) Close(ctx context.Context) error {
	e.closeOnce.Do(func() { e.closeErr = e.close(ctx) })
	return e.closeErr
}

func (e *Engine) close(ctx context.Context) error {
	var err error
drain:
	for {
		idle := e.work.idleCh()
		if idle == nil {
			break
		}
		select {
		case <-idle:
		case <-ctx.Done():
			e.cancel() // abandon calls still running; their due times recover them
			err = fmt.Errorf("actors: close: in-flight work abandoned: %w", ctx.Err())
			break drain
		}
	}
	e.closed.Store(true)
	e.cancel()
	var stops []chan struct{}
	for i := range e.shards {
		sh := &e.shards[i]
		sh.mu.Lock()
		for _, en := range sh.live {
			if !en.passivating {
				en.passivating = true
				e.system.Root.Send(en.pid, passivateNow{})
			}
			stops = append(stops, en.stopped)
		}
		sh.mu.Unlock()
	}
	for _, ch := range stops {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			err = errors.Join(err, errors.New("actors: close: an actor did not stop in time"))
		}
	}
	e.system.Shutdown()
	return err
}

// Active returns the number of live actors.
func (e *Engine) Active() int {
	n := 0
	for i := range e.shards {
		sh := &e.shards[i]
		sh.mu.Lock()
		n += len(sh.live)
		sh.mu.Unlock()
	}
	return n
}

// Waiting returns the number of Await calls kept by actors until their
// condition holds or their caller leaves.
func (e *Engine) Waiting() int { return int(e.waiting.Load()) }

// ProviderPrincipal is recorded as the cause of events that provider answers
// produce.
const ProviderPrincipal = "provider"

// EnginePrincipal is recorded as the cause of events the engine decides on
// its own (timers).
const EnginePrincipal = "engine"

// report delivers a provider outcome to its reservation and logs one that
// could not be journaled; the refund's due time will query again.
func (e *Engine) report(id string, c reservation.RecordOutcome) {
	if err := e.deliver(id, c, ProviderPrincipal); err != nil {
		e.log.Warn("provider outcome not journaled; the refund's due time will query again",
			"reservation", id, "refund_no", c.RefundNo, "outcome", c.Outcome.Kind, "err", err)
	}
}
