package broadcast_test

import (
	"testing"

	"github.com/refundd/refundd/internal/broadcast"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestSignal(t *testing.T) {
	var s broadcast.Signal
	a, stopped := s.Wait()
	b, _ := s.Wait()
	if stopped || closed(a) || closed(b) {
		t.Fatal("a fresh signal is closed or stopped")
	}
	s.Broadcast()
	if !closed(a) || !closed(b) {
		t.Fatal("Broadcast did not wake every waiter")
	}
	c, _ := s.Wait()
	if closed(c) {
		t.Fatal("a Wait after Broadcast got a closed channel")
	}
	s.Broadcast()
	s.Broadcast() // nobody waiting: no panic on a closed channel
	s.Stop()
	s.Stop()
	d, stopped := s.Wait()
	if !closed(c) || !closed(d) || !stopped {
		t.Fatal("Stop did not close the channel for good")
	}
	s.Broadcast() // after Stop: nothing to close
}
