package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/logs"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

var errHelp = errors.New("help requested")

// Config is wxpaysim's effective configuration.
type Config struct {
	Listen          string
	MchID           string
	TimeFactor      float64
	ProcessingDelay time.Duration
	KeysDir         string
	NotifyURL       string
	NotifyURLV2     string
	LogLevel        string
	LogFormat       string // logs.FormatText (the default), FormatJSON or FormatAuto
	ShutdownTimeout time.Duration
	// MinRefundSpacing is sandbox.Config.MinRefundSpacing; zero: off.
	MinRefundSpacing time.Duration
	// MaxCreates is each account's sandbox.CreateCounter limit (creates
	// per second); zero: no limit.
	MaxCreates int
	// StateFile is sandbox.Config.StateFile; empty: books in memory only.
	StateFile string
	// CertificateMode is sandbox.Config.CertificateMode: serve a platform
	// certificate on /v3/certificates and sign with its serial.
	CertificateMode bool

	// Several merchants (multi.go): direct merchant ids, a service
	// provider's sp_mchid and its authorised sub-merchants. Any of them set
	// serves them all instead of the one --mchid.
	DirectMchIDs []string
	SPMchID      string
	SubMchIDs    []string
	// StateDir keeps each merchant's books in its own file; multi only.
	StateDir string
	// RefunddURL is where the printed merchants file says refundd takes
	// notifications.
	RefunddURL string

	mchIDSet bool // --mchid given explicitly
}

// Main is the program, split so tests can run it in-process on :0 and a
// temp directory.
type Main struct {
	Config Config
	Stdout io.Writer
	Stderr io.Writer

	log    *slog.Logger
	sb     *sandbox.Server
	multi  *sandbox.Multi
	server *http.Server
	ln     net.Listener
	done   chan struct{} // closed when Serve returns
}

// NewMain returns a Main with the defaults.
func NewMain() *Main {
	return &Main{
		Config: Config{
			Listen: "127.0.0.1:8090", MchID: "1900000109", TimeFactor: 1, ProcessingDelay: time.Second,
			KeysDir: "wxpaysim-keys", LogLevel: "info", LogFormat: logs.FormatText, ShutdownTimeout: 10 * time.Second,
			RefunddURL: "http://127.0.0.1:8080",
		},
		Stdout: os.Stdout, Stderr: os.Stderr,
	}
}

// ParseFlags reads the command line.
func (m *Main) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("wxpaysim", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	c := &m.Config
	fs.StringVar(&c.Listen, "listen", c.Listen, "HTTP listen address; port 0 picks a free one")
	fs.StringVar(&c.MchID, "mchid", c.MchID, "merchant id served (keys in --keys-dir are for one mchid)")
	fs.Float64Var(&c.TimeFactor, "time-factor", c.TimeFactor, "scales the processing delay and the notification retry schedule (15s ... 6h); 0.001 makes 15s 15ms")
	fs.DurationVar(&c.ProcessingDelay, "processing-delay", c.ProcessingDelay, "time from acceptance (PROCESSING) to the outcome, before --time-factor; 0 decides during the create call")
	fs.StringVar(&c.KeysDir, "keys-dir", c.KeysDir, "directory for the generated keys and wxpaysim.json (reused if present)")
	fs.StringVar(&c.NotifyURL, "notify-url", "", "v3 notification URL for refunds created without notify_url (empty: none)")
	fs.StringVar(&c.NotifyURLV2, "notify-url-v2", "", "also send APIv2 XML notifications here (empty: none)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text, json or auto (JSON unless stderr is a terminal)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long shutdown waits for requests in flight")
	fs.DurationVar(&c.MinRefundSpacing, "min-refund-spacing", c.MinRefundSpacing,
		"refuse a new refund of an order within this time of its previous one with 429 FREQUENCY_LIMITED, like WeChat Pay's one-minute rule (not scaled by --time-factor); 0 disables")
	fs.IntVar(&c.MaxCreates, "max-creates", c.MaxCreates,
		"refuse refund creates beyond this many per second per merchant id (a service provider's sub-merchants share it) with 429 FREQUENCY_LIMITED, like WeChat Pay's 150/s; GET /sandbox/creates counts them; 0: no limit")
	fs.BoolVar(&c.CertificateMode, "certificate-mode", false,
		"serve a platform certificate on GET /v3/certificates (encrypted with the APIv3 key) and sign with its serial instead of the public key id; /sandbox/credentials routes rotate it")
	fs.StringVar(&c.StateFile, "state-file", c.StateFile, "keep orders and accepted refunds in this file across restarts (its directory must exist); empty keeps them in memory only")
	fs.Func("direct-merchants", "comma-separated direct merchant ids to serve, each with its own keys and books (serves several merchants instead of --mchid)",
		func(v string) error { c.DirectMchIDs = splitList(v); return nil })
	fs.StringVar(&c.SPMchID, "service-provider", "", "a service provider's sp_mchid to serve, with --sub-merchants (serves several merchants instead of --mchid)")
	fs.Func("sub-merchants", "comma-separated sub_mchids the --service-provider is authorised for; others are refused with 403 NO_AUTH",
		func(v string) error { c.SubMchIDs = splitList(v); return nil })
	fs.StringVar(&c.StateDir, "state-dir", "", "with several merchants: keep each merchant's books in its own file in this directory (must exist)")
	fs.StringVar(&c.RefunddURL, "refundd-url", c.RefunddURL, "with several merchants: refundd's base URL, for the notify_url of the printed merchants file")
	fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "mchid" {
			c.mchIDSet = true
		}
	})
	return c.validate()
}

