package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/config"
	"github.com/refundd/refundd/internal/logs"
	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/internal/profiler"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/runtimetune"
	"github.com/refundd/refundd/internal/wechatpay"
)

var errHelp = errors.New("help requested")

// RuntimeConfig is Go's runtime settings (collector, Ps), applied by main (runtimetune.Apply).
type RuntimeConfig = runtimetune.Config

// Config is refundd's effective configuration.
type Config struct {
	Listen, DataDir, ConfigFile   string // ConfigFile: key = value lines beneath flags and REFUNDD_* variables
	TokensFile, WebhooksFile      string
	MerchantsFile                 string // accounts and merchants (internal/merchant); empty: the --wechatpay-* merchant
	TLSCert, TLSKey               string
	MetricsPublic                 bool // /metrics without a token
	AccessLog                     bool // a line per request (api.Options.NoAccessLog when off)
	LogFormat, LogLevel           string
	Pprof                         string // a loopback address serving net/http/pprof; empty: none
	Provider, RefundNoPrefix      string
	Wechatpay                     WechatpayConfig
	CertificateRefresh            time.Duration // --wechatpay-certificate-refresh
	APIv3KeyGrace                 time.Duration // --wechatpay-apiv3-key-grace
	SandboxDelay                  time.Duration
	SandboxTimeFactor             float64
	ReconcileAfter, StuckAfter    time.Duration
	ReconcileSchedule             string
	MaxAttempts                   int
	RetryBackoff, RetryBackoffMax time.Duration
	RefundSpacing, RefundWindow   time.Duration
	SettleHorizon                 time.Duration
	// Four-eyes approval of the default merchant (the merchants file sets
	// it per merchant): reservation.Policy's Approve* and ApprovalTimeout.
	ApproveAll, ApproveNonService     bool
	ApproveAbove, ApproveAbovePercent int
	ApprovalTimeout                   time.Duration
	CheckpointKeyFile, BackupSpoolDir string
	CheckpointEvery                   int
	CheckpointInterval                time.Duration
	Cluster                           ClusterConfig // cluster mode (cluster.go); zero: single node
	IdleTimeout, SchedulerInterval    time.Duration
	MaxActiveActors                   int           // actors.Config.MaxActive; 0: no bound
	ProviderTimeout                   time.Duration // bounds one call to WeChat Pay, its wait for pacing included
	ShutdownTimeout, LockTimeout      time.Duration
	ReadHeaderTimeout                 time.Duration
	Runtime                           RuntimeConfig // applied by main (it is process-wide), not by Run
	RateLimit                         RateLimitConfig
	// Pacing is the outbound rate to WeChat Pay per account (sandbox and
	// wechatpay providers; not the memory stand-in).
	Pacing merchant.Pacing
	// SandboxMaxCreates makes the built-in sandbox refuse creates beyond
	// this many per second, as WeChat Pay does; 0: no limit.
	SandboxMaxCreates int
}

// RateLimitConfig is the inbound rate limits (api.RateLimits): requests
// per second per token of each role, and notifications per second per
// source address. 0 disables one.
type RateLimitConfig struct {
	Service, Reader, Auditor, Operator, Approver float64
	Notify                                       float64
}

