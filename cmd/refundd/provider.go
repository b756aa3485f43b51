package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
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
	// encode builds a submission's bytes (actors.Config.Encode): the
	// merchant's pure encoder, through the same router.
	encode func(reservation.RefundRequest) ([]byte, error)
	notify *api.NotifyConfig // nil: no notification endpoints
	// onRegister runs after a registration is journaled (the sandbox learns
	// the paid order, as real WeChat knows what was paid).
	onRegister func(reservation.Register)
	// setEngine hands the engine to a provider that pushes outcomes.
	setEngine func(*actors.Engine)
	close     func() // nil: nothing to close
	describe  string
	sandbox   *sandbox.Server     // the in-process sandbox, for tests; nil otherwise
	mchID     string              // the one account's mchid, for the logs; "" otherwise
	push      *simprovider.Pusher // the memory stand-in's outcome pusher; nil otherwise
	// accounts are the WeChat Pay accounts running (their certificate
	// managers keep downloaded platform certificates current:
	// download_certificates, --wechatpay-download-certificates); nil for
	// the sandbox and memory providers.
	accounts *wechatpayAccounts
	// credentials describes the keys held (GET /v1/admin/credentials);
	// nil for the memory provider.
	credentials func() api.CredentialsView
	// reload rereads the credential files and swaps them in
	// (merchant.Reloader.Reload); nil when the provider reads none.
	reload func(ctx context.Context, trigger string) error
	// encrypt encrypts an abnormal refund's bank details for the WeChat
	// Pay key of its merchant (api.Options.EncryptSensitive).
	encrypt func(refundNo string, plain ...string) (string, []string, error)

	// router and pacers route and pace every merchant's calls; a merchant
	// added by a reload joins them (addMerchants).
	router *merchant.Router
	pacers *merchant.Pacers // nil for the memory provider (unpaced)
	// forMerchant makes the provider of a merchant on a running account;
	// nil when the provider takes no merchant while it runs.
	forMerchant func(*merchant.Merchant) (merchant.Provider, error)
	// add checks the merchants and the notification routes of the
	// accounts a reload adds (their providers from forMerchant, which
	// knows the accounts being added) and returns the commit that makes
	// them usable (merchantAdder). Set once the engine and the API it
	// must reach exist (Main.start); nil until then.
	add func(added []*merchant.Merchant, notify []api.NotifyAccount,
		forMerchant func(*merchant.Merchant) (merchant.Provider, error)) (commit func(), err error)
}

// merchant is the merchant id refunds are made under, for the logs: the
// one account's; "" for the memory provider and for several accounts.
func (w *wiredProvider) merchant() string { return w.mchID }

// wireProvider builds the provider of every merchant of ms, behind one
// merchant.Router: a refund goes to its merchant's provider by its number's
// prefix in every epoch (prefixes: audit.EpochPrefixes of the journal's).
func (m *Main) wireProvider(notifyBase string, ms *merchants, prefixes func(string) ([]string, error)) (*wiredProvider, error) {
	var (
		w   *wiredProvider
		per map[string]merchant.Provider
		err error
	)
	switch m.Config.Provider {
	case providerMemory:
		w, per = m.wireMemory(ms.reg)
	case providerSandbox:
		w, per, err = m.wireSandbox(notifyBase, ms.reg)
	case providerWechatpay:
		w, per, err = m.wireWechatpay(notifyBase, ms)
	default:
		return nil, fmt.Errorf("--provider must be sandbox, wechatpay or memory")
	}
	if err != nil {
		return nil, err
	}
	if m.Config.Provider != providerMemory {
		// WeChat Pay's limits are per account: its merchants share turns.
		// The memory stand-in has none to respect.
		w.pacers, err = merchant.NewPacers(m.Config.Pacing, m.metrics, merchant.PacingClock{})
		for _, mc := range ms.reg.Merchants() {
			if err != nil {
				break
			}
			per[mc.Name], err = w.pacers.Wrap(mc, per[mc.Name])
		}
		if err != nil {
			if w.close != nil {
				w.close()
			}
			return nil, err
		}
	}
	router, err := ms.reg.Router(per, prefixes)
	if err != nil {
		if w.close != nil {
			w.close()
		}
		return nil, err
	}
	w.provider, w.encode, w.encrypt, w.router = router, router.RequestBody, router.EncryptSensitive, router
	if w.push != nil {
		// The core refuses an outcome that names another merchant than
		// the refund's: the stand-in's pushes name the router's.
		w.push.Merchant = func(no string) string { name, _ := router.Merchant(no); return name }
	}
	return w, nil
}