func (c *Config) validate() error {
	switch {
	case c.TimeFactor <= 0 || math.IsInf(c.TimeFactor, 0) || math.IsNaN(c.TimeFactor):
		return errors.New("--time-factor must be a positive number")
	case c.ProcessingDelay < 0:
		return errors.New("--processing-delay must not be negative")
	case c.MinRefundSpacing < 0:
		return errors.New("--min-refund-spacing must not be negative")
	case c.MaxCreates < 0:
		return errors.New("--max-creates must not be negative")
	case c.MchID == "":
		return errors.New("--mchid must not be empty")
	case c.KeysDir == "":
		return errors.New("--keys-dir must not be empty")
	case c.ShutdownTimeout <= 0:
		return errors.New("--shutdown-timeout must be positive")
	}
	if err := c.validateMulti(); err != nil {
		return err
	}
	if _, err := logs.New(io.Discard, c.LogFormat, c.LogLevel); err != nil {
		return fmt.Errorf("--log-level, --log-format: %w", err)
	}
	return nil
}

// Run loads or generates the keys, starts the sandbox, writes the key
// directory (with the listen URL) and returns once it is listening.
func (m *Main) Run(ctx context.Context) error {
	c := m.Config
	// The same handler as refundd's (masking, one value per key,
	// durations as strings); validate checked the format and level.
	log, err := logs.New(m.Stderr, c.LogFormat, c.LogLevel)
	if err != nil {
		return err
	}
	m.log = log
	if c.multi() {
		return m.runMulti()
	}

	keys, reused, err := m.keys()
	if err != nil {
		return err
	}
	cfg := keys.Config()
	cfg.TimeFactor, cfg.ProcessingDelay = c.TimeFactor, c.ProcessingDelay
	cfg.NotifyURL, cfg.NotifyURLV2 = c.NotifyURL, c.NotifyURLV2
	cfg.MinRefundSpacing, cfg.StateFile = c.MinRefundSpacing, c.StateFile
	cfg.Creates = sandbox.NewCreateCounter(c.MaxCreates)
	cfg.CertificateMode = c.CertificateMode
	if c.NotifyURLV2 == "" {
		cfg.APIv2Key = nil
	}
	cfg.Logger = m.log
	sb, err := sandbox.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		sb.Close()
		return fmt.Errorf("listen %s: %w", c.Listen, err)
	}
	base := "http://" + ln.Addr().String()
	dir, err := filepath.Abs(c.KeysDir)
	if err != nil {
		dir = c.KeysDir
	}
	if _, err := keys.WriteDir(dir, base); err != nil {
		ln.Close()
		sb.Close()
		return err
	}
	m.sb = sb
	m.serve(sb, ln)
	m.report(base, dir, keys, reused)
	return nil
}

// serve serves h on ln until Close.
func (m *Main) serve(h http.Handler, ln net.Listener) {
	m.ln = ln
	m.server = &http.Server{
		Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute,
		// No write timeout: delay faults may hold a response on purpose.
		ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
	}
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		if err := m.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("serve", "err", err)
		}
	}()
}

// keys loads the key directory or generates fresh keys.
func (m *Main) keys() (sandbox.Keys, bool, error) {
	return loadOrGenerate(m.Config.KeysDir, m.Config.MchID, m.Config.mchIDSet)
}

