package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/config"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/quarantine"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/tally"
	"github.com/refundd/refundd/internal/version"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/journal"
)

// Main is the program, split so tests can run it in-process on :0 and a temp
// directory (the WTF Dial layout).
type Main struct {
	Config Config
	Stdout io.Writer
	Stderr io.Writer

	log       *slog.Logger
	db        *journal.DB // the single node's journal; nil in cluster mode
	be        *backend
	tally     *tally.Store // the durable operational counters, in the journal's kv area
	server    *http.Server
	ln        net.Listener
	pprof     *http.Server
	stopBG    context.CancelFunc // the scheduler and the restore reconciliation
	provider  *wiredProvider
	hooksStop context.CancelFunc
	hooksDone chan struct{}
	feedDone  chan struct{}
	getenv    func(string) string
	metrics   *metrics.Metrics
	effective config.Settings // the effective configuration, secrets masked, logged at start
	notes     []string        // warnings from ParseFlags (deprecated names), logged at start
	bg        sync.WaitGroup
	// runtimeNote says how main set Go's runtime (runtimetune.Apply); logged at start.
	runtimeNote string
	// readyEvery is how often /readyz's probe writes at most; zero means
	// a second (tests set it).
	readyEvery time.Duration
}

// checked is the configuration read and checked before anything is
// created on disk: a mistake in it stops the start with nothing to clean up.
type checked struct {
	policy    reservation.Policy
	signKey   ed25519.PrivateKey
	tokens    *auth.Tokens // from --tokens-file and REFUNDD_TOKENS; empty: local tokens
	endpoints []webhook.Endpoint
	merchants *merchants // the merchants served, with their keys under --provider wechatpay
}

// enginePolicies are the engine's policies (actors.Config): base for a
// reservation whose merchant is no longer configured, and each
// configured merchant's, with its prefix of the journal's epoch (a
// merchant added by a reload is added to the set).
type enginePolicies struct {
	base      reservation.Policy
	merchants *actors.PolicySet
}

// of is the policy the engine decides merchant's reservations under
// (actors.Config.Policies, else Policy), for the API's next_step.
func (p enginePolicies) of(merchant string) reservation.Policy {
	policy, _ := actors.PolicyOf(p.merchants, p.base, merchant)
	return policy
}

// engineConfig is the reservation actors' configuration, the same for a
// single node and for each node of a cluster.
func (m *Main) engineConfig(store actors.Store, w *wiredProvider, policies enginePolicies) actors.Config {
	return actors.Config{
		Store: m.metrics.Store(store), Provider: tally.CountProvider(m.metrics.Provider(w.provider), m.tally), Encode: w.encode, Logger: m.log,
		Merchant: w.merchant(), Policy: policies.base, Policies: policies.merchants,
		IdleTimeout: m.Config.IdleTimeout, MaxActive: m.Config.maxActive(), ProviderTimeout: m.Config.ProviderTimeout,
	}
}

// maxActive is --max-active-actors for actors.Config.MaxActive: the flag's
// 0 (no bound) is the engine's -1, since the engine's zero is its default.
func (c *Config) maxActive() int {
	if c.MaxActiveActors == 0 {
		return -1
	}
	return c.MaxActiveActors
}

// sharedJournal is what both journals (bbolt and PostgreSQL) give the
// shared wiring.
type sharedJournal interface {
	eventstore.BackfillJournal
	webhook.Journal
}

// backend is what the two modes do differently (single node: the bbolt
// journal and an actors.Engine; cluster: the PostgreSQL journal and a
// cluster node). Run does everything else the same way over it.
type backend struct {
	db sharedJournal
	// owner names this process's entry of the durable counters
	// (internal/tally): the node id in a cluster.
	owner string
	// prefix is the default merchant's refund-number prefix in effect (a
	// restored journal's epoch changes it); epoch is the journal's
	// refund-number epoch, which every merchant's prefix carries.
	prefix string
	epoch  uint64
	// start runs the actors over the journal with the provider, setting
	// the fields below; work it starts in the background ends with bg.
	start func(ctx, bg context.Context, w *wiredProvider, policies enginePolicies) error
	// webhooks sets webhook dispatch up; Run runs it.
	webhooks func(eps []webhook.Endpoint, merchants []string) (dispatch, error)

	engine    api.Engine
	scheduler func(ctx context.Context, every time.Duration)
	ready     func(ctx context.Context) error
	sources   metrics.Sources
	audit     *api.AuditConfig
	// totals reads the refund totals kept with the journal (both journals
	// keep them).
	totals api.TotalsReader
	// started describes the backend in the start-up log and line.
	started  string
	logAttrs []any
	line     string
	// closeActors stops the engine or node: in-flight provider calls
	// finish while a node still owns its reservations. closeJournal runs
	// after the provider has closed too.
	closeActors, closeJournal func(ctx context.Context) error
}

