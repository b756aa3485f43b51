package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/reservation"
)

// Kind is the cluster kind of reservation grains.
const Kind = "reservation"

// Config wires a Node.
type Config struct {
	// Engine configures this node's engine, which runs the reservations
	// this node owns. Its Store is wrapped so that a reservation owned by
	// another node is never activated here (ErrNotOwner).
	Engine actors.Config
	// Membership says how nodes find each other; required.
	Membership Membership
	// Name of the cluster: nodes with the same name and membership form
	// one. Empty means "refundd".
	Name string
	// Host and Port are where this node's actors listen for other nodes
	// (protoactor-go remote, gRPC). Empty Host means 127.0.0.1; Port 0
	// picks a free port once, kept when the node rejoins.
	Host string
	Port int
	// AdvertisedAddress is the host:port other nodes dial when it differs
	// from Host:Port (containers, NAT); empty means the bound address.
	AdvertisedAddress string
	// RequestTimeout bounds a routed call whose context has no deadline;
	// zero means 10s.
	RequestTimeout time.Duration
	// JoinTimeout bounds Start waiting to see itself in the membership;
	// zero means 30s.
	JoinTimeout time.Duration
	// FenceTimeout bounds stopping the actors when the node fences itself;
	// zero means 5s.
	FenceTimeout time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Membership == nil {
		return fmt.Errorf("%w: Config.Membership is required", ErrMembership)
	}
	if c.Engine.Store == nil {
		return errors.New("cluster: Config.Engine needs a Store")
	}
	if c.Name == "" {
		c.Name = "refundd"
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("cluster: port %d out of range", c.Port)
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.JoinTimeout <= 0 {
		c.JoinTimeout = 30 * time.Second
	}
	if c.FenceTimeout <= 0 {
		c.FenceTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Engine.Logger == nil {
		c.Engine.Logger = c.Logger
	}
	if c.Engine.IdleTimeout <= 0 {
		c.Engine.IdleTimeout = 2 * time.Minute
	}
	return nil
}

// Node is one refundd process in cluster mode. It accepts calls for any
// reservation and routes each to the node that owns it (a grain of Kind,
// placed by protoactor-go's disthash: rendezvous hashing over the members),
// whose engine runs the reservation's actor. It implements what the API
// needs from an engine.
type Node struct {
	cfg    Config
	log    *slog.Logger
	store  actors.Store // unguarded: shared reads (lookups, indexes)
	engine *actors.Engine
	mem    membership
	dedup  *dedup
	grains *grainRegistry

	view atomic.Pointer[view] // this node's view of the placement
	// changed is closed and replaced whenever the view changes, so that a
	// call waiting on a member that left stops waiting.
	changedMu sync.Mutex
	changed   chan struct{}
	cur       atomic.Pointer[member] // the current incarnation; nil while (re)joining

	mu     sync.Mutex // serializes fence, rejoin and Close
	closed atomic.Bool
	fences atomic.Int64
	failed atomic.Int64    // rejoin attempts that failed
	ctx    context.Context // ends when Close starts
	cancel context.CancelFunc
	port   int // the port bound by the first incarnation

	// bg counts goroutines Close waits for: the sweeper, fencing and
	// rejoining, grain requests in progress. bgDone refuses new ones once
	// Close waits.
	bgMu   sync.Mutex
	bg     sync.WaitGroup
	bgDone bool
}

// spawn runs f as tracked background work; false once Close is waiting.
func (n *Node) spawn(f func()) bool {
	n.bgMu.Lock()
	defer n.bgMu.Unlock()
	if n.bgDone {
		return false
	}
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		f()
	}()
	return true
}

// view is a snapshot of the membership as this node sees it.
type view struct {
	rdv       *pcluster.Rendezvous
	memberID  string // this incarnation's member id
	self      bool   // this incarnation is among the members
	members   int
	addresses map[string]bool
}

// setView installs v and wakes calls waiting for a change.
func (n *Node) setView(v *view) {
	n.view.Store(v)
	n.changedMu.Lock()
	close(n.changed)
	n.changed = make(chan struct{})
	n.changedMu.Unlock()
}

func (n *Node) viewChanged() <-chan struct{} {
	n.changedMu.Lock()
	defer n.changedMu.Unlock()
	return n.changed
}

// Start starts the node's engine, joins the cluster and returns once this
// node sees itself as a member.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("component", "cluster"), store: cfg.Engine.Store,
		dedup: newDedup(4096), grains: newGrainRegistry(), port: cfg.Port}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.view.Store(&view{})
	n.changed = make(chan struct{})
	ecfg := cfg.Engine
	ecfg.Store = guard{Store: cfg.Engine.Store, n: n}
	engine, err := actors.New(ecfg)
	if err != nil {
		return nil, err
	}
	n.engine = engine
	if n.mem, err = cfg.Membership.open(n); err != nil {
		n.engine.Close(ctx)
		return nil, err
	}
	m, err := n.join(ctx)
	if err != nil {
		n.engine.Close(ctx)
		n.mem.close()
		return nil, err
	}
	n.cur.Store(m)
	n.spawn(n.sweep)
	n.log.Info("cluster: joined", "member", m.id, "address", m.address, "membership", cfg.Membership.String(), "members", n.view.Load().members)
	return n, nil
}

