package reservation

import "time"

// Env is what a decision may know about the world: the time, who asks, and
// the deployment's policy. Decide reads nothing else.
type Env struct {
	Now    time.Time
	By     string
	Policy Policy
}

// Policy holds the deployment's settings that shape decisions.
type Policy struct {
	// RefundNoPrefix starts every refund number; environments sharing one
	// merchant id must use different prefixes. 1..16 of [0-9A-Za-z].
	// Empty means "R".
	RefundNoPrefix string
	// MaxRefunds caps refunds per reservation; zero means 50 (WeChat's
	// limit on partial refunds of one order).
	MaxRefunds int
	// RecheckAfter is how long after a submission starts to check on it if
	// no answer arrives; zero means 30s.
	RecheckAfter time.Duration
	// QueryBackoff is the wait after the nth query; past its end the last
	// entry repeats. Nil means 1m, 5m, 10m, 30m, 1h.
	QueryBackoff []time.Duration
	// StuckAfter flags a refund unresolved this long after it was requested;
	// zero means 24h.
	StuckAfter time.Duration
}

// DefaultRefundNoPrefix is used when Policy.RefundNoPrefix is empty.
const DefaultRefundNoPrefix = "R"

var defaultQueryBackoff = []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour}

func (p Policy) prefix() string {
	if p.RefundNoPrefix == "" {
		return DefaultRefundNoPrefix
	}
	return p.RefundNoPrefix
}

func (p Policy) maxRefunds() int {
	if p.MaxRefunds <= 0 {
		return 50
	}
	return p.MaxRefunds
}

func (p Policy) recheckAfter() time.Duration {
	if p.RecheckAfter <= 0 {
		return 30 * time.Second
	}
	return p.RecheckAfter
}

func (p Policy) stuckAfter() time.Duration {
	if p.StuckAfter <= 0 {
		return 24 * time.Hour
	}
	return p.StuckAfter
}

// queryBackoff returns the wait after query number n (1-based).
func (p Policy) queryBackoff(n int) time.Duration {
	b := p.QueryBackoff
	if len(b) == 0 {
		b = defaultQueryBackoff
	}
	if n < 1 {
		n = 1
	}
	if n > len(b) {
		n = len(b)
	}
	return b[n-1]
}

// Validate reports a malformed policy.
func (p Policy) Validate() error {
	if p.RefundNoPrefix != "" && !validPrefix(p.RefundNoPrefix) {
		return invalid("refund_no_prefix", "must be 1..16 characters of [0-9A-Za-z]")
	}
	if p.maxRefunds() > maxRefundNumber {
		return invalid("max_refunds", "must be at most 99")
	}
	for _, d := range p.QueryBackoff {
		if d <= 0 {
			return invalid("query_backoff", "durations must be positive")
		}
	}
	return nil
}
