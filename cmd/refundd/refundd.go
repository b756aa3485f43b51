package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/config"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/logs"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/quarantine"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal"
)

var errHelp = errors.New("help requested")

// Config is refundd's effective configuration.
type Config struct {
	Listen             string
	DataDir            string
	RefundNoPrefix     string
	IdleTimeout        time.Duration
	ReconcileAfter     time.Duration
	ReconcileSchedule  string
	StuckAfter         time.Duration
	MaxAttempts        int
	RetryBackoff       time.Duration
	RetryBackoffMax    time.Duration
	RefundSpacing      time.Duration
	RefundWindow       time.Duration
	SettleHorizon      time.Duration
	SchedulerInterval  time.Duration
	SandboxDelay       time.Duration
	SandboxTimeFactor  float64
	ShutdownTimeout    time.Duration
	LockTimeout        time.Duration
	LogFormat          string
	ConfigFile         string // optional key = value file beneath flags and REFUNDD_* variables
	MetricsPublic      bool   // /metrics without a token
	AccessLog          bool   // a line per request (api.Options.NoAccessLog when off)
	LogLevel           string
	Provider           string
	Wechatpay          WechatpayConfig
	WebhooksFile       string
	TokensFile         string
	CheckpointKeyFile  string
	CheckpointEvery    int
	CheckpointInterval time.Duration
	BackupSpoolDir     string
	ReadHeaderTimeout  time.Duration
	TLSCert, TLSKey    string
	Cluster            ClusterConfig // cluster mode (cluster.go); zero: single node
	// Pprof is a loopback address serving net/http/pprof; empty (the
	// default) serves nothing.
	Pprof string
	// GC is applied by main (it is process-wide), not by Run.
	GC GCConfig
}

// Main is the program, split so tests can run it in-process on :0 and a temp
// directory (the WTF Dial layout).
type Main struct {
	Config Config
	Stdout io.Writer
	Stderr io.Writer

	log       *slog.Logger
	db        *journal.DB
	engine    *actors.Engine
	server    *http.Server
	ln        net.Listener
	pprof     *http.Server
	stopSch   context.CancelFunc
	provider  *wiredProvider
	hooksStop context.CancelFunc
	hooksDone chan struct{}
	feedDone  chan struct{}
	getenv    func(string) string
	// refundsPaused holds why refund requests are refused (a restored
	// journal being reconciled); nil when they are taken.
	refundsPaused atomic.Pointer[string]
	stopReconcile context.CancelFunc
	metrics       *metrics.Metrics
	effective     config.Settings // the effective configuration, secrets masked, logged at start
	bg            sync.WaitGroup
	cl            *clusterMode // cluster mode only
	// runtimeNote says how main set Go's collector (gc.go); logged at start.
	runtimeNote string
	// readyEvery is how often /readyz's probe writes at most; zero means
	// a second (tests set it).
	readyEvery time.Duration
}

// NewMain returns a Main with the embedded defaults.
func NewMain() *Main {
	return &Main{
		Config: Config{
			Listen: "127.0.0.1:8080", DataDir: "data", RefundNoPrefix: reservation.DefaultRefundNoPrefix,
			IdleTimeout: 2 * time.Minute, ReconcileAfter: 30 * time.Second, SchedulerInterval: 200 * time.Millisecond,
			ReconcileSchedule: "1m,5m,10m,30m,1h", StuckAfter: 24 * time.Hour, MaxAttempts: 5,
			RetryBackoff: time.Second, RetryBackoffMax: time.Minute, RefundSpacing: 60 * time.Second,
			RefundWindow: 365 * 24 * time.Hour, SettleHorizon: reservation.DefaultSettleHorizon, ReadHeaderTimeout: 5 * time.Second,
			CheckpointEvery: 10000, CheckpointInterval: 10 * time.Minute,
			SandboxDelay: time.Second, ShutdownTimeout: 15 * time.Second, LockTimeout: time.Second,
			LogFormat: logs.FormatAuto, LogLevel: "info", Provider: providerSandbox, AccessLog: true,
			Cluster: ClusterConfig{Listen: "127.0.0.1:0", Name: "refundd"},
			GC:      GCConfig{Percent: 400, MemoryLimit: "auto"},
		},
		Stdout: os.Stdout, Stderr: os.Stderr,
	}
}

