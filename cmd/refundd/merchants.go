package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/internal/reservation"
)

// merchants are the merchants refundd serves, read and checked before
// anything is created: the accounts and merchants of --merchants-file, or
// the one default merchant of the --wechatpay-* flags and --refund-prefix.
type merchants struct {
	reg *merchant.Registry
	// fromFile says reg came from --merchants-file: registrations name
	// their merchant (api.Options.Merchants) and notifications come to
	// each account's own route.
	fromFile bool
	// creds are every account's keys, by account name; nil unless
	// --provider wechatpay.
	creds map[string]*merchant.Credentials
}

// names are the merchants a registration may name (api.Options.Merchants,
// api.CheckScopes): nil for the default merchant alone, as before.
func (ms *merchants) names() []string {
	if !ms.fromFile {
		return nil
	}
	var out []string
	for _, m := range ms.reg.Merchants() {
		out = append(out, m.Name)
	}
	return out
}

// basePrefixes are the merchants' refund-number prefixes of epoch 0, by
// name: where the restore gate looks for refunds lost with a restore.
func (ms *merchants) basePrefixes() map[string]string {
	out := map[string]string{}
	for _, m := range ms.reg.Merchants() {
		out[m.Name] = m.RefundNoPrefix
	}
	return out
}

// readMerchants reads the merchants and, with --provider wechatpay, every
// account's credentials; errors name the file or the flags, never a
// secret.
//
// --merchants-file replaces the --wechatpay-* flags: given together they
// are refused (two sources for one account would leave which one signs
// unclear). With --provider memory every merchant refunds through the
// memory stand-in (no credentials read; refund numbers keep each
// merchant's prefix). --provider sandbox runs one merchant and is refused
// with a merchants file: use wxpaysim, which serves several and writes the
// file.
func (m *Main) readMerchants() (*merchants, error) {
	c := m.Config
	ms := &merchants{}
	if c.MerchantsFile == "" {
		s := c.Wechatpay
		s.RefundNoPrefix = c.RefundNoPrefix
		if c.Provider != providerWechatpay {
			// The sandbox and memory providers bring their own keys.
			s = merchant.DefaultSettings{RefundNoPrefix: c.RefundNoPrefix}
		}
		reg, err := merchant.NewDefault(s)
		if err != nil {
			return nil, fmt.Errorf("wechatpay provider: %w", err)
		}
		ms.reg = reg
		if c.Provider == providerWechatpay {
			if _, ok := reg.Account(merchant.DefaultName); !ok {
				return nil, errNoAccount
			}
		}
	} else {
		if flags := c.wechatpayFlags(); len(flags) > 0 {
			return nil, fmt.Errorf("--merchants-file %s and %s: %w", c.MerchantsFile, flags[0], errMerchantsFileAndFlags)
		}
		if c.Provider == providerSandbox {
			return nil, fmt.Errorf("--merchants-file %s: %w", c.MerchantsFile, errMerchantsFileSandbox)
		}
		reg, err := merchant.ReadFile(c.MerchantsFile, os.ReadFile)
		if err != nil {
			return nil, fmt.Errorf("--merchants-file %s: %w", c.MerchantsFile, err)
		}
		ms.reg, ms.fromFile = reg, true
	}
	if c.Provider == providerWechatpay {
		creds, err := ms.reg.LoadCredentials(merchant.Sources{Getenv: m.env, ReadFile: os.ReadFile})
		if err != nil {
			if ms.fromFile {
				return nil, fmt.Errorf("--merchants-file %s: %w", c.MerchantsFile, err)
			}
			return nil, fmt.Errorf("wechatpay provider: %w", err)
		}
		ms.creds = creds
	}
	return ms, nil
}

var (
	errNoAccount = errors.New("wechatpay provider: missing --wechatpay-base-url, --wechatpay-mchid, --wechatpay-serial, " +
		"--wechatpay-private-key, --wechatpay-public-key or --wechatpay-platform-cert, --wechatpay-apiv3-key-file (or REFUNDD_WECHATPAY_APIV3_KEY)")
	errMerchantsFileAndFlags = errors.New("a merchants file defines every account: put this account in it instead of the --wechatpay-* flags")
	errMerchantsFileSandbox  = errors.New("--provider sandbox serves one merchant: use --provider memory, or wxpaysim (which writes a merchants file) with --provider wechatpay")
)