// wireMemory serves every merchant from one in-memory stand-in.
func (m *Main) wireMemory(reg *merchant.Registry) (*wiredProvider, map[string]merchant.Provider) {
	push := &simprovider.Pusher{By: actors.ProviderPrincipal, Logger: m.log}
	p := simprovider.New(simprovider.Options{Delay: m.Config.SandboxDelay, Notify: push.Notify})
	per := map[string]merchant.Provider{}
	for _, mc := range reg.Merchants() {
		per[mc.Name] = p
	}
	return &wiredProvider{setEngine: func(e *actors.Engine) { push.SetRecorder(e) }, push: push,
		describe: "in-memory stand-in (no WeChat Pay protocol)"}, per
}

// wireSandbox runs the WeChat Pay sandbox in-process on loopback and talks
// to it with the real client, so the one-command start exercises the whole
// protocol: signed requests, signed answers, encrypted notifications. Its
// keys are kept under the data directory. It serves the one default
// merchant (readMerchants refuses a merchants file with it).
func (m *Main) wireSandbox(notifyBase string, reg *merchant.Registry) (*wiredProvider, map[string]merchant.Provider, error) {
	c := m.Config
	sb, err := sandbox.StartLocal(filepath.Join(c.DataDir, "sandbox"), "1900000001", func(cfg *sandbox.Config) {
		cfg.ProcessingDelay, cfg.TimeFactor, cfg.MinRefundSpacing = c.SandboxDelay, c.SandboxTimeFactor, c.RefundSpacing
		cfg.Creates = sandbox.NewCreateCounter(c.SandboxMaxCreates)
		cfg.NotifyURLV2 = notifyBase + "/v1/notify/wechatpay/v2/refund"
		cfg.Logger = m.log.With("component", "sandbox")
	})
	if err != nil {
		return nil, nil, err
	}
	keys := sb.Keys
	verifier, err := keys.Verifier()
	if err != nil {
		sb.Close()
		return nil, nil, err
	}
	client, err := wechatpay.NewClient(wechatpay.ClientConfig{
		BaseURL: sb.URL, MchID: keys.MchID, Signer: keys.Signer(), Verifier: verifier,
		NotifyURL: notifyBase + legacyNotifyPath, Logger: m.log.With("component", "wechatpay"),
	})
	if err != nil {
		sb.Close()
		return nil, nil, err
	}
	mc, err := client.For(wechatpay.Target{})
	if err != nil {
		sb.Close()
		return nil, nil, err
	}
	per := map[string]merchant.Provider{}
	for _, d := range reg.Merchants() {
		per[d.Name] = mc
	}
	return &wiredProvider{
		notify: &api.NotifyConfig{Accounts: []api.NotifyAccount{{Name: merchant.DefaultName,
			MchID: keys.MchID, Verifier: verifier, APIv3Key: keys.APIv3Key, APIv2Key: keys.APIv2Key}}},
		mchID: keys.MchID,
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
	}, per, nil
}

