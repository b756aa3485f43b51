package api

import (
	"fmt"
	"testing"
	"time"
)

// fakeClock is a clock tests move by hand: no sleeps.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)} }
func (l *keyedLimiter) takeN(key string, n int) (taken int) {
	for range n {
		if ok, _ := l.take(key); ok {
			taken++
		}
	}
	return taken
}

func TestKeyedLimiter_BurstRefuseRecover(t *testing.T) {
	c := newFakeClock()
	l := newKeyedLimiter(10, 20, c.now)
	if n := l.takeN("a", 20); n != 20 {
		t.Fatalf("burst: %d of 20 taken", n)
	}
	ok, wait := l.take("a")
	if ok || wait != 100*time.Millisecond {
		t.Fatalf("past the burst: ok=%v wait=%v, want refused for 100ms", ok, wait)
	}
	// A refused request takes nothing: the wait does not grow.
	if _, again := l.take("a"); again != wait {
		t.Fatalf("second refusal waits %v, want %v", again, wait)
	}
	// Another key has its own bucket.
	if n := l.takeN("b", 20); n != 20 {
		t.Fatalf("other key: %d of 20 taken", n)
	}
	c.add(wait)
	if ok, _ := l.take("a"); !ok {
		t.Fatal("refused after the wait")
	}
	c.add(time.Second) // 10 more
	if n := l.takeN("a", 11); n != 10 {
		t.Fatalf("after a second: %d taken, want 10", n)
	}
	c.add(time.Hour) // refilled to the burst, no further
	if n := l.takeN("a", 21); n != 20 {
		t.Fatalf("after an hour: %d taken, want the burst of 20", n)
	}
}

// TestKeyedLimiter_EvictsIdle: the limiters of idle keys go once the map is
// full, so memory stays bounded by maxLimiters; a key still draining keeps
// its limiter (evicting it would hand it a full bucket).
func TestKeyedLimiter_EvictsIdle(t *testing.T) {
	c := newFakeClock()
	l := newKeyedLimiter(1, 2, c.now)
	l.takeN("busy", 2) // empty: must be kept
	for i := range maxLimiters - 1 {
		l.take(fmt.Sprint("addr-", i))
	}
	if l.size() != maxLimiters {
		t.Fatalf("%d limiters, want %d", l.size(), maxLimiters)
	}
	c.add(2 * time.Second) // every one refilled, but busy took two more below
	l.takeN("busy", 2)
	l.take("new")
	if n := l.size(); n != 2 {
		t.Fatalf("after eviction %d limiters, want busy and new", n)
	}
	if ok, _ := l.take("busy"); ok {
		t.Fatal("busy's empty bucket was replaced by a full one")
	}
	// More live keys than the bound: all go rather than grow.
	for i := range maxLimiters + 10 {
		l.take(fmt.Sprint("flood-", i))
	}
	if n := l.size(); n > maxLimiters {
		t.Fatalf("%d limiters, bound %d", n, maxLimiters)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{time.Nanosecond: 1, 100 * time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 90 * time.Second: 90} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// TestNotifyRateFor_WeChatRetryStorm replays the worst storm WeChat Pay
// can send one address: an account creating refunds at its limit (150 a
// second) for longer than the retry schedule lasts while refundd answers
// nothing, so that every stage of every refund's schedule comes due, then
// refundd answering again. Fed to the notification limiter at the bound
// NotifyRateFor gives, at the exact moments WeChat would send them, not
// one delivery is refused.
func TestNotifyRateFor_WeChatRetryStorm(t *testing.T) {
	schedule := []time.Duration{15 * time.Second, 15 * time.Second, 30 * time.Second, 3 * time.Minute, 10 * time.Minute,
		20 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute, time.Hour, 3 * time.Hour, 3 * time.Hour,
		3 * time.Hour, 6 * time.Hour, 6 * time.Hour}
	if len(schedule)+1 != NotifyAttempts {
		t.Fatalf("%d deliveries, NotifyAttempts says %d", len(schedule)+1, NotifyAttempts)
	}
	var offsets []time.Duration // when each delivery of one refund comes, after its first
	var at time.Duration
	offsets = append(offsets, 0)
	for _, d := range schedule {
		at += d
		offsets = append(offsets, at)
	}
	if at != 24*time.Hour+4*time.Minute {
		t.Fatalf("the schedule lasts %v, PROTOCOL.md says 24h4m", at)
	}
	// A window of 4 seconds long after the first refunds, when every
	// stage holds refunds made at the full rate: the deliveries in it
	// come from refunds created offsets[k] earlier. Each second's 150
	// refunds are created in one burst, at the end of even seconds and
	// at the start of odd ones: twice 2400 deliveries a millisecond apart,
	// the worst bunching WeChat's per-second limit allows.
	c := newFakeClock()
	start := c.t
	bound := NotifyRateFor(1)
	l := newKeyedLimiter(bound, int(2*bound), c.now)
	var window []time.Time
	for sec := range 4 {
		at := start.Add(time.Duration(sec) * time.Second)
		if sec%2 == 0 {
			at = at.Add(999 * time.Millisecond)
		}
		for _, off := range offsets {
			created := at.Add(-off)
			for range MaxRefundCreatesPerSecond {
				window = append(window, created.Add(off))
			}
		}
	}
	refused := 0
	for _, when := range window {
		c.t = when
		if ok, _ := l.take("wechat"); !ok {
			refused++
		}
	}
	if refused != 0 || len(window) != 4*NotifyAttempts*MaxRefundCreatesPerSecond {
		t.Fatalf("%d of %d deliveries refused", refused, len(window))
	}
	// A flood from one address gets a second's worth a second and no more.
	flood := newKeyedLimiter(bound, int(2*bound), c.now)
	if n := flood.takeN("x", 10000); n != int(2*bound) {
		t.Fatalf("flood's first burst: %d taken, want %d", n, int(2*bound))
	}
	for range 3 {
		c.add(time.Second)
		if n := flood.takeN("x", 10000); n != int(bound) {
			t.Fatalf("flood: %d taken in a second, want %d", n, int(bound))
		}
	}
	if NotifyRateFor(1) != 2400 || NotifyRateFor(3) != 7200 || NotifyRateFor(0) != 2400 {
		t.Fatalf("NotifyRateFor: %v %v %v", NotifyRateFor(1), NotifyRateFor(3), NotifyRateFor(0))
	}
}
