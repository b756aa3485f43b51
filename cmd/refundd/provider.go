package main

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// Provider modes.
const (
	providerSandbox   = "sandbox"   // WeChat Pay wire protocol against an in-process sandbox on loopback
	providerWechatpay = "wechatpay" // a real merchant account (or a standalone wxpaysim)
	providerMemory    = "memory"    // in-memory stand-in without the protocol (fast demos)
)

// WechatpayConfig is the merchant's WeChat Pay configuration. Secrets are
// read from files or REFUNDD_WECHATPAY_APIV3_KEY / _APIV2_KEY, never taken
// as flag values (visible in ps), and never logged.
type WechatpayConfig struct {
	BaseURL        string
	MchID          string
	Serial         string   // merchant certificate serial
	PrivateKeyFile string   // merchant PKCS#8 PEM
	APIv3KeyFile   string   // or REFUNDD_WECHATPAY_APIV3_KEY
	PublicKeyFile  string   // WeChat Pay public key PEM
	PublicKeyID    string   // its id, PUB_KEY_ID_...
	PlatformCerts  []string // platform certificate PEM files (switchover: both kinds at once)
	APIv2KeyFile   string   // or REFUNDD_WECHATPAY_APIV2_KEY; enables the v2 endpoint
	NotifyURL      string
	apiV3Key       []byte
	apiV2Key       []byte
}

// wiredProvider is what a provider mode gives the rest of the wiring.
type wiredProvider struct {
	provider actors.Provider
	// encode builds a submission's bytes (actors.Config.Encode): the same
	// adapter's pure encoder.
	encode func(reservation.RefundRequest) ([]byte, error)
	notify *api.NotifyConfig // nil: no notification endpoints
	// onRegister runs after a registration is journaled (the sandbox learns
	// the paid order, as real WeChat knows what was paid).
	onRegister func(reservation.Register)
	// setEngine hands the engine to a provider that pushes outcomes.
	setEngine func(*actors.Engine)
	close     func()
	describe  string
	sandbox   *sandbox.Server // the in-process sandbox, for tests; nil otherwise
}

