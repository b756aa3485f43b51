package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// recorder keeps the latencies and outcomes of the measured phase. Samples
// that started before warmEnd are dropped; operations count toward
// throughput when they end inside [warmEnd, end].
type recorder struct {
	mu       sync.Mutex
	warmEnd  time.Time
	end      time.Time
	ops      map[string]*series
	reqs     map[string]*series
	errors   map[string]int64
	statuses map[string]int64
	counts   map[string]int64 // scenario-specific tallies, e.g. claims accepted
	dropped  int64
	lastEnd  time.Time // the last measured operation's end
}

type series struct {
	lat       []time.Duration
	ok        int64 // operations that succeeded and ended inside the window
	failed    int64
	completed int64 // successful operations that started inside the window
}

func newRecorder() *recorder {
	return &recorder{ops: map[string]*series{}, reqs: map[string]*series{}, errors: map[string]int64{}, statuses: map[string]int64{},
		counts: map[string]int64{}}
}

func (r *recorder) setWindow(warmEnd, end time.Time) {
	r.mu.Lock()
	r.warmEnd, r.end = warmEnd, end
	r.mu.Unlock()
}

func seriesOf(m map[string]*series, kind string) *series {
	s := m[kind]
	if s == nil {
		s = &series{}
		m[kind] = s
	}
	return s
}

// request records one HTTP exchange.
func (r *recorder) request(kind string, start time.Time, d time.Duration, res result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warmEnd.IsZero() || start.Before(r.warmEnd) {
		return
	}
	s := seriesOf(r.reqs, kind)
	s.lat = append(s.lat, d)
	r.statuses[kind+" "+strconv.Itoa(res.status)]++
	if !res.ok() || res.err != nil {
		r.errors[errorKey(kind, res)]++
		s.failed++
	} else {
		s.completed++
		if !start.Add(d).After(r.end) {
			s.ok++
		}
	}
}

// op records one scenario operation scheduled at sched (its start in a
// closed loop) that ended at end. A failed operation with a reason not
// already counted by its request records the reason.
func (r *recorder) op(kind string, sched, end time.Time, ok bool, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warmEnd.IsZero() || sched.Before(r.warmEnd) {
		return
	}
	s := seriesOf(r.ops, kind)
	if !ok {
		s.failed++
		if reason != "" {
			r.errors[kind+": "+reason]++
		}
		return
	}
	s.lat = append(s.lat, end.Sub(sched))
	s.completed++
	if !end.After(r.end) {
		s.ok++
	}
	if end.After(r.lastEnd) {
		r.lastEnd = end
	}
}

func (r *recorder) drop(sched time.Time) {
	r.mu.Lock()
	if !r.warmEnd.IsZero() && !sched.Before(r.warmEnd) {
		r.dropped++
	}
	r.mu.Unlock()
}

// opFunc runs one operation scheduled at sched and records it. It returns
// false when the scenario has no more work (a prepared list ran out).
type opFunc func(ctx context.Context, sched time.Time) bool

// drive runs op in a closed loop (clients workers) or an open loop (rate
// per second, at most maxOpen in flight) for warmup+duration, then waits
// for operations in flight. It returns when the load stopped.
func drive(ctx context.Context, log *slog.Logger, rec *recorder, c Config, op opFunc, start time.Time) (warmEnd, end time.Time) {
	warmEnd = start.Add(c.Warmup)
	end = warmEnd.Add(c.Duration)
	rec.setWindow(warmEnd, end)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var exhausted atomic.Bool
	if c.Rate <= 0 {
		log.Info("closed loop", "clients", c.Clients, "warmup", c.Warmup, "duration", c.Duration)
		for range c.Clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil && !exhausted.Load() {
					now := time.Now()
					if !now.Before(end) {
						return
					}
					if !op(ctx, now) {
						exhausted.Store(true)
						return
					}
				}
			}()
		}
		wg.Wait()
		return warmEnd, end
	}
	log.Info("open loop", "rate", c.Rate, "max_inflight", c.MaxOpen, "warmup", c.Warmup, "duration", c.Duration)
	sem := make(chan struct{}, c.MaxOpen)
	interval := float64(time.Second) / c.Rate
	for i := 0; ctx.Err() == nil && !exhausted.Load(); i++ {
		sched := start.Add(time.Duration(float64(i) * interval))
		if !sched.Before(end) {
			break
		}
		if d := time.Until(sched); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		select {
		case sem <- struct{}{}:
		default:
			rec.drop(sched)
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if !op(ctx, sched) {
				exhausted.Store(true)
			}
		}()
	}
	wg.Wait()
	return warmEnd, end
}

// stats summarizes one series.
func (s *series) stats(window time.Duration) OpStats {
	lat := slices.Clone(s.lat)
	slices.Sort(lat)
	o := OpStats{Count: s.completed, Failed: s.failed}
	if window > 0 {
		o.PerSecond = float64(s.ok) / window.Seconds()
	}
	if len(lat) > 0 {
		pct := func(p float64) float64 {
			i := int(p * float64(len(lat)-1))
			return ms(lat[i])
		}
		o.P50, o.P95, o.P99, o.Max = pct(0.50), pct(0.95), pct(0.99), ms(lat[len(lat)-1])
	}
	return o
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fmtMS(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
