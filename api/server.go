package api

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"

	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/tally"
)

// Engine is everything the API needs from the engine: the single-node
// actors.Engine and, in cluster mode, the cluster node (with an abandon that
// asks WeChat Pay from this node) both implement it. Every route and the
// notification endpoints use this one handle. States returned are shared
// and must only be read.
type Engine interface {
	// Execute runs one command on a reservation and returns the state
	// after it and the events it journaled (none for a duplicate); by is
	// the principal recorded with the events.
	Execute(ctx context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error)
	// Get returns a reservation's state, or reservation.ErrNotFound.
	Get(ctx context.Context, id string) (*reservation.State, error)
	// Await waits until done(state) holds or ctx ends and returns the last
	// state seen; done must be quick and must not call the Engine.
	Await(ctx context.Context, id string, done func(*reservation.State) bool) (*reservation.State, error)
	// Abandon releases a REJECTED refund's amount only on a fresh "not
	// found" from WeChat Pay, asked just before (actors.AbandonChecked).
	Abandon(ctx context.Context, id, by string, c reservation.Abandon) (*reservation.State, []reservation.Event, error)
	// RecordNotification journals a verified WeChat Pay notification in the
	// actor of the reservation that owns its refund and returns the events
	// (none for a duplicate); reservation.ErrNotFound when no reservation
	// owns the number. See actors.RecordNotification.
	RecordNotification(ctx context.Context, by string, n reservation.Notification) ([]reservation.Event, error)
	// Attention lists up to limit refunds needing attention of one kind
	// (reservation.AttentionKinds) after the cursor "reservation/refund_no",
	// from the journal's index (GET /v1/refunds, GET /v1/summary).
	Attention(ctx context.Context, kind, after string, limit int) ([]reservation.RefundRef, error)
	// Active is the number of live reservation actors here (GET /v1/summary).
	Active() int
}

