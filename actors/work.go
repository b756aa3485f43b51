package actors

import "sync"

// tracker counts background work. Unlike sync.WaitGroup it allows new work
// to start while Close is waiting (a provider result can trigger a
// resubmission during shutdown).
type tracker struct {
	mu   sync.Mutex
	n    int
	idle chan struct{}
}

func (t *tracker) add() {
	t.mu.Lock()
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
	t.mu.Unlock()
}

func (t *tracker) done() {
	t.mu.Lock()
	t.n--
	if t.n == 0 {
		close(t.idle)
	}
	t.mu.Unlock()
}

// idleCh returns a channel closed when no work is running, or nil when
// there is none now.
func (t *tracker) idleCh() chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return nil
	}
	return t.idle
}
