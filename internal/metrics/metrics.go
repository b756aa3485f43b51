package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/version"
)

const namespace = "refundd"

// Options configure New.
type Options struct {
	// Logger receives errors of reading a source at scrape time; nil means
	// slog.Default().
	Logger *slog.Logger
	// ScrapeTimeout bounds reading the sources for one scrape; zero means
	// 5s.
	ScrapeTimeout time.Duration
	// AttentionCap stops counting one attention kind at this many refunds,
	// so a scrape stays cheap however bad things are; zero means 100000.
	AttentionCap int
	// OverdueAfter is how late a due time must be to count as overdue;
	// zero means 1 minute.
	OverdueAfter time.Duration
	// CertificateWarning is how long before its last platform certificate
	// expires an account counts as expiring
	// (wechatpay_certificate_expiring); zero means 30 days. WeChat Pay
	// offers a new certificate for download 180 days before the old one
	// expires (PARTNER.md §3.4): an account still without one 30 days
	// before is not downloading.
	CertificateWarning time.Duration
	// NoRuntime leaves out the Go runtime and process collectors (tests).
	NoRuntime bool
	// Merchants are the configured merchants' names: the values the
	// merchant label may take, besides OtherMerchant (any other name) and
	// NoMerchant (a notification not attributed to one). Empty means the
	// single default merchant (reservation.DefaultMerchant). The label set
	// stays bounded whatever the journal or a caller names.
	Merchants []string
}

// Values of the merchant label that are not configured merchants. A
// merchant's name cannot start with "_", so they never collide with one.
const (
	// OtherMerchant counts every name that is not a configured merchant.
	OtherMerchant = "_other"
	// NoMerchant counts notifications attributed to no merchant (not
	// verified, or counted by a source that does not split by merchant).
	NoMerchant = "_none"
)

// Metrics is refundd's registry and instruments. Its methods are safe for
// concurrent use.
type Metrics struct {
	opts Options
	log  *slog.Logger
	reg  *prometheus.Registry
	// merchants is the set of merchant label values (Options.Merchants,
	// and those added by AddMerchants), copied on write.
	merchants   atomic.Pointer[map[string]bool]
	merchantsMu sync.Mutex // serializes AddMerchants

	httpDuration     *prometheus.HistogramVec
	appendDuration   *prometheus.HistogramVec
	commitBatch      prometheus.Histogram
	commitDuration   prometheus.Histogram
	syncDuration     prometheus.Histogram
	commitErrors     prometheus.Counter
	events           *prometheus.CounterVec
	loadDuration     prometheus.Histogram
	transitions      *prometheus.CounterVec
	providerCalls    *prometheus.CounterVec
	providerDuration *prometheus.HistogramVec
	rateLimited      *prometheus.CounterVec
	reloads          *prometheus.CounterVec
	pacingWait       *prometheus.HistogramVec
	pacingDeferred   *prometheus.CounterVec

	activations atomic.Uint64
	watched     atomic.Bool

	// requests caches the histogram of each label set of
	// httpDuration seen so far (copied on write, read without a lock):
	// WithLabelValues hashes the labels under a lock and allocates on every
	// call.
	requests atomic.Pointer[map[requestLabels]prometheus.Observer]
}

// requestLabels are the labels of one http_request_duration_seconds
// series, before the status code is formatted.
type requestLabels struct {
	method, route string
	status        int
}

// maxCachedRequests bounds the cache of request series; labels beyond it
// are still counted, without the cache.
const maxCachedRequests = 4096

// Bucket sets: requests include long-polls of up to 30 s; commits are
// dominated by one fsync.
var (
	requestBuckets  = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	diskBuckets     = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
	batchBuckets    = prometheus.ExponentialBuckets(1, 2, 11) // 1 .. 1024 (journal.Options.MaxBatch)
	providerBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
)