// Options configure a Server.
type Options struct {
	// Principal is recorded as the cause of events from API requests until
	// requests are authenticated; empty means "api".
	Principal string
	// MaxWait caps ?wait=; zero means 10s.
	MaxWait time.Duration
	// RequestTimeout bounds one request's work in the engine; zero means 10s.
	RequestTimeout time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Notify, if set, enables the WeChat Pay notification endpoints.
	Notify *NotifyConfig
	// Auth, if set, requires a bearer token on every route but health and
	// WeChat Pay's notifications, and checks the route's permission (the
	// table in auth.go). Nil means no authentication (tests of other things).
	Auth *auth.Tokens
	// RoutePerms adds permissions for routes registered outside this
	// package; PublicRoutes marks such routes as open. Keys are
	// "METHOD /path/{template}".
	RoutePerms   map[string]auth.Permission
	PublicRoutes map[string]bool
	// Ready reports whether the service can take work (the journal is
	// writable, a provider is configured); nil means always ready.
	Ready func(ctx context.Context) error
	// Events, if set, enables the event feed and webhook routes (events.go).
	Events *EventsConfig
	// Metrics, if set, serves GET /metrics (Prometheus); nil leaves the
	// route out.
	Metrics http.Handler
	// Observer, if set, is told the route, status and duration of every
	// request; nil measures nothing.
	Observer RequestObserver
	// Timeline, if set, serves a reservation's journal at
	// GET /v1/reservations/{id}/events for the console; nil leaves the
	// route out.
	Timeline TimelineReader
	// Search, if set, serves GET /v1/search (search.go); nil leaves the
	// route out.
	Search Finder
	// List, if set, serves the lists GET /v1/refunds and GET
	// /v1/reservations (lists.go); nil leaves GET /v1/reservations out and
	// GET /v1/refunds the attention list alone.
	List Lister
	// Audit, if set, serves the audit head and the hot backup, and pauses
	// new refunds while a restored journal is reconciled (audit.go).
	Audit *AuditConfig
	// Credentials, if set, describes the WeChat Pay credentials held for
	// GET /v1/admin/credentials (credentials.go); nil answers no accounts.
	Credentials func() CredentialsView
	// ReloadCredentials, if set, rereads and swaps in the credentials for
	// POST /v1/admin/credentials/reload; its errors wrap
	// ErrCredentialsInvalid or ErrRestartRequired. Nil answers 409.
	ReloadCredentials func(context.Context) error
	// EncryptSensitive, if set, encrypts the bank card and name of an
	// abnormal refund's payout for the WeChat Pay key of the refund's
	// merchant and names that key (wechatpay.MerchantClient.EncryptSensitive,
	// routed by refund number: merchant.Router.EncryptSensitive). Nil, or
	// an error (no key held, a provider without the protocol): payouts to a
	// user's card are refused (503 encryption_unavailable), nothing is
	// journaled. The clear values are never journaled, logged or echoed.
	EncryptSensitive func(refundNo string, plain ...string) (serial string, ciphertext []string, err error)
	// NoAccessLog leaves out the line logged at INFO for every request
	// (method, route template, status, duration, request id, principal,
	// merchant); false, the default, logs it.
	NoAccessLog bool
	// Merchants names the merchants reservations may belong to
	// (reservation.ValidMerchant names, distinct). A registration names
	// one of them; with exactly one it may name none and gets that one.
	// Empty means the single reservation.DefaultMerchant: a deployment of
	// one merchant, where registrations need not name it.
	Merchants []string
	// RateLimits, if set, bounds requests per token and notifications per
	// source address (limits.go); nil limits nothing.
	RateLimits *RateLimits
	// Tally, if set, keeps the operational counters durably in the
	// journal's key-value area: notification outcomes are counted there
	// before they are answered, and GET /v1/summary reads it for them,
	// provider calls and webhook deliveries (counters.go). Nil counts
	// notifications in memory only, from zero at every start.
	Tally *tally.Store
	// Totals, if set, serves GET /v1/totals (totals.go) from the refund
	// totals kept with the journal; nil leaves the route out.
	Totals TotalsReader
	// PolicyOf returns the policy of a merchant's reservations (as the
	// engine decides them), for the next_step of refund views
	// (reservation.NextOf); nil means the default reservation.Policy{}
	// for every merchant.
	PolicyOf func(merchant string) reservation.Policy
	// Now is the time of next_step in answers; nil means time.Now.
	Now func() time.Time
}

// Server routes HTTP requests to the engine.
type Server struct {
	engine Engine
	opts   Options
	log    *slog.Logger
	router *mux.Router
	notify *notifier
	// handler is the router behind request ids, measurement and panic
	// recovery (metrics.go).
	handler http.Handler
	// routes describes every route New registered (request.go); it is
	// not changed after New.
	routes map[*mux.Route]*routeInfo
	// exposed is set once Router() has handed the router out (dispatch).
	exposed atomic.Bool
	// bufs holds buffers for request and response bodies (fastjson.go).
	bufs sync.Pool
	// merchant is the WeChat Pay merchant id refunds are made under when
	// the notification settings have exactly one account, logged with
	// each request; "" otherwise.
	merchant string
	// merchants is the set of Options.Merchants; soleMerchant is the one
	// a registration naming none gets, "" when there are several.
	merchants    *merchantSet
	soleMerchant string
	// limits is the inbound rate limiting; nil when there is none.
	limits *limits
}

