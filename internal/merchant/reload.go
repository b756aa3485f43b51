package merchant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// Errors of Reloader.Reload. Either way nothing was swapped in.
var (
	// ErrReloadInvalid: a file or setting read again is missing or wrong.
	ErrReloadInvalid = errors.New("credentials not reloaded")
	// ErrRestartRequired: the files changed something a reload does not
	// apply (an account removed, a merchant removed, a kind, mchid,
	// base_url, download_certificates, account, prefix, sub_mchid,
	// sub_appid, notify_url or policy changed, an APIv2 key added or
	// removed, an account or merchant added when ReloaderConfig.Add is
	// nil).
	ErrRestartRequired = errors.New("a restart is needed")
)

// Reload results, as Reloader.Observe receives them.
const (
	ReloadOK              = "ok"
	ReloadInvalid         = "invalid"
	ReloadRestartRequired = "restart_required"
)

// Signers take a new merchant key and serial: *wechatpay.Client and
// *wechatpay.CertificateManager.
type Signers interface {
	SetSigner(wechatpay.Signer) error
}

// NotifyKeys take an account's new notification keys (api.NotifyKeys):
// after an APIv3 key change the previous key keeps opening notifications
// for grace.
type NotifyKeys interface {
	Set(apiV3, apiV2 []byte, grace time.Duration)
}

// Live are the running parts of one account that hold its credentials.
type Live struct {
	Client Signers                       // required
	Certs  *wechatpay.CertificateManager // platform certificate mode; nil otherwise
	Notify NotifyKeys                    // nil: no notification route
}

// ReloaderConfig configures a Reloader.
type ReloaderConfig struct {
	// Registry and Credentials are what the service started with. The
	// Verifier of each account's Credentials is the running one: a reload
	// replaces its file keys in place.
	Registry    *Registry
	Credentials map[string]*Credentials
	Live        map[string]Live // by account name; every account of Registry
	// Read reads the merchants (or settings) and credential files again;
	// its errors name the file and setting, never a secret.
	Read func() (*Registry, map[string]*Credentials, error)
	// Grace is how long the APIv3 key replaced by a reload keeps opening
	// notifications.
	Grace  time.Duration
	Logger *slog.Logger
	// Observe, if set, counts every reload by result (ReloadOK, ...).
	Observe func(result string)
	// Add, if set, takes the accounts and merchants the files name that
	// the running registry has not: it checks them against the running
	// ones, builds each added account's running parts (a certificate
	// mode account downloads its certificates here) and returns them
	// with the commit that makes it all usable, which cannot fail;
	// nothing running may change before commit. The reload swaps the
	// credentials in between the two, so an error leaves everything as it
	// was. Nil: adding an account or a merchant needs a restart.
	Add func(Addition) (Staged, error)
}

// Addition is what a reload adds to the running service.
type Addition struct {
	// Accounts are the accounts the running registry has not, in file
	// order, and Credentials their credentials as read, by name.
	Accounts    []*Account
	Credentials map[string]*Credentials
	// Merchants are the merchants the running registry has not, in file
	// order, each on a running account or on one of Accounts.
	Merchants []*Merchant
}

// Staged is an Addition checked and built, not yet in use.
type Staged struct {
	// Live are the running parts of each added account, by name; each
	// needs a Client.
	Live map[string]Live
	// Commit makes the added accounts and merchants usable; it cannot
	// fail. Nil: nothing to do.
	Commit func()
}

// Reloader swaps in credentials read again from their files while
// refunds and notifications run (SIGHUP, POST
// /v1/admin/credentials/reload): all of them when every file is good and
// nothing needing a restart changed, none otherwise. Safe for concurrent
// use; reloads run one at a time.
type Reloader struct {
	cfg   ReloaderConfig
	mu    sync.Mutex      // one reload at a time
	live  map[string]Live // by account name; grows with added accounts, under mu
	reg   atomic.Pointer[Registry]
	creds atomic.Pointer[map[string]*Credentials]
}