// Owns reports whether this node owns the reservation in its current view
// of the membership. Two nodes may both believe so for a moment (a
// partition, a topology change in flight); the journal's epoch refuses the
// stale one's appends.
func (n *Node) Owns(id string) bool {
	v := n.view.Load()
	if !v.self {
		return false
	}
	m := n.cur.Load()
	if m == nil {
		return false
	}
	return v.rdv.GetByClusterIdentity(&pcluster.ClusterIdentity{Identity: id, Kind: Kind}) == m.address
}

// MemberID is this incarnation's member id ("" while rejoining); it
// changes every time the node fences itself and rejoins.
func (n *Node) MemberID() string {
	if m := n.cur.Load(); m != nil {
		return m.id
	}
	return ""
}

// Address is where other nodes reach this one.
func (n *Node) Address() string {
	if m := n.cur.Load(); m != nil {
		return m.address
	}
	return ""
}

// Members is the number of members in this node's view.
func (n *Node) Members() int { return n.view.Load().members }

// Fences counts how often this node fenced itself: each is counted once
// its actors have stopped (or FenceTimeout passed).
func (n *Node) Fences() int64 { return n.fences.Load() }

// Engine is the node's local engine: it runs the reservations this node
// owns. Calls for a reservation go through the Node, never straight to it.
func (n *Node) Engine() *actors.Engine { return n.engine }

// Execute runs a command on the reservation's owner; see actors.Engine.
func (n *Node) Execute(ctx context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error) {
	name, data, err := encodeCommand(cmd)
	if err != nil {
		return nil, nil, err
	}
	r, err := n.call(ctx, &request{Op: opExecute, ID: id, By: by, Cmd: name, Data: data, CmdID: newCmdID()})
	if err != nil {
		return nil, nil, err
	}
	return r.values()
}

// Get returns a snapshot of a reservation from its owner, or
// reservation.ErrNotFound.
func (n *Node) Get(ctx context.Context, id string) (*reservation.State, error) {
	r, err := n.call(ctx, &request{Op: opGet, ID: id})
	if err != nil {
		return nil, err
	}
	st, _, err := r.values()
	return st, err
}

// maxWatch bounds how long one watch call is held by the owner, so that a
// change of owner is noticed by a waiting caller.
const maxWatch = 5 * time.Second

// Await waits until done(state) holds or ctx ends and returns the last state
// seen, like actors.Engine.Await; the owner holds each call until the
// reservation changes.
func (n *Node) Await(ctx context.Context, id string, done func(*reservation.State) bool) (*reservation.State, error) {
	var last *reservation.State
	var after uint64
	for {
		wait := maxWatch
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl)-50*time.Millisecond)
		}
		if after == 0 || wait < 0 {
			wait = 0
		}
		r, err := n.call(ctx, &request{Op: opWatch, ID: id, After: after, WaitMS: wait.Milliseconds()})
		if err == nil {
			var st *reservation.State
			st, _, err = r.values()
			if err == nil && st != nil {
				last, after = st, st.Version
				if done(st) {
					return st, nil
				}
			}
		}
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			if last != nil {
				return last, nil
			}
			return nil, err
		}
		if err != nil {
			return last, err
		}
	}
}