// wireWechatpay makes one wechatpay.Client per account (its keys sign for
// all its merchants) and one MerchantClient per merchant (its sub_mchid
// and notify_url). A merchant without notify_url is notified at its
// account's route, or, for the --wechatpay-* merchant, at
// --wechatpay-notify-url or the route it always had. An account in
// certificate mode has its certificates downloaded before this returns.
// A reload that adds an account builds it the same way (wireAccount).
func (m *Main) wireWechatpay(notifyBase string, ms *merchants) (_ *wiredProvider, _ map[string]merchant.Provider, err error) {
	accts := &wechatpayAccounts{byName: map[string]*wiredAccount{}}
	w := &wiredProvider{close: accts.close, accounts: accts}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	var rl *merchant.Reloader // the credentials in use, after any reload
	// Notifications find their merchant in the registry in use, which
	// names the merchants reloads added (before the reloader exists, the
	// one read at start).
	registry := func() *merchant.Registry {
		if rl == nil {
			return ms.reg
		}
		return rl.Registry()
	}
	current := func(name string) *merchant.Credentials { return rl.Credentials(name) }
	var describe string
	for _, a := range ms.reg.Accounts() {
		creds := ms.creds[a.Name]
		wa, err := m.wireAccount(notifyBase, a, creds, ms.fromFile, registry, current)
		if err != nil {
			return nil, nil, fmt.Errorf("account %q: %w", a.Name, err)
		}
		accts.add(wa)
		if describe != "" {
			describe += ", "
		}
		describe += creds.BaseURL + " (mchid " + creds.MchID + ")"
	}
	// A merchant refunds through its account's client (its keys sign for
	// all its merchants) with its own sub_mchid and notify_url.
	w.forMerchant = func(mc *merchant.Merchant) (merchant.Provider, error) { return accts.provider(mc, nil) }
	per := map[string]merchant.Provider{}
	for _, mc := range ms.reg.Merchants() {
		if per[mc.Name], err = w.forMerchant(mc); err != nil {
			return nil, nil, err
		}
	}
	live := map[string]merchant.Live{}
	var accounts []api.NotifyAccount
	for _, wa := range accts.all() {
		live[wa.name] = wa.live()
		accounts = append(accounts, wa.notify)
	}
	rl, err = merchant.NewReloader(merchant.ReloaderConfig{Registry: ms.reg, Credentials: ms.creds, Live: live,
		Read: func() (*merchant.Registry, map[string]*merchant.Credentials, error) {
			again, err := m.readMerchants()
			if err != nil {
				return nil, nil, err
			}
			return again.reg, again.creds, nil
		},
		Grace: m.Config.APIv3KeyGrace, Logger: m.log.With("component", "credentials"), Observe: m.metrics.ObserveReload,
		Add: func(add merchant.Addition) (merchant.Staged, error) {
			if w.add == nil {
				return merchant.Staged{}, fmt.Errorf("refundd is still starting: add accounts and merchants once it is ready")
			}
			// The added accounts are built as at the start, but run
			// (certificate refreshes, routes, credentials views) only
			// from the commit.
			staged := map[string]*wiredAccount{}
			var notify []api.NotifyAccount
			for _, a := range add.Accounts {
				wa, err := m.wireAccount(notifyBase, a, add.Credentials[a.Name], ms.fromFile, registry, current)
				if err != nil {
					return merchant.Staged{}, fmt.Errorf("account %q: %w", a.Name, err)
				}
				staged[a.Name], notify = wa, append(notify, wa.notify)
			}
			commit, err := w.add(add.Merchants, notify, func(mc *merchant.Merchant) (merchant.Provider, error) {
				return accts.provider(mc, staged)
			})
			if err != nil {
				return merchant.Staged{}, err
			}
			out := merchant.Staged{Live: map[string]merchant.Live{}, Commit: func() {
				for _, a := range add.Accounts {
					accts.add(staged[a.Name])
				}
				commit()
			}}
			for name, wa := range staged {
				out.Live[name] = wa.live()
			}
			return out, nil
		}})
	if err != nil {
		return nil, nil, err
	}
	w.reload = rl.Reload
	w.notify, w.describe = notifyConfig(accounts), "WeChat Pay at "+describe
	if len(accounts) == 1 {
		w.mchID = accounts[0].MchID
	}
	w.credentials = func() api.CredentialsView {
		v := api.CredentialsView{Accounts: []api.AccountCredentials{}}
		for _, wa := range accts.all() {
			v.Accounts = append(v.Accounts, wa.view())
		}
		return v
	}
	return w, per, nil
}

// wiredAccount is one WeChat Pay account's running parts.
type wiredAccount struct {
	name   string
	mchID  string
	client *wechatpay.Client             // signs for all the account's merchants
	certs  *wechatpay.CertificateManager // certificate mode; nil otherwise
	// run starts refreshing certs until the returned stop; nil without.
	run    func() (stop func())
	notify api.NotifyAccount // its notification route's keys
	view   func() api.AccountCredentials
}

// live are the parts a reload swaps the account's credentials in.
func (wa *wiredAccount) live() merchant.Live {
	return merchant.Live{Client: wa.client, Certs: wa.certs, Notify: wa.notify.Keys}
}

// wireAccount builds account a's running parts on creds, at the start and
// for an account a reload adds: in certificate mode its stored
// certificates are loaded and a download is made (the account verifies
// nothing before), then its client, its notification route (merchants of
// the registry reg returns, keys swapped by reloads) and its credentials
// view (of the credentials current returns). Nothing runs until run.
func (m *Main) wireAccount(notifyBase string, a *merchant.Account, creds *merchant.Credentials, fromFile bool,
	reg func() *merchant.Registry, current func(string) *merchant.Credentials) (*wiredAccount, error) {
	wa := &wiredAccount{name: a.Name, mchID: creds.MchID}
	if a.DownloadCertificates {
		c, run, err := m.prepareCertificates(creds)
		if err != nil {
			return nil, err
		}
		wa.certs, wa.run = c, run
	}
	cfg := creds.ClientConfig()
	cfg.Logger = m.log.With("component", "wechatpay", "account", a.Name)
	cfg.NotifyURL = notifyBase + accountNotifyPath(a.Name)
	if !fromFile {
		cfg.NotifyURL = notifyBase + legacyNotifyPath
	}
	client, err := wechatpay.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	wa.client = client
	wa.notify = notifyAccount(reg, a.Name, creds)
	certs, name := wa.certs, a.Name
	wa.view = func() api.AccountCredentials {
		creds := current(name)
		return accountView(creds.Account, creds.MchID, creds.Signer.SerialNo, creds.Verifier, len(creds.APIv3Key) > 0,
			len(creds.APIv2Key) > 0, api.KeySourceFile, certs, m.Config.CertificateRefresh)
	}
	return wa, nil
}