// merchant is the merchant id refunds are made under, for the logs; "" for
// the memory provider.
func (w *wiredProvider) merchant() string {
	if w.notify == nil {
		return ""
	}
	return w.notify.MchID
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func (m *Main) wireProvider(notifyBase string) (*wiredProvider, error) {
	switch m.Config.Provider {
	case providerMemory:
		return m.wireMemory(), nil
	case providerSandbox:
		return m.wireSandbox(notifyBase)
	case providerWechatpay:
		return m.wireWechatpay(notifyBase)
	}
	return nil, fmt.Errorf("--provider must be sandbox, wechatpay or memory")
}

func (m *Main) wireMemory() *wiredProvider {
	var engine *actors.Engine
	p := simprovider.New(simprovider.Options{
		Delay:  m.Config.SandboxDelay,
		Notify: func(no string, o reservation.Outcome) { m.pushOutcome(engine, no, o) },
	})
	return &wiredProvider{provider: p, encode: p.RequestBody, setEngine: func(e *actors.Engine) { engine = e }, close: func() {},
		describe: "in-memory stand-in (no WeChat Pay protocol)"}
}

// pushOutcome records an outcome the memory provider pushes as the
// notification it stands for, through the engine's one notification call.
func (m *Main) pushOutcome(engine *actors.Engine, no string, o reservation.Outcome) {
	if engine == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := engine.RecordNotification(ctx, actors.ProviderPrincipal, reservation.Notification{RefundNo: no, Outcome: o}); err != nil {
		m.log.Warn("provider outcome not applied; the refund's due time will query", "refund_no", no, "err", err)
	}
}

// wireSandbox runs the WeChat Pay sandbox in-process on loopback and talks
// to it with the real client, so the one-command start exercises the whole
// protocol: signed requests, signed answers, encrypted notifications. Its
// keys are kept under the data directory.
func (m *Main) wireSandbox(notifyBase string) (*wiredProvider, error) {
	keyDir := filepath.Join(m.Config.DataDir, "sandbox")
	keys, err := sandbox.LoadKeys(keyDir)
	if errors.Is(err, os.ErrNotExist) {
		if keys, err = sandbox.GenerateKeys("1900000001"); err == nil {
			_, err = keys.WriteDir(keyDir, "")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox keys in %s: %w", keyDir, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sandbox listener: %w", err)
	}
	cfg := keys.Config()
	cfg.ProcessingDelay = m.Config.SandboxDelay
	cfg.TimeFactor = m.Config.SandboxTimeFactor
	cfg.NotifyURLV2 = notifyBase + "/v1/notify/wechatpay/v2/refund"
	cfg.Logger = m.log.With("component", "sandbox")
	cfg.StateFile = filepath.Join(keyDir, "state.json")
	cfg.MinRefundSpacing = m.Config.RefundSpacing
	sb, err := sandbox.New(cfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	srv := &http.Server{Handler: sb, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	verifier, err := keys.Verifier()
	if err != nil {
		return nil, err
	}
	client, err := wechatpay.NewClient(wechatpay.ClientConfig{
		BaseURL: "http://" + ln.Addr().String(), MchID: keys.MchID, Signer: keys.Signer(), Verifier: verifier,
		NotifyURL: notifyBase + "/v1/notify/wechatpay/refund", Logger: m.log.With("component", "wechatpay"),
	})
	if err != nil {
		return nil, err
	}
	return &wiredProvider{
		provider: client,
		encode:   client.RequestBody,
		notify:   &api.NotifyConfig{MchID: keys.MchID, Verifier: verifier, APIv3Key: keys.APIv3Key, APIv2Key: keys.APIv2Key},
		onRegister: func(c reservation.Register) {
			if err := sb.CreateOrder(c.OutTradeNo, c.TransactionID, c.Amount); err != nil {
				m.log.Warn("sandbox did not record the paid order", "out_trade_no", c.OutTradeNo, "err", err)
			}
		},
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
			sb.Close()
		},
		describe: "in-process WeChat Pay sandbox at http://" + ln.Addr().String(),
		sandbox:  sb,
	}, nil
}

func (m *Main) wireWechatpay(notifyBase string) (*wiredProvider, error) {
	c := &m.Config.Wechatpay
	key, verifier, err := c.credentials()
	if err != nil {
		return nil, err
	}
	notifyURL := c.NotifyURL
	if notifyURL == "" {
		notifyURL = notifyBase + "/v1/notify/wechatpay/refund"
	}
	client, err := wechatpay.NewClient(wechatpay.ClientConfig{
		BaseURL: c.BaseURL, MchID: c.MchID, Signer: wechatpay.Signer{MchID: c.MchID, SerialNo: c.Serial, Key: key},
		Verifier: verifier, NotifyURL: notifyURL, Logger: m.log.With("component", "wechatpay"),
	})
	if err != nil {
		return nil, err
	}
	return &wiredProvider{
		provider: client,
		encode:   client.RequestBody,
		notify:   &api.NotifyConfig{MchID: c.MchID, Verifier: verifier, APIv3Key: c.apiV3Key, APIv2Key: c.apiV2Key},
		close:    func() {},
		describe: "WeChat Pay at " + c.BaseURL + " (mchid " + c.MchID + ")",
	}, nil
}

// credentials reads and checks the merchant's key and WeChat Pay's keys
// and certificates (refundd checks them before it creates anything).
func (c *WechatpayConfig) credentials() (*rsa.PrivateKey, *wechatpay.Verifier, error) {
	if err := c.load(); err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(c.PrivateKeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--wechatpay-private-key: %w", err)
	}
	key, err := wechatpay.ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("--wechatpay-private-key %s: %w", c.PrivateKeyFile, err)
	}
	verifier := &wechatpay.Verifier{}
	if c.PublicKeyFile != "" {
		b, err := os.ReadFile(c.PublicKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--wechatpay-public-key: %w", err)
		}
		pub, err := wechatpay.ParsePublicKey(b)
		if err != nil {
			return nil, nil, fmt.Errorf("--wechatpay-public-key %s: %w", c.PublicKeyFile, err)
		}
		if err := verifier.AddPublicKey(c.PublicKeyID, pub); err != nil {
			return nil, nil, fmt.Errorf("--wechatpay-public-key-id: %w", err)
		}
	}
	for _, f := range c.PlatformCerts {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("--wechatpay-platform-cert: %w", err)
		}
		cert, err := wechatpay.ParseCertificate(b)
		if err != nil {
			return nil, nil, fmt.Errorf("--wechatpay-platform-cert %s: %w", f, err)
		}
		if err := verifier.AddCertificate(cert); err != nil {
			return nil, nil, fmt.Errorf("--wechatpay-platform-cert %s: %w", f, err)
		}
	}
	return key, verifier, nil
}

// load checks the merchant configuration and reads its secrets, failing
// with a message that names the setting and never the secret.
func (c *WechatpayConfig) load() error {
	var missing []string
	for _, f := range []struct{ v, name string }{
		{c.BaseURL, "--wechatpay-base-url"}, {c.MchID, "--wechatpay-mchid"}, {c.Serial, "--wechatpay-serial"},
		{c.PrivateKeyFile, "--wechatpay-private-key"},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if c.PublicKeyFile == "" && len(c.PlatformCerts) == 0 {
		missing = append(missing, "--wechatpay-public-key or --wechatpay-platform-cert")
	}
	if c.PublicKeyFile != "" && c.PublicKeyID == "" {
		missing = append(missing, "--wechatpay-public-key-id")
	}
	if c.APIv3KeyFile == "" && len(c.apiV3Key) == 0 {
		missing = append(missing, "--wechatpay-apiv3-key-file (or REFUNDD_WECHATPAY_APIV3_KEY)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("wechatpay provider: missing %s", strings.Join(missing, ", "))
	}
	if c.APIv3KeyFile != "" {
		b, err := os.ReadFile(c.APIv3KeyFile)
		if err != nil {
			return fmt.Errorf("--wechatpay-apiv3-key-file: %w", err)
		}
		c.apiV3Key = b
	}
	key, err := wechatpay.ParseAPIv3Key(c.apiV3Key)
	if err != nil {
		return fmt.Errorf("APIv3 key: must be exactly 32 bytes: %w", err)
	}
	c.apiV3Key = key
	if c.APIv2KeyFile != "" {
		b, err := os.ReadFile(c.APIv2KeyFile)
		if err != nil {
			return fmt.Errorf("--wechatpay-apiv2-key-file: %w", err)
		}
		c.apiV2Key = []byte(strings.TrimSpace(string(b)))
	}
	return nil
}
