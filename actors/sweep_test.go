package actors

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// emptyStore is a Store with nothing in it that accepts every append: the
// sweep's test needs live actors, not a journal.
type emptyStore struct{}

func (emptyStore) Load(context.Context, string) ([]reservation.Event, uint64, error) {
	return nil, 0, nil
}

func (emptyStore) Version(context.Context, string) (uint64, error) { return 0, nil }

func (emptyStore) Append(context.Context, string, *reservation.State, []reservation.Event) error {
	return nil
}

func (emptyStore) LookupRefund(context.Context, string) (string, error) {
	return "", reservation.ErrNotFound
}

func (emptyStore) DueBefore(context.Context, time.Time, int) ([]reservation.Timer, error) {
	return nil, nil
}
func (emptyStore) DeleteDue(context.Context, []reservation.Timer) error { return nil }
func (emptyStore) Attention(context.Context, string, string, int) ([]reservation.RefundRef, error) {
	return nil, nil
}

// noProvider is never called: no refund is requested.
type noProvider struct{}

func (noProvider) RequestBody(reservation.RefundRequest) ([]byte, error) { return []byte("{}"), nil }
func (noProvider) Submit(context.Context, string, []byte, int) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeUnknown}
}
func (noProvider) Query(context.Context, string) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeUnknown}
}

// TestSweep_AsksOnlyIdleActors: the sweep sends nothing to actors that had
// work within IdleTimeout, and the ones it asks passivate.
func TestSweep_AsksOnlyIdleActors(t *testing.T) {
	// No sweep of its own: askIdle is called by hand.
	e, err := newEngine(Config{Store: emptyStore{}, Provider: noProvider{}, Encode: noProvider{}.RequestBody, IdleTimeout: time.Hour,
		Policy: reservation.Policy{RefundNoPrefix: "T"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	ctx := context.Background()
	ids := []string{"a1", "a2", "a3"}
	for _, id := range ids {
		if _, _, err := e.Execute(ctx, id, "test", reservation.Register{ReservationID: id, UserID: "u",
			OutTradeNo: "O-" + id, Amount: 100, Currency: "CNY"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.askIdle(); n != 0 {
		t.Fatalf("askIdle asked %d actors that just had work", n)
	}
	// Two actors' last activity moves two hours back, as if they had been
	// idle that long.
	for _, id := range ids[:2] {
		sh := e.shard(id)
		sh.mu.Lock()
		sh.live[id].active.Add(-int64(2 * time.Hour))
		sh.mu.Unlock()
	}
	if n := e.askIdle(); n != 2 {
		t.Fatalf("askIdle asked %d actors, want the 2 idle ones", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.Active() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d actors live, want the busy one only", e.Active())
		}
		time.Sleep(time.Millisecond)
	}
	sh := e.shard(ids[2])
	sh.mu.Lock()
	_, live := sh.live[ids[2]]
	sh.mu.Unlock()
	if !live {
		t.Fatal("the actor with recent work passivated")
	}
	// A passivated reservation is activated again by its next message
	// (and, from this empty store, reloads as never registered).
	if _, err := e.Get(ctx, ids[0]); !errors.Is(err, reservation.ErrNotFound) {
		t.Fatalf("Get after passivation: %v", err)
	}
	if n := e.Active(); n != 2 {
		t.Fatalf("%d actors live after the reactivation, want 2", n)
	}
}

// TestSweep_TrimsToMaxActive: past MaxActive live actors, the sweep
// passivates the least recently used down to 7/8 of MaxActive, on its own
// (every second), and keeps the most recently used.
func TestSweep_TrimsToMaxActive(t *testing.T) {
	e, err := New(Config{Store: emptyStore{}, Provider: noProvider{}, Encode: noProvider{}.RequestBody, IdleTimeout: time.Hour,
		MaxActive: 8, Policy: reservation.Policy{RefundNoPrefix: "T"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	ctx := context.Background()
	var ids []string
	for i := range 20 {
		id := "m" + strconv.Itoa(i)
		ids = append(ids, id)
		if _, _, err := e.Execute(ctx, id, "test", reservation.Register{ReservationID: id, UserID: "u",
			OutTradeNo: "O-" + id, Amount: 100, Currency: "CNY"}); err != nil {
			t.Fatal(err)
		}
	}
	// Passivation is asynchronous: wait for the count to settle at 7 (7/8
	// of 8), the actors used last (one after another).
	deadline := time.Now().Add(10 * time.Second)
	for e.Active() != 7 {
		if time.Now().After(deadline) {
			t.Fatalf("%d actors live 10 s after 20 were used, want 7 (7/8 of MaxActive 8)", e.Active())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, id := range ids[len(ids)-7:] {
		sh := e.shard(id)
		sh.mu.Lock()
		_, live := sh.live[id]
		sh.mu.Unlock()
		if !live {
			t.Errorf("%s, one of the 7 most recently used, was passivated", id)
		}
	}
}

// TestTrim_WithinBound: at or under MaxActive, or with no bound, trim asks
// nothing; past it, only the least recently used.
func TestTrim_WithinBound(t *testing.T) {
	for _, tc := range []struct{ max, asked int }{{-1, 0}, {3, 0}, {2, 2}} {
		max := tc.max
		e, err := newEngine(Config{Store: emptyStore{}, Provider: noProvider{}, Encode: noProvider{}.RequestBody, IdleTimeout: time.Hour,
			MaxActive: max, Policy: reservation.Policy{RefundNoPrefix: "T"}}, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"w1", "w2", "w3"} {
			if _, _, err := e.Execute(context.Background(), id, "test", reservation.Register{ReservationID: id, UserID: "u",
				OutTradeNo: "O-" + id, Amount: 100, Currency: "CNY"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, asked := e.trim(nil); asked != tc.asked {
			t.Errorf("MaxActive %d, 3 live: trim asked %d actors to passivate, want %d", max, asked, tc.asked)
		}
		_ = e.Close(context.Background())
	}
}