// LookupRefund returns the reservation that owns a refund number (from the
// shared journal; no routing).
func (n *Node) LookupRefund(ctx context.Context, refundNo string) (string, error) {
	return n.store.LookupRefund(ctx, refundNo)
}

// RecordNotification records a provider notification on its refund's
// owner; see actors.RecordNotification.
func (n *Node) RecordNotification(ctx context.Context, by string, no reservation.Notification) ([]reservation.Event, error) {
	return actors.RecordNotification(ctx, n, by, no)
}

// Attention lists refunds needing attention (from the shared journal).
func (n *Node) Attention(ctx context.Context, kind, after string, limit int) ([]reservation.RefundRef, error) {
	return n.store.Attention(ctx, kind, after, limit)
}

// Active is the number of reservation actors live on this node.
func (n *Node) Active() int { return n.engine.Active() }

// call routes one request to the reservation's grain and returns its
// answer. It sends again only when the request provably did not run: no
// owner known, a dead letter (the grain was gone), or an answer saying
// "not the owner". A timeout is returned as ErrUnavailable, never resent,
// so routing adds no duplicate; the command id lets the owner answer a
// repeat with its first answer all the same.
func (n *Node) call(ctx context.Context, req *request) (*reply, error) {
	if !reservation.ValidReservationID(req.ID) {
		return nil, reservation.ErrNotFound
	}
	if n.closed.Load() {
		return nil, ErrClosed
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.RequestTimeout)
		defer cancel()
	}
	dl, _ := ctx.Deadline()
	req.V = wireVersion
	req.Timeout = time.Until(dl).Milliseconds()
	msg, err := marshal(req)
	if err != nil {
		return nil, err
	}
	// A grain in this process gets the request as it is.
	msgs := sendable{remote: msg, local: req}
	backoff := 5 * time.Millisecond
	why := "no member owns it yet"
	for {
		m := n.cur.Load()
		if m == nil {
			// Fenced and rejoining: this node may not know the placement
			// for seconds. Say so now, so the client (or its load
			// balancer, which also sees /readyz fail) retries through
			// another node instead of waiting out its timeout here.
			return nil, fmt.Errorf("%w: %s %s: this node lost its cluster membership and is rejoining; retry through another node",
				ErrUnavailable, req.Op, req.ID)
		}
		r, retry, err := m.request(ctx, req.ID, msgs, time.Until(dl))
		if !retry {
			return r, err
		}
		why = err.Error()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %s %s: %s (%v)", ErrUnavailable, req.Op, req.ID, why, ctx.Err())
		case <-n.ctx.Done():
			return nil, ErrClosed
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

func newCmdID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// serve answers a request for a reservation this node should own; it runs
// outside the grain's mailbox.
func (n *Node) serve(req *request) *reply {
	if !n.Owns(req.ID) {
		return &reply{NotOwner: true}
	}
	timeout := min(max(time.Duration(req.Timeout)*time.Millisecond, time.Second), time.Minute)
	ctx, cancel := context.WithTimeout(n.ctx, timeout)
	defer cancel()
	var (
		st     *reservation.State
		events []reservation.Event
		err    error
	)
	switch req.Op {
	case opExecute:
		cmd, derr := decodeCommand(req.Cmd, req.Data)
		if derr != nil {
			return &reply{err: derr}
		}
		return n.dedup.do(req.CmdID, func() *reply {
			st, events, err := n.engine.Execute(ctx, req.ID, req.By, cmd)
			return n.answer(req, st, events, err)
		})
	case opGet:
		st, err = n.engine.Get(ctx, req.ID)
	case opWatch:
		st, err = n.engine.Get(ctx, req.ID)
		if err == nil && st.Version <= req.After && req.WaitMS > 0 {
			wctx, wcancel := context.WithTimeout(ctx, min(time.Duration(req.WaitMS)*time.Millisecond, maxWatch))
			next, werr := n.engine.Await(wctx, req.ID, func(s *reservation.State) bool { return s.Version > req.After })
			wcancel()
			if werr != nil {
				err = werr
			} else if next != nil {
				st = next
			}
		}
	default:
		err = fmt.Errorf("%w: unknown operation %q", ErrWire, req.Op)
	}
	return n.answer(req, st, events, err)
}

// answer builds a reply. A failure that happened because this node lost
// the reservation meanwhile (the guard refused to activate it, the journal
// fenced the append: nothing was written) becomes "not the owner", so the
// caller asks the new owner.
func (n *Node) answer(req *request, st *reservation.State, events []reservation.Event, err error) *reply {
	if (errors.Is(err, actors.ErrUnavailable) || errors.Is(err, actors.ErrClosed)) && !n.Owns(req.ID) {
		return &reply{NotOwner: true}
	}
	if errors.Is(err, actors.ErrClosed) {
		return &reply{NotOwner: true} // leaving: the next owner answers
	}
	return &reply{st: st, events: events, err: err}
}

// onTopology installs a new view from incarnation m's topology event. It
// runs inside protoactor's member list lock: nothing here may block.
func (n *Node) onTopology(m *member, t *pcluster.ClusterTopology) {
	if m.retired.Load() {
		return
	}
	rdv := pcluster.NewRendezvous()
	rdv.UpdateMembers(t.Members)
	self := false
	addresses := map[string]bool{}
	for _, mb := range t.Members {
		self = self || mb.Id == m.id
		addresses[mb.Address()] = true
	}
	n.setView(&view{rdv: rdv, memberID: m.id, self: self, members: len(t.Members), addresses: addresses})
	if self {
		m.joinedOnce.Do(func() { close(m.joined) })
	} else if m.isJoined() {
		n.bgFence(m, "this node is no longer in the membership")
		return
	}
	go n.rebalance()
}

// rebalance stops the live actors of reservations this node no longer owns.
func (n *Node) rebalance() {
	moved := 0
	for _, id := range n.engine.LiveIDs() {
		if !n.Owns(id) {
			n.engine.Passivate(id)
			moved++
		}
	}
	if moved > 0 {
		n.log.Info("cluster: passivated reservations that moved to another node", "count", moved)
	}
}

func (n *Node) bgFence(m *member, reason string) {
	n.spawn(func() { n.fence(m, reason) })
}

// fence is self-fencing: incarnation m can no longer prove it is a member,
// so the others may already have moved its reservations. It stops routing
// to this node's engine, stops every actor, leaves, and rejoins as a new
// member (protoactor-go blocks a removed member id for good).
func (n *Node) fence(m *member, reason string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if m.retired.Load() || n.closed.Load() {
		return
	}
	n.log.Error("cluster: self-fencing: stopping every reservation actor and rejoining as a new member",
		"reason", reason, "member", m.id)
	m.retired.Store(true)
	n.cur.Store(nil)
	n.setView(&view{})
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.FenceTimeout)
	if err := n.engine.PassivateAll(ctx); err != nil {
		n.log.Warn("cluster: self-fencing: some actors did not stop in time; the journal fences their appends", "err", err)
	}
	cancel()
	// Counted once the actors are stopped (or FenceTimeout gave up on
	// them): a fence counted is one that has done its work.
	n.fences.Add(1)
	m.stop()
	n.spawn(n.rejoin)
}

