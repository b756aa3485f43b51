package actors

import (
	"context"
	"sync"
	"testing"
)

// TestPoolDispatcher_RunsEveryFunction: every scheduled function runs
// once, whether a worker is free, all are busy (its own goroutine), or the
// workers have ended with their context; Schedule never waits.
func TestPoolDispatcher_RunsEveryFunction(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d := newPoolDispatcher(ctx, 2, 7)
	if d.Throughput() != 7 {
		t.Fatalf("Throughput %d, want 7", d.Throughput())
	}
	var ran sync.WaitGroup
	counts := make([]int, 10)
	var mu sync.Mutex
	run := func(i int) func() {
		return func() {
			mu.Lock()
			counts[i]++
			mu.Unlock()
			ran.Done()
		}
	}
	// Both workers held busy: what comes next must still run.
	release := make(chan struct{})
	var busy sync.WaitGroup
	busy.Add(2)
	ran.Add(2)
	for range 2 {
		d.Schedule(func() { busy.Done(); <-release; ran.Done() })
	}
	busy.Wait() // may have run on goroutines of their own if no worker was waiting yet: either way both are running
	for i := range 5 {
		ran.Add(1)
		d.Schedule(run(i))
	}
	close(release)
	cancel()
	for i := 5; i < 10; i++ {
		ran.Add(1)
		d.Schedule(run(i))
	}
	ran.Wait()
	for i, n := range counts {
		if n != 1 {
			t.Errorf("function %d ran %d times, want once", i, n)
		}
	}
}
