package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/refundd/refundd/internal/crashpoint"
	"github.com/refundd/refundd/internal/reservation"
)

// reservationActor owns one reservation's state while it is active.
type reservationActor struct {
	e     *Engine
	id    string
	entry *entry
	state *reservation.State
	// shared says state was handed out with a reply: it is never changed
	// again, and the next change applies to a copy (copy on write, so that
	// replies need no copy of their own).
	shared bool
	broken error // the state could not be loaded; every request fails
	// archived says the reservation was loaded from the journal's archive:
	// it can be read, and refuses every command (reservation.ErrArchived).
	archived bool
	// answered says the message being handled got its reply; only the
	// actor's goroutine uses it.
	answered bool
	waiters  []waiter
	// sweepAt is the number of waiters at which the next one kept first
	// forgets those whose callers left (keepWaiter).
	sweepAt int
	leaving bool // passivation started; only this actor's goroutine reads it
}

func (a *reservationActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.entry.active.Store(a.e.since())
		a.load()
	case idleCheck:
		a.dropGoneWaiters()
		if a.entry.active.Load() <= m.before && len(a.waiters) == 0 {
			a.passivate(ctx)
		}
	case passivateNow:
		ctx.Stop(ctx.Self())
	case *actor.Stopped:
		a.releaseWaiters()
		a.e.removeEntry(a.id, a.entry)
	case *envelope:
		a.entry.active.Store(a.e.since())
		a.handle(ctx, m)
	}
}

// load rebuilds the state from the journal. It runs on every (re)start, so a
// restart after a panic recovers from durable facts only.
func (a *reservationActor) load() {
	var events []reservation.Event
	var version uint64
	var err error
	if as, ok := a.e.cfg.Store.(ArchiveStore); ok {
		events, version, a.archived, err = as.LoadArchived(a.e.journalDeadline.context(), a.id)
	} else {
		events, version, err = a.e.cfg.Store.Load(a.e.journalDeadline.context(), a.id)
	}
	if err != nil {
		a.broken = fmt.Errorf("%w: load %s: %v", ErrUnavailable, a.id, err)
		a.log().Error("loading reservation failed", "err", err)
		return
	}
	a.state = reservation.Replay(events)
	if a.state.Version != version {
		a.broken = fmt.Errorf("%w: load %s: replayed %d events, journal has %d", ErrUnavailable, a.id, a.state.Version, version)
		a.log().Error("reservation journal inconsistent", "replayed", a.state.Version, "version", version)
	}
}

// log is the engine's logger with the reservation, made when there is
// something to log: most activations never log, and With copies the
// handler.
func (a *reservationActor) log() *slog.Logger { return a.e.log.With("reservation", a.id) }

// passivate marks the activation as leaving and queues the stop behind
// whatever is already in the mailbox, so no accepted message is dropped.
func (a *reservationActor) passivate(ctx actor.Context) {
	if a.leaving {
		return
	}
	a.leaving = true
	a.e.markPassivating(a.id, a.entry)
	ctx.Send(ctx.Self(), passivateNow{})
}

func (a *reservationActor) handle(ctx actor.Context, m *envelope) {
	a.answered = false
	defer func() {
		// A panic must not leave the caller waiting nor keep a state that
		// may be half applied: answer, then rebuild from the journal.
		if p := recover(); p != nil {
			a.log().Error("reservation actor panicked; passivating", "panic", p)
			a.broken = fmt.Errorf("%w: panic: %v", ErrUnavailable, p)
			a.passivate(ctx) // before answering: see execute
			if !a.answered {
				a.answer(m, reply{err: a.broken})
			}
		}
	}()
	if a.broken != nil {
		a.answer(m, reply{err: a.broken})
		a.passivate(ctx)
		return
	}
	switch m.kind {
	case askGet:
		if !a.state.Registered() {
			a.answer(m, reply{err: reservation.ErrNotFound})
			return
		}
		a.answer(m, reply{state: a.publish()})
	case askAwait:
		if !a.state.Registered() {
			a.answer(m, reply{err: reservation.ErrNotFound})
			return
		}
		done, err := holds(m.done, a.state)
		// The waiter is kept after answering, so that nothing can fail
		// between the two: the caller frees m when the answer says no
		// waiter was kept.
		w := waiter{ctx: m.ctx, done: m.done, ch: m.reply}
		a.answer(m, reply{state: a.publish(), done: done, err: err})
		if !done && err == nil {
			a.keepWaiter(w)
		}
	case askCmd:
		a.execute(ctx, m)
	default:
		a.answer(m, reply{err: fmt.Errorf("actors: unknown request kind %d", m.kind)})
	}
}