// ParseFlags reads flags, falling back to REFUNDD_* variables from getenv.
func (m *Main) ParseFlags(args []string, getenv func(string) string) error {
	m.getenv = getenv
	fs := flag.NewFlagSet("refundd", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	c := &m.Config
	str := func(p *string, name, env, usage string) {
		if v := getenv(env); v != "" {
			*p = v
		}
		fs.StringVar(p, name, *p, usage+" (env "+env+")")
	}
	var envErrs []error
	dur := func(p *time.Duration, name, env, usage string) {
		fs.DurationVar(p, name, *p, usage+" (env "+env+")")
		if v := getenv(env); v != "" {
			if err := fs.Set(name, v); err != nil {
				envErrs = append(envErrs, fmt.Errorf("%s=%q: not a duration", env, v))
			}
		}
	}
	// fromEnv applies a REFUNDD_* variable to an already defined flag.
	fromEnv := func(name, env, kind string) {
		if v := getenv(env); v != "" {
			if err := fs.Set(name, v); err != nil {
				envErrs = append(envErrs, fmt.Errorf("%s=%q: not %s", env, v, kind))
			}
		}
	}
	str(&c.Listen, "listen", "REFUNDD_LISTEN", "HTTP listen address; port 0 picks a free one")
	str(&c.DataDir, "data", "REFUNDD_DATA", "data directory holding the journal (refundd.db)")
	str(&c.RefundNoPrefix, "refund-prefix", "REFUNDD_REFUND_PREFIX",
		"refund number prefix, 1..16 of [0-9A-Za-z]; environments sharing a merchant id must differ")
	dur(&c.IdleTimeout, "idle-timeout", "REFUNDD_IDLE_TIMEOUT", "passivate a reservation actor after this long without messages")
	dur(&c.ReconcileAfter, "reconcile-after", "REFUNDD_RECONCILE_AFTER", "query the provider about a refund with no answer after this long")
	str(&c.ReconcileSchedule, "reconcile-schedule", "REFUNDD_RECONCILE_SCHEDULE", "waits between reconciliation queries; the last repeats")
	dur(&c.StuckAfter, "stuck-after", "REFUNDD_STUCK_AFTER", "flag a refund unresolved this long after it was requested")
	fs.IntVar(&c.MaxAttempts, "retry-max-attempts", c.MaxAttempts, "submissions of one refund with unknown answers before it is left to reconciliation (env REFUNDD_RETRY_MAX_ATTEMPTS)")
	fromEnv("retry-max-attempts", "REFUNDD_RETRY_MAX_ATTEMPTS", "a number")
	dur(&c.RetryBackoff, "retry-backoff", "REFUNDD_RETRY_BACKOFF", "wait before the second attempt; doubles per attempt, with jitter")
	dur(&c.RetryBackoffMax, "retry-backoff-max", "REFUNDD_RETRY_BACKOFF_MAX", "cap of the retry wait")
	dur(&c.RefundSpacing, "refund-spacing", "REFUNDD_REFUND_SPACING", "minimum time between create requests of one order: first submissions, retries and resubmissions of all its refunds (WeChat Pay rule); 0 disables")
	dur(&c.RefundWindow, "refund-window", "REFUNDD_REFUND_WINDOW", "refuse refunds this long after payment")
	dur(&c.SettleHorizon, "settle-horizon", "REFUNDD_SETTLE_HORIZON",
		"how long after an attempt with an unknown outcome WeChat Pay may still apply it: until then the refund is queried and its amount is not released")
	dur(&c.SchedulerInterval, "scheduler-interval", "REFUNDD_SCHEDULER_INTERVAL", "how often due timers are drained")
	dur(&c.SandboxDelay, "sandbox-delay", "REFUNDD_SANDBOX_DELAY", "built-in sandbox: time from acceptance to the refund's outcome")
	fs.Float64Var(&c.SandboxTimeFactor, "sandbox-time-factor", 1, "built-in sandbox: scales its notification retry schedule (15s, 15s, 30s, 3m, ...) and delay (env REFUNDD_SANDBOX_TIME_FACTOR)")
	fromEnv("sandbox-time-factor", "REFUNDD_SANDBOX_TIME_FACTOR", "a number")
	dur(&c.ShutdownTimeout, "shutdown-timeout", "REFUNDD_SHUTDOWN_TIMEOUT", "how long shutdown waits for in-flight work")
	dur(&c.LockTimeout, "lock-timeout", "REFUNDD_LOCK_TIMEOUT", "how long to wait for the journal file lock")
	str(&c.Provider, "provider", "REFUNDD_PROVIDER",
		"sandbox (WeChat Pay protocol against a built-in sandbox), wechatpay (a merchant account; implied by --wechatpay-mchid) or memory")
	w := &c.Wechatpay
	str(&w.BaseURL, "wechatpay-base-url", "REFUNDD_WECHATPAY_BASE_URL", "WeChat Pay API base URL, e.g. https://api.mch.weixin.qq.com")
	str(&w.MchID, "wechatpay-mchid", "REFUNDD_WECHATPAY_MCHID", "merchant id")
	str(&w.Serial, "wechatpay-serial", "REFUNDD_WECHATPAY_SERIAL", "merchant API certificate serial")
	str(&w.PrivateKeyFile, "wechatpay-private-key", "REFUNDD_WECHATPAY_PRIVATE_KEY", "merchant private key PEM file (PKCS#8)")
	str(&w.APIv3KeyFile, "wechatpay-apiv3-key-file", "REFUNDD_WECHATPAY_APIV3_KEY_FILE", "file holding the 32-byte APIv3 key (or set REFUNDD_WECHATPAY_APIV3_KEY)")
	str(&w.PublicKeyFile, "wechatpay-public-key", "REFUNDD_WECHATPAY_PUBLIC_KEY", "WeChat Pay public key PEM file")
	str(&w.PublicKeyID, "wechatpay-public-key-id", "REFUNDD_WECHATPAY_PUBLIC_KEY_ID", "id of that key, PUB_KEY_ID_...")
	var certs stringList
	if v := getenv("REFUNDD_WECHATPAY_PLATFORM_CERTS"); v != "" {
		certs = strings.Split(v, ",")
	}
	fs.Var(&certs, "wechatpay-platform-cert", "platform certificate PEM file; repeatable (env REFUNDD_WECHATPAY_PLATFORM_CERTS, comma-separated)")
	str(&w.APIv2KeyFile, "wechatpay-apiv2-key-file", "REFUNDD_WECHATPAY_APIV2_KEY_FILE", "file holding the APIv2 key; enables the v2 notification endpoint (or set REFUNDD_WECHATPAY_APIV2_KEY)")
	str(&w.NotifyURL, "wechatpay-notify-url", "REFUNDD_WECHATPAY_NOTIFY_URL", "public notify_url sent with refunds (no query string)")
	w.apiV3Key = []byte(getenv("REFUNDD_WECHATPAY_APIV3_KEY"))
	w.apiV2Key = []byte(getenv("REFUNDD_WECHATPAY_APIV2_KEY"))
	str(&c.WebhooksFile, "webhooks-file", "REFUNDD_WEBHOOKS_FILE",
		"webhook endpoints, one per line: name url env:VAR|file:PATH [types=a,b] [start=now|beginning]; empty: none")
	str(&c.TokensFile, "tokens-file", "REFUNDD_TOKENS_FILE",
		"bearer tokens, one per line: role sha256-hex-of-token name (roles: service, reader, auditor, operator); REFUNDD_TOKENS=role:token,... adds tokens for development")
	dur(&c.ReadHeaderTimeout, "read-header-timeout", "REFUNDD_READ_HEADER_TIMEOUT", "drop connections that do not finish their headers in time (slow-header clients)")
	str(&c.CheckpointKeyFile, "checkpoint-key", "REFUNDD_CHECKPOINT_KEY", "Ed25519 private key (PKCS#8 PEM, from refundctl keygen) signing journal checkpoints and /v1/audit/head; empty: unsigned")
	fs.IntVar(&c.CheckpointEvery, "checkpoint-every", c.CheckpointEvery, "write a journal checkpoint every this many records (env REFUNDD_CHECKPOINT_EVERY)")
	fromEnv("checkpoint-every", "REFUNDD_CHECKPOINT_EVERY", "a number")
	dur(&c.CheckpointInterval, "checkpoint-interval", "REFUNDD_CHECKPOINT_INTERVAL", "write a journal checkpoint with the first append this long after the last")
	str(&c.BackupSpoolDir, "backup-spool-dir", "REFUNDD_BACKUP_SPOOL_DIR", "copy hot backups here before sending them, so a slow client cannot hold up appends; empty: stream")
	str(&c.TLSCert, "tls-cert", "REFUNDD_TLS_CERT", "serve HTTPS with this certificate PEM (with --tls-key)")
	str(&c.TLSKey, "tls-key", "REFUNDD_TLS_KEY", "private key PEM for --tls-cert")
	str(&c.LogFormat, "log-format", "REFUNDD_LOG_FORMAT", "auto (JSON unless stderr is a terminal), json or text")
	str(&c.ConfigFile, "config", "REFUNDD_CONFIG",
		"optional configuration file: key = value lines named like these flags; flags and REFUNDD_* variables win over it")
	fs.BoolVar(&c.MetricsPublic, "metrics-public", false, "serve /metrics without a token (env REFUNDD_METRICS_PUBLIC)")
	fromEnv("metrics-public", "REFUNDD_METRICS_PUBLIC", "a boolean")
	fs.BoolVar(&c.AccessLog, "access-log", c.AccessLog, "log a line per request: method, route, status, duration, request id, principal (env REFUNDD_ACCESS_LOG)")
	fromEnv("access-log", "REFUNDD_ACCESS_LOG", "a boolean")
	str(&c.LogLevel, "log-level", "REFUNDD_LOG_LEVEL", "debug, info, warn or error")
	clusterFlags(fs, &c.Cluster, str)
	str(&c.Pprof, "pprof", "REFUNDD_PPROF", "serve Go's profiler (net/http/pprof) on this loopback address, e.g. 127.0.0.1:6060; empty: off")
	fs.IntVar(&c.GC.Percent, "gc-percent", c.GC.Percent, "heap growth between garbage collections, as GOGC, which wins when set (env REFUNDD_GC_PERCENT)")
	fromEnv("gc-percent", "REFUNDD_GC_PERCENT", "a number")
	str(&c.GC.MemoryLimit, "memory-limit", "REFUNDD_MEMORY_LIMIT",
		"soft limit of the Go heap: a size (1536MiB, 4GiB), auto (half of the cgroup's or the machine's memory) or off; GOMEMLIMIT wins when set")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return err
	}
	if err := errors.Join(envErrs...); err != nil {
		return err
	}
	copts := config.Options{Getenv: getenv, Reserved: []string{"config"},
		EnvNames: map[string]string{"wechatpay-platform-cert": "REFUNDD_WECHATPAY_PLATFORM_CERTS"}}
	src, err := config.Load(fs, args, c.ConfigFile, copts)
	if err != nil {
		return err
	}
	m.effective = config.Effective(fs, src, copts)
	w.PlatformCerts = certs
	providerSet := false
	fs.Visit(func(f *flag.Flag) { providerSet = providerSet || f.Name == "provider" })
	if !providerSet && getenv("REFUNDD_PROVIDER") == "" && w.MchID != "" {
		c.Provider = providerWechatpay
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return m.Config.validate()
}

func (c *Config) validate() error {
	if err := (reservation.Policy{RefundNoPrefix: c.RefundNoPrefix}).Validate(); err != nil {
		return fmt.Errorf("--refund-prefix: %w", err)
	}
	if _, err := c.policy(); err != nil {
		return err
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	if c.GC.Percent < 25 {
		return errors.New("--gc-percent must be at least 25")
	}
	if _, err := memoryLimit(c.GC.MemoryLimit, func() (int64, error) { return 1 << 30, nil }); err != nil {
		return err
	}
	if c.CheckpointEvery < 1 {
		return errors.New("--checkpoint-every must be at least 1")
	}
	if c.MaxAttempts < 1 {
		return errors.New("--retry-max-attempts must be at least 1")
	}
	if c.RefundSpacing < 0 {
		return errors.New("--refund-spacing must not be negative")
	}
	for name, d := range map[string]time.Duration{"--idle-timeout": c.IdleTimeout, "--reconcile-after": c.ReconcileAfter,
		"--scheduler-interval": c.SchedulerInterval, "--shutdown-timeout": c.ShutdownTimeout, "--lock-timeout": c.LockTimeout, "--stuck-after": c.StuckAfter,
		"--retry-backoff": c.RetryBackoff, "--read-header-timeout": c.ReadHeaderTimeout, "--checkpoint-interval": c.CheckpointInterval, "--retry-backoff-max": c.RetryBackoffMax, "--refund-window": c.RefundWindow,
		"--settle-horizon": c.SettleHorizon} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive", name)
		}
	}
	if c.SandboxTimeFactor <= 0 {
		return errors.New("--sandbox-time-factor must be positive")
	}
	if c.SandboxDelay < 0 {
		return errors.New("--sandbox-delay must not be negative")
	}
	if c.Pprof != "" {
		if err := loopbackAddr(c.Pprof); err != nil {
			return fmt.Errorf("--pprof: %w", err)
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	switch c.Provider {
	case providerSandbox, providerWechatpay, providerMemory:
	default:
		return errors.New("--provider must be sandbox, wechatpay or memory")
	}
	if c.LogFormat != logs.FormatAuto && c.LogFormat != logs.FormatText && c.LogFormat != logs.FormatJSON {
		return errors.New("--log-format must be auto, text or json")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	return nil
}

// policy turns the settings into the state machine's policy.
func (c *Config) policy() (reservation.Policy, error) {
	var schedule []time.Duration
	for _, part := range strings.Split(c.ReconcileSchedule, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			return reservation.Policy{}, fmt.Errorf("--reconcile-schedule: %q is not a positive duration", part)
		}
		schedule = append(schedule, d)
	}
	p := reservation.Policy{
		RefundNoPrefix: c.RefundNoPrefix, RecheckAfter: c.ReconcileAfter, QueryBackoff: schedule,
		StuckAfter: c.StuckAfter, MaxAttempts: c.MaxAttempts, RetryBackoff: c.RetryBackoff,
		RetryBackoffMax: c.RetryBackoffMax, RefundSpacing: c.RefundSpacing, RefundWindow: c.RefundWindow,
		SettleHorizon: c.SettleHorizon,
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("policy: %w", err)
	}
	return p, nil
}

func (m *Main) logger() *slog.Logger {
	log, err := logs.New(m.Stderr, m.Config.LogFormat, m.Config.LogLevel)
	if err != nil { // validate() has checked both
		return slog.New(logs.NewHandler(slog.NewTextHandler(m.Stderr, nil)))
	}
	return log
}

// Run opens the journal, starts the engine, the scheduler and the HTTP
// server, and returns once it is listening.
func (m *Main) Run(ctx context.Context) error {
	c := m.Config
	m.log = m.logger()
	m.log.Info("effective configuration", "config", m.effective)
	if m.runtimeNote != "" {
		m.log.Info("go runtime: " + m.runtimeNote)
	}
	m.metrics = metrics.New(metrics.Options{Logger: m.log})
	if c.Cluster.on() {
		return m.runCluster(ctx)
	}
	path := filepath.Join(c.DataDir, "refundd.db")
	var signKey ed25519.PrivateKey
	if c.CheckpointKeyFile != "" {
		b, err := os.ReadFile(c.CheckpointKeyFile)
		if err != nil {
			return fmt.Errorf("--checkpoint-key: %w", err)
		}
		if signKey, err = audit.ParseSigningKey(b); err != nil {
			return fmt.Errorf("--checkpoint-key %s: %w", c.CheckpointKeyFile, err)
		}
	}
	db, err := journal.Open(path, &journal.Options{Timeout: c.LockTimeout, Logger: m.log,
		SigningKey: signKey, CheckpointEvery: c.CheckpointEvery, CheckpointInterval: c.CheckpointInterval,
		OnCommit: func(ci journal.CommitInfo) { m.metrics.ObserveCommit(ci.Batch, ci.Duration, ci.Sync, ci.Err) }})
	if err != nil {
		if errors.Is(err, journal.ErrLocked) {
			return fmt.Errorf("%s is in use by another refundd process (only one may own a data directory): %w", path, err)
		}
		return err
	}
	m.db = db

	policy, err := c.policy()
	if err != nil {
		m.Close()
		return err
	}
	// A restored journal starts a new refund-number epoch (R, then RE1,
	// RE2, ...): no number handed out after the backup can be reissued.
	epoch, err := db.Epoch(ctx)
	if err != nil {
		m.Close()
		return err
	}
	if policy.RefundNoPrefix, err = audit.EpochPrefix(c.RefundNoPrefix, epoch); err != nil {
		m.Close()
		return fmt.Errorf("--refund-prefix in journal epoch %d: %w", epoch, err)
	}
	// Listen first: the provider needs our notification URL.
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		m.Close()
		return fmt.Errorf("listen %s: %w", c.Listen, err)
	}
	m.ln = ln
	wired, err := m.wireProvider("http://" + ln.Addr().String())
	if err != nil {
		m.Close()
		return err
	}
	m.provider = wired
	store := eventstore.New(db)
	engine, err := actors.New(actors.Config{
		Store: m.metrics.Store(store), Provider: m.metrics.Provider(wired.provider), Encode: wired.encode, Logger: m.log,
		Merchant:    wired.merchant(),
		Policy:      policy,
		IdleTimeout: c.IdleTimeout,
	})
	if err != nil {
		m.Close()
		return err
	}
	m.engine = engine
	if wired.setEngine != nil {
		wired.setEngine(engine)
	}

	schCtx, stopSch := context.WithCancel(context.Background())
	m.stopSch = stopSch
	m.bg.Add(1)
	go func() { defer m.bg.Done(); engine.RunScheduler(schCtx, c.SchedulerInterval) }()

	opts := api.Options{Logger: m.log, Ready: api.ShareProbe(func(ctx context.Context) error {
		// A tiny fsynced write proves the journal's disk takes writes;
		// /readyz is open, so requests share one write per interval.
		return db.Put(ctx, "health/ready-probe", []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	}, m.readyEvery), Metrics: m.metrics.Handler(), Observer: m.metrics, Timeline: store}
	opts.NoAccessLog = !c.AccessLog
	if c.MetricsPublic {
		opts.PublicRoutes = map[string]bool{"GET /metrics": true}
	}
	pending, err := db.ReconcileRequired(ctx)
	if err != nil {
		m.Close()
		return err
	}
	if pending != nil {
		reason := fmt.Sprintf("refunds are paused: the journal was restored from a backup (epoch %d) and is being reconciled with WeChat Pay", pending.Epoch)
		m.refundsPaused.Store(&reason)
		rctx, stop := context.WithCancel(context.Background())
		m.stopReconcile = stop
		m.bg.Add(1)
		go func() {
			defer m.bg.Done()
			audit.ResumeAfterRestore(rctx, db, wired.provider, engine, audit.RestoreCheckOptions{BasePrefix: c.RefundNoPrefix, By: actors.EnginePrincipal},
				m.log, func() { m.refundsPaused.Store(nil) })
		}()
	}
	opts.Audit = &api.AuditConfig{Journal: db, SpoolDir: c.BackupSpoolDir, RefundsPaused: func() string {
		if p := m.refundsPaused.Load(); p != nil {
			return *p
		}
		return ""
	}}
	tokens, err := m.loadTokens()
	if err != nil {
		m.Close()
		return err
	}
	opts.Auth = tokens
	hooks, err := m.startWebhooks(db)
	if err != nil {
		m.Close()
		return err
	}
	m.feedDone = make(chan struct{})
	opts.Events = &api.EventsConfig{Feed: feed.New(db), Done: m.feedDone}
	if hooks != nil {
		opts.Events.Webhooks = hooks // only when set: a nil *Dispatcher in an interface is not nil
	}
	if wired.notify != nil {
		q, err := quarantine.Open(filepath.Join(c.DataDir, "quarantine"), quarantine.Options{})
		if err != nil {
			m.Close()
			return err
		}
		n := *wired.notify
		n.Quarantine = q
		opts.Notify = &n
	}
	var handlerEngine api.Engine = engine
	if wired.onRegister != nil {
		handlerEngine = registerHook{Engine: engine, after: wired.onRegister}
	}
	srv := api.New(handlerEngine, opts)
	sources := metrics.Sources{Active: engine.Active, Attention: engine.Attention, DueBefore: store.DueBefore}
	if st := srv.NotifyStats(); st != nil {
		sources.Notifications = st.Snapshot
	}
	if hooks != nil {
		sources.Webhooks = hooks.Lag
	}
	if err := m.metrics.Watch(sources); err != nil {
		m.Close()
		return err
	}
	if err := m.serveHTTP(ln, srv); err != nil {
		m.Close()
		return err
	}
	m.log.Info("refundd started", "listen", ln.Addr().String(), "journal", path,
		"provider", wired.describe, "refund_prefix", policy.RefundNoPrefix, "epoch", epoch)
	scheme := "http"
	if c.TLSCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(m.Stdout, "refundd listening on %s://%s\n", scheme, ln.Addr())
	return nil
}

// startWebhooks starts the webhook dispatcher when endpoints are configured.
func (m *Main) startWebhooks(db *journal.DB) (*webhook.Dispatcher, error) {
	c := m.Config
	if c.WebhooksFile == "" {
		return nil, nil
	}
	f, err := os.Open(c.WebhooksFile)
	if err != nil {
		return nil, fmt.Errorf("--webhooks-file: %w", err)
	}
	getenv := m.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	eps, err := webhook.ParseEndpoints(f, getenv, os.ReadFile)
	f.Close()
	var hooks *webhook.Dispatcher
	if err == nil {
		hooks, err = webhook.New(webhook.Config{DB: db, Endpoints: eps, Logger: m.log.With("component", "webhook")})
	}
	if err != nil {
		return nil, fmt.Errorf("--webhooks-file %s: %w", c.WebhooksFile, err)
	}
	hctx, stop := context.WithCancel(context.Background())
	m.hooksStop, m.hooksDone = stop, make(chan struct{})
	go func() {
		defer close(m.hooksDone)
		if err := hooks.Run(hctx); err != nil {
			m.log.Error("webhook dispatcher stopped", "err", err)
		}
	}()
	return hooks, nil
}

// Addr is the address the server listens on.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// registerHook runs a function after each registration that was journaled;
// every other call goes to the engine unchanged.
type registerHook struct {
	api.Engine
	after func(reservation.Register)
}

// Both single-node handles the API may be given.
var (
	_ api.Engine = (*actors.Engine)(nil)
	_ api.Engine = registerHook{}
)

func (h registerHook) Execute(ctx context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error) {
	st, events, err := h.Engine.Execute(ctx, id, by, cmd)
	if reg, ok := cmd.(reservation.Register); ok && err == nil {
		h.after(reg) // also for a replayed registration: the hook is idempotent
	}
	return st, events, err
}

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
	if m.stopSch != nil {
		m.stopSch()
	}
	if m.stopReconcile != nil {
		m.stopReconcile()
	}
	m.bg.Wait()
	if m.engine != nil {
		errs = append(errs, m.engine.Close(ctx))
	}
	errs = append(errs, m.cl.closeNode(ctx))
	if m.provider != nil {
		m.provider.close()
	}
	if m.db != nil {
		if _, err := m.db.WriteCheckpoint(ctx); err != nil {
			m.log.Warn("final checkpoint not written", "err", err)
		}
		errs = append(errs, m.db.Close())
	}
	errs = append(errs, m.cl.closeJournal())
	return errors.Join(errs...)
}

// serveHTTP serves h on ln (HTTPS with --tls-cert) in the background, and
// the profiler when --pprof asks for it. Both modes (single node and
// cluster) serve through it.
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
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		serve := func() error { return m.server.Serve(ln) }
		if c.TLSCert != "" {
			serve = func() error { return m.server.ServeTLS(ln, c.TLSCert, c.TLSKey) }
		}
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("http server stopped", "err", err)
		}
	}()
	if c.Pprof != "" {
		return m.startPprof(c.Pprof)
	}
	return nil
}