// rejoin starts new incarnations until one joins or the node closes.
func (n *Node) rejoin() {
	backoff := 200 * time.Millisecond
	for n.ctx.Err() == nil {
		n.mu.Lock()
		if n.closed.Load() {
			n.mu.Unlock()
			return
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.JoinTimeout)
		m, err := n.join(ctx)
		cancel()
		if err == nil {
			n.cur.Store(m)
			n.mu.Unlock()
			n.log.Info("cluster: rejoined", "member", m.id, "address", m.address)
			return
		}
		n.mu.Unlock()
		n.failed.Add(1)
		n.log.Warn("cluster: rejoining failed; retrying", "err", err, "retry_in", backoff)
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// Close stops the node: in-flight provider calls finish and journal their
// results while it still owns its reservations (bounded by ctx), then it
// leaves the membership. The caller closes the Store afterwards.
func (n *Node) Close(ctx context.Context) error {
	if n.closed.Swap(true) {
		return nil
	}
	err := n.engine.Close(ctx)
	n.mu.Lock()
	n.cancel()
	m := n.cur.Swap(nil)
	if m != nil {
		m.retired.Store(true)
		m.stop()
	}
	n.mu.Unlock()
	n.bgMu.Lock()
	n.bgDone = true
	n.bgMu.Unlock()
	n.bg.Wait()
	return errors.Join(err, n.mem.close())
}

// member is one incarnation of the node in the cluster: an actor system
// with its own member id, protoactor's cluster and remote on it, and a
// membership provider.
type member struct {
	n          *Node
	id         string
	address    string
	system     *actor.ActorSystem
	cluster    *pcluster.Cluster
	provider   pcluster.ClusterProvider
	joined     chan struct{}
	joinedOnce sync.Once
	retired    atomic.Bool
	stopOnce   sync.Once
}

func (m *member) isJoined() bool {
	select {
	case <-m.joined:
		return true
	default:
		return false
	}
}

// join starts a new incarnation and waits until it sees itself a member.
func (n *Node) join(ctx context.Context) (joined *member, err error) {
	log := n.cfg.Logger.With("component", "protoactor-cluster")
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return log }))
	m := &member{n: n, id: system.ID, system: system, joined: make(chan struct{})}
	m.provider = n.mem.provider(func(reason string) { n.bgFence(m, reason) })
	kind := pcluster.NewKind(Kind, actor.PropsFromProducer(func() actor.Actor { return &grain{n: n} }))
	var ropts []remote.ConfigOption
	if n.cfg.AdvertisedAddress != "" {
		ropts = append(ropts, remote.WithAdvertisedHost(n.cfg.AdvertisedAddress))
	}
	rcfg := remote.Configure(n.cfg.Host, n.port, ropts...)
	ccfg := pcluster.Configure(n.cfg.Name, m.provider, disthash.New(), rcfg, pcluster.WithKinds(kind))
	m.cluster = pcluster.New(system, ccfg)
	system.EventStream.Subscribe(func(ev any) {
		if t, ok := ev.(*pcluster.ClusterTopology); ok {
			n.onTopology(m, t)
		}
	})
	defer func() {
		if err != nil { // m, not the nil result: undo this incarnation
			m.retired.Store(true)
			m.stop()
		}
	}()
	if err := startMember(m.cluster); err != nil {
		return nil, err
	}
	m.address = system.Address()
	if n.port == 0 {
		if _, p, err := net.SplitHostPort(m.address); err == nil {
			n.port, _ = strconv.Atoi(p)
		}
	}
	select {
	case <-m.joined:
	case <-ctx.Done():
		return nil, fmt.Errorf("cluster: member %s did not see itself in the membership: %w", m.id, ctx.Err())
	}
	return m, nil
}

