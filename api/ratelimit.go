package api

import (
	"sync"
	"time"
)

// logLimiter lets through one log line per key per interval and counts
// what it held back, so a flood of bad notifications cannot flood the logs.
type logLimiter struct {
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
}

func newLogLimiter(every time.Duration) *logLimiter {
	return &logLimiter{every: every, now: time.Now, last: map[string]time.Time{}, suppressed: map[string]int{}}
}

// allow reports whether to log now and how many lines were held back since
// the last one.
func (l *logLimiter) allow(key string) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.every {
		l.suppressed[key]++
		return false, 0
	}
	if len(l.last) > 1024 { // keys are a small closed set; this only guards memory
		clear(l.last)
	}
	l.last[key] = now
	n := l.suppressed[key]
	delete(l.suppressed, key)
	return true, n
}