// wechatpayFlags names the --wechatpay-* flags that are set.
func (c *Config) wechatpayFlags() []string {
	w := c.Wechatpay
	var out []string
	for _, f := range []struct {
		set  bool
		name string
	}{
		{w.BaseURL != "", "--wechatpay-base-url"}, {w.MchID != "", "--wechatpay-mchid"}, {w.Serial != "", "--wechatpay-serial"},
		{w.PrivateKeyFile != "", "--wechatpay-private-key"}, {w.APIv3KeyFile != "", "--wechatpay-apiv3-key-file"},
		{w.APIv2KeyFile != "", "--wechatpay-apiv2-key-file"}, {w.PublicKeyFile != "", "--wechatpay-public-key"},
		{w.PublicKeyID != "", "--wechatpay-public-key-id"}, {len(w.PlatformCerts) > 0, "--wechatpay-platform-cert"},
		{w.NotifyURL != "", "--wechatpay-notify-url"},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// accountNotifyPath is the notification route of one account (api/notify.go
// serves it): a merchant of a merchants file without notify_url has
// WeChat Pay notify here, so a notification is verified with its
// account's keys only.
func accountNotifyPath(account string) string {
	return "/v1/notify/wechatpay/accounts/" + account + "/refund"
}

// legacyNotifyPath is the notification route of the one default merchant.
const legacyNotifyPath = "/v1/notify/wechatpay/refund"

// notifyAccounts are the notification settings of every account, in file
// order (the first also serves the legacy routes): notifyAccount of each.
func notifyAccounts(reg func() *merchant.Registry, creds map[string]*merchant.Credentials) []api.NotifyAccount {
	var out []api.NotifyAccount
	for _, a := range reg().Accounts() {
		if c := creds[a.Name]; c != nil {
			out = append(out, notifyAccount(reg, a.Name, c))
		}
	}
	return out
}

// notifyAccount is the notification settings of one account: its keys,
// and the merchant a notification names, among this account's merchants
// only, in the registry reg returns at the time (the one in use: reloads
// add merchants). This is the one place they are built, for the accounts
// refundd starts with and those a reload adds.
func notifyAccount(reg func() *merchant.Registry, name string, c *merchant.Credentials) api.NotifyAccount {
	return api.NotifyAccount{Name: name, MchID: c.MchID, Verifier: c.Verifier, Keys: api.NewNotifyKeys(c.APIv3Key, c.APIv2Key),
		Merchant: func(mchID, subMchID string) (string, bool) {
			m, ok := reg().ByMchID(mchID, subMchID)
			if !ok || m.Account == nil || m.Account.Name != name {
				return "", false
			}
			return m.Name, true
		}}
}

// notifyConfig serves every account's notifications on its own routes;
// the first account also answers the legacy ones.
func notifyConfig(accounts []api.NotifyAccount) *api.NotifyConfig {
	if len(accounts) == 0 {
		return nil
	}
	return &api.NotifyConfig{Accounts: accounts}
}

// merchantParts are the running parts a merchant added by a reload joins,
// besides the provider's router and pacers.
type merchantParts struct {
	base        reservation.Policy                  // the engine-wide policy (--refund-* flags)
	epochPrefix func(base string) (string, error)   // audit.EpochPrefix of the journal's epoch
	prefixes    func(base string) ([]string, error) // audit.EpochPrefixes of the journal's epoch
	policies    *actors.PolicySet
	api         *api.Server
}

// merchantAdder checks what a reload adds (wiredProvider.add): it makes
// each added merchant's provider (forMerchant: its account's client, an
// account running or being added), behind its account's pacer, its
// policy and routes, and checks its refund-number prefixes, in every
// epoch, against the running ones; nothing changes until the commit.
// The commit makes them known in this order: routes, engine policy,
// metrics labels, the added accounts' notification routes, then the
// merchants to the API, so that by the time a registration may name one
// every refund of it has a route and its notifications are taken.
func (m *Main) merchantAdder(parts merchantParts) func([]*merchant.Merchant, []api.NotifyAccount,
	func(*merchant.Merchant) (merchant.Provider, error)) (func(), error) {
	w := m.provider
	return func(added []*merchant.Merchant, notify []api.NotifyAccount, forMerchant func(*merchant.Merchant) (merchant.Provider, error)) (func(), error) {
		raw := make(map[string]merchant.Provider, len(added))
		pols := make(map[string]reservation.Policy, len(added))
		names := make([]string, 0, len(added))
		for _, mc := range added {
			p, err := forMerchant(mc)
			if err != nil {
				return nil, err
			}
			raw[mc.Name] = p
			if pols[mc.Name], err = mc.EpochPolicy(parts.base, parts.epochPrefix); err != nil {
				return nil, err
			}
			names = append(names, mc.Name)
		}
		// An added account's pacer is kept from the commit on.
		per, pace, err := w.pacers.Stage(added, raw)
		if err != nil {
			return nil, err
		}
		route, err := w.router.Extend(added, per, parts.prefixes)
		if err != nil {
			return nil, err
		}
		return func() {
			pace()
			route()
			for _, name := range names {
				// Checked above, and new: the Reloader adds only merchants
				// the running registry has not.
				if err := parts.policies.Add(name, pols[name]); err != nil {
					m.log.Error("merchant added without its policy", "merchant", name, "err", err)
				}
			}
			m.metrics.AddMerchants(names...)
			parts.api.AddNotifyAccounts(notify...)
			parts.api.AddMerchants(names...)
		}, nil
	}
}