// startMember runs protoactor's StartMember, which panics on errors (a
// port in use, a provider that cannot register).
func startMember(c *pcluster.Cluster) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cluster: start member: %v", p)
		}
	}()
	c.StartMember()
	return nil
}

// stop leaves: the provider deregisters (others stop routing here), then
// the actor system and remote stop.
func (m *member) stop() {
	m.stopOnce.Do(func() {
		if err := shutdownProvider(m.provider); err != nil {
			m.n.log.Warn("cluster: leaving the membership", "member", m.id, "err", err)
		}
		if m.cluster.Remote != nil {
			m.cluster.Shutdown(false)
		} else {
			m.system.Shutdown()
		}
	})
}

// shutdownProvider shuts a provider down; protoactor's automanaged
// provider panics when it never started serving (a failed start).
func shutdownProvider(p pcluster.ClusterProvider) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cluster: provider shutdown: %v", r)
		}
	}()
	return p.Shutdown(true)
}

// request sends one request to the reservation's grain. retry says the
// request did not run and may be sent again (err says why).
// sendable is a request in both forms: encoded for another node, as it is
// for a grain in this process.
type sendable struct {
	remote *wrapperspb.BytesValue
	local  *request
}

func (m *member) request(ctx context.Context, id string, msgs sendable, timeout time.Duration) (r *reply, retry bool, err error) {
	if m.retired.Load() {
		return nil, true, errors.New("this node is rejoining the cluster")
	}
	pid, err := m.pid(ctx, id)
	if err != nil {
		return nil, true, err
	}
	if timeout <= 0 {
		return nil, false, fmt.Errorf("%w: %s: %v", ErrUnavailable, id, context.DeadlineExceeded)
	}
	var msg any = msgs.remote
	if pid.Address == m.address {
		msg = msgs.local
	}
	res, err := m.await(m.system.Root.RequestFuture(pid, msg, timeout), pid.Address)
	switch {
	case errors.Is(err, errOwnerLeft):
		m.cluster.PidCache.Remove(id, Kind)
		return nil, false, fmt.Errorf("%w: %s: %s left the membership while the call was in flight (the outcome is unknown)", ErrUnavailable, id, pid.Address)
	case err == nil:
	case errors.Is(err, actor.ErrDeadLetter) || errors.Is(err, remote.ErrDeadLetter):
		m.cluster.PidCache.Remove(id, Kind)
		return nil, true, errors.New("owner's grain was gone")
	case errors.Is(err, actor.ErrTimeout) || errors.Is(err, remote.ErrTimeout):
		m.cluster.PidCache.Remove(id, Kind)
		return nil, false, fmt.Errorf("%w: %s: no answer from %s in %s (the outcome is unknown)", ErrUnavailable, id, pid.Address, timeout.Round(time.Millisecond))
	default:
		return nil, false, fmt.Errorf("%w: %s: %v", ErrUnavailable, id, err)
	}
	switch res := res.(type) {
	case *reply: // from a grain in this process
		r = res
	case *wrapperspb.BytesValue:
		r = &reply{remote: true}
		if err := unmarshal(res, r, &r.V); err != nil {
			return nil, false, err
		}
	default:
		return nil, false, fmt.Errorf("%w: answer of type %T", ErrWire, res)
	}
	if r.NotOwner {
		m.cluster.PidCache.Remove(id, Kind)
		return nil, true, fmt.Errorf("%s does not own it (membership changing)", pid.Address)
	}
	return r, false, nil
}