// loadOrGenerate loads the keys in dir, or generates keys for mchID when
// there are none. strict refuses keys of another mchid.
func loadOrGenerate(dir, mchID string, strict bool) (sandbox.Keys, bool, error) {
	k, err := sandbox.LoadKeys(dir)
	switch {
	case err == nil:
		if strict && k.MchID != mchID {
			return k, false, fmt.Errorf("%s holds keys for mchid %s, not %s: use another --keys-dir", dir, k.MchID, mchID)
		}
		return k, true, nil
	case errors.Is(err, os.ErrNotExist):
		k, err := sandbox.GenerateKeys(mchID)
		return k, false, err
	default:
		return k, false, fmt.Errorf("%w (delete %s to generate new keys)", err, dir)
	}
}

// report prints where the sandbox listens and what it wrote.
func (m *Main) report(base, dir string, k sandbox.Keys, reused bool) {
	how := "generated"
	if reused {
		how = "reused"
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	w := m.Stdout
	fmt.Fprintf(w, "wxpaysim: WeChat Pay refund sandbox listening on %s\n", base)
	fmt.Fprintf(w, "wxpaysim: mchid %s, time factor %g, processing delay %s\n", k.MchID, m.Config.TimeFactor, m.Config.ProcessingDelay)
	if m.Config.MinRefundSpacing > 0 {
		fmt.Fprintf(w, "wxpaysim: refunds of one order at least %s apart (else 429 FREQUENCY_LIMITED)\n", m.Config.MinRefundSpacing)
	}
	if m.Config.MaxCreates > 0 {
		fmt.Fprintf(w, "wxpaysim: at most %d refund creates a second per merchant id (else 429 FREQUENCY_LIMITED)\n", m.Config.MaxCreates)
	}
	if m.Config.StateFile != "" {
		fmt.Fprintf(w, "wxpaysim: books kept in %s\n", m.Config.StateFile)
	}
	fmt.Fprintf(w, "wxpaysim: keys %s in %s:\n", how, dir)
	fmt.Fprintf(w, "  merchant private key      %s\n", p(sandbox.MerchantKeyFile))
	fmt.Fprintf(w, "  merchant serial           %s\n", k.MerchantSerial)
	fmt.Fprintf(w, "  wechatpay public key      %s\n", p(sandbox.PublicKeyFile))
	fmt.Fprintf(w, "  wechatpay public key id   %s\n", k.PublicKeyID)
	fmt.Fprintf(w, "  APIv3 key file            %s\n", p(sandbox.APIv3KeyFile))
	fmt.Fprintf(w, "  APIv2 key file            %s\n", p(sandbox.APIv2KeyFile))
	fmt.Fprintf(w, "  description               %s\n", p(sandbox.ManifestFile))
	fmt.Fprintf(w, "wxpaysim: point refundd at it with:\n")
	fmt.Fprintf(w, "  --wechatpay-base-url=%s --wechatpay-mchid=%s --wechatpay-serial=%s \\\n", base, k.MchID, k.MerchantSerial)
	fmt.Fprintf(w, "  --wechatpay-private-key=%s --wechatpay-apiv3-key-file=%s \\\n", p(sandbox.MerchantKeyFile), p(sandbox.APIv3KeyFile))
	if m.Config.CertificateMode {
		// refundd downloads the certificate: no public key flags.
		if cert, err := sandbox.StablePlatformCertificate(k.PlatformKey, k.MchID); err == nil {
			fmt.Fprintf(w, "wxpaysim: certificate mode: platform certificate %s on GET %s/v3/certificates\n", wechatpay.CertificateSerial(cert), base)
		}
	} else {
		fmt.Fprintf(w, "  --wechatpay-public-key=%s --wechatpay-public-key-id=%s \\\n", p(sandbox.PublicKeyFile), k.PublicKeyID)
	}
	fmt.Fprintf(w, "  --wechatpay-apiv2-key-file=%s\n", p(sandbox.APIv2KeyFile))
	fmt.Fprintf(w, "wxpaysim: admin routes (unauthenticated, tests/dev only): POST %s/sandbox/orders, POST %s/sandbox/faults, %s/sandbox/credentials\n", base, base, base)
}

// URL returns the base URL once Run has returned.
func (m *Main) URL() string {
	if m.ln == nil {
		return ""
	}
	return "http://" + m.ln.Addr().String()
}

// Close stops the sandbox (timers, notifications, held responses) and then
// the HTTP server, waiting up to ShutdownTimeout for requests in flight.
func (m *Main) Close() error {
	if m.sb != nil {
		m.sb.Close() // first: releases handlers held by delay faults
	}
	if m.multi != nil {
		m.multi.Close()
	}
	if m.server == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.Config.ShutdownTimeout)
	defer cancel()
	err := m.server.Shutdown(ctx)
	<-m.done
	return err
}