// dispatch is webhook dispatch as a backend sets it up.
type dispatch struct {
	api     api.Webhooks // the routes
	lag     func(context.Context) ([]webhook.EndpointLag, error)
	run     func(context.Context) error
	stopped string // logged when run fails
}

// Run checks the configuration, opens the journal, starts the engine, the
// scheduler and the HTTP server, and returns once it is listening.
func (m *Main) Run(ctx context.Context) error {
	m.log = m.logger()
	m.log.Info("effective configuration", "config", m.effective)
	for _, n := range m.notes {
		m.log.Warn(n)
	}
	if m.runtimeNote != "" {
		m.log.Info("go runtime: " + m.runtimeNote)
	}
	pre, err := m.check()
	if err != nil {
		return err
	}
	// Series by merchant are bounded to the configured names.
	m.metrics = metrics.New(metrics.Options{Logger: m.log, Merchants: pre.merchants.names()})
	if err := m.start(ctx, pre); err != nil {
		m.Close()
		return err
	}
	return nil
}

func (m *Main) start(ctx context.Context, pre *checked) error {
	c := m.Config
	open := m.openSingle
	if c.Cluster.on() {
		open = m.openCluster
	}
	be, err := open(ctx, pre)
	m.be = be
	if err != nil {
		return err
	}
	if m.tally, err = tally.Open(ctx, be.db, be.owner, nil); err != nil {
		return err
	}
	// Before the provider: it needs our notification URL.
	if err := m.listen(); err != nil {
		return err
	}
	epochPrefixes := func(base string) ([]string, error) { return audit.EpochPrefixes(base, be.epoch) }
	if m.provider, err = m.wireProvider("http://"+m.ln.Addr().String(), pre.merchants, epochPrefixes); err != nil {
		return err
	}
	policy := pre.policy
	policy.RefundNoPrefix = be.prefix
	epochPrefix := func(base string) (string, error) { return audit.EpochPrefix(base, be.epoch) }
	perMerchant, err := pre.merchants.reg.Policies(pre.policy, epochPrefix)
	if err != nil {
		return fmt.Errorf("journal epoch %d: %w", be.epoch, err)
	}
	policies := actors.NewPolicySet(perMerchant)
	// Before the engine: nothing appends while the rows are written.
	if _, err := eventstore.BackfillLists(ctx, be.db, m.log); err != nil {
		return err
	}
	// A cluster journal migrated with records in it counts them once;
	// safe while other nodes append (BackfillCounters). The bbolt journal
	// is rebuilt by refundctl journal stats --build-counters instead.
	if cj, ok := be.db.(eventstore.CountersJournal); ok {
		if _, err := eventstore.BackfillCounters(ctx, cj, m.log); err != nil {
			return err
		}
	}
	bgCtx, stopBG := context.WithCancel(context.Background())
	m.stopBG = stopBG
	engPolicies := enginePolicies{base: policy, merchants: policies}
	if err := be.start(ctx, bgCtx, m.provider, engPolicies); err != nil {
		return err
	}
	m.bg.Go(func() { be.scheduler(bgCtx, c.SchedulerInterval) })

	opts := api.Options{Logger: m.log, Ready: be.ready, Metrics: m.metrics.Handler(), Observer: m.metrics,
		Timeline: eventstore.Reader{DB: be.db}, Search: eventstore.Reader{DB: be.db}, List: eventstore.Reader{DB: be.db}, Audit: be.audit, NoAccessLog: !c.AccessLog, Merchants: pre.merchants.names(),
		RateLimits: c.RateLimit.api(m.metrics), Tally: m.tally, Totals: be.totals, PolicyOf: engPolicies.of}
	if c.MetricsPublic {
		opts.PublicRoutes = map[string]bool{"GET /metrics": true}
	}
	if opts.Auth, err = m.localTokens(pre.tokens); err != nil {
		return err
	}
	if n := m.provider.notify; n != nil {
		q, err := quarantine.Open(filepath.Join(c.DataDir, "quarantine"), quarantine.Options{})
		if err != nil {
			return err
		}
		nc := *n
		nc.Quarantine = q
		opts.Notify = &nc
	}
	// The event feed reads the journal in global order (in a cluster, the
	// shared one: every node serves the same feed).
	m.feedDone = make(chan struct{})
	opts.Events = &api.EventsConfig{Feed: feed.New(be.db), Done: m.feedDone}
	sources := be.sources
	if accts := m.provider.accounts; accts != nil {
		// Accounts a reload adds are watched from then on.
		sources.AccountKeys = accts.keys
	} else if n := m.provider.notify; n != nil { // the sandbox's verifier holds a public key only: no series
		sources.AccountKeys = func() map[string][]wechatpay.KeyInfo {
			out := make(map[string][]wechatpay.KeyInfo, len(n.Accounts))
			for _, a := range n.Accounts {
				if a.Verifier != nil {
					out[a.MchID] = append(out[a.MchID], a.Verifier.Keys()...)
				}
			}
			return out
		}
	}
	opts.Credentials = m.provider.credentials
	if m.provider.reload != nil {
		opts.ReloadCredentials = func(ctx context.Context) error { return m.ReloadCredentials(ctx, "api") }
	}
	opts.EncryptSensitive = m.provider.encrypt
	if accts := m.provider.accounts; accts != nil {
		sources.CertificateDownloads = func() map[string]metrics.CertificateDownloads {
			certs := accts.certificates()
			out := make(map[string]metrics.CertificateDownloads, len(certs))
			for mchid, c := range certs {
				st := c.Status()
				out[mchid] = metrics.CertificateDownloads{Failures: st.Failures,
					ConsecutiveFailures: st.ConsecutiveFail, LastSuccess: st.LastSuccess}
			}
			return out
		}
	}
	if c.WebhooksFile != "" {
		d, err := be.webhooks(pre.endpoints, pre.merchants.names())
		if err != nil {
			return fmt.Errorf("--webhooks-file %s: %w", c.WebhooksFile, err)
		}
		opts.Events.Webhooks, sources.Webhooks = d.api, d.lag
		hctx, stop := context.WithCancel(context.Background())
		m.hooksStop, m.hooksDone = stop, make(chan struct{})
		go func() {
			defer close(m.hooksDone)
			if err := d.run(hctx); err != nil {
				m.log.Error(d.stopped, "component", "webhook", "err", err)
			}
		}()
	}
	srv := api.New(be.engine, opts)
	if m.provider.forMerchant != nil {
		m.provider.add = m.merchantAdder(merchantParts{pre.policy, epochPrefix, epochPrefixes, policies, srv})
	}
	if st := srv.NotifyStats(); st != nil {
		sources.NotificationsByMerchant = func() map[string]map[string]int64 {
			counts := st.ByMerchant()
			if c, ok := counts[api.Unattributed]; ok { // the metrics' "no merchant"
				delete(counts, api.Unattributed)
				counts[""] = c
			}
			return counts
		}
	}
	if err := m.metrics.Watch(sources); err != nil {
		return err
	}
	if err := m.serveHTTP(m.ln, srv); err != nil {
		return err
	}
	m.log.Info(be.started, append([]any{"listen", m.ln.Addr().String(), "provider", m.provider.describe, "refund_prefix", policy.RefundNoPrefix,
		"version", version.Get().Version}, be.logAttrs...)...)
	scheme := "http"
	if c.TLSCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(m.Stdout, "refundd listening on %s://%s%s\n", scheme, m.ln.Addr(), be.line)
	return nil
}

