package main

import (
	"context"
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
	"time"

	"refundd/actors"
	"refundd/api"
	"refundd/internal/eventstore"
	"refundd/internal/reservation"
	"refundd/internal/simprovider"
	"refundd/journal"
)

var errHelp = errors.New("help requested")

// Config is refundd's effective configuration.
type Config struct {
	Listen            string
	DataDir           string
	RefundNoPrefix    string
	IdleTimeout       time.Duration
	RecheckAfter      time.Duration
	SchedulerInterval time.Duration
	SandboxDelay      time.Duration
	ShutdownTimeout   time.Duration
	LockTimeout       time.Duration
	LogFormat         string
	LogLevel          string
}

// Main is the program, split so tests can run it in-process on :0 and a temp
// directory (the WTF Dial layout).
type Main struct {
	Config Config
	Stdout io.Writer
	Stderr io.Writer

	log     *slog.Logger
	db      *journal.DB
	engine  *actors.Engine
	server  *http.Server
	ln      net.Listener
	stopSch context.CancelFunc
	bg      sync.WaitGroup
}

// NewMain returns a Main with the embedded defaults.
func NewMain() *Main {
	return &Main{
		Config: Config{
			Listen: "127.0.0.1:8080", DataDir: "data", RefundNoPrefix: reservation.DefaultRefundNoPrefix,
			IdleTimeout: 2 * time.Minute, RecheckAfter: 30 * time.Second, SchedulerInterval: 200 * time.Millisecond,
			SandboxDelay: time.Second, ShutdownTimeout: 15 * time.Second, LockTimeout: time.Second,
			LogFormat: "text", LogLevel: "info",
		},
		Stdout: os.Stdout, Stderr: os.Stderr,
	}
}

// ParseFlags reads flags, falling back to REFUNDD_* variables from getenv.
func (m *Main) ParseFlags(args []string, getenv func(string) string) error {
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
	str(&c.Listen, "listen", "REFUNDD_LISTEN", "HTTP listen address; port 0 picks a free one")
	str(&c.DataDir, "data", "REFUNDD_DATA", "data directory holding the journal (refundd.db)")
	str(&c.RefundNoPrefix, "refund-prefix", "REFUNDD_REFUND_PREFIX",
		"refund number prefix, 1..16 of [0-9A-Za-z]; environments sharing a merchant id must differ")
	dur(&c.IdleTimeout, "idle-timeout", "REFUNDD_IDLE_TIMEOUT", "passivate a reservation actor after this long without messages")
	dur(&c.RecheckAfter, "recheck-after", "REFUNDD_RECHECK_AFTER", "query the provider about a submission with no answer after this long")
	dur(&c.SchedulerInterval, "scheduler-interval", "REFUNDD_SCHEDULER_INTERVAL", "how often due timers are drained")
	dur(&c.SandboxDelay, "sandbox-delay", "REFUNDD_SANDBOX_DELAY", "in-process sandbox: time from acceptance to success")
	dur(&c.ShutdownTimeout, "shutdown-timeout", "REFUNDD_SHUTDOWN_TIMEOUT", "how long shutdown waits for in-flight work")
	dur(&c.LockTimeout, "lock-timeout", "REFUNDD_LOCK_TIMEOUT", "how long to wait for the journal file lock")
	str(&c.LogFormat, "log-format", "REFUNDD_LOG_FORMAT", "text or json")
	str(&c.LogLevel, "log-level", "REFUNDD_LOG_LEVEL", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return err
	}
	if err := errors.Join(envErrs...); err != nil {
		return err
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
	for name, d := range map[string]time.Duration{"--idle-timeout": c.IdleTimeout, "--recheck-after": c.RecheckAfter,
		"--scheduler-interval": c.SchedulerInterval, "--shutdown-timeout": c.ShutdownTimeout, "--lock-timeout": c.LockTimeout} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive", name)
		}
	}
	if c.SandboxDelay < 0 {
		return errors.New("--sandbox-delay must not be negative")
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return errors.New("--log-format must be text or json")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	return nil
}

func (m *Main) logger() *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(m.Config.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if m.Config.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(m.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(m.Stderr, opts))
}

// Run opens the journal, starts the engine, the scheduler and the HTTP
// server, and returns once it is listening.
func (m *Main) Run(ctx context.Context) error {
	c := m.Config
	m.log = m.logger()
	path := filepath.Join(c.DataDir, "refundd.db")
	db, err := journal.Open(path, &journal.Options{Timeout: c.LockTimeout, Logger: m.log})
	if err != nil {
		if errors.Is(err, journal.ErrLocked) {
			return fmt.Errorf("%s is in use by another refundd process (only one may own a data directory): %w", path, err)
		}
		return err
	}
	m.db = db

	var engine *actors.Engine
	provider := simprovider.New(simprovider.Options{
		Delay: c.SandboxDelay,
		// The sandbox tells us about completed refunds the way WeChat does:
		// a notification routed by refund number to the reservation's actor.
		Notify: func(no string, o reservation.Outcome) { m.notify(engine, no, o) },
	})
	engine, err = actors.New(actors.Config{
		Store: eventstore.New(db), Provider: provider, Logger: m.log,
		Policy:      reservation.Policy{RefundNoPrefix: c.RefundNoPrefix, RecheckAfter: c.RecheckAfter},
		IdleTimeout: c.IdleTimeout,
	})
	if err != nil {
		db.Close()
		return err
	}
	m.engine = engine

	schCtx, stopSch := context.WithCancel(context.Background())
	m.stopSch = stopSch
	m.bg.Add(1)
	go func() { defer m.bg.Done(); engine.RunScheduler(schCtx, c.SchedulerInterval) }()

	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		m.Close()
		return fmt.Errorf("listen %s: %w", c.Listen, err)
	}
	m.ln = ln
	m.server = &http.Server{
		Handler:           api.New(engine, api.Options{Logger: m.log}),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		if err := m.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("http server stopped", "err", err)
		}
	}()
	m.log.Info("refundd started", "listen", ln.Addr().String(), "journal", path,
		"provider", "in-process sandbox", "refund_prefix", c.RefundNoPrefix)
	fmt.Fprintf(m.Stdout, "refundd listening on http://%s\n", ln.Addr())
	return nil
}

// Addr is the address the server listens on.
func (m *Main) Addr() string { return m.ln.Addr().String() }

func (m *Main) notify(engine *actors.Engine, no string, o reservation.Outcome) {
	if engine == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := engine.LookupRefund(ctx, no)
	if err == nil {
		_, _, err = engine.Execute(ctx, id, actors.ProviderPrincipal,
			reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceNotification, Outcome: o})
	}
	if err != nil {
		m.log.Warn("sandbox notification not applied; the refund's due time will query", "refund_no", no, "err", err)
	}
}

// Close stops accepting requests, drains in-flight requests and provider
// calls, stops the actors and closes the journal.
func (m *Main) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), m.Config.ShutdownTimeout)
	defer cancel()
	var errs []error
	if m.server != nil {
		errs = append(errs, m.server.Shutdown(ctx))
	}
	if m.stopSch != nil {
		m.stopSch()
	}
	m.bg.Wait()
	if m.engine != nil {
		errs = append(errs, m.engine.Close(ctx))
	}
	if m.db != nil {
		errs = append(errs, m.db.Close())
	}
	return errors.Join(errs...)
}