// New builds the HTTP handler.
func New(engine Engine, opts Options) *Server {
	if opts.Principal == "" {
		opts.Principal = "api"
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 10 * time.Second
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// SkipClean: a path like /v1/reservations/a/../b gets a JSON 404, not
	// a redirect to another reservation.
	s := &Server{engine: engine, opts: opts, log: opts.Logger, router: mux.NewRouter().SkipClean(true), limits: newLimits(opts.RateLimits)}
	if opts.Notify != nil && len(opts.Notify.Accounts) == 1 {
		s.merchant = opts.Notify.Accounts[0].MchID
	}
	names := opts.Merchants
	if len(names) == 0 {
		names = []string{reservation.DefaultMerchant}
	}
	s.merchants = newMerchantSet(names)
	if len(s.merchants.sorted()) == 1 {
		s.soleMerchant = names[0]
	}
	r := s.router
	// The router tries routes in order, a regexp each: the lifecycle's
	// POSTs come first. No two routes match the same request, so the order
	// changes nothing else.
	r.HandleFunc("/v1/reservations", s.registerReservation).Methods(http.MethodPost)
	r.HandleFunc("/v1/reservations/{id}/refunds", s.requestRefund).Methods(http.MethodPost)
	r.HandleFunc("/v1/reservations/{id}", s.getReservation).Methods(http.MethodGet)
	r.HandleFunc("/v1/reservations/{id}/refunds/{refund_no}", s.getRefund).Methods(http.MethodGet)
	r.HandleFunc("/v1/reservations/{id}/refunds/{refund_no}/resubmit", s.resubmitRefund).Methods(http.MethodPost)
	r.HandleFunc("/v1/reservations/{id}/refunds/{refund_no}/abandon", s.abandonRefund).Methods(http.MethodPost)
	r.HandleFunc("/v1/reservations/{id}/refunds/{refund_no}/reconcile", s.reconcileRefund).Methods(http.MethodPost)
	r.HandleFunc("/v1/reservations/{id}/refunds/{refund_no}/resolve", s.resolveRefund).Methods(http.MethodPost)
	r.HandleFunc("/v1/reservations/{id}/refunds/{refund_no}/apply-abnormal", s.applyAbnormal).Methods(http.MethodPost)
	r.HandleFunc("/v1/reservations/{id}/refunds/{refund_no}/approve", s.approveRefund).Methods(http.MethodPost)
	r.HandleFunc("/v1/reservations/{id}/refunds/{refund_no}/reject", s.rejectRefund).Methods(http.MethodPost)
	r.HandleFunc("/v1/refunds", s.listRefunds).Methods(http.MethodGet)
	if opts.List != nil {
		r.HandleFunc("/v1/reservations", s.listReservations).Methods(http.MethodGet)
	}
	r.HandleFunc("/healthz", s.healthz).Methods(http.MethodGet)
	r.HandleFunc("/readyz", s.readyz).Methods(http.MethodGet)
	s.handler = s.operability() // request ids, metrics, OpenAPI, console (metrics.go)
	if opts.Notify != nil {
		s.notify = newNotifier(*opts.Notify, s)
		s.notify.routes(s)
	}
	s.eventRoutes()
	s.auditRoutes()
	s.credentialsRoutes()
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, &apiError{code: codeRouteNotFound, msg: "no such route"})
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, &apiError{code: codeMethod, msg: "method not allowed"})
	})
	s.indexRoutes()
	return s
}

// NotifyStats returns the notification counters, or nil when notifications
// are not enabled.
func (s *Server) NotifyStats() *NotifyStats {
	if s.notify == nil {
		return nil
	}
	return s.notify.stats
}

// Router exposes the router so other handlers (notifications) can be added
// by the wiring in cmd/. Requests are then served through mux's own
// dispatch, so that what is added finds mux.Vars and mux.CurrentRoute.
func (s *Server) Router() *mux.Router {
	s.exposed.Store(true)
	return s.router
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// serve runs the router for ServeHTTP, inside the request id and
// measurement.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	defer func() {
		// A panic in one request answers 500 and never takes the process
		// down.
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.ErrorContext(r.Context(), "panic serving request", "method", r.Method, "path", r.URL.Path, "panic", p)
			s.writeError(w, r, &apiError{code: codeInternal, msg: "internal error"})
		}
	}()
	s.dispatch(w, r)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 503 while the service cannot take work, for example while
// the journal cannot be written (disk full): load balancers then send
// requests elsewhere, and the answer turns 200 once a write succeeds again.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.opts.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.opts.Ready(ctx); err != nil {
			s.log.WarnContext(r.Context(), "not ready", "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "journal not writable"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.opts.RequestTimeout)
}
