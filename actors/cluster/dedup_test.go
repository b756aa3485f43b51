package cluster

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Concurrent deliveries of one command id run it once and all get its
// answer; a "not the owner" answer is not remembered; old ids are evicted.
func TestDedup_RunsOncePerID(t *testing.T) {
	d := newDedup(2)
	var runs atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	answers := make([]*reply, 10)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = d.do("a", func() *reply { runs.Add(1); <-release; return &reply{V: 7} })
		}()
	}
	close(release)
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("ran %d times, want once", runs.Load())
	}
	for _, a := range answers {
		if a != answers[0] {
			t.Fatal("deliveries got different answers")
		}
	}
	d.do("n", func() *reply { runs.Add(1); return &reply{NotOwner: true} })
	d.do("n", func() *reply { runs.Add(1); return &reply{} })
	if runs.Load() != 3 {
		t.Fatalf("not-owner answer was remembered (runs %d)", runs.Load())
	}
	d.do("b", func() *reply { return &reply{} })
	d.do("c", func() *reply { return &reply{} }) // evicts "a" (capacity 2: n, b, c -> a and n gone)
	d.do("a", func() *reply { runs.Add(1); return &reply{} })
	if runs.Load() != 4 {
		t.Fatalf("evicted id did not run again (runs %d)", runs.Load())
	}
	d.do("", func() *reply { runs.Add(1); return &reply{} })
	d.do("", func() *reply { runs.Add(1); return &reply{} })
	if runs.Load() != 6 {
		t.Fatal("empty ids must always run")
	}
}