// NewMain returns a Main with the embedded defaults.
func NewMain() *Main {
	return &Main{
		Config: Config{
			Listen: "127.0.0.1:8080", DataDir: "data", RefundNoPrefix: reservation.DefaultRefundNoPrefix,
			IdleTimeout: 2 * time.Minute, MaxActiveActors: 20000, ProviderTimeout: 10 * time.Second, ReconcileAfter: 30 * time.Second, SchedulerInterval: 200 * time.Millisecond,
			ReconcileSchedule: "1m,5m,10m,30m,1h", StuckAfter: 24 * time.Hour, MaxAttempts: 5,
			RetryBackoff: time.Second, RetryBackoffMax: time.Minute, RefundSpacing: 60 * time.Second,
			RefundWindow: 365 * 24 * time.Hour, SettleHorizon: reservation.DefaultSettleHorizon, ReadHeaderTimeout: 5 * time.Second,
			ApprovalTimeout: reservation.DefaultApprovalTimeout,
			CheckpointEvery: 10000, CheckpointInterval: 10 * time.Minute,
			CertificateRefresh: wechatpay.DefaultCertificateRefresh, APIv3KeyGrace: defaultAPIv3KeyGrace,
			SandboxDelay: time.Second, SandboxTimeFactor: 1, ShutdownTimeout: 15 * time.Second, LockTimeout: time.Second,
			LogFormat: logs.FormatAuto, LogLevel: "info", Provider: providerSandbox, AccessLog: true,
			Cluster: ClusterConfig{Listen: "127.0.0.1:0", Name: "refundd"},
			Runtime: RuntimeConfig{Percent: 1600, MemoryLimit: "auto", MinProcs: 2},
			// One merchant account's worst retry storm (api.NotifyRateFor).
			RateLimit: RateLimitConfig{Notify: api.NotifyRateFor(1)},
			Pacing:    merchant.DefaultPacing,
		},
		Stdout: os.Stdout, Stderr: os.Stderr,
	}
}

// defaultAPIv3KeyGrace covers WeChat Pay's notification retries, which
// span about a day (15s, 15s, 30s, 3m, ... 6h): a notification built with
// the old APIv3 key before a change is retried within it, if at all.
const defaultAPIv3KeyGrace = 24 * time.Hour

// Sections of --help, in order.
const (
	secService   = "Service"
	secWechatpay = "WeChat Pay"
	secReliable  = "Reliability"
	secCluster   = "Cluster"
	secTuning    = "Tuning"
)

var sections = []string{secService, secWechatpay, secReliable, secCluster, secTuning}

// envOptions name every flag's variable: REFUNDD_ + the flag name in upper
// case with '_' (config.Options.EnvName), no exceptions.
var envOptions = config.Options{Reserved: []string{"config"}}

// deprecatedEnv maps old variable names to the ones that replaced them;
// the old ones keep working, with a warning at start.
var deprecatedEnv = map[string]string{
	"REFUNDD_WECHATPAY_PLATFORM_CERTS": "REFUNDD_WECHATPAY_PLATFORM_CERT", // broke the naming rule
}

// flagTable is config.Table under the short names defineFlags uses.
type flagTable struct{ *config.Table }

func (t flagTable) in(section string)             { t.In(section) }
func (t flagTable) def(p any, name, usage string) { t.Def(p, name, usage) }

// stringList is a repeatable flag.
type stringList = config.List

