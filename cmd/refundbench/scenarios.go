package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// bench is one run: the client, what was measured and what the service
// accepted.
type bench struct {
	cfg    Config
	log    *slog.Logger
	client *client
	rec    *recorder
	ledger *ledger
	seq    atomic.Int64
	mix    mix
	// merchantSeq picks the merchant of each registration, round-robin.
	merchantSeq atomic.Int64

	slots []*claimSlot // claims: the shared reservations

	recentMu sync.Mutex
	recent   []string // mixed: reservations to read, a ring
	recentN  int

	notes    []notification // notify-storm: prepared, in send order
	nextNote atomic.Int64
	notify   *notifyStats // notify-storm: the target's counters before the run, if it has them
}

func newBench(c Config, log *slog.Logger) *bench {
	rec := newRecorder()
	conns := c.Clients
	if c.Rate > 0 {
		conns = c.MaxOpen
	}
	m, _ := parseMix(c.Mix) // validated
	return &bench{
		cfg: c, log: log, rec: rec, ledger: newLedger(), mix: m,
		client: newClient(c.Target, c.Token, c.Timeout, conns+8, rec),
		recent: make([]string, 4096),
	}
}

// register registers reservation id for --amount, for the next of the
// --merchants merchants in turn (none named without --merchants), and
// records it in the ledger once the service accepted it.
func (b *bench) register(ctx context.Context, id string) result {
	merchant := ""
	if n := b.cfg.Merchants; n > 0 {
		merchant, _ = benchMerchant(int(b.merchantSeq.Add(1)-1)%n+1, n)
	}
	r := b.client.register(ctx, id, merchant, b.cfg.Amount)
	if r.ok() {
		b.ledger.registered(id, merchant, b.cfg.Amount)
	}
	return r
}

// newID returns a fresh reservation id: run id, kind letter, counter.
func (b *bench) newID(kind string) string {
	return b.cfg.RunID + kind + strconv.FormatInt(b.seq.Add(1), 36)
}

