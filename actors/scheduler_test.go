package actors_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

// unloadableStore fails Load for reservations whose id starts with "bad"
// once poisoned: a stream the process can no longer read (a corrupt or
// undecodable record), every time it is activated.
type unloadableStore struct {
	actors.Store
	poisoned *atomic.Bool
}

func (s unloadableStore) Load(ctx context.Context, id string) ([]reservation.Event, uint64, error) {
	if s.poisoned.Load() && strings.HasPrefix(id, "bad") {
		return nil, 0, errors.New("journal: corrupt record")
	}
	return s.Store.Load(ctx, id)
}

// The scheduler reads the due index from its oldest timer. When the oldest
// 256 timers all fail (reservations that cannot be loaded), the timers
// behind them must still fire: after a restart, a healthy refund in flight
// is queried, and the failing timers stay for later passes.
func TestScheduler_TimersBehindFailingOnesStillFire(t *testing.T) {
	var poisoned atomic.Bool
	h := newHarness(t, harnessOpts{
		sim:   simprovider.Options{Delay: time.Hour}, // refunds stay PROCESSING
		store: func(s actors.Store) actors.Store { return unloadableStore{Store: s, poisoned: &poisoned} },
	})
	const bad = 256
	for i := range bad {
		id := fmt.Sprintf("bad-%03d", i)
		h.register(id, 100)
		if _, _, err := h.refund(id, "k", 100); err != nil {
			t.Fatal(err)
		}
	}
	h.clock.Advance(time.Second) // the healthy refund's due time is later
	h.register("good", 100)
	st, _, err := h.refund("good", "k", 100)
	if err != nil {
		t.Fatal(err)
	}
	no := st.RefundByKey("k").No
	waitFor(t, "the healthy refund to be PROCESSING", func() bool {
		s, _ := h.engine.Get(context.Background(), "good")
		r := s.Refund(no)
		return r != nil && r.State == reservation.Processing && r.Attempts == 1 && !r.DueAt.IsZero()
	})

	// Restart: the "bad" streams can no longer be loaded.
	if err := h.engine.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	poisoned.Store(true)
	h.start(0, reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute})
	h.clock.Advance(5 * time.Minute) // every refund is overdue

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.engine.RunScheduler(ctx, 5*time.Millisecond) }()
	deadline := time.Now().Add(3 * time.Second)
	queried := false
	for time.Now().Before(deadline) && !queried {
		s, err := h.engine.Get(context.Background(), "good")
		if err == nil && s.Refund(no).Queries > 0 {
			queried = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if !queried {
		t.Fatalf("healthy refund %s overdue by minutes was never queried: %d failing timers ahead of it in the due index block the scheduler", no, bad)
	}
	dues, err := h.store.DueBefore(context.Background(), h.clock.Now(), 2*bad)
	if err != nil {
		t.Fatal(err)
	}
	if len(dues) != bad {
		t.Fatalf("%d timers left in the index, want the %d failing ones", len(dues), bad)
	}
}