// wechatpayAccounts are the running accounts, in order: those refundd
// started with, then those reloads added. Safe for concurrent use.
type wechatpayAccounts struct {
	mu     sync.Mutex
	list   []*wiredAccount
	byName map[string]*wiredAccount
	stops  []func()
	closed bool
}

// add puts wa in use: its certificates start refreshing.
func (s *wechatpayAccounts) add(wa *wiredAccount) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, wa)
	s.byName[wa.name] = wa
	if wa.run != nil && !s.closed {
		s.stops = append(s.stops, wa.run())
	}
}

// all returns the running accounts in order.
func (s *wechatpayAccounts) all() []*wiredAccount {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// provider is mc's provider: its account's client (running, or among
// staged: accounts a reload is adding) with mc's sub_mchid and
// notify_url.
func (s *wechatpayAccounts) provider(mc *merchant.Merchant, staged map[string]*wiredAccount) (merchant.Provider, error) {
	s.mu.Lock()
	wa, ok := s.byName[mc.Account.Name]
	s.mu.Unlock()
	if !ok {
		if wa, ok = staged[mc.Account.Name]; !ok {
			return nil, fmt.Errorf("merchant %q: account %q is not running", mc.Name, mc.Account.Name)
		}
	}
	p, err := wa.client.For(wechatpay.Target{SubMchID: mc.SubMchID, NotifyURL: mc.NotifyURL})
	if err != nil {
		return nil, fmt.Errorf("merchant %q: %w", mc.Name, err)
	}
	return p, nil
}

// certificates are the certificate managers of the accounts in
// certificate mode, by mchid.
func (s *wechatpayAccounts) certificates() map[string]*wechatpay.CertificateManager {
	out := map[string]*wechatpay.CertificateManager{}
	for _, wa := range s.all() {
		if wa.certs != nil {
			out[wa.mchID] = wa.certs
		}
	}
	return out
}

// keys are the keys each account verifies with, by mchid.
func (s *wechatpayAccounts) keys() map[string][]wechatpay.KeyInfo {
	out := map[string][]wechatpay.KeyInfo{}
	for _, wa := range s.all() {
		if v := wa.notify.Verifier; v != nil {
			out[wa.mchID] = append(out[wa.mchID], v.Keys()...)
		}
	}
	return out
}

// close stops every certificate refresh; an account added afterwards
// starts none.
func (s *wechatpayAccounts) close() {
	s.mu.Lock()
	stops := s.stops
	s.stops, s.closed = nil, true
	s.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
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

// prepareCertificates puts an account in platform certificate mode: the
// stored certificates are loaded and a download is made before refundd
// (or an account a reload adds) is ready; run starts a goroutine that
// refreshes them until its stop. A failed download is fatal only when
// nothing is held afterwards (no stored certificate, no public key or
// certificate file): a restart while WeChat Pay is unreachable keeps
// verifying with what was stored.
func (m *Main) prepareCertificates(creds *merchant.Credentials) (*wechatpay.CertificateManager, func() (stop func()), error) {
	dir := filepath.Join(m.Config.DataDir, "wechatpay-certificates", creds.MchID)
	certs, err := wechatpay.NewCertificateManager(wechatpay.CertificateManagerConfig{
		BaseURL: creds.BaseURL, Signer: creds.Signer, APIv3Key: creds.APIv3Key, Verifier: creds.Verifier, Dir: dir,
		Refresh: m.Config.CertificateRefresh, Logger: m.log.With("component", "wechatpay-certificates", "mchid", creds.MchID),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("--wechatpay-download-certificates: %w", err)
	}
	if _, err := certs.Load(context.Background()); err != nil {
		return nil, nil, fmt.Errorf("--wechatpay-download-certificates: stored certificates in %s: %w", dir, err)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), certificateStartTimeout)
	err = certs.Refresh(dctx)
	dcancel()
	if err != nil {
		if len(creds.Verifier.Serials()) == 0 {
			return nil, nil, fmt.Errorf("--wechatpay-download-certificates: no platform certificate stored and the download failed: %w", err)
		}
		m.log.Warn("platform certificate download failed at start; verifying with the certificates held",
			"mchid", creds.MchID, "held", len(creds.Verifier.Serials()), "err", err.Error())
	}
	run := func() func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			certs.Run(ctx)
		}()
		return func() { cancel(); <-done }
	}
	return certs, run, nil
}
