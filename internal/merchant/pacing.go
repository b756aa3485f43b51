package merchant

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/refundd/refundd/internal/reservation"
)

// Pacing is the rate, in calls per second, at which one WeChat Pay account
// is sent refund creates and queries. WeChat Pay limits both per merchant
// id, and in partner mode per service provider, shared by all its
// sub-merchants (PARTNER.md §4); refundd keeps below the limit instead of
// being refused for it (FREQUENCY_LIMITED). Zero leaves an operation
// unpaced.
type Pacing struct {
	Creates float64
	// FailedCreates is WeChat's separate limit on creates it refuses
	// (invalid or failing requests). Whether a create fails is known only
	// from its answer, so each refused create makes the account's next
	// creates wait 1/FailedCreates s.
	FailedCreates float64
	Queries       float64
}

// DefaultPacing is WeChat Pay's documented limits: 150 refund creates,
// 6 failing ones and 300 refund queries per second per account.
var DefaultPacing = Pacing{Creates: 150, FailedCreates: 6, Queries: 300}

// maxPace bounds a pace: beyond it the setting is surely a mistake.
const maxPace = 1e6

// Validate reports a negative, non-finite or absurd rate.
func (p Pacing) Validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{{"creates", p.Creates}, {"failed creates", p.FailedCreates}, {"queries", p.Queries}} {
		if !(r.v >= 0) || r.v > maxPace {
			return fmt.Errorf("pacing of %s must be 0..1000000 per second, not %v", r.name, r.v)
		}
	}
	return nil
}

// PacingOf returns the pacing of account (nil: the default merchant's
// account of the sandbox or memory provider): base with the account's own
// settings applied.
func PacingOf(account *Account, base Pacing) Pacing {
	if account == nil {
		return base
	}
	o := account.Pacing
	for _, s := range []struct {
		dst *float64
		src *float64
	}{{&base.Creates, o.Creates}, {&base.FailedCreates, o.FailedCreates}, {&base.Queries, o.Queries}} {
		if s.src != nil {
			*s.dst = *s.src
		}
	}
	return base
}

// PacingOverrides are an account's differences from the engine-wide
// pacing (the --wechatpay-pace-* flags); a nil field keeps it.
type PacingOverrides struct {
	Creates, FailedCreates, Queries *float64
}

// IsZero reports whether nothing is overridden.
func (o PacingOverrides) IsZero() bool {
	return o.Creates == nil && o.FailedCreates == nil && o.Queries == nil
}

// CodePacingDeferred is the Code of the OutcomeUnknown a paced provider
// answers for a call it did not make because its turn would come after
// the call's deadline: nothing was sent, and the refund's journaled due
// time (a retry, a query) brings it back.
const CodePacingDeferred = "PACING_DEFERRED"

// Operations paced, as the op of a PacingObserver.
const (
	OpCreate = "create"
	OpQuery  = "query"
)

// PacingObserver is told of every paced call: the account, the operation,
// how long it waited for its turn and whether it was deferred instead of
// made.
type PacingObserver interface {
	ObservePacing(account, op string, waited time.Duration, deferred bool)
}

// PacingClock is the time a pacer reads and waits on; tests replace it.
type PacingClock struct {
	Now func() time.Time
	// Sleep waits d or until ctx ends, and reports whether d passed.
	Sleep func(ctx context.Context, d time.Duration) bool
}

func realSleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Paced returns the providers (by merchant name) each behind its
// account's pacer: the merchants of one account share one pacer, so
// sub-merchants of a service provider are paced together. An account's
// pacing is base with its own settings (PacingOf). A merchant without an
// account (the sandbox's and memory's default) counts as the account
// DefaultName. obs may be nil; clock's zero fields mean the real clock.
func (r *Registry) Paced(providers map[string]Provider, base Pacing, obs PacingObserver, clock PacingClock) (map[string]Provider, error) {
	ps, err := NewPacers(base, obs, clock)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Provider, len(providers))
	for _, m := range r.merchants {
		if out[m.Name], err = ps.Wrap(m, providers[m.Name]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Pacers are the accounts' pacers, kept so that a merchant added by a
// reload shares its account's turns with the merchants already running.
// Safe for concurrent use.
type Pacers struct {
	base  Pacing
	obs   PacingObserver
	clock PacingClock

	mu     sync.Mutex
	pacers map[string]*pacer // by account name
}

// NewPacers returns the pacers of accounts paced at base with their own
// settings (PacingOf). obs may be nil; clock's zero fields mean the real
// clock.
func NewPacers(base Pacing, obs PacingObserver, clock PacingClock) (*Pacers, error) {
	if err := base.Validate(); err != nil {
		return nil, err
	}
	if clock.Now == nil {
		clock.Now = time.Now
	}
	if clock.Sleep == nil {
		clock.Sleep = realSleep
	}
	return &Pacers{base: base, obs: obs, clock: clock, pacers: map[string]*pacer{}}, nil
}

// Wrap returns prov behind the pacer of m's account, made on first use.
func (ps *Pacers) Wrap(m *Merchant, prov Provider) (Provider, error) {
	if prov == nil {
		return nil, fmt.Errorf("merchant: no provider for merchant %q", m.Name)
	}
	account := DefaultName
	if m.Account != nil {
		account = m.Account.Name
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	pc, ok := ps.pacers[account]
	if !ok {
		var err error
		if pc, err = ps.newPacer(account, m.Account); err != nil {
			return nil, err
		}
		ps.pacers[account] = pc
	}
	return &pacedProvider{Provider: prov, pacer: pc}, nil
}

// Stage wraps the providers of merchants added while the service runs
// (provs, by merchant name) as Wrap does, behind their accounts' pacers.
// The pacer of an account that has none yet (an account added with them)
// is made here but kept by the Pacers only from commit on, so a refused
// addition leaves no pacer behind (one kept would pace the account, added
// later, at the settings it had then). Stages are not run concurrently
// with each other (reloads run one at a time).
func (ps *Pacers) Stage(ms []*Merchant, provs map[string]Provider) (map[string]Provider, func(), error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	made := map[string]*pacer{}
	out := make(map[string]Provider, len(ms))
	for _, m := range ms {
		prov := provs[m.Name]
		if prov == nil {
			return nil, nil, fmt.Errorf("merchant: no provider for merchant %q", m.Name)
		}
		account := DefaultName
		if m.Account != nil {
			account = m.Account.Name
		}
		pc, ok := ps.pacers[account]
		if !ok {
			if pc, ok = made[account]; !ok {
				var err error
				if pc, err = ps.newPacer(account, m.Account); err != nil {
					return nil, nil, err
				}
				made[account] = pc
			}
		}
		out[m.Name] = &pacedProvider{Provider: prov, pacer: pc}
	}
	return out, func() {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		for account, pc := range made {
			if _, ok := ps.pacers[account]; !ok {
				ps.pacers[account] = pc
			}
		}
	}, nil
}

// newPacer makes the pacer of account a (nil: the default merchant's).
func (ps *Pacers) newPacer(name string, a *Account) (*pacer, error) {
	p := PacingOf(a, ps.base)
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("merchant: account %q: %w", name, err)
	}
	pc := &pacer{account: name, creates: newGate(p.Creates), queries: newGate(p.Queries), obs: ps.obs, clock: ps.clock}
	if p.FailedCreates > 0 {
		pc.failures = rate.NewLimiter(rate.Limit(p.FailedCreates), 1)
	}
	return pc, nil
}

// gate paces one operation of one account at r calls per second, two
// ways. A limiter spaces the calls evenly (a burst of one: idle time banks
// no turns). And n = floor(r) slots, each held from a call's start until
// a second after its answer, bound what the other side can see: a request
// arrives between its call's start and its answer, so n+1 requests
// arriving within one second would need n+1 slots held at once. Spacing
// alone does not give that: a call delayed after its turn (CPU, a busy
// connection) lands in the next second with that second's own calls, as
// the sandbox measured (docs/DESIGN.md, pacing). Below one call a second,
// one slot is held 1/r s after the answer.
type gate struct {
	lim   *rate.Limiter
	slots chan time.Time // each slot's time of being free again
	hold  time.Duration
}

// newGate returns the gate of r calls per second; nil for zero (unpaced).
func newGate(r float64) *gate {
	if r == 0 {
		return nil
	}
	n, hold := int(math.Floor(r)), time.Second
	if n < 1 {
		n, hold = 1, time.Duration(float64(time.Second)/r)
	}
	g := &gate{lim: rate.NewLimiter(rate.Limit(r), 1), slots: make(chan time.Time, n), hold: hold}
	for range n {
		g.slots <- time.Time{}
	}
	return g
}

// pacer is one account's gates, and its budget of failing creates.
type pacer struct {
	account          string
	creates, queries *gate
	// failures is taken by every create WeChat Pay refuses (after the
	// fact); a create waits for it to hold a turn, without taking it.
	failures *rate.Limiter
	obs      PacingObserver
	clock    PacingClock
}

// acquire waits for g's turn for op within ctx's deadline. It reports
// false, taking nothing, when the turn would come after the deadline or
// ctx ends first; else the caller calls release when its call is answered.
func (p *pacer) acquire(ctx context.Context, g *gate, op string) (release func(), ok bool) {
	if g == nil {
		return func() {}, true
	}
	start := p.clock.Now()
	dl, hasDL := ctx.Deadline()
	// after waits until t, unless t is past the deadline or ctx ends.
	after := func(t time.Time) bool {
		now := p.clock.Now()
		if !t.After(now) {
			return ctx.Err() == nil
		}
		if hasDL && !t.Before(dl) {
			return false
		}
		return p.clock.Sleep(ctx, t.Sub(now))
	}
	observe := func(ok bool) {
		if p.obs != nil {
			p.obs.ObservePacing(p.account, op, p.clock.Now().Sub(start), !ok)
		}
	}
	var free time.Time
	select {
	case free = <-g.slots:
	case <-ctx.Done():
		observe(false)
		return nil, false
	}
	ok = after(free)
	if ok && op == OpCreate && p.failures != nil {
		// Refused creates owe turns: wait until one is free again.
		now := p.clock.Now()
		if owed := 1 - p.failures.TokensAt(now); owed > 0 {
			ok = after(now.Add(time.Duration(owed / float64(p.failures.Limit()) * float64(time.Second))))
		}
	}
	if ok {
		now := p.clock.Now()
		res := g.lim.ReserveN(now, 1)
		if ok = after(now.Add(res.DelayFrom(now))); !ok {
			// Give the turn back: the calls behind this one move up.
			res.CancelAt(p.clock.Now())
		}
	}
	observe(ok)
	if !ok {
		g.slots <- free
		return nil, false
	}
	return func() { g.slots <- p.clock.Now().Add(g.hold) }, true
}

// pacedProvider makes its merchant's calls in its account's turns.
type pacedProvider struct {
	Provider
	pacer *pacer
}

func (pp *pacedProvider) Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome {
	release, ok := pp.pacer.acquire(ctx, pp.pacer.creates, OpCreate)
	if !ok {
		return deferred(refundNo, OpCreate)
	}
	o := pp.Provider.Submit(ctx, refundNo, body, attempt)
	release()
	if pp.pacer.failures != nil && refused(o) {
		pp.pacer.failures.ReserveN(pp.pacer.clock.Now(), 1)
	}
	return o
}

func (pp *pacedProvider) Query(ctx context.Context, refundNo string) reservation.Outcome {
	return (&pacedQuerier{q: pp.Provider, pacer: pp.pacer}).Query(ctx, refundNo)
}

// EncryptSensitive is the wrapped provider's: a local computation that
// sends nothing, so it takes no turn. Without it, ErrNoEncryption.
func (pp *pacedProvider) EncryptSensitive(plain ...string) (string, []string, error) {
	e, ok := pp.Provider.(sensitiveEncrypter)
	if !ok {
		return "", nil, ErrNoEncryption
	}
	return e.EncryptSensitive(plain...)
}

// ApplyAbnormal pays an ABNORMAL refund out in the account's create turns:
// it is a write to WeChat Pay's refund API like a create. A provider
// without the call sends nothing and answers UNKNOWN (noAbnormalPayout).
func (pp *pacedProvider) ApplyAbnormal(ctx context.Context, refundNo string, app reservation.AbnormalApplication) reservation.Outcome {
	p, ok := pp.Provider.(abnormalPayer)
	if !ok {
		return noAbnormalPayout()
	}
	release, ok := pp.pacer.acquire(ctx, pp.pacer.creates, OpCreate)
	if !ok {
		return deferred(refundNo, OpCreate)
	}
	defer release()
	return p.ApplyAbnormal(ctx, refundNo, app)
}

// refused reports whether WeChat Pay refused a create: with a business
// code (REJECTED) or for its rate (the codes of PARTNER.md §4). Unknown
// outcomes of timeouts and of answers that did not verify are not
// counted: nothing says WeChat Pay counted them as failing.
func refused(o reservation.Outcome) bool {
	switch o.Code {
	case "FREQUENCY_LIMITED", "RATELIMIT_EXCEEDED", "RATELIMIT_EXCEED", "RATE_LIMITED":
		return true
	}
	return o.Kind == reservation.OutcomeRejected
}

func deferred(no, op string) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: CodePacingDeferred,
		Message: "the " + op + " of refund " + no + " would wait for its turn past its deadline; nothing was sent"}
}

// Querier asks WeChat Pay about one refund (audit.Querier; a Provider is
// one).
type Querier interface {
	Query(ctx context.Context, refundNo string) reservation.Outcome
}

// PaceQueries returns q with its queries paced at r per second as an
// account's are (Paced), for a tool that queries one account besides
// refundd (refundctl reconcile --query); zero returns q. obs may be nil.
func PaceQueries(q Querier, account string, r float64, obs PacingObserver) (Querier, error) {
	if err := (Pacing{Queries: r}).Validate(); err != nil {
		return nil, err
	}
	if r == 0 {
		return q, nil
	}
	return &pacedQuerier{q: q, pacer: &pacer{account: account, queries: newGate(r), obs: obs,
		clock: PacingClock{Now: time.Now, Sleep: realSleep}}}, nil
}

type pacedQuerier struct {
	q     Querier
	pacer *pacer
}

func (pq *pacedQuerier) Query(ctx context.Context, refundNo string) reservation.Outcome {
	release, ok := pq.pacer.acquire(ctx, pq.pacer.queries, OpQuery)
	if !ok {
		return deferred(refundNo, OpQuery)
	}
	defer release()
	return pq.q.Query(ctx, refundNo)
}
