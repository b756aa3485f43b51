package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/merchant"
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

// WechatpayConfig is the default merchant's settings, from the
// --wechatpay-* flags; its RefundNoPrefix is --refund-prefix, set when the
// merchant is built. Secrets are read from files or
// REFUNDD_WECHATPAY_APIV3_KEY / _APIV2_KEY, never taken as flag values
// (visible in ps), and never logged.
type WechatpayConfig = merchant.DefaultSettings

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
	close     func() // nil: nothing to close
	describe  string
	sandbox   *sandbox.Server // the in-process sandbox, for tests; nil otherwise
	// certs keeps the default account's downloaded platform certificates
	// current (--wechatpay-download-certificates); nil otherwise.
	certs *wechatpay.CertificateManager
	// credentials describes the keys held (GET /v1/admin/credentials);
	// nil for the memory provider.
	credentials func() api.CredentialsView
}

// merchant is the merchant id refunds are made under, for the logs; "" for
// the memory provider.
func (w *wiredProvider) merchant() string {
	if w.notify == nil {
		return ""
	}
	return w.notify.MchID
}

// wireProvider builds the provider; creds are the merchant's, checked by
// check (nil unless --provider wechatpay).
func (m *Main) wireProvider(notifyBase string, creds *merchant.Credentials) (*wiredProvider, error) {
	switch m.Config.Provider {
	case providerMemory:
		return m.wireMemory(), nil
	case providerSandbox:
		return m.wireSandbox(notifyBase)
	case providerWechatpay:
		return m.wireWechatpay(notifyBase, creds)
	}
	return nil, fmt.Errorf("--provider must be sandbox, wechatpay or memory")
}

func (m *Main) wireMemory() *wiredProvider {
	push := &simprovider.Pusher{By: actors.ProviderPrincipal, Logger: m.log}
	p := simprovider.New(simprovider.Options{Delay: m.Config.SandboxDelay, Notify: push.Notify})
	return &wiredProvider{provider: p, encode: p.RequestBody, setEngine: func(e *actors.Engine) { push.SetRecorder(e) },
		describe: "in-memory stand-in (no WeChat Pay protocol)"}
}

// wireSandbox runs the WeChat Pay sandbox in-process on loopback and talks
// to it with the real client, so the one-command start exercises the whole
// protocol: signed requests, signed answers, encrypted notifications. Its
// keys are kept under the data directory.
func (m *Main) wireSandbox(notifyBase string) (*wiredProvider, error) {
	c := m.Config
	sb, err := sandbox.StartLocal(filepath.Join(c.DataDir, "sandbox"), "1900000001", func(cfg *sandbox.Config) {
		cfg.ProcessingDelay, cfg.TimeFactor, cfg.MinRefundSpacing = c.SandboxDelay, c.SandboxTimeFactor, c.RefundSpacing
		cfg.NotifyURLV2 = notifyBase + "/v1/notify/wechatpay/v2/refund"
		cfg.Logger = m.log.With("component", "sandbox")
	})
	if err != nil {
		return nil, err
	}
	keys := sb.Keys
	verifier, err := keys.Verifier()
	if err != nil {
		sb.Close()
		return nil, err
	}
	client, err := wechatpay.NewClient(wechatpay.ClientConfig{
		BaseURL: sb.URL, MchID: keys.MchID, Signer: keys.Signer(), Verifier: verifier,
		NotifyURL: notifyBase + "/v1/notify/wechatpay/refund", Logger: m.log.With("component", "wechatpay"),
	})
	if err != nil {
		sb.Close()
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
		close:    sb.Close,
		describe: "in-process WeChat Pay sandbox at " + sb.URL,
		sandbox:  sb.Server,
		credentials: func() api.CredentialsView {
			return api.CredentialsView{Accounts: []api.AccountCredentials{accountView(merchant.DefaultName, keys.MchID,
				keys.MerchantSerial, verifier, true, len(keys.APIv2Key) > 0, api.KeySourceSandbox, nil, 0)}}
		},
	}, nil
}

func (m *Main) wireWechatpay(notifyBase string, creds *merchant.Credentials) (*wiredProvider, error) {
	var certs *wechatpay.CertificateManager
	var stop func()
	if m.Config.Wechatpay.DownloadCertificates {
		var err error
		if certs, stop, err = m.startCertificates(creds); err != nil {
			return nil, err
		}
	}
	cfg := creds.ClientConfig()
	cfg.NotifyURL, cfg.Logger = m.Config.Wechatpay.NotifyURL, m.log.With("component", "wechatpay")
	if cfg.NotifyURL == "" {
		cfg.NotifyURL = notifyBase + "/v1/notify/wechatpay/refund"
	}
	client, err := wechatpay.NewClient(cfg)
	if err != nil {
		if stop != nil {
			stop()
		}
		return nil, err
	}
	return &wiredProvider{
		provider: client,
		encode:   client.RequestBody,
		notify:   &api.NotifyConfig{MchID: creds.MchID, Verifier: creds.Verifier, APIv3Key: creds.APIv3Key, APIv2Key: creds.APIv2Key},
		describe: "WeChat Pay at " + creds.BaseURL + " (mchid " + creds.MchID + ")",
		certs:    certs,
		close:    stop,
		credentials: func() api.CredentialsView {
			return api.CredentialsView{Accounts: []api.AccountCredentials{accountView(creds.Account, creds.MchID,
				creds.Signer.SerialNo, creds.Verifier, len(creds.APIv3Key) > 0, len(creds.APIv2Key) > 0, api.KeySourceFile,
				certs, m.Config.CertificateRefresh)}}
		},
	}, nil
}