// NewReloader checks cfg and returns its Reloader.
func NewReloader(cfg ReloaderConfig) (*Reloader, error) {
	if cfg.Registry == nil || cfg.Read == nil {
		return nil, fmt.Errorf("merchant: reloader needs a Registry and Read")
	}
	for _, a := range cfg.Registry.Accounts() {
		if cfg.Credentials[a.Name] == nil || cfg.Live[a.Name].Client == nil {
			return nil, fmt.Errorf("merchant: reloader: account %q has no credentials or client", a.Name)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{cfg: cfg, live: maps.Clone(cfg.Live)}
	r.reg.Store(cfg.Registry)
	creds := cfg.Credentials
	r.creds.Store(&creds)
	return r, nil
}

// Credentials are the account's credentials in use now; nil for an
// unknown account. Their Verifier is the running one.
func (r *Reloader) Credentials(account string) *Credentials { return (*r.creds.Load())[account] }

// Registry is the registry in use now: the one the service started with,
// or the last one a reload swapped in (with the merchants it added).
func (r *Reloader) Registry() *Registry { return r.reg.Load() }

// Reload reads every file again and swaps the credentials in when all are
// good; trigger ("SIGHUP", "api") is logged. A refusal is logged at ERROR
// and wraps ErrReloadInvalid or ErrRestartRequired; the running
// credentials stay.
func (r *Reloader) Reload(_ context.Context, trigger string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.reload(trigger)
	result := ReloadOK
	switch {
	case errors.Is(err, ErrRestartRequired):
		result = ReloadRestartRequired
	case err != nil:
		result = ReloadInvalid
	}
	if err != nil {
		r.cfg.Logger.Error("credentials reload refused; the running credentials stay in use", "trigger", trigger,
			"result", result, "err", err.Error())
	}
	if r.cfg.Observe != nil {
		r.cfg.Observe(result)
	}
	return err
}

func (r *Reloader) reload(trigger string) error {
	reg, creds, err := r.cfg.Read()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrReloadInvalid, err)
	}
	old := *r.creds.Load()
	add, err := sameShape(r.reg.Load(), reg, old, creds, r.cfg.Add != nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRestartRequired, err)
	}
	var staged Staged
	if len(add.Accounts)+len(add.Merchants) > 0 {
		// Checked and built before any credential is swapped: a refusal
		// changes nothing.
		if staged, err = r.cfg.Add(add); err != nil {
			return fmt.Errorf("%w: %w", ErrReloadInvalid, err)
		}
		for _, a := range add.Accounts {
			if staged.Live[a.Name].Client == nil {
				return fmt.Errorf("%w: account %q: no client was built for it", ErrReloadInvalid, a.Name)
			}
		}
	}
	next := make(map[string]*Credentials, len(creds))
	for _, a := range reg.Accounts() {
		was, running := old[a.Name]
		if !running {
			// Added: its client, certificates and notification route
			// were built on these credentials (its Verifier is theirs).
			next[a.Name] = creds[a.Name]
			continue
		}
		now := *creds[a.Name]
		live := r.live[a.Name]
		// The signer is the one swap that can refuse (a serial that is not
		// header-safe, which reading the files already refuses): first, so
		// a refusal leaves this account as it was.
		if err := live.Client.SetSigner(now.Signer); err != nil {
			return fmt.Errorf("%w: account %q: %w", ErrReloadInvalid, a.Name, err)
		}
		if live.Certs != nil {
			if err := live.Certs.SetSigner(now.Signer); err != nil {
				return fmt.Errorf("%w: account %q: %w", ErrReloadInvalid, a.Name, err)
			}
			if err := live.Certs.SetAPIv3Key(now.APIv3Key); err != nil {
				return fmt.Errorf("%w: account %q: %w", ErrReloadInvalid, a.Name, err)
			}
		}
		// The file keys are replaced in the running Verifier, which the
		// client, the certificate manager and the notification route
		// share; downloaded certificates stay.
		added, removed := diff(was.FileSerials, now.FileSerials)
		was.Verifier.Replace(now.Verifier, was.FileSerials)
		now.Verifier = was.Verifier
		if live.Notify != nil {
			live.Notify.Set(now.APIv3Key, now.APIv2Key, r.cfg.Grace)
		}
		next[a.Name] = &now
		attrs := []any{"trigger", trigger, "account", a.Name, "mchid", now.MchID, "merchant_serial", now.Signer.SerialNo,
			"keys_added", added, "keys_removed", removed}
		if was.Signer.SerialNo != now.Signer.SerialNo {
			attrs = append(attrs, "previous_merchant_serial", was.Signer.SerialNo)
		}
		if !slices.Equal(was.APIv3Key, now.APIv3Key) {
			attrs = append(attrs, "apiv3_key_changed", true, "previous_apiv3_key_grace", r.cfg.Grace.String())
		}
		r.cfg.Logger.Info("credentials reloaded", attrs...)
	}
	// The new accounts and merchants use the credentials just swapped in;
	// the registry that names them (notifications find their merchant in
	// it) follows their routes.
	r.creds.Store(&next)
	for _, a := range add.Accounts {
		r.live[a.Name] = staged.Live[a.Name]
	}
	if staged.Commit != nil {
		staged.Commit()
	}
	r.reg.Store(reg)
	for _, a := range add.Accounts {
		c := creds[a.Name]
		r.cfg.Logger.Info("account added", "trigger", trigger, "account", a.Name, "kind", a.Kind, "mchid", c.MchID,
			"merchant_serial", c.Signer.SerialNo, "keys", c.FileSerials, "download_certificates", a.DownloadCertificates)
	}
	for _, m := range add.Merchants {
		r.cfg.Logger.Info("merchant added", "trigger", trigger, "merchant", m.Name, "kind", m.Kind, "account", m.Account.Name,
			"sub_mchid", m.SubMchID, "refund_prefix", m.RefundNoPrefix)
	}
	return nil
}

