package webhook

import (
	"testing"
	"time"

	"github.com/refundd/refundd/journal/journaltest"
)

func TestBackoff_Bounds(t *testing.T) {
	d, err := New(Config{DB: journaltest.Open(t), BackoffBase: time.Second, BackoffMax: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		n    int
		step time.Duration // before jitter
	}{
		{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {10, 512 * time.Second},
		{11, 10 * time.Minute}, {12, 10 * time.Minute}, {1000, 10 * time.Minute},
	}
	for _, tt := range tests {
		lo, hi := tt.step, time.Duration(0)
		for range 200 {
			b := d.backoff(tt.n)
			if b < tt.step/2 || b > tt.step {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", tt.n, b, tt.step/2, tt.step)
			}
			lo, hi = min(lo, b), max(hi, b)
		}
		// Jitter: 200 draws from a range this wide are not all equal.
		if lo == hi {
			t.Errorf("backoff(%d) returned %s every time: no jitter", tt.n, lo)
		}
	}
}
