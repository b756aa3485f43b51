package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"refundd/internal/crashpoint"
	"refundd/internal/reservation"
)

// reservationActor owns one reservation's state while it is active.
type reservationActor struct {
	e       *Engine
	id      string
	entry   *entry
	state   *reservation.State
	broken  error // the state could not be loaded; every request fails
	waiters []waiter
	leaving bool // passivation started; only this actor's goroutine reads it
	active  time.Time
}

func (a *reservationActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.active = time.Now()
		a.load()
	case idleCheck:
		a.dropGoneWaiters()
		if time.Since(a.active) >= a.e.cfg.IdleTimeout && len(a.waiters) == 0 {
			a.passivate(ctx)
		}
	case passivateNow:
		ctx.Stop(ctx.Self())
	case *actor.Stopped:
		a.releaseWaiters()
		a.e.removeEntry(a.id, a.entry)
	case *envelope:
		a.active = time.Now()
		a.handle(ctx, m)
	}
}

// load rebuilds the state from the journal. It runs on every (re)start, so a
// restart after a panic recovers from durable facts only.
func (a *reservationActor) load() {
	loadCtx, cancel := context.WithTimeout(a.e.baseCtx, a.e.cfg.DeliverTimeout)
	defer cancel()
	events, version, err := a.e.cfg.Store.Load(loadCtx, a.id)
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
	defer func() {
		// A panic must not leave the caller waiting nor keep a state that
		// may be half applied: answer, then rebuild from the journal.
		if p := recover(); p != nil {
			a.log().Error("reservation actor panicked; passivating", "panic", p)
			a.broken = fmt.Errorf("%w: panic: %v", ErrUnavailable, p)
			a.passivate(ctx) // before answering: see execute
			select {
			case m.reply <- reply{err: a.broken}:
			default:
			}
		}
	}()
	if a.broken != nil {
		m.reply <- reply{err: a.broken}
		a.passivate(ctx)
		return
	}
	switch p := m.payload.(type) {
	case getMsg:
		if !a.state.Registered() {
			m.reply <- reply{err: reservation.ErrNotFound}
			return
		}
		m.reply <- reply{state: a.state.Clone()}
	case awaitMsg:
		if !a.state.Registered() {
			m.reply <- reply{err: reservation.ErrNotFound}
			return
		}
		done, err := holds(p.done, a.state)
		if !done && err == nil {
			a.waiters = append(a.waiters, waiter{ctx: m.ctx, done: p.done, ch: p.ch})
		}
		m.reply <- reply{state: a.state.Clone(), done: done, err: err}
	case cmdMsg:
		a.execute(ctx, m, p)
	default:
		m.reply <- reply{err: fmt.Errorf("actors: unknown message %T", p)}
	}
}

// execute is the one order every change follows: decide, append (durable),
// apply, reply, then side effects.
func (a *reservationActor) execute(ctx actor.Context, m *envelope, c cmdMsg) {
	env := reservation.Env{Now: a.e.cfg.Now().UTC(), By: c.by, Policy: a.e.cfg.Policy, Jitter: rand.Float64()}
	events, err := a.decide(c.cmd, env)
	if err != nil {
		m.reply <- reply{state: a.snapshot(c.quiet), err: err}
		return
	}
	if len(events) == 0 {
		m.reply <- reply{state: a.snapshot(c.quiet)}
		return
	}
	// The append outlives a caller that gave up: once decided, the outcome
	// of this message must be settled one way or the other.
	appendCtx, cancel := context.WithTimeout(a.e.baseCtx, a.e.cfg.DeliverTimeout)
	err = a.e.cfg.Store.Append(appendCtx, a.id, a.state.Version, events)
	cancel()
	if err != nil {
		if errors.Is(err, reservation.ErrOutTradeNoTaken) {
			m.reply <- reply{err: err}
			return
		}
		a.log().Error("journal append failed; passivating to recover from the journal", "err", err)
		a.broken = fmt.Errorf("%w: %v", ErrUnavailable, err)
		// Passivating before answering: a caller that retries at once
		// reaches a fresh activation that reloads the journal, not this
		// one, which would only repeat the error.
		a.passivate(ctx)
		m.reply <- reply{err: a.broken}
		return
	}
	for _, ev := range events {
		reservation.Apply(a.state, ev)
	}
	a.wakeWaiters()
	m.reply <- reply{state: a.snapshot(c.quiet), events: events}
	a.sideEffects(events)
}