// sameShape says what in the files changed that a reload does not apply,
// naming the merchant or account and the setting. It returns the
// accounts and merchants now has that was has not, in file order; they
// are allowed only when adding (ReloaderConfig.Add is set).
func sameShape(was, now *Registry, wasCreds, nowCreds map[string]*Credentials, adding bool) (Addition, error) {
	add := Addition{Credentials: map[string]*Credentials{}}
	var ps []error
	for _, a := range was.Accounts() {
		b, ok := now.Account(a.Name)
		if !ok {
			ps = append(ps, fmt.Errorf("account %q removed", a.Name))
			continue
		}
		for _, f := range []struct {
			what     string
			old, new any
		}{
			{"kind", a.Kind, b.Kind}, {"mchid", a.MchID, b.MchID}, {"base_url", a.BaseURL, b.BaseURL},
			{"download_certificates", a.DownloadCertificates, b.DownloadCertificates},
			{"apiv2_key (present)", len(wasCreds[a.Name].APIv2Key) > 0, len(nowCreds[a.Name].APIv2Key) > 0},
		} {
			if f.old != f.new {
				ps = append(ps, fmt.Errorf("account %q: %s changed from %v to %v", a.Name, f.what, f.old, f.new))
			}
		}
	}
	for _, b := range now.Accounts() {
		if _, ok := was.Account(b.Name); ok {
			continue
		}
		if !adding {
			ps = append(ps, fmt.Errorf("account %q added (this provider takes new accounts at a restart only)", b.Name))
			continue
		}
		add.Accounts = append(add.Accounts, b)
		add.Credentials[b.Name] = nowCreds[b.Name]
	}
	accountOf := func(m *Merchant) string {
		if m.Account == nil {
			return ""
		}
		return m.Account.Name
	}
	for _, m := range was.Merchants() {
		n, ok := now.ByName(m.Name)
		if !ok {
			ps = append(ps, fmt.Errorf("merchant %q removed (or renamed)", m.Name))
			continue
		}
		for _, f := range []struct {
			what     string
			old, new any
		}{
			{"account", accountOf(m), accountOf(n)}, {"kind", m.Kind, n.Kind}, {"sub_mchid", m.SubMchID, n.SubMchID},
			{"sub_appid", m.SubAppID, n.SubAppID}, {"refund_prefix", m.RefundNoPrefix, n.RefundNoPrefix},
			{"notify_url", m.NotifyURL, n.NotifyURL},
		} {
			if f.old != f.new {
				ps = append(ps, fmt.Errorf("merchant %q: %s changed from %q to %q", m.Name, f.what, f.old, f.new))
			}
		}
		if !reflect.DeepEqual(m.Overrides, n.Overrides) {
			ps = append(ps, fmt.Errorf("merchant %q: a policy setting changed", m.Name))
		}
	}
	for _, m := range now.Merchants() {
		if _, ok := was.ByName(m.Name); ok {
			continue
		}
		switch {
		case !adding:
			ps = append(ps, fmt.Errorf("merchant %q added (this provider takes new merchants at a restart only)", m.Name))
		case m.Account == nil:
			ps = append(ps, fmt.Errorf("merchant %q added without an account", m.Name))
		default:
			add.Merchants = append(add.Merchants, m)
		}
	}
	if err := errors.Join(ps...); err != nil {
		return Addition{}, err
	}
	return add, nil
}

// diff is what b has that a has not, and the other way round.
func diff(a, b []string) (added, removed []string) {
	added, removed = []string{}, []string{}
	for _, s := range b {
		if !slices.Contains(a, s) {
			added = append(added, s)
		}
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			removed = append(removed, s)
		}
	}
	return added, removed
}