func (b *bench) run(ctx context.Context) (*Report, error) {
	c := b.cfg
	var op opFunc
	switch c.Scenario {
	case scenarioLifecycle:
		op = b.lifecycleOp
	case scenarioClaims:
		if err := b.setupClaims(ctx); err != nil {
			return nil, err
		}
		op = b.claimOp
	case scenarioNotifyStorm:
		if err := b.setupNotify(ctx); err != nil {
			return nil, err
		}
		op = b.notifyOp
	case scenarioMixed:
		if err := b.setupClaims(ctx); err != nil {
			return nil, err
		}
		op = b.mixedOp
	}
	var watch *cpuWatch
	if c.CPUPids != "" || c.CPUUser != "" {
		var err error
		if watch, err = newCPUWatch(c.CPUPids, c.CPUUser); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	alloc := func() (float64, bool) { return b.serviceAllocated(ctx) }
	cpu := watchWindow(watch, alloc, start.Add(c.Warmup), start.Add(c.Warmup+c.Duration))
	warmEnd, end := drive(ctx, b.log, b.rec, c, op, start)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	<-cpu.done
	window := end.Sub(warmEnd)
	if last := b.rec.lastEnd; !last.IsZero() && last.Before(end) && b.nextNote.Load() >= int64(len(b.notes)) && len(b.notes) > 0 {
		// The prepared notifications ran out before the end: measure
		// over the time they lasted.
		window = last.Sub(warmEnd)
	}
	if window <= 0 {
		return nil, errors.New("nothing was measured: the warm-up used all the prepared work (raise --refunds)")
	}
	rep := b.report(window)
	rep.LoadAvg = [2]string{cpu.load0, cpu.load1}
	if watch != nil {
		rep.ServiceCPU = cpu.svc1 - cpu.svc0
		rep.LoadGenCPU = cpu.self1 - cpu.self0
		if ops := rep.PerSecond * c.Duration.Seconds(); ops > 0 {
			rep.CPUPerOp = rep.ServiceCPU * 1000 / ops
		}
	}
	if ops := rep.PerSecond * c.Duration.Seconds(); cpu.allocOK && ops > 0 {
		rep.ServiceAlloc = (cpu.alloc1 - cpu.alloc0) / (1 << 20)
		rep.AllocPerOp = (cpu.alloc1 - cpu.alloc0) / 1024 / ops
	}
	if c.Scenario == scenarioNotifyStorm && b.notify != nil {
		if after, err := b.notifyStats(ctx); err == nil {
			rep.Notify = after.minus(*b.notify)
		}
	}
	if c.Check {
		b.log.Info("checking", "reservations", b.ledger.size())
		rep.Check = b.check(ctx)
		if !rep.Check.OK {
			rep.Failures = append(rep.Failures, fmt.Sprintf("correctness check: %d violations", rep.Check.Violations))
		}
	} else {
		rep.Check = CheckResult{OK: true, Skipped: true}
	}
	return rep, nil
}

// lifecycleOp registers a reservation, requests one refund with ?wait=,
// and follows it until it is final. The whole is one operation.
func (b *bench) lifecycleOp(ctx context.Context, sched time.Time) bool {
	ok, reason := b.lifecycle(ctx)
	b.rec.op("lifecycle", sched, time.Now(), ok, reason)
	return true
}

func (b *bench) lifecycle(ctx context.Context) (bool, string) {
	c := b.cfg
	id := b.newID("L")
	if r := b.register(ctx, id); !r.ok() {
		return false, ""
	}
	b.remember(id)
	v, r := b.client.refund(ctx, id, "k1", c.RefundAmount, c.Wait)
	if !r.ok() || r.err != nil {
		return false, ""
	}
	b.ledger.accepted(id, v.RefundNo, v.Amount)
	deadline := time.Now().Add(c.Timeout)
	for !terminal(v.State) {
		if time.Now().After(deadline) {
			return false, "not final within --timeout"
		}
		if v, r = b.client.getRefund(ctx, "follow", id, v.RefundNo, c.Wait); !r.ok() || r.err != nil {
			return false, ""
		}
	}
	if v.State != "SUCCEEDED" {
		return false, "ended " + v.State
	}
	return true, ""
}

// claimSlot is one shared reservation that claims race on; it is replaced
// when it has nothing left to refund.
type claimSlot struct {
	mu  sync.Mutex
	cur atomic.Pointer[string]
}

func (b *bench) setupClaims(ctx context.Context) error {
	b.slots = make([]*claimSlot, b.cfg.Shared)
	for i := range b.slots {
		s := &claimSlot{}
		id, err := b.freshShared(ctx)
		if err != nil {
			return err
		}
		s.cur.Store(&id)
		b.slots[i] = s
	}
	return nil
}

func (b *bench) freshShared(ctx context.Context) (string, error) {
	id := b.newID("C")
	if r := b.register(ctx, id); !r.ok() {
		return "", fmt.Errorf("register shared reservation %s: %s", id, errorKey("register", r))
	}
	b.remember(id)
	return id, nil
}

// claimOp requests a partial refund of a random shared reservation, under
// a fresh idempotency key, without waiting for its outcome. A 409 that
// says the reservation has nothing left replaces it.
func (b *bench) claimOp(ctx context.Context, sched time.Time) bool {
	slot := b.slots[rand.IntN(len(b.slots))]
	idp := slot.cur.Load()
	id := *idp
	key := "c" + strconv.FormatInt(b.seq.Add(1), 36)
	v, r := b.client.refund(ctx, id, key, b.cfg.RefundAmount, 0)
	switch {
	case r.ok() && r.err == nil:
		b.ledger.accepted(id, v.RefundNo, v.Amount)
		b.rec.claim(sched, true)
		b.rec.op("claim", sched, time.Now(), true, "")
	case r.status == 409:
		b.rec.claim(sched, false)
		b.rec.op("claim", sched, time.Now(), true, "") // a correct answer
		if r.code == "insufficient_refundable" || r.code == "refund_limit_reached" || r.code == "reservation_canceled" {
			b.replace(ctx, slot, idp)
		}
	default:
		b.rec.op("claim", sched, time.Now(), false, "")
	}
	return true
}

func (b *bench) replace(ctx context.Context, slot *claimSlot, old *string) {
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.cur.Load() != old {
		return // someone else replaced it
	}
	id, err := b.freshShared(ctx)
	if err != nil {
		b.log.Warn("could not replace a shared reservation", "err", err)
		return
	}
	slot.cur.Store(&id)
}

// remember keeps a reservation for the mixed scenario's reads.
func (b *bench) remember(id string) {
	b.recentMu.Lock()
	b.recent[b.recentN%len(b.recent)] = id
	b.recentN++
	b.recentMu.Unlock()
}

func (b *bench) randomRecent() string {
	b.recentMu.Lock()
	defer b.recentMu.Unlock()
	n := min(b.recentN, len(b.recent))
	if n == 0 {
		return ""
	}
	return b.recent[rand.IntN(n)]
}

// mixedOp runs a lifecycle, a claim or a read, by the --mix weights.
func (b *bench) mixedOp(ctx context.Context, sched time.Time) bool {
	m := b.mix
	switch n := rand.IntN(m.lifecycle + m.claims + m.read); {
	case n < m.lifecycle:
		return b.lifecycleOp(ctx, sched)
	case n < m.lifecycle+m.claims:
		return b.claimOp(ctx, sched)
	}
	id := b.randomRecent()
	_, r := b.client.getReservation(ctx, "read", id)
	b.rec.op("read", sched, time.Now(), r.ok() && r.err == nil, "")
	return true
}

// claim counts one claim's answer: accepted or refused with 409.
func (r *recorder) claim(sched time.Time, accepted bool) {
	if accepted {
		r.count(sched, "claims accepted")
	} else {
		r.count(sched, "claims refused (409)")
	}
}

func (r *recorder) count(sched time.Time, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warmEnd.IsZero() || sched.Before(r.warmEnd) {
		return
	}
	r.counts[what]++
}