// New returns a registry with every instrument registered.
func New(opts Options) *Metrics {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = 5 * time.Second
	}
	if opts.AttentionCap <= 0 {
		opts.AttentionCap = 100000
	}
	if opts.CertificateWarning <= 0 {
		opts.CertificateWarning = 30 * 24 * time.Hour
	}
	if opts.OverdueAfter <= 0 {
		opts.OverdueAfter = time.Minute
	}
	m := &Metrics{opts: opts, log: opts.Logger, reg: prometheus.NewRegistry()}
	merchants := map[string]bool{}
	for _, name := range opts.Merchants {
		merchants[name] = true
	}
	if len(merchants) == 0 {
		merchants[reservation.DefaultMerchant] = true
	}
	m.merchants.Store(&merchants)
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
		Name: "http_request_duration_seconds", Help: "HTTP requests by method, route template and status code.",
		Buckets: requestBuckets}, []string{"method", "route", "code"})
	m.appendDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
		Name: "journal_append_duration_seconds", Help: "Journal appends by reservation actors, group commit wait included, by result (ok, conflict, taken, error).",
		Buckets: diskBuckets}, []string{"result"})
	m.commitBatch = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace,
		Name: "journal_commit_batch_size", Help: "Appends committed together in one journal transaction.", Buckets: batchBuckets})
	m.commitDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace,
		Name: "journal_commit_duration_seconds", Help: "Journal transactions of the group committer, start to durable.", Buckets: diskBuckets})
	m.syncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace,
		Name: "journal_sync_duration_seconds", Help: "The commit-to-disk part of a journal transaction: page writes and fsync.", Buckets: diskBuckets})
	m.commitErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace,
		Name: "journal_commit_errors_total", Help: "Journal transactions that failed."})
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
		Name: "journal_events_total", Help: "Reservation events appended to the journal, by type."}, []string{"type"})
	m.loadDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace,
		Name: "actor_load_duration_seconds", Help: "Loading a reservation's events when its actor activates.", Buckets: diskBuckets})
	m.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
		Name: "refund_transitions_total", Help: "Refund state changes journaled since start, by merchant (configured ones, else _other); from is NEW for a new refund."},
		[]string{"from", "to", "merchant"})
	m.providerCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
		Name: "provider_calls_total", Help: "Provider calls by operation (submit, query), outcome and merchant (configured ones, else _other)."}, []string{"op", "outcome", "merchant"})
	m.providerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
		Name: "provider_call_duration_seconds", Help: "Provider call latency by operation.", Buckets: providerBuckets}, []string{"op"})
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
		Name: "http_requests_rate_limited_total", Help: "Requests refused 429 for their rate: class token (by the token's role) or notify (per source address; role empty)."},
		[]string{"class", "role"})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
		Name: "credentials_reload_total", Help: "WeChat Pay credential reloads (SIGHUP, POST /v1/admin/credentials/reload) by result: ok, invalid (a bad file; the running credentials stay), restart_required."},
		[]string{"result"})
	for _, r := range []string{"ok", "invalid", "restart_required"} {
		m.reloads.WithLabelValues(r) // present at 0, so that an alert on increase() sees the first refusal
	}
	m.pacingWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
		Name: "provider_pacing_wait_seconds", Help: "Time a call to WeChat Pay waited for its account's turn (outbound pacing), by account and operation (create, query).",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 2.5, 5, 10, 30}}, []string{"account", "op"})
	m.pacingDeferred = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
		Name: "provider_pacing_deferred_total", Help: "Calls to WeChat Pay not made because their account's turn would come after their deadline; the refund's due time brings them back."},
		[]string{"account", "op"})
	m.reg.MustRegister(m.httpDuration, m.appendDuration, m.commitBatch, m.commitDuration, m.syncDuration,
		m.commitErrors, m.events, m.loadDuration, m.transitions, m.providerCalls, m.providerDuration, m.rateLimited, m.reloads,
		m.pacingWait, m.pacingDeferred,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "actor_activations_total",
			Help: "Reservation actor activations; each loads the reservation from the journal."},
			func() float64 { return float64(m.activations.Load()) }))
	// Always 1; its labels say which build answers, so that a dashboard can
	// show a rollout and join the version onto other series.
	v := version.Get()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "The running build: version, VCS revision and Go version; always 1."}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	m.reg.MustRegister(build)
	if !opts.NoRuntime {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// merchant is the merchant label value of name: itself when configured,
// OtherMerchant otherwise.
func (m *Metrics) merchant(name string) string {
	if (*m.merchants.Load())[name] {
		return name
	}
	return OtherMerchant
}

// AddMerchants makes names merchant label values: merchants added to the
// merchants file while refundd runs (a reload). Series counted under
// OtherMerchant before stay there.
func (m *Metrics) AddMerchants(names ...string) {
	m.merchantsMu.Lock()
	defer m.merchantsMu.Unlock()
	next := maps.Clone(*m.merchants.Load())
	for _, n := range names {
		next[n] = true
	}
	m.merchants.Store(&next)
}

// Registry returns the registry, to add collectors or gather in tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format. A source that
// fails is logged and left out; the other metrics are still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      promLogger{m.log},
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg, // counts the handler's own errors
	})
}

