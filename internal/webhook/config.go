package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// Endpoint is one webhook receiver.
type Endpoint struct {
	// Name identifies the endpoint in the journal's kv area, the API and
	// logs: 1..64 of [0-9A-Za-z_-]. Its cursor and parked events are kept
	// under this name, so renaming an endpoint starts it over.
	Name string
	// URL receives the POSTs: an absolute http or https URL. It is never
	// logged (it may carry credentials).
	URL string
	// Secret signs every delivery; at least 16 bytes.
	Secret []byte
	// Types limits the event types delivered (feed.Types()); empty means
	// all of them.
	Types []string
	// Merchants limits the events delivered to those of reservations of
	// these merchants; empty means every merchant's. Each must be one of
	// Config.Merchants. Events of other merchants are skipped: they move
	// the cursor like a filtered type, are never parked and never hold
	// anything back.
	Merchants []string
	// FromNow starts an endpoint that has no stored cursor at the
	// journal's current end. False (the zero value) delivers the whole
	// history first.
	FromNow bool
}

// Journal is what the dispatcher needs: the feed's reads, the signal of
// new commits, and the key-value area for cursors and parked events.
type Journal interface {
	feed.Journal
	// Committed returns a channel closed by the next commit.
	Committed() <-chan struct{}
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, value []byte) error
	List(ctx context.Context, prefix string) ([]journal.KV, error)
	WriteKV(ctx context.Context, put []journal.KV, del []string) error
}

// Config configures a Dispatcher.
type Config struct {
	// DB is the journal to read and to keep cursors in (*journal.DB, or
	// *pgjournal.DB in cluster mode); required. The caller keeps ownership
	// and closes it after Run has returned.
	DB Journal
	// Endpoints to deliver to; may be empty (Run then only waits).
	Endpoints []Endpoint
	// Merchants are the names of the configured merchants, which an
	// endpoint's Merchants must be among. Empty means the single default
	// merchant (reservation.DefaultMerchant).
	Merchants []string
	// MaxAttempts is how many POSTs one event gets before it is parked.
	// Zero means 12.
	MaxAttempts int
	// BackoffBase is the wait after the first failed attempt; each further
	// failure doubles it up to BackoffMax. Waits are jittered between half
	// and all of that. Zero means 1s.
	BackoffBase time.Duration
	// BackoffMax caps one wait (and a Retry-After asked by the endpoint).
	// Zero means 10m.
	BackoffMax time.Duration
	// Timeout bounds one POST, response included. Zero means 10s.
	Timeout time.Duration
	// BatchSize is how many events are read from the feed at a time. Zero
	// means 100.
	BatchSize int
	// Now is the clock for signature timestamps, parking times and ages.
	// Nil means time.Now.
	Now func() time.Time
	// Logger receives delivery failures and parkings. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Tally, if set, counts deliveries durably (internal/tally: *tally.Store):
	// per endpoint, POSTs delivered and failed and events parked after
	// their last attempt, noted without waiting for the write. Nil counts
	// only in memory (EndpointLag.Delivered, FailedAttempts).
	Tally Tally
	// HTTPClient sends the POSTs. Nil means a client that does not follow
	// redirects (a 3xx counts as a failure, so a misconfigured URL is
	// noticed rather than silently forwarded).
	HTTPClient *http.Client
}

// Tally is where deliveries are counted durably (*tally.Store).
type Tally interface {
	Note(changes map[string]int64)
}

func (c *Config) validate() error {
	if c.DB == nil {
		return fmt.Errorf("%w: DB is required", ErrConfig)
	}
	if c.MaxAttempts < 0 || c.BackoffBase < 0 || c.BackoffMax < 0 || c.Timeout < 0 || c.BatchSize < 0 {
		return fmt.Errorf("%w: negative MaxAttempts, BackoffBase, BackoffMax, Timeout or BatchSize", ErrConfig)
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 12
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 10 * time.Minute
	}
	if c.BackoffBase > c.BackoffMax {
		return fmt.Errorf("%w: BackoffBase %s exceeds BackoffMax %s", ErrConfig, c.BackoffBase, c.BackoffMax)
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.BatchSize == 0 {
		c.BatchSize = 100
	}
	c.BatchSize = min(c.BatchSize, feed.MaxLimit)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
	}
	seen := map[string]bool{}
	for i, e := range c.Endpoints {
		if err := e.validate(); err != nil {
			return fmt.Errorf("%w: endpoint %d: %w", ErrConfig, i, err)
		}
		if seen[e.Name] {
			return fmt.Errorf("%w: endpoint name %q used twice", ErrConfig, e.Name)
		}
		seen[e.Name] = true
	}
	return CheckMerchants(c.Endpoints, c.Merchants)
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (e Endpoint) validate() error {
	if !validName(e.Name) {
		return fmt.Errorf("name %q must be 1..64 of [0-9A-Za-z_-]", e.Name)
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: URL must be an absolute http or https URL", e.Name)
	}
	if len(e.Secret) < 16 {
		return fmt.Errorf("%s: secret must be at least 16 bytes, got %d", e.Name, len(e.Secret))
	}
	for _, t := range e.Types {
		if !feed.KnownType(t) {
			return fmt.Errorf("%s: unknown event type %q", e.Name, t)
		}
	}
	for i, m := range e.Merchants {
		if m == "" || slices.Contains(e.Merchants[:i], m) {
			return fmt.Errorf("%s: merchant %q empty or listed twice", e.Name, m)
		}
	}
	return nil
}

// CheckMerchants reports an endpoint subscribed to a merchant that is not
// among merchants (empty: the single reservation.DefaultMerchant), naming
// the endpoint and the merchant. New checks it; refundd checks it before
// it creates anything.
func CheckMerchants(eps []Endpoint, merchants []string) error {
	if len(merchants) == 0 {
		merchants = []string{reservation.DefaultMerchant}
	}
	for _, e := range eps {
		for _, m := range e.Merchants {
			if !slices.Contains(merchants, m) {
				return fmt.Errorf("%w: endpoint %s: unknown merchant %q; configured: %s",
					ErrConfig, e.Name, m, strings.Join(merchants, ", "))
			}
		}
	}
	return nil
}