// answer sends m its reply. The caller may reuse m as soon as it has it,
// so the actor must not touch m afterwards.
func (a *reservationActor) answer(m *envelope, r reply) {
	a.answered = true
	m.reply <- r
}

// execute is the one order every change follows: decide, append (durable),
// apply, reply, then side effects (counted as work before the reply) and
// the log lines the journaled events call for. One
// Decide is the whole decision: a new refund comes with its first
// submission and the exact provider bytes (Env.Encode), so a refund is
// never journaled without the request that will be sent for it.
func (a *reservationActor) execute(ctx actor.Context, m *envelope) {
	policy, configured := a.e.cfg.policyOf(a.merchant(m.cmd))
	env := reservation.Env{Now: a.e.cfg.Now().UTC(), By: m.by, Policy: policy, Jitter: rand.Float64(),
		Encode: a.e.cfg.Encode, Unconfigured: !configured}
	quiet := m.quiet
	if a.archived {
		a.answerArchived(m, env)
		return
	}
	events, err := reservation.Decide(a.state, m.cmd, env)
	if (err != nil || len(events) == 0) && isTimer(m.cmd) {
		if cerr := a.confirmCurrent(ctx); cerr != nil {
			a.answer(m, reply{err: cerr})
			return
		}
	}
	if err != nil {
		a.answer(m, reply{state: a.snapshot(quiet), err: err})
		return
	}
	if len(events) == 0 {
		a.answer(m, reply{state: a.snapshot(quiet)})
		return
	}
	// The append outlives a caller that gave up: once decided, the outcome
	// of this message must be settled one way or the other. The store
	// derives the indexes from the state the events were decided on.
	err = a.e.cfg.Store.Append(a.e.journalDeadline.context(), a.id, a.state, events)
	if err != nil {
		if errors.Is(err, reservation.ErrOutTradeNoTaken) {
			a.answer(m, reply{err: err})
			return
		}
		a.log().Error("journal append failed; passivating to recover from the journal", "err", err)
		a.broken = fmt.Errorf("%w: %v", ErrUnavailable, err)
		// Passivating before answering: a caller that retries at once
		// reaches a fresh activation that reloads the journal, not this
		// one, which would only repeat the error.
		a.passivate(ctx)
		a.answer(m, reply{err: a.broken})
		return
	}
	if has[reservation.Approved](events) {
		crashpoint.Hit(crashpoint.AfterApprovalJournaled)
	}
	if has[reservation.AbnormalApplied](events) {
		crashpoint.Hit(crashpoint.AfterAbnormalJournaled)
	}
	next := a.state
	if a.shared {
		next = a.state.Clone()
	}
	for _, ev := range events {
		reservation.Apply(next, ev)
	}
	a.state, a.shared = next, false
	a.wakeWaiters()
	var buf [2]providerCall
	calls := a.providerCalls(events, buf[:0])
	reqCtx, cmd, by := m.ctx, m.cmd, m.by // m is the caller's once answered
	a.answer(m, reply{state: a.snapshot(quiet), events: events})
	a.logJournaled(reqCtx, cmd, by, events)
	a.startCalls(calls)
}

// answerArchived answers m for a reservation read from the archive, which
// nothing may change (it is finished and its events are sealed). A command
// that decides nothing new is answered as on a hot reservation: a repeated
// request gets the refund's state, a notification that matches our records
// is a duplicate WeChat must see acknowledged, one that contradicts them
// its mismatch. Anything that would journal an event (a new refund, a
// conflict, a move WeChat reports) is refused with ErrArchived, so that a
// notification stays refused, kept and retried where operators see it.
func (a *reservationActor) answerArchived(m *envelope, env reservation.Env) {
	events, err := reservation.Decide(a.state, m.cmd, env)
	switch {
	case err == nil && len(events) == 0:
		a.answer(m, reply{state: a.snapshot(m.quiet)})
	case errors.Is(err, reservation.ErrOutcomeMismatch):
		a.answer(m, reply{state: a.snapshot(m.quiet), err: err})
	default:
		a.answer(m, reply{state: a.snapshot(m.quiet), err: reservation.ErrArchived})
	}
}

// merchant is the merchant cmd is decided for: the reservation's once
// registered (it never changes), else the one a Register names.
func (a *reservationActor) merchant(cmd reservation.Command) string {
	if a.state.Registered() {
		return a.state.Merchant
	}
	switch c := cmd.(type) {
	case reservation.Register:
		return reservation.MerchantOf(c.Merchant)
	case *reservation.Register:
		return reservation.MerchantOf(c.Merchant)
	}
	return reservation.DefaultMerchant
}

