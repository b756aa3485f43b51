package api

import (
	"context"
	"sync"
	"time"
)

// ShareProbe returns a readiness probe (Options.Ready) that runs probe at
// most once per every and gives every caller in between that run's result;
// callers arriving while it runs wait for it. GET /readyz needs no token, and
// a probe that writes to disk must not let anyone who reaches the port make
// refundd write at will. A run cut short by its caller's context is not
// kept, so one impatient caller does not mark the service unready. every
// <= 0 means one second.
func ShareProbe(probe func(ctx context.Context) error, every time.Duration) func(ctx context.Context) error {
	if every <= 0 {
		every = time.Second
	}
	p := &sharedProbe{probe: probe, every: every}
	return p.run
}

type sharedProbe struct {
	probe func(context.Context) error
	every time.Duration

	mu   sync.Mutex
	at   time.Time     // when the kept result was taken; zero for none
	err  error         // the kept result
	done chan struct{} // closed when the running probe ends; nil when none runs
}

func (p *sharedProbe) run(ctx context.Context) error {
	p.mu.Lock()
	for {
		if !p.at.IsZero() && time.Since(p.at) < p.every {
			err := p.err
			p.mu.Unlock()
			return err
		}
		if p.done == nil {
			break
		}
		done := p.done
		p.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	done := make(chan struct{})
	p.done = done
	p.mu.Unlock()

	err := p.probe(ctx)

	p.mu.Lock()
	if ctx.Err() == nil {
		p.at, p.err = time.Now(), err
	}
	p.done = nil
	close(done)
	p.mu.Unlock()
	return err
}
