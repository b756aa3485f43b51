package api

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/refundd/refundd/internal/auth"
)

// RateLimits bound inbound requests: each token's (its principal's) by
// its role, and the unauthenticated WeChat Pay notification endpoints'
// by source address. A refused request is answered 429 rate_limited with
// Retry-After, and changes nothing.
type RateLimits struct {
	// PerRole is requests per second per principal of each role; a role
	// absent or at 0 is not limited. Bursts of two seconds' worth pass.
	// Tokens of one principal (old and new during a rotation) share it.
	PerRole map[auth.Role]float64
	// Notify is notifications per second per source address on the
	// public /v1/notify/ routes; 0 is no bound. Size it from WeChat Pay's
	// retry schedule, never below what WeChat can send (NotifyRateFor);
	// bursts of two seconds' worth pass, so deliveries bunched about the
	// edge of a second pass too. The address is the connection's: behind
	// a proxy every notification shares one.
	Notify float64
	// Observer, if set, is told of every refused request.
	Observer RateLimitObserver
	// Now is the clock; nil is time.Now (tests inject one).
	Now func() time.Time
}

// RateLimitObserver counts refused requests; metrics.Metrics implements
// it. class is "token" (role is the token's) or "notify" (role is "").
type RateLimitObserver interface {
	ObserveRateLimited(class, role string)
}

// WeChat Pay retries a notification that is not acknowledged 15 times,
// at 15s/15s/30s/3m/10m/20m/30m/30m/30m/60m/3h/3h/3h/6h/6h (24h4m in all,
// PROTOCOL.md §3). So each refund causes at most 16 deliveries, and while
// refundd answers none of them (down, or refusing) every refund of the
// last 24h4m still has retries to come: once each stage of the schedule
// holds refunds made at the peak rate, deliveries arrive at up to 16 times
// that rate. A merchant account creates at most 150 refunds a second
// (WeChat Pay's limit on refund creates, PARTNER.md §4), so one account's
// notifications never exceed 16 * 150 = 2400 a second, even coming back
// from a day's outage, and even if all come from one of WeChat's callback
// addresses. A single address sending more is not WeChat Pay.
const (
	// NotifyAttempts is a notification's deliveries: the first and 15
	// retries.
	NotifyAttempts = 16
	// MaxRefundCreatesPerSecond is WeChat Pay's limit on one account's
	// refund creates.
	MaxRefundCreatesPerSecond = 150
)

// NotifyRateFor is the bound per source address that never refuses
// WeChat Pay's notifications for the given number of merchant accounts,
// each at WeChat Pay's refund create limit: accounts * 150 * 16 a second.
func NotifyRateFor(accounts int) float64 {
	return float64(max(accounts, 1) * MaxRefundCreatesPerSecond * NotifyAttempts)
}

// codeRateLimited answers a request over its rate (429).
const codeRateLimited = "rate_limited"

// maxLimiters bounds the limiters one keyed limiter keeps; beyond it the
// idle ones go, and if that is not enough, all of them (a flood from more
// addresses than this is not one address's flood).
const maxLimiters = 1 << 16

// keyedLimiter is a token bucket (golang.org/x/time/rate) per key.
type keyedLimiter struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu   sync.Mutex
	keys map[string]*rate.Limiter
}

func newKeyedLimiter(perSecond float64, burst int, now func() time.Time) *keyedLimiter {
	return &keyedLimiter{limit: rate.Limit(perSecond), burst: max(burst, 1), now: now, keys: map[string]*rate.Limiter{}}
}

// take takes one request for key. When none is left it returns false and
// how long until one is.
func (l *keyedLimiter) take(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	lim := l.keys[key]
	if lim == nil {
		if len(l.keys) >= maxLimiters {
			l.evict(now)
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.keys[key] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now) // a refused request takes nothing
		return false, d
	}
	return true, 0
}

// evict drops the limiters whose bucket has refilled: a fresh one is the
// same. When fewer than half go, all go, so that sweeping stays rare.
func (l *keyedLimiter) evict(now time.Time) {
	n := len(l.keys)
	for k, lim := range l.keys {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.keys, k)
		}
	}
	if len(l.keys) > n/2 {
		clear(l.keys)
	}
}

// size is how many limiters are kept (tests).
func (l *keyedLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// limits is a server's inbound rate limiting, built once in New.
type limits struct {
	byRole   map[auth.Role]*keyedLimiter
	notify   *keyedLimiter
	observer RateLimitObserver
}

func newLimits(o *RateLimits) *limits {
	if o == nil {
		return nil
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	l := &limits{byRole: map[auth.Role]*keyedLimiter{}, observer: o.Observer}
	for role, perSecond := range o.PerRole {
		if perSecond > 0 {
			l.byRole[role] = newKeyedLimiter(perSecond, int(math.Ceil(2*perSecond)), now)
		}
	}
	if o.Notify > 0 {
		l.notify = newKeyedLimiter(o.Notify, int(math.Ceil(2*o.Notify)), now)
	}
	return l
}

// rateLimited answers a request over its rate 429 and returns true. It
// runs after authorize: a token's requests are counted once it is known
// to be valid (a bad token is a 401 however often it is sent), and the
// public notification routes by the connection's address.
func (s *Server) rateLimited(w http.ResponseWriter, r *http.Request, st *reqState, key string) bool {
	l := s.limits
	if l == nil {
		return false
	}
	var (
		lim        *keyedLimiter
		id         string
		class      string
		role       string
		limitedMsg string
	)
	switch {
	case st.hasPrincipal && s.opts.Auth != nil:
		role = string(st.principal.Role)
		lim, id, class = l.byRole[st.principal.Role], st.principal.String(), "token"
		limitedMsg = "too many requests for this token's role; retry after the time Retry-After gives"
	case strings.HasPrefix(st.route, "/v1/notify/") && (publicRoutes[key] || s.opts.PublicRoutes[key]):
		lim, id, class = l.notify, sourceAddress(r), "notify"
		limitedMsg = "too many notifications from this address"
	}
	if lim == nil {
		return false
	}
	ok, wait := lim.take(id)
	if ok {
		return false
	}
	if l.observer != nil {
		l.observer.ObserveRateLimited(class, role)
	}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
	s.writeError(w, r, &apiError{code: codeRateLimited, msg: limitedMsg})
	return true
}

// retryAfterSeconds is Retry-After for a wait: whole seconds, rounded up,
// at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// sourceAddress is the connection's address without its port. Forwarded
// headers are not read: anyone can send them.
func sourceAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