// has reports whether events hold one of type T (for the crash points).
func has[T reservation.EventData](events []reservation.Event) bool {
	for _, e := range events {
		if _, ok := e.Data.(T); ok {
			return true
		}
	}
	return false
}

// isTimer reports whether cmd fires a due timer.
func isTimer(cmd reservation.Command) bool {
	switch cmd.(type) {
	case reservation.FireTimer, *reservation.FireTimer:
		return true
	}
	return false
}

// confirmCurrent checks the state against the journal before a timer is
// answered as stale or as unknown (a refund or reservation the state does
// not hold). The scheduler deletes a timer so answered from the shared due
// index, and in cluster mode a node that still believes it owns the
// reservation may hold a state older than the journal's (only appends are
// fenced): its "stale" could be the live due time of a newer event, and
// deleting it would leave the refund with nobody to check on it. Such
// answers are rare (superseded due times leave the index with the events
// that supersede them), so the extra read costs little; it reads the
// version without taking ownership, which would fence the real owner. A
// state behind the journal passivates the actor and answers an error: the
// timer stays, and the next pass finds a fresh activation.
func (a *reservationActor) confirmCurrent(ctx actor.Context) error {
	version, err := a.e.cfg.Store.Version(a.e.journalDeadline.context(), a.id)
	switch {
	case err != nil:
		return fmt.Errorf("%w: confirm %s against the journal: %v", ErrUnavailable, a.id, err)
	case version != a.state.Version:
		a.log().Warn("reservation state behind the journal; reloading before handling its timer",
			"version", a.state.Version, "journal_version", version)
		a.passivate(ctx)
		return fmt.Errorf("%w: %s: state at version %d, journal at %d", ErrUnavailable, a.id, a.state.Version, version)
	}
	return nil
}

// providerCall is one provider call that a journaled event justifies: a
// submission of body, or a query when body is nil.
type providerCall struct {
	no      string
	body    []byte
	attempt int
	// abnormal, when set, is an abnormal refund's payout to apply.
	abnormal *reservation.AbnormalApplication
}

// providerCalls lists, into calls, the provider calls the journaled events
// justify, and counts each as the engine's work. It runs before the reply:
// a reply can finish the provider call that reported this outcome, and
// Close, seeing no work between the two, would cancel the calls this turn
// starts.
func (a *reservationActor) providerCalls(events []reservation.Event, calls []providerCall) []providerCall {
	for _, ev := range events {
		switch d := ev.Data.(type) {
		case reservation.SubmissionStarted:
			r := a.state.Refund(d.RefundNo)
			if r == nil || len(r.Request) == 0 {
				continue
			}
			a.e.work.add()
			calls = append(calls, providerCall{no: r.No, body: r.Request, attempt: d.Attempt})
		case reservation.QueryStarted:
			a.e.work.add()
			calls = append(calls, providerCall{no: d.RefundNo})
		case reservation.AbnormalApplied:
			r := a.state.Refund(d.RefundNo)
			if r == nil {
				continue
			}
			app := d.Application(r.ProviderID)
			a.e.work.add()
			calls = append(calls, providerCall{no: r.No, abnormal: &app})
		}
	}
	return calls
}

// startCalls starts the counted provider calls. Results come back through
// the engine as messages, never by touching the state from another
// goroutine.
func (a *reservationActor) startCalls(calls []providerCall) {
	for _, c := range calls {
		if c.abnormal != nil {
			go a.e.applyAbnormal(a.id, c.no, *c.abnormal)
			continue
		}
		if c.body == nil {
			go a.e.query(a.id, c.no)
			continue
		}
		crashpoint.Hit(crashpoint.AfterSubmitJournaled)
		go a.e.submit(a.id, c.no, c.body, c.attempt)
	}
}

// snapshot is the state a reply carries: none when the caller does not
// read it (quiet) or there is no reservation.
func (a *reservationActor) snapshot(quiet bool) *reservation.State {
	if quiet || a.state == nil || !a.state.Registered() {
		return nil
	}
	return a.publish()
}

// publish hands out the state: from now on it is only read, by callers
// while this actor goes on, and the next change is made to a copy.
func (a *reservationActor) publish() *reservation.State {
	a.shared = true
	return a.state
}

// submit makes one provider submission and delivers its outcome, as
// tracked work (the caller has added it).
func (e *Engine) submit(id, no string, body []byte, attempt int) {
	defer e.work.done()
	o := e.cfg.Provider.Submit(e.providerDeadline.context(), no, body, attempt)
	crashpoint.Hit(crashpoint.AfterProviderAnswered)
	e.report(id, reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse, Attempt: attempt, Outcome: o})
}

