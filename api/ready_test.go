package api_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/api"
)

func TestShareProbe(t *testing.T) {
	broken := errors.New("no space left on device")
	t.Run("callers within the interval share one run", func(t *testing.T) {
		for _, want := range []error{nil, broken} {
			var runs atomic.Int64
			probe := api.ShareProbe(func(context.Context) error { runs.Add(1); return want }, time.Hour)
			for range 200 {
				if err := probe(context.Background()); err != want {
					t.Fatalf("probe = %v, want %v", err, want)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("200 calls ran the probe %d times, want 1", n)
			}
		}
	})
	t.Run("callers during a run wait for it", func(t *testing.T) {
		var runs atomic.Int64
		release, started := make(chan struct{}), make(chan struct{})
		probe := api.ShareProbe(func(context.Context) error {
			if runs.Add(1) == 1 {
				close(started)
			}
			<-release
			return broken
		}, time.Hour)
		var wg sync.WaitGroup
		errs := make(chan error, 51)
		wg.Add(1)
		go func() { defer wg.Done(); errs <- probe(context.Background()) }()
		<-started
		for range 50 {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- probe(context.Background()) }()
		}
		close(release)
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, broken) {
				t.Fatalf("a caller got %v, want the run's %v", err, broken)
			}
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("51 concurrent calls ran the probe %d times, want 1", n)
		}
	})
	t.Run("after the interval the probe runs again", func(t *testing.T) {
		var runs atomic.Int64
		probe := api.ShareProbe(func(context.Context) error { runs.Add(1); return nil }, time.Nanosecond)
		for range 3 {
			if err := probe(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if n := runs.Load(); n != 3 {
			t.Fatalf("3 calls a nanosecond apart ran the probe %d times, want 3", n)
		}
	})
	t.Run("a run its caller gave up on is not kept", func(t *testing.T) {
		var runs atomic.Int64
		probe := api.ShareProbe(func(ctx context.Context) error {
			if runs.Add(1) == 1 {
				return ctx.Err()
			}
			return nil
		}, time.Hour)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := probe(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled caller got %v", err)
		}
		if err := probe(context.Background()); err != nil {
			t.Fatalf("the next caller got %v, want a fresh run", err)
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("%d runs, want 2", n)
		}
	})
}