// errOwnerLeft: the node a call went to left the membership before
// answering.
var errOwnerLeft = errors.New("cluster: owner left")

// await waits for a future's answer, or until the node at address is no
// longer a member: a node that died never answers, and its calls would
// otherwise wait out their whole timeout.
func (m *member) await(f *actor.Future, address string) (any, error) {
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f.Result()
		done <- result{v, err}
	}()
	for {
		changed := m.n.viewChanged()
		if v := m.n.view.Load(); address != m.address && v.addresses != nil && !v.addresses[address] {
			return nil, errOwnerLeft
		}
		select {
		case r := <-done:
			return r.v, r.err
		case <-changed:
		}
	}
}

// activationTimeout bounds one activation request. protoactor's own lookup
// (disthash's Manager.Get, behind Cluster.Get) sends a single request with
// a fixed 5s timeout, never resends it and ignores the caller's deadline:
// one request lost while a connection flaps cost the whole call. The
// partition-activator answers a repeated request with the grain it already
// has, so a request that got no answer is simply sent again by call.
const activationTimeout = time.Second

// pid finds the reservation's grain: from the cache, else by asking the
// owner's partition-activator (disthash's placement actor, with its own
// message types) to activate it, waiting at most activationTimeout and
// never past ctx's deadline. An error means no grain is known yet and the
// request may be retried.
func (m *member) pid(ctx context.Context, id string) (*actor.PID, error) {
	if pid, ok := m.cluster.PidCache.Get(id, Kind); ok && pid != nil {
		return pid, nil
	}
	v := m.n.view.Load()
	if v.rdv == nil {
		return nil, errors.New("no owner found")
	}
	identity := pcluster.NewClusterIdentity(id, Kind)
	owner := v.rdv.GetByClusterIdentity(identity)
	if owner == "" {
		return nil, errors.New("no owner found")
	}
	timeout := activationTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("no time left to activate it on %s", owner)
	}
	activator := actor.NewPID(owner, disthash.PartitionActivatorActorName)
	res, err := m.await(m.system.Root.RequestFuture(activator, &pcluster.ActivationRequest{ClusterIdentity: identity}, timeout), owner)
	if err != nil {
		return nil, fmt.Errorf("activation on %s: %w", owner, err)
	}
	resp, ok := res.(*pcluster.ActivationResponse)
	if !ok || resp.GetFailed() || resp.GetPid() == nil {
		return nil, fmt.Errorf("%s did not activate it (answer %T)", owner, res)
	}
	m.cluster.PidCache.Set(id, Kind, resp.Pid)
	return resp.Pid, nil
}