// listen opens the API's listener, once.
func (m *Main) listen() error {
	if m.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", m.Config.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", m.Config.Listen, err)
	}
	m.ln = ln
	return nil
}

// check reads and checks every file the configuration names (the signing
// key, tokens, webhook endpoints, the merchant's credentials) before
// anything is created on disk.
func (m *Main) check() (*checked, error) {
	c := &m.Config
	pre := &checked{}
	var err error
	if pre.policy, err = c.policy(); err != nil {
		return nil, err
	}
	pre.tokens = &auth.Tokens{}
	for _, f := range []struct {
		flag, path string
		parse      func([]byte) error
	}{
		{"--checkpoint-key", c.CheckpointKeyFile, func(b []byte) (err error) { pre.signKey, err = audit.ParseSigningKey(b); return err }},
		{"--tokens-file", c.TokensFile, func(b []byte) error { return auth.ParseFile(bytes.NewReader(b), pre.tokens) }},
		{"--webhooks-file", c.WebhooksFile, func(b []byte) (err error) {
			pre.endpoints, err = webhook.ParseEndpoints(bytes.NewReader(b), m.env, os.ReadFile)
			return err
		}},
	} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.flag, err) // the error names the file
		}
		if err := f.parse(b); err != nil {
			return nil, fmt.Errorf("%s %s: %w", f.flag, f.path, err)
		}
	}
	if v := m.env("REFUNDD_TOKENS"); v != "" {
		if err := auth.ParseEnv(v, pre.tokens); err != nil {
			return nil, fmt.Errorf("REFUNDD_TOKENS: %w", err)
		}
	}
	if pre.merchants, err = m.readMerchants(); err != nil {
		return nil, err
	}
	// A token may be limited only to merchants the API serves.
	if err := api.CheckScopes(pre.tokens, pre.merchants.names()); err != nil {
		return nil, fmt.Errorf("--tokens-file %s: %w", c.TokensFile, err)
	}
	if err := webhook.CheckMerchants(pre.endpoints, pre.merchants.names()); err != nil {
		return nil, fmt.Errorf("--webhooks-file %s: %w", c.WebhooksFile, err)
	}
	return pre, nil
}

