// Package broadcast holds Signal, a one-to-many wake-up: both journals use
// it to wake readers waiting for the next commit.
package broadcast

import "sync"

// Signal is a broadcast: every Wait before a Broadcast gets a channel that
// the Broadcast closes; a Wait after it gets a new channel. Stop closes the
// current channel for good: it stays closed for every later Wait. The zero
// value is ready to use.
type Signal struct {
	mu      sync.Mutex
	ch      chan struct{}
	stopped bool
}

// Wait returns the channel the next Broadcast (or Stop) closes, and
// whether Stop has been called.
func (s *Signal) Wait() (<-chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch, s.stopped
}

// Broadcast wakes every waiter so far.
func (s *Signal) Broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil && !s.stopped {
		close(s.ch)
		s.ch = nil
	}
}

// Stop wakes every waiter, now and later.
func (s *Signal) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	close(s.ch)
	s.stopped = true
}
