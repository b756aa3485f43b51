package actors

import (
	"context"
	"testing"
	"time"
)

func TestSharedDeadline_EndsNoEarlierThanItsTimeout(t *testing.T) {
	cases := []struct {
		name string
		d    time.Duration
	}{
		{"hour", time.Hour},
		{"default deliver timeout", 30 * time.Second},
		{"tiny", 32 * time.Nanosecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSharedDeadline(context.Background(), tc.d)
			for range 100 {
				before := time.Now()
				ctx := s.context()
				after := time.Now()
				dl, ok := ctx.Deadline()
				if !ok {
					t.Fatal("no deadline")
				}
				if dl.Before(before.Add(tc.d)) {
					t.Fatalf("deadline %v is sooner than %v after the call", dl.Sub(before), tc.d)
				}
				if limit := after.Add(tc.d + tc.d/deadlineSlots + time.Nanosecond); dl.After(limit) {
					t.Fatalf("deadline %v after the call, want at most %v", dl.Sub(before), tc.d+tc.d/deadlineSlots)
				}
			}
		})
	}
}

func TestSharedDeadline_SharedWithinASlotThenRenewed(t *testing.T) {
	s := newSharedDeadline(context.Background(), time.Hour)
	first := s.context()
	if again := s.context(); again != first {
		t.Fatal("two calls in the same slot got different contexts")
	}
	// A short timeout has short slots: a new context soon.
	s = newSharedDeadline(context.Background(), 32*time.Millisecond)
	first = s.context()
	deadline := time.Now().Add(10 * time.Second)
	for s.context() == first {
		if time.Now().After(deadline) {
			t.Fatal("no new context after 10s with 1ms slots")
		}
	}
	// And the contexts end: each at its deadline.
	select {
	case <-first.Done():
		if first.Err() != context.DeadlineExceeded {
			t.Fatalf("ended with %v", first.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a 32ms context still running after 10s")
	}
}

func TestSharedDeadline_EndsWithParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	s := newSharedDeadline(parent, time.Hour)
	ctx := s.context()
	cancel()
	select {
	case <-ctx.Done():
		if ctx.Err() != context.Canceled {
			t.Fatalf("ended with %v", ctx.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not cancelled with its parent")
	}
	if err := s.context().Err(); err != context.Canceled {
		t.Fatalf("a context handed out after the parent ended: %v", err)
	}
}