// query asks the provider for a refund's outcome and delivers it, as
// tracked work (the caller has added it).
func (e *Engine) query(id, no string) {
	defer e.work.done()
	o := e.cfg.Provider.Query(e.providerDeadline.context(), no)
	e.report(id, reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceQuery, Outcome: o})
}

// applyAbnormal asks the provider to pay an ABNORMAL refund out as
// journaled, as tracked work (the caller has added it). Its answer is a
// refund object like a query's and is applied as one; a refusal or no
// answer changes nothing (the refund's due time queries it, and WeChat
// Pay's ABNORMAL puts it back in front of an operator).
func (e *Engine) applyAbnormal(id, no string, app reservation.AbnormalApplication) {
	defer e.work.done()
	p, ok := e.cfg.Provider.(AbnormalProvider)
	if !ok {
		e.log.Error("provider cannot pay out abnormal refunds; the refund will be queried", "reservation", id, "refund_no", no)
		return
	}
	o := p.ApplyAbnormal(e.providerDeadline.context(), no, app)
	switch o.Kind {
	case reservation.OutcomeSucceeded, reservation.OutcomeProcessing, reservation.OutcomeFailed, reservation.OutcomeAbnormal:
		e.report(id, reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceQuery, Outcome: o})
	default:
		// Never the card or the name: only what WeChat Pay answered.
		e.log.Warn("abnormal refund payout not accepted; the refund will be queried", "reservation", id, "refund_no", no,
			"outcome", o.Kind, "code", o.Code, "message", o.Message)
	}
}

// waiter is an Engine.Await call waiting for its condition on this
// reservation. Its condition is checked here, on the actor, after every
// change, so that a waiting caller costs a message only when it is done.
type waiter struct {
	ctx  context.Context
	done func(*reservation.State) bool
	ch   chan reply // the envelope's: it has room for this one reply
}

// holds runs an Await condition on the actor's state. A condition that
// panics is the caller's bug: it fails that call, not the reservation.
func holds(done func(*reservation.State) bool, st *reservation.State) (ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			ok, err = false, fmt.Errorf("actors: await condition panicked: %v", p)
		}
	}()
	return done(st), nil
}

// wakeWaiters answers the waiters whose condition holds after a change and
// drops those whose caller left.
func (a *reservationActor) wakeWaiters() {
	kept := a.waiters[:0]
	for _, w := range a.waiters {
		if w.ctx.Err() != nil {
			continue
		}
		done, err := holds(w.done, a.state)
		if !done && err == nil {
			kept = append(kept, w)
			continue
		}
		var st *reservation.State
		if err == nil {
			st = a.publish()
		}
		w.ch <- reply{state: st, done: done, err: err}
	}
	a.setWaiters(kept)
}

// keepWaiter keeps w until its condition holds or its caller leaves. A
// refund that does not change, polled with ?wait=, would otherwise keep
// every finished poll's waiter (and its request) until the reservation
// changes, and polling keeps the actor from the idle check that drops
// them: so each time the list has doubled, the waiters whose callers left
// are forgotten first, which bounds it by twice the callers still waiting
// at a constant cost per waiter.
func (a *reservationActor) keepWaiter(w waiter) {
	if w.ctx.Err() != nil {
		return // already gone
	}
	if len(a.waiters) >= a.sweepAt {
		a.dropGoneWaiters()
		a.sweepAt = max(2*len(a.waiters), 8)
	}
	a.waiters = append(a.waiters, w)
	a.e.waiting.Add(1)
}

// dropGoneWaiters forgets waiters whose caller gave up, so that they do not
// keep an idle actor from passivating.
func (a *reservationActor) dropGoneWaiters() {
	kept := a.waiters[:0]
	for _, w := range a.waiters {
		if w.ctx.Err() == nil {
			kept = append(kept, w)
		}
	}
	a.setWaiters(kept)
}

// setWaiters makes kept, a prefix of the waiters' own array, the waiters.
func (a *reservationActor) setWaiters(kept []waiter) {
	clear(a.waiters[len(kept):])
	a.e.waiting.Add(int64(len(kept) - len(a.waiters)))
	a.waiters = kept
}

// releaseWaiters tells every waiter that this activation stopped (an empty
// reply): Await asks again, which activates a fresh actor.
func (a *reservationActor) releaseWaiters() {
	for _, w := range a.waiters {
		w.ch <- reply{}
	}
	a.setWaiters(a.waiters[:0])
	a.waiters = nil
}