// accountView describes one account's keys: those the certificate manager
// holds (certs, may be nil) by where it got them, the others as
// fileSource.
func accountView(account, mchid, serial string, v *wechatpay.Verifier, apiv3, apiv2 bool, fileSource string,
	certs *wechatpay.CertificateManager, refresh time.Duration) api.AccountCredentials {
	a := api.AccountCredentials{Account: account, MchID: mchid, MerchantSerial: serial, APIv3Key: apiv3, APIv2Key: apiv2,
		Keys: []api.CredentialKey{}}
	managed := map[string]string{}
	if certs != nil {
		st := certs.Status()
		for _, c := range st.Certificates {
			managed[c.Serial] = c.Source
		}
		a.Download = &api.CertificateDownloadView{Refresh: refresh.String(), LastAttempt: st.LastAttempt,
			LastSuccess: st.LastSuccess, LastError: st.LastError, Downloads: st.Downloads, Failures: st.Failures,
			ConsecutiveFailures: st.ConsecutiveFail, OnDemand: st.OnDemand, OnDemandDropped: st.OnDemandDropped}
	}
	for _, k := range v.Keys() {
		ck := api.CredentialKey{Serial: k.Serial, Kind: api.KeyKindPublicKey, Source: fileSource}
		if k.Certificate {
			nb, na := k.NotBefore, k.NotAfter
			ck.Kind, ck.NotBefore, ck.NotAfter = api.KeyKindCertificate, &nb, &na
		}
		if src, ok := managed[k.Serial]; ok {
			ck.Source = src
		}
		a.Keys = append(a.Keys, ck)
	}
	return a
}

// certificateStartTimeout bounds the download refundd makes before it is
// ready.
const certificateStartTimeout = 30 * time.Second

// startCertificates puts the default account in platform certificate
// mode: the stored certificates are loaded, a download is made before
// refundd is ready, and a goroutine refreshes them until stop. A failed
// download is fatal only when nothing is held afterwards (no stored
// certificate, no public key or certificate file): a restart while WeChat
// Pay is unreachable keeps verifying with what was stored.
func (m *Main) startCertificates(creds *merchant.Credentials) (*wechatpay.CertificateManager, func(), error) {
	dir := filepath.Join(m.Config.DataDir, "wechatpay-certificates", creds.MchID)
	certs, err := wechatpay.NewCertificateManager(wechatpay.CertificateManagerConfig{
		BaseURL: creds.BaseURL, Signer: creds.Signer, APIv3Key: creds.APIv3Key, Verifier: creds.Verifier, Dir: dir,
		Refresh: m.Config.CertificateRefresh, Logger: m.log.With("component", "wechatpay-certificates", "mchid", creds.MchID),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("--wechatpay-download-certificates: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := certs.Load(ctx); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("--wechatpay-download-certificates: stored certificates in %s: %w", dir, err)
	}
	dctx, dcancel := context.WithTimeout(ctx, certificateStartTimeout)
	err = certs.Refresh(dctx)
	dcancel()
	if err != nil {
		if len(creds.Verifier.Serials()) == 0 {
			cancel()
			return nil, nil, fmt.Errorf("--wechatpay-download-certificates: no platform certificate stored and the download failed: %w", err)
		}
		m.log.Warn("platform certificate download failed at start; verifying with the certificates held",
			"mchid", creds.MchID, "held", len(creds.Verifier.Serials()), "err", err.Error())
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		certs.Run(ctx)
	}()
	return certs, func() { cancel(); <-done }, nil
}

// credentials checks the default merchant's settings and reads its keys
// (internal/merchant), so refundd finds a mistake before it creates
// anything; errors name the flags, never a secret.
func (m *Main) credentials() (*merchant.Credentials, error) {
	s := m.Config.Wechatpay
	s.RefundNoPrefix = m.Config.RefundNoPrefix
	reg, err := merchant.NewDefault(s)
	if err != nil {
		return nil, fmt.Errorf("wechatpay provider: %w", err)
	}
	if _, ok := reg.Account(merchant.DefaultName); !ok {
		return nil, errNoAccount
	}
	creds, err := reg.LoadCredentials(merchant.Sources{Getenv: m.env, ReadFile: os.ReadFile})
	if err != nil {
		return nil, fmt.Errorf("wechatpay provider: %w", err)
	}
	return creds[merchant.DefaultName], nil
}

var errNoAccount = errors.New("wechatpay provider: missing --wechatpay-base-url, --wechatpay-mchid, --wechatpay-serial, " +
	"--wechatpay-private-key, --wechatpay-public-key or --wechatpay-platform-cert, --wechatpay-apiv3-key-file (or REFUNDD_WECHATPAY_APIV3_KEY)")