// defineFlags is the table of refundd's flags.
func (m *Main) defineFlags(t *flagTable, certs *stringList) {
	c := &m.Config
	t.in(secService)
	t.def(&c.Listen, "listen", "HTTP listen address; port 0 picks a free one")
	t.def(&c.DataDir, "data", "data directory holding the journal (refundd.db)")
	t.def(&c.ConfigFile, "config", "optional configuration file: key = value lines named like these flags; flags and REFUNDD_* variables win over it")
	t.def(&c.TokensFile, "tokens-file",
		"bearer tokens, one per line: role sha256-hex-of-token name [merchants=a,b] [approver] (roles: service, reader, auditor, operator, approver; the word approver lets an operator approve too); REFUNDD_TOKENS=role:token,... adds tokens for development")
	t.def(&c.WebhooksFile, "webhooks-file",
		"webhook endpoints, one per line: name url env:VAR|file:PATH [types=a,b] [start=now|beginning]; empty: none")
	t.def(&c.TLSCert, "tls-cert", "serve HTTPS with this certificate PEM (with --tls-key)")
	t.def(&c.TLSKey, "tls-key", "private key PEM for --tls-cert")
	t.def(&c.MetricsPublic, "metrics-public", "serve /metrics without a token")
	t.def(&c.AccessLog, "access-log", "log a line per request: method, route, status, duration, request id, principal")
	t.def(&c.LogFormat, "log-format", "auto (JSON unless stderr is a terminal), json or text")
	t.def(&c.LogLevel, "log-level", "debug, info, warn or error")
	rl := &c.RateLimit
	t.def(&rl.Service, "rate-limit-service", "requests per second per service token (bursts of two seconds' worth), answered 429 with Retry-After beyond; 0: unlimited")
	t.def(&rl.Reader, "rate-limit-reader", "requests per second per reader token; 0: unlimited")
	t.def(&rl.Auditor, "rate-limit-auditor", "requests per second per auditor token; 0: unlimited")
	t.def(&rl.Operator, "rate-limit-operator", "requests per second per operator token; 0: unlimited")
	t.def(&rl.Approver, "rate-limit-approver", "requests per second per approver token; 0: unlimited")
	t.def(&rl.Notify, "notify-rate-limit",
		"WeChat Pay notifications per second per source address (bursts of two seconds' worth); the default, 2400, is one account's worst retry storm (150 refunds/s x 16 deliveries): raise it by that per merchant account; 0: unlimited")
	t.def(&c.Pprof, "pprof", "serve Go's profiler (net/http/pprof) on this loopback address, e.g. 127.0.0.1:6060; empty: off")

	t.in(secWechatpay)
	t.def(&c.Provider, "provider",
		"sandbox (WeChat Pay protocol against a built-in sandbox), wechatpay (a merchant account; implied by --wechatpay-mchid) or memory")
	t.def(&c.RefundNoPrefix, "refund-prefix", "refund number prefix, 1..16 of [0-9A-Za-z]; environments sharing a merchant id must differ")
	t.def(&c.MerchantsFile, "merchants-file",
		"TOML file of WeChat Pay accounts and the merchants refunds are made for (docs/MERCHANTS.md); replaces the --wechatpay-* flags, which may not be given with it")
	w := &c.Wechatpay
	t.def(&w.BaseURL, "wechatpay-base-url", "WeChat Pay API base URL, e.g. https://api.mch.weixin.qq.com")
	t.def(&w.MchID, "wechatpay-mchid", "merchant id")
	t.def(&w.Serial, "wechatpay-serial", "merchant API certificate serial")
	t.def(&w.PrivateKeyFile, "wechatpay-private-key", "merchant private key PEM file (PKCS#8)")
	t.def(&w.APIv3KeyFile, "wechatpay-apiv3-key-file", "file holding the 32-byte APIv3 key (or set REFUNDD_WECHATPAY_APIV3_KEY)")
	t.def(&w.PublicKeyFile, "wechatpay-public-key", "WeChat Pay public key PEM file")
	t.def(&w.PublicKeyID, "wechatpay-public-key-id", "id of that key, PUB_KEY_ID_...")
	t.def(certs, "wechatpay-platform-cert", "platform certificate PEM file; repeatable")
	t.def(&w.DownloadCertificates, "wechatpay-download-certificates",
		"platform certificate mode: download the certificates from WeChat Pay (GET /v3/certificates) before ready, keep them in <data>/wechatpay-certificates and refresh them; a public key or certificate file is then optional")
	t.def(&c.CertificateRefresh, "wechatpay-certificate-refresh", "how often downloaded platform certificates are refreshed (also on an unknown serial, at most once a minute)")
	t.def(&c.APIv3KeyGrace, "wechatpay-apiv3-key-grace",
		"after a reload (SIGHUP, POST /v1/admin/credentials/reload) changes an APIv3 key, how long notifications are also tried with the previous key; 0: not at all")
	t.def(&w.APIv2KeyFile, "wechatpay-apiv2-key-file", "file holding the APIv2 key; enables the v2 notification endpoint (or set REFUNDD_WECHATPAY_APIV2_KEY)")
	t.def(&w.NotifyURL, "wechatpay-notify-url", "public notify_url sent with refunds (no query string)")
	t.def(&c.Pacing.Creates, "wechatpay-pace-creates",
		"refund creates sent per second per WeChat Pay account (a service provider's sub-merchants share it), spaced evenly, at most this many in any second at WeChat Pay; WeChat Pay's limit is 150; an account's pace_creates overrides it; 0: unpaced")
	t.def(&c.Pacing.FailedCreates, "wechatpay-pace-failed-creates",
		"refund creates WeChat Pay refuses, per second per account: each refused create delays the account's next creates by 1/this; WeChat Pay's limit is 6; pace_failed_creates overrides it; 0: unpaced")
	t.def(&c.Pacing.Queries, "wechatpay-pace-queries", "refund queries sent per second per WeChat Pay account, reconciliation included; WeChat Pay's limit is 300; pace_queries overrides it; 0: unpaced")
	t.def(&c.SandboxDelay, "sandbox-delay", "built-in sandbox and memory provider: time from acceptance to the refund's outcome")
	t.def(&c.SandboxTimeFactor, "sandbox-time-factor", "built-in sandbox: scales its notification retry schedule (15s, 15s, 30s, 3m, ...) and delay")
	t.def(&c.SandboxMaxCreates, "sandbox-max-creates", "built-in sandbox: refuse refund creates beyond this many per second with 429 FREQUENCY_LIMITED, as WeChat Pay does; 0: no limit")

	t.in(secReliable)
	t.def(&c.ReconcileAfter, "reconcile-after", "query the provider about a refund with no answer after this long")
	t.def(&c.ReconcileSchedule, "reconcile-schedule", "waits between reconciliation queries; the last repeats")
	t.def(&c.StuckAfter, "stuck-after", "flag a refund unresolved this long after it was requested")
	t.def(&c.MaxAttempts, "retry-max-attempts", "submissions of one refund with unknown answers before it is left to reconciliation")
	t.def(&c.RetryBackoff, "retry-backoff", "wait before the second attempt; doubles per attempt, with jitter")
	t.def(&c.RetryBackoffMax, "retry-backoff-max", "cap of the retry wait")
	t.def(&c.RefundSpacing, "refund-spacing", "minimum time between create requests of one order: first submissions, retries and resubmissions of all its refunds (WeChat Pay rule); 0 disables")
	t.def(&c.RefundWindow, "refund-window", "refuse refunds this long after payment")
	t.def(&c.SettleHorizon, "settle-horizon",
		"how long after an attempt with an unknown outcome WeChat Pay may still apply it: until then the refund is queried and its amount is not released")
	t.def(&c.ApproveAll, "approve-all", "hold every refund for four-eyes approval (PENDING_APPROVAL) until an approver other than its requester approves it")
	t.def(&c.ApproveAbove, "approve-above", "hold refunds above this amount, in fen, for approval; 0: no such rule")
	t.def(&c.ApproveAbovePercent, "approve-above-percent", "hold refunds above this share of the paid amount, 1..100 percent, for approval; 0: no such rule")
	t.def(&c.ApproveNonService, "approve-non-service", "hold refunds requested by anyone but a service token (an operator's, say) for approval")
	t.def(&c.ApprovalTimeout, "approval-timeout", "release a refund held for approval that nobody approved within this long")
	t.def(&c.CheckpointKeyFile, "checkpoint-key", "Ed25519 private key (PKCS#8 PEM, from refundctl keygen) signing journal checkpoints and /v1/audit/head; empty: unsigned")
	t.def(&c.CheckpointEvery, "checkpoint-every", "write a journal checkpoint every this many records")
	t.def(&c.CheckpointInterval, "checkpoint-interval", "write a journal checkpoint with the first append this long after the last")
	t.def(&c.BackupSpoolDir, "backup-spool-dir", "copy hot backups here before sending them, so a slow client cannot hold up appends; empty: stream")

	t.in(secCluster)
	clusterFlags(t, &c.Cluster)

	t.in(secTuning)
	t.def(&c.IdleTimeout, "idle-timeout", "passivate a reservation actor after this long without messages")
	t.def(&c.MaxActiveActors, "max-active-actors",
		"most reservation actors kept in memory: past it the least recently used idle ones are passivated (checked every second); 0: no bound but --idle-timeout")
	t.def(&c.SchedulerInterval, "scheduler-interval", "how often due timers are drained")
	t.def(&c.ProviderTimeout, "provider-timeout",
		"bounds one call to WeChat Pay, its wait for its account's pacing turn included: a call whose turn comes later is not sent (unknown outcome, retried at its due time); so a backlog of about pace x this is queued without deferring")
	t.def(&c.ShutdownTimeout, "shutdown-timeout", "how long shutdown waits for in-flight work")
	t.def(&c.LockTimeout, "lock-timeout", "how long to wait for the journal file lock")
	t.def(&c.ReadHeaderTimeout, "read-header-timeout", "drop connections that do not finish their headers in time (slow-header clients)")
	t.def(&c.Runtime.Percent, "gc-percent", "heap growth between garbage collections, as GOGC, which wins when set")
	t.def(&c.Runtime.MemoryLimit, "memory-limit",
		"soft limit of the Go heap: a size (1536MiB, 4GiB), auto (half of the cgroup's or the machine's memory) or off; GOMEMLIMIT wins when set")
	t.def(&c.Runtime.MinProcs, "min-procs",
		"least GOMAXPROCS when the CPU affinity allows fewer CPUs: a second P runs requests while the journal waits in fdatasync; 0: Go's choice; GOMAXPROCS wins when set")
}