type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) { l.log.Warn("metrics: " + fmt.Sprint(v...)) }

// ObserveRequest records one answered HTTP request; it implements
// api.RequestObserver. route is the route template, or "" when none
// matched; unknown methods are counted as "OTHER" so clients cannot grow
// the label set.
func (m *Metrics) ObserveRequest(method, route string, status int, d time.Duration) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
	default:
		method = "OTHER"
	}
	if route == "" {
		route = "unmatched"
	}
	key := requestLabels{method: method, route: route, status: status}
	cache := m.requests.Load()
	if cache != nil {
		if o, ok := (*cache)[key]; ok {
			o.Observe(d.Seconds())
			return
		}
	}
	o := m.httpDuration.WithLabelValues(method, route, strconv.Itoa(status))
	o.Observe(d.Seconds())
	for {
		next := map[requestLabels]prometheus.Observer{key: o}
		if cache != nil {
			if len(*cache) >= maxCachedRequests {
				return
			}
			next = maps.Clone(*cache)
			next[key] = o
		}
		if m.requests.CompareAndSwap(cache, &next) {
			return
		}
		cache = m.requests.Load()
	}
}

// ObserveRateLimited counts one request refused for its rate; it
// implements api.RateLimitObserver. Both labels come from closed sets
// (the route classes and the roles), never from the request.
func (m *Metrics) ObserveRateLimited(class, role string) {
	m.rateLimited.WithLabelValues(class, role).Inc()
}

// ObserveReload counts one credential reload by result
// (merchant.ReloadOK, ReloadInvalid, ReloadRestartRequired).
func (m *Metrics) ObserveReload(result string) {
	m.reloads.WithLabelValues(result).Inc()
}

// ObservePacing records one paced call to WeChat Pay; it implements
// merchant.PacingObserver. The account label takes configured account
// names only (the pacer's), and op is create or query.
func (m *Metrics) ObservePacing(account, op string, waited time.Duration, deferred bool) {
	if deferred {
		m.pacingDeferred.WithLabelValues(account, op).Inc()
		return
	}
	m.pacingWait.WithLabelValues(account, op).Observe(waited.Seconds())
}

// ObserveCommit records one transaction of the journal's group committer:
// how many appends it held, its whole duration, the part spent committing
// to disk (page writes and fsync) and its error. It is meant for a
// journal.Options commit callback and is cheap enough for the committer's
// goroutine.
func (m *Metrics) ObserveCommit(batch int, total, sync time.Duration, err error) {
	if err != nil {
		m.commitErrors.Inc()
		return
	}
	m.commitBatch.Observe(float64(batch))
	m.commitDuration.Observe(total.Seconds())
	m.syncDuration.Observe(sync.Seconds())
}

// ErrWatched is returned by Watch when called a second time.
var ErrWatched = errors.New("metrics: sources already watched")

// scrapeContext bounds reading the sources of one scrape.
func (m *Metrics) scrapeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), m.opts.ScrapeTimeout)
}
