package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineSlots is the number of contexts a sharedDeadline keeps alive at
// once: calls started within 1/deadlineSlots of its timeout share one.
const deadlineSlots = 32

// sharedDeadline hands out contexts of parent that end between d and
// d+d/deadlineSlots after they are asked for. Calls started close together
// share one context, so that a call costs no timer and no allocation of its
// own: the timeouts here are safety nets around calls that take
// milliseconds (a journal append, a provider call), made several times per
// refund. The contexts are never cancelled early; each ends at its
// deadline, or with parent.
type sharedDeadline struct {
	parent context.Context
	d      time.Duration
	slot   time.Duration
	mu     sync.Mutex // serializes making a new slot
	cur    atomic.Pointer[deadlineSlot]
}

type deadlineSlot struct {
	ctx    context.Context
	cancel context.CancelFunc // runs by itself at the deadline
	until  time.Time          // ctx is handed out until then
}

func newSharedDeadline(parent context.Context, d time.Duration) *sharedDeadline {
	return &sharedDeadline{parent: parent, d: d, slot: max(d/deadlineSlots, time.Nanosecond)}
}

// context returns a context that ends at least s.d from now.
func (s *sharedDeadline) context() context.Context {
	now := time.Now()
	if c := s.cur.Load(); c != nil && now.Before(c.until) {
		return c.ctx
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now = time.Now()
	if c := s.cur.Load(); c != nil && now.Before(c.until) {
		return c.ctx
	}
	// Handed out until now+slot, it ends slot later than d after that.
	ctx, cancel := context.WithDeadline(s.parent, now.Add(s.d+s.slot))
	s.cur.Store(&deadlineSlot{ctx: ctx, cancel: cancel, until: now.Add(s.slot)})
	return ctx
}