// ParseFlags reads flags, falling back to REFUNDD_* variables from getenv
// and then to --config.
func (m *Main) ParseFlags(args []string, getenv func(string) string) error {
	getenv, m.notes = config.WithAliases(getenv, deprecatedEnv)
	m.getenv = getenv
	fs := flag.NewFlagSet("refundd", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	t := &flagTable{config.NewTable(fs, envOptions)}
	var certs stringList
	m.defineFlags(t, &certs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of refundd: refundd [check-config] [flags] | refundd --version\n\n"+
			"--version prints the version (from the build) and exits.\n"+
			"check-config checks the configuration and credentials, prints it with secrets masked, and exits.\n"+
			"Every flag may be set by its REFUNDD_* variable or in --config; flags win.\n")
		t.PrintSections(fs.Output(), sections)
	}
	copts := envOptions
	copts.Getenv = getenv
	if err := config.ApplyEnv(fs, copts, "wechatpay-platform-cert"); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return err
	}
	src, err := config.Load(fs, args, m.Config.ConfigFile, copts)
	if err != nil {
		return err
	}
	m.effective = config.Effective(fs, src, copts)
	w := &m.Config.Wechatpay
	w.PlatformCerts = certs
	providerSet := false
	fs.Visit(func(f *flag.Flag) { providerSet = providerSet || f.Name == "provider" })
	if !providerSet && w.MchID != "" {
		m.Config.Provider = providerWechatpay
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
	// Named by flag here: policy() would name the policy's field.
	if c.ApproveAbove < 0 || int64(c.ApproveAbove) > reservation.MaxAmount {
		return errors.New("--approve-above must be 0..1000000000000 fen")
	}
	if c.ApproveAbovePercent < 0 || c.ApproveAbovePercent > 100 {
		return errors.New("--approve-above-percent must be 0..100")
	}
	if _, err := c.policy(); err != nil {
		return err
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	if _, err := runtimetune.Limit(c.Runtime.MemoryLimit, func() (int64, error) { return 1 << 30, nil }); err != nil {
		return err
	}
	for name, d := range map[string]time.Duration{"--idle-timeout": c.IdleTimeout, "--reconcile-after": c.ReconcileAfter,
		"--scheduler-interval": c.SchedulerInterval, "--shutdown-timeout": c.ShutdownTimeout, "--lock-timeout": c.LockTimeout, "--stuck-after": c.StuckAfter,
		"--retry-backoff": c.RetryBackoff, "--read-header-timeout": c.ReadHeaderTimeout, "--checkpoint-interval": c.CheckpointInterval, "--retry-backoff-max": c.RetryBackoffMax, "--refund-window": c.RefundWindow,
		"--settle-horizon": c.SettleHorizon, "--provider-timeout": c.ProviderTimeout, "--approval-timeout": c.ApprovalTimeout} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive", name)
		}
	}
	for _, r := range []struct {
		bad bool
		msg string
	}{
		{c.Runtime.Percent < 25, "--gc-percent must be at least 25"},
		{c.Runtime.MinProcs < 0 || c.Runtime.MinProcs > 64, "--min-procs must be 0 to 64"},
		{c.MaxActiveActors < 0, "--max-active-actors must not be negative"},
		{c.CheckpointEvery < 1, "--checkpoint-every must be at least 1"},
		{c.MaxAttempts < 1, "--retry-max-attempts must be at least 1"},
		{c.RefundSpacing < 0, "--refund-spacing must not be negative"},
		{c.SandboxTimeFactor <= 0, "--sandbox-time-factor must be positive"},
		{c.CertificateRefresh < time.Minute, "--wechatpay-certificate-refresh must be at least 1m"},
		{c.APIv3KeyGrace < 0, "--wechatpay-apiv3-key-grace must not be negative"},
		{c.SandboxDelay < 0, "--sandbox-delay must not be negative"},
		{c.SandboxMaxCreates < 0, "--sandbox-max-creates must not be negative"},
		{c.Pacing.Validate() != nil, "--wechatpay-pace-creates, --wechatpay-pace-failed-creates and --wechatpay-pace-queries must be 0..1000000 per second"},
		{min(c.RateLimit.Service, c.RateLimit.Reader, c.RateLimit.Auditor, c.RateLimit.Operator, c.RateLimit.Approver, c.RateLimit.Notify) < 0,
			"--rate-limit-* and --notify-rate-limit must not be negative"},
		{(c.TLSCert == "") != (c.TLSKey == ""), "--tls-cert and --tls-key go together"},
		{!slices.Contains([]string{providerSandbox, providerWechatpay, providerMemory}, c.Provider), "--provider must be sandbox, wechatpay or memory"},
		{!slices.Contains([]string{logs.FormatAuto, logs.FormatText, logs.FormatJSON}, c.LogFormat), "--log-format must be auto, text or json"},
	} {
		if r.bad {
			return errors.New(r.msg)
		}
	}
	if c.Pprof != "" {
		if err := profiler.CheckLoopback(c.Pprof); err != nil {
			return fmt.Errorf("--pprof: %w", err)
		}
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	return nil
}

// api is the limits as the API takes them, refusals counted by obs.
func (r RateLimitConfig) api(obs api.RateLimitObserver) *api.RateLimits {
	return &api.RateLimits{Notify: r.Notify, Observer: obs, PerRole: map[auth.Role]float64{
		auth.RoleService: r.Service, auth.RoleReader: r.Reader, auth.RoleAuditor: r.Auditor, auth.RoleOperator: r.Operator,
		auth.RoleApprover: r.Approver}}
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
		ApproveAll:    c.ApproveAll, ApproveAbove: int64(c.ApproveAbove), ApproveAbovePercent: c.ApproveAbovePercent,
		ApproveNonService: c.ApproveNonService, ApprovalTimeout: c.ApprovalTimeout,
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
