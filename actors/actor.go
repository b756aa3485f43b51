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
	waiters []chan struct{}
	leaving bool // passivation started; only this actor's goroutine reads it
	active  time.Time
	log     *slog.Logger
}

func (a *reservationActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.log = a.e.log.With("reservation", a.id)
		a.active = time.Now()
		a.load()
	case idleCheck:
		if time.Since(a.active) >= a.e.cfg.IdleTimeout && len(a.waiters) == 0 {
			a.passivate(ctx)
		}
	case passivateNow:
		ctx.Stop(ctx.Self())
	case *actor.Stopped:
		a.wakeWaiters()
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
		a.log.Error("loading reservation failed", "err", err)
		return
	}
	a.state = reservation.Replay(events)
	if a.state.Version != version {
		a.broken = fmt.Errorf("%w: load %s: replayed %d events, journal has %d", ErrUnavailable, a.id, a.state.Version, version)
		a.log.Error("reservation journal inconsistent", "replayed", a.state.Version, "version", version)
	}
}

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
			a.log.Error("reservation actor panicked; passivating", "panic", p)
			a.broken = fmt.Errorf("%w: panic: %v", ErrUnavailable, p)
			select {
			case m.reply <- reply{err: a.broken}:
			default:
			}
			a.passivate(ctx)
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
	case watchMsg:
		if a.state.Version > p.after {
			close(p.ch)
		} else {
			a.waiters = append(a.waiters, p.ch)
		}
		m.reply <- reply{}
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
		m.reply <- reply{state: a.snapshot(), err: err}
		return
	}
	if len(events) == 0 {
		m.reply <- reply{state: a.snapshot()}
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
		a.log.Error("journal append failed; passivating to recover from the journal", "err", err)
		m.reply <- reply{err: fmt.Errorf("%w: %v", ErrUnavailable, err)}
		a.broken = err
		a.passivate(ctx)
		return
	}
	for _, ev := range events {
		reservation.Apply(a.state, ev)
	}
	a.wakeWaiters()
	m.reply <- reply{state: a.state.Clone(), events: events}
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
			a.log.Error("refund stuck: unresolved past the stuck limit; an operator should look",
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

func (a *reservationActor) snapshot() *reservation.State {
	if a.state == nil || !a.state.Registered() {
		return nil
	}
	return a.state.Clone()
}

func (a *reservationActor) wakeWaiters() {
	for _, ch := range a.waiters {
		close(ch)
	}
	a.waiters = nil
}