// CheckConfig makes the checks Run makes before it creates anything
// (check) and writes the effective configuration to Stdout: flags as a
// configuration file, secrets and URL passwords masked, and which secret
// variables are set.
func (m *Main) CheckConfig() error {
	if _, err := m.effective.WriteTo(m.Stdout); err != nil {
		return err
	}
	for _, v := range []string{"REFUNDD_TOKENS", merchant.EnvAPIv3Key, merchant.EnvAPIv2Key} {
		if m.env(v) != "" {
			fmt.Fprintf(m.Stdout, "# %s = %s  # env\n", v, config.MaskedValue)
		}
	}
	if _, err := m.check(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(m.Stdout, "# configuration OK (provider %s)\n", m.Config.Provider)
	return err
}

// openSingle opens the single node's bbolt journal under --data.
func (m *Main) openSingle(ctx context.Context, pre *checked) (*backend, error) {
	c := m.Config
	path := filepath.Join(c.DataDir, "refundd.db")
	db, err := journal.Open(path, &journal.Options{Timeout: c.LockTimeout, Logger: m.log,
		SigningKey: pre.signKey, CheckpointEvery: c.CheckpointEvery, CheckpointInterval: c.CheckpointInterval,
		OnCommit: func(ci journal.CommitInfo) { m.metrics.ObserveCommit(ci.Batch, ci.Duration, ci.Sync, ci.Err) }})
	if err != nil {
		if errors.Is(err, journal.ErrLocked) {
			return nil, fmt.Errorf("%s is in use by another refundd process (only one may own a data directory): %w", path, err)
		}
		return nil, err
	}
	m.db = db
	be := &backend{db: db, owner: "single", started: "refundd started"}
	be.closeJournal = func(ctx context.Context) error {
		if _, err := db.WriteCheckpoint(ctx); err != nil {
			m.log.Warn("final checkpoint not written", "err", err)
		}
		return db.Close()
	}
	// A restored journal starts a new refund-number epoch (R, then RE1,
	// RE2, ...): no number handed out after the backup can be reissued.
	epoch, err := db.Epoch(ctx)
	if err != nil {
		return be, err
	}
	be.epoch = epoch
	if be.prefix, err = audit.EpochPrefix(c.RefundNoPrefix, epoch); err != nil {
		return be, fmt.Errorf("--refund-prefix in journal epoch %d: %w", epoch, err)
	}
	be.logAttrs = []any{"journal", path, "epoch", epoch}
	// A journal from a build before the counters keeps them from now on
	// but not for its past: journal stats folds until they are built.
	if counts, err := db.Counters(ctx); err != nil {
		return be, err
	} else if !counts.Complete {
		m.log.Warn("the journal's counters do not cover its history: journal stats replays it; stop refundd and run \"refundctl journal stats --build-counters --data DIR\" once", "journal", path)
	} else if counts.Generation < journal.CountersGeneration {
		m.log.Warn("the journal's counters predate the per-hour refund totals: GET /v1/totals refuses them; stop refundd and run \"refundctl journal stats --build-counters --data DIR\" once", "journal", path)
	}
	// A tiny fsynced write proves the journal's disk takes writes; /readyz
	// is open, so requests share one write per interval.
	be.ready = api.ShareProbe(func(ctx context.Context) error {
		return db.Put(ctx, "health/ready-probe", []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	}, m.readyEvery)
	// Refunds wait while a restored journal is reconciled with WeChat Pay.
	gate := &audit.RestoreGate{}
	be.audit = &api.AuditConfig{Journal: db, SpoolDir: c.BackupSpoolDir, RefundsPaused: gate.Paused}
	be.totals = eventstore.Totals{DB: db}
	be.start = func(ctx, bg context.Context, w *wiredProvider, policies enginePolicies) error {
		store := eventstore.New(db)
		engine, err := actors.New(m.engineConfig(store, w, policies))
		if err != nil {
			return err
		}
		be.closeActors = engine.Close
		if w.setEngine != nil {
			w.setEngine(engine)
		}
		be.engine, be.scheduler = engine, engine.RunScheduler
		if w.onRegister != nil {
			be.engine = api.AfterRegister(engine, w.onRegister)
		}
		be.sources = metrics.Sources{Active: engine.Active, Attention: engine.Attention, DueBefore: store.DueBefore}
		restored, err := gate.Check(ctx, db)
		if restored {
			opts := audit.RestoreCheckOptions{BasePrefixes: pre.merchants.basePrefixes(), By: actors.EnginePrincipal}
			m.bg.Go(func() { gate.Reconcile(bg, db, w.provider, engine, opts, m.log) })
		}
		return err
	}
	be.webhooks = func(eps []webhook.Endpoint, merchants []string) (dispatch, error) {
		hooks, err := webhook.New(webhook.Config{DB: db, Endpoints: eps, Merchants: merchants, Logger: m.log.With("component", "webhook"), Tally: m.tally})
		if err != nil {
			return dispatch{}, err
		}
		return dispatch{api: hooks, lag: hooks.Lag, run: hooks.Run, stopped: "webhook dispatcher stopped"}, nil
	}
	return be, nil
}

// ReloadCredentials rereads the merchants and credential files and swaps
// them in when all are good (SIGHUP, POST /v1/admin/credentials/reload);
// trigger is logged. Errors wrap merchant.ErrReloadInvalid or
// merchant.ErrRestartRequired.
func (m *Main) ReloadCredentials(ctx context.Context, trigger string) error {
	if m.provider == nil || m.provider.reload == nil {
		err := fmt.Errorf("%w: --provider %s reads no credential files", merchant.ErrRestartRequired, m.Config.Provider)
		m.log.Warn("credentials reload refused", "trigger", trigger, "err", err.Error())
		return err
	}
	return m.provider.reload(ctx, trigger)
}

// Addr is the address the server listens on.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// Close stops accepting requests, drains in-flight requests and provider
// calls, stops the actors and closes the journal.
func (m *Main) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), m.Config.ShutdownTimeout)
	defer cancel()
	var errs []error
	if m.server != nil {
		errs = append(errs, m.server.Shutdown(ctx))
	} else if m.ln != nil {
		m.ln.Close()
	}
	if m.pprof != nil {
		errs = append(errs, m.pprof.Close())
	}
	if m.hooksStop != nil {
		// It aborts in-flight deliveries and saves its cursor: before the
		// journal closes.
		m.hooksStop()
		<-m.hooksDone
	}
	if m.stopBG != nil {
		m.stopBG()
	}
	m.bg.Wait()
	if m.be != nil && m.be.closeActors != nil {
		errs = append(errs, m.be.closeActors(ctx))
	}
	if m.provider != nil && m.provider.close != nil {
		m.provider.close()
	}
	if m.tally != nil {
		// After every counted call has ended, before the journal closes.
		errs = append(errs, m.tally.Close())
	}
	if m.be != nil && m.be.closeJournal != nil {
		errs = append(errs, m.be.closeJournal(ctx))
	}
	return errors.Join(errs...)
}

// serveHTTP serves h on ln (HTTPS with --tls-cert) in the background, and
// the profiler when --pprof asks for it.
func (m *Main) serveHTTP(ln net.Listener, h http.Handler) error {
	c := m.Config
	m.server = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: 15 * time.Second, MaxHeaderBytes: 32 << 10,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
	}
	feedDone := m.feedDone
	m.server.RegisterOnShutdown(func() { close(feedDone) }) // long-polls answer at once
	srv := m.server
	serve := func() error { return srv.Serve(ln) }
	if c.TLSCert != "" {
		serve = func() error { return srv.ServeTLS(ln, c.TLSCert, c.TLSKey) }
	}
	m.serveBG("http server", serve)
	if c.Pprof != "" {
		return m.startPprof(c.Pprof)
	}
	return nil
}

// serveBG runs serve in the background until its server closes.
func (m *Main) serveBG(what string, serve func() error) {
	m.bg.Go(func() {
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error(what+" stopped", "err", err)
		}
	})
}
