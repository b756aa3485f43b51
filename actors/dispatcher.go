package actors

import "context"

// poolDispatcher runs the reservation actors' mailboxes on goroutines that
// live as long as the engine, and on a new goroutine, like protoactor's
// default dispatcher, only when none of them is free.
//
// The default starts a goroutine for every mailbox run, and each grows its
// stack from the minimum to what an append needs (the event's encoding,
// bbolt's cursor), copying it at each step: runtime.newstack took 10% of
// refundd's CPU in the pinned lifecycle benchmark. A long-lived goroutine
// keeps its grown stack. protoactor offers no pooled dispatcher, hence
// this one.
type poolDispatcher struct {
	ctx        context.Context
	work       chan func()
	throughput int
}

// newPoolDispatcher starts workers goroutines that end with ctx.
// throughput is the messages a mailbox processes before it yields its
// goroutine (protoactor's Dispatcher.Throughput).
func newPoolDispatcher(ctx context.Context, workers, throughput int) *poolDispatcher {
	d := &poolDispatcher{ctx: ctx, work: make(chan func()), throughput: throughput}
	for range workers {
		go d.worker()
	}
	return d
}

func (d *poolDispatcher) worker() {
	for {
		select {
		case fn := <-d.work:
			fn()
		case <-d.ctx.Done():
			return
		}
	}
}

// Schedule runs fn on a free worker, else on a goroutine of its own: it
// never waits, since mailboxes are scheduled from inside other actors'
// runs and from the engine's shard locks.
func (d *poolDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		go fn()
	}
}

func (d *poolDispatcher) Throughput() int { return d.throughput }
