package reservation

import "time"

// Env is what a decision may know about the world: the time, who asks, the
// deployment's policy, and how the provider encodes a refund request.
// Decide reads nothing else.
type Env struct {
	Now    time.Time
	By     string
	Policy Policy
	// Jitter in [0, 1) spreads retry times; the adapter draws it at random
	// and the decided due time is journaled, so replay stays exact.
	Jitter float64
	// Encode returns the exact bytes of a refund submission; it must be
	// pure (the same request gives the same bytes, no IO). RequestRefund
	// journals them with the refund, so the refund is never journaled
	// without the request that will be sent for it, and every retry resends
	// them unchanged. Nil decides the refund alone, its bytes to come from
	// a StartSubmission (how tests and tools drive the core step by step).
	Encode func(RefundRequest) ([]byte, error)
	// Unconfigured says the merchant of the command (the reservation's, or
	// the one a Register names) is not configured: registrations, new
	// refunds and resubmissions are refused (ErrMerchantNotConfigured),
	// while outcomes, timers and queries are decided as usual, so a
	// merchant taken out of the configuration leaves no refund unsettled
	// by the core's doing.
	Unconfigured bool
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
	// MaxAttempts bounds the submissions of one refund whose answers were
	// unknown before it is left to reconciliation as UNKNOWN; zero means 5.
	MaxAttempts int
	// RetryBackoff is the wait before the second attempt, doubling for each
	// later one up to RetryBackoffMax, with jitter; zero means 1s and 1m.
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	// RefundSpacing keeps create requests of one order (first submissions,
	// retries and resubmissions of all its refunds) at least this far apart
	// (WeChat Pay's rule for partial refunds). Zero means no spacing;
	// refundd's default configuration sets 60s.
	RefundSpacing time.Duration
	// RefundWindow refuses refunds this long after payment (when the paid
	// time is known); zero means 365 days.
	RefundWindow time.Duration
	// HintWindow holds back a hint (a CheckProvider from a notification)
	// while the refund's last provider query started less than this long
	// ago: that query is in flight or was just answered, and an APIv2
	// notification, which anyone can replay, must not buy a query and a
	// journal write each time. A query that never got an answer (a crash)
	// holds hints back only this long. Timers and an operator's reconcile
	// are not held back. Zero means 1m.
	HintWindow time.Duration
	// SettleHorizon is how long after an attempt whose outcome is unknown
	// WeChat Pay may still apply it: until then "not found" proves nothing,
	// the refund keeps being queried, and its amount is not released. Zero
	// means 48h.
	SettleHorizon time.Duration

	// Approval rules (approval.go): a refund that any of them matches is
	// created PENDING_APPROVAL and sent only once approved. None set (the
	// default) sends every refund at once.
	// ApproveAll asks for approval of every refund.
	ApproveAll bool
	// ApproveAbove asks for approval of refunds above this amount, fen;
	// zero: no such rule.
	ApproveAbove int64
	// ApproveAbovePercent asks for approval of refunds above this share of
	// the paid amount, 1..100 percent; zero: no such rule.
	ApproveAbovePercent int
	// ApproveNonService asks for approval of refunds requested by anyone
	// other than the booking/payment system's service tokens (an
	// operator's, say).
	ApproveNonService bool
	// ApprovalTimeout is how long a refund waits for approval before it
	// expires and releases its amount; zero means 24h.
	ApprovalTimeout time.Duration
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

func (p Policy) maxAttempts() int {
	if p.MaxAttempts <= 0 {
		return 5
	}
	return p.MaxAttempts
}

func (p Policy) refundWindow() time.Duration {
	if p.RefundWindow <= 0 {
		return 365 * 24 * time.Hour
	}
	return p.RefundWindow
}

// retryDelay is the wait after attempt n (1-based) got an unknown answer:
// exponential, capped, with "equal jitter" (half fixed, half random) so
// retries of many refunds do not arrive together.
func (p Policy) retryDelay(n int, jitter float64) time.Duration {
	base, max := p.RetryBackoff, p.RetryBackoffMax
	if base <= 0 {
		base = time.Second
	}
	if max <= 0 {
		max = time.Minute
	}
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	if !(jitter >= 0 && jitter < 1) { // also catches NaN
		jitter = 0
	}
	return d/2 + time.Duration(float64(d/2)*jitter)
}

func (p Policy) hintWindow() time.Duration {
	if p.HintWindow <= 0 {
		return time.Minute
	}
	return p.HintWindow
}

func (p Policy) settleHorizon() time.Duration {
	if p.SettleHorizon <= 0 {
		return DefaultSettleHorizon
	}
	return p.SettleHorizon
}

// DefaultSettleHorizon is used when Policy.SettleHorizon is zero.
const DefaultSettleHorizon = 48 * time.Hour

// settling reports whether an attempt started at unsettled, whose outcome
// is unknown, may still land at now.
func (p Policy) settling(unsettled, now time.Time) bool {
	return !unsettled.IsZero() && now.Before(unsettled.Add(p.settleHorizon()))
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
	if p.RetryBackoff < 0 || p.RetryBackoffMax < 0 || p.RefundSpacing < 0 || p.RefundWindow < 0 || p.StuckAfter < 0 || p.RecheckAfter < 0 ||
		p.HintWindow < 0 || p.SettleHorizon < 0 || p.ApprovalTimeout < 0 {
		return invalid("policy", "durations must not be negative")
	}
	if p.MaxAttempts < 0 || p.MaxRefunds < 0 {
		return invalid("policy", "counts must not be negative")
	}
	if p.ApproveAbove < 0 || p.ApproveAbove > MaxAmount {
		return invalid("approve_above", "must be 0..10^12 fen")
	}
	if p.ApproveAbovePercent < 0 || p.ApproveAbovePercent > 100 {
		return invalid("approve_above_percent", "must be 0..100")
	}
	for _, d := range p.QueryBackoff {
		if d <= 0 {
			return invalid("query_backoff", "durations must be positive")
		}
	}
	return nil
}