// decide runs the pure core. A new refund also gets its first submission,
// with the exact provider bytes, in the same append: a refund is never
// journaled without the request that will be sent for it.
func (a *reservationActor) decide(cmd reservation.Command, env reservation.Env) ([]reservation.Event, error) {
	events, err := reservation.Decide(a.state, cmd, env)
	if err != nil || len(events) == 0 {
		return events, err
	}
	var tentative *reservation.State
	for _, ev := range events {
		req, ok := ev.Data.(reservation.RefundRequested)
		if !ok {
			continue
		}
		if tentative == nil {
			tentative = a.state.Clone()
			for _, e := range events {
				reservation.Apply(tentative, e)
			}
		}
		body, err := a.e.cfg.Provider.RequestBody(RefundRequest{
			RefundNo: req.RefundNo, OutTradeNo: tentative.OutTradeNo, TransactionID: tentative.TransactionID,
			Amount: req.Amount, Total: tentative.Amount, Currency: tentative.Currency, Reason: req.Reason,
		})
		if err != nil {
			return nil, fmt.Errorf("actors: build provider request for %s: %w", req.RefundNo, err)
		}
		more, err := reservation.Decide(tentative, reservation.StartSubmission{RefundNo: req.RefundNo, Request: body}, env)
		if err != nil {
			return nil, err
		}
		for _, e := range more {
			reservation.Apply(tentative, e)
		}
		events = append(events, more...)
	}
	return events, nil
}

// sideEffects starts the provider calls that the journaled events justify.
// Results come back through the engine as messages, never by touching the
// state from another goroutine.
func (a *reservationActor) sideEffects(events []reservation.Event) {
	for _, ev := range events {
		switch d := ev.Data.(type) {
		case reservation.FlaggedStuck:
			r := a.state.Refund(d.RefundNo)
			a.log().Error("refund stuck: unresolved past the stuck limit; an operator should look",
				"refund_no", d.RefundNo, "state", r.State, "attempts", r.Attempts, "queries", r.Queries, "requested_at", r.CreatedAt)
		case reservation.SubmissionStarted:
			r := a.state.Refund(d.RefundNo)
			if r == nil || len(r.Request) == 0 {
				continue
			}
			no, body, attempt := r.No, r.Request, d.Attempt
			crashpoint.Hit(crashpoint.AfterSubmitJournaled)
			a.e.goWork(func(base context.Context) {
				cctx, cancel := context.WithTimeout(base, a.e.cfg.ProviderTimeout)
				o := a.e.cfg.Provider.Submit(cctx, no, body, attempt)
				cancel()
				crashpoint.Hit(crashpoint.AfterProviderAnswered)
				a.e.report(a.id, reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse, Attempt: attempt, Outcome: o})
			})
		case reservation.QueryStarted:
			no := d.RefundNo
			a.e.goWork(func(base context.Context) {
				cctx, cancel := context.WithTimeout(base, a.e.cfg.ProviderTimeout)
				o := a.e.cfg.Provider.Query(cctx, no)
				cancel()
				a.e.report(a.id, reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceQuery, Outcome: o})
			})
		}
	}
}

// snapshot is the state a reply carries: a copy, since the caller reads it
// while this actor goes on; none when the caller does not read it (quiet).
func (a *reservationActor) snapshot(quiet bool) *reservation.State {
	if quiet || a.state == nil || !a.state.Registered() {
		return nil
	}
	return a.state.Clone()
}

// waiter is an Engine.Await call waiting for its condition on this
// reservation. Its condition is checked here, on the actor, after every
// change, so that a waiting caller costs a message only when it is done.
type waiter struct {
	ctx  context.Context
	done func(*reservation.State) bool
	ch   chan reply // buffered: this actor never blocks on it
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
			st = a.state.Clone()
		}
		w.ch <- reply{state: st, done: done, err: err}
	}
	clear(a.waiters[len(kept):])
	a.waiters = kept
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
	clear(a.waiters[len(kept):])
	a.waiters = kept
}

// releaseWaiters tells every waiter that this activation stopped (an empty
// reply): Await asks again, which activates a fresh actor.
func (a *reservationActor) releaseWaiters() {
	for _, w := range a.waiters {
		w.ch <- reply{}
	}
	a.waiters = nil
}
