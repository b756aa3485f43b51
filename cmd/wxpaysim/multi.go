package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// MerchantsFile is the merchants file (refundd --merchants-file) written
// into --keys-dir when several merchants are served.
const MerchantsFile = "merchants.toml"

// multi reports whether several merchants are served.
func (c *Config) multi() bool { return len(c.DirectMchIDs) > 0 || c.SPMchID != "" }

func (c *Config) validateMulti() error {
	if !c.multi() {
		switch {
		case len(c.SubMchIDs) > 0:
			return errors.New("--sub-merchants needs --service-provider")
		case c.StateDir != "":
			return errors.New("--state-dir is for several merchants (--direct-merchants, --service-provider); use --state-file")
		}
		return nil
	}
	switch {
	case c.mchIDSet:
		return errors.New("--mchid serves one merchant; with --direct-merchants or --service-provider list every merchant there")
	case c.StateFile != "":
		return errors.New("--state-file keeps one merchant's books; with several merchants use --state-dir")
	case c.SPMchID != "" && len(c.SubMchIDs) == 0:
		return errors.New("--service-provider needs --sub-merchants")
	case c.SPMchID == "" && len(c.SubMchIDs) > 0:
		return errors.New("--sub-merchants needs --service-provider")
	}
	seen := map[string]string{}
	for _, id := range slices.Concat(c.DirectMchIDs, []string{c.SPMchID}, c.SubMchIDs) {
		if id == "" {
			continue
		}
		if !digits(id) || len(id) > 32 {
			return fmt.Errorf("merchant id %q: want 1..32 digits", id)
		}
		if seen[id] != "" {
			return fmt.Errorf("merchant id %s is listed twice", id)
		}
		seen[id] = id
	}
	if len(c.DirectMchIDs) > 26 || len(c.SubMchIDs) > 26 {
		return errors.New("at most 26 direct merchants and 26 sub-merchants")
	}
	return nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func splitList(v string) []string {
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// multiAccount is one account served and the merchants of it.
type multiAccount struct {
	keys   sandbox.Keys
	dir    string
	reused bool
	subs   []string // nil for a direct merchant
}

// runMulti serves every configured merchant behind one address: each
// account's keys in --keys-dir/{mchid}/, each merchant's books apart.
func (m *Main) runMulti() error {
	c := m.Config
	root, err := filepath.Abs(c.KeysDir)
	if err != nil {
		root = c.KeysDir
	}
	var accounts []multiAccount
	add := func(mchID string, subs []string) error {
		dir := filepath.Join(root, mchID)
		k, reused, err := loadOrGenerate(dir, mchID, true)
		if err != nil {
			return err
		}
		accounts = append(accounts, multiAccount{keys: k, dir: dir, reused: reused, subs: subs})
		return nil
	}
	for _, id := range c.DirectMchIDs {
		if err := add(id, nil); err != nil {
			return err
		}
	}
	if c.SPMchID != "" {
		if err := add(c.SPMchID, c.SubMchIDs); err != nil {
			return err
		}
	}
	var cfgs []sandbox.Config
	for _, a := range accounts {
		subs := a.subs
		if subs == nil {
			subs = []string{""}
		}
		creates := sandbox.NewCreateCounter(c.MaxCreates) // the account's, shared by its sub-merchants
		for _, sub := range subs {
			cfg := a.keys.Config()
			cfg.SubMchID = sub
			cfg.TimeFactor, cfg.ProcessingDelay = c.TimeFactor, c.ProcessingDelay
			cfg.NotifyURL, cfg.NotifyURLV2 = c.NotifyURL, c.NotifyURLV2
			cfg.MinRefundSpacing, cfg.Creates = c.MinRefundSpacing, creates
			cfg.CertificateMode = c.CertificateMode
			if c.NotifyURLV2 == "" {
				cfg.APIv2Key = nil
			}
			if c.StateDir != "" {
				cfg.StateFile = filepath.Join(c.StateDir, "books-"+bookName(a.keys.MchID, sub)+".json")
			}
			cfg.Logger = m.log.With("mchid", a.keys.MchID, "sub_mchid", sub)
			cfgs = append(cfgs, cfg)
		}
	}
	mu, err := sandbox.NewMulti(cfgs)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		mu.Close()
		return fmt.Errorf("listen %s: %w", c.Listen, err)
	}
	base := "http://" + ln.Addr().String()
	for _, a := range accounts {
		if _, err := a.keys.WriteDir(a.dir, base); err != nil {
			ln.Close()
			mu.Close()
			return err
		}
	}
	file := merchantsTOML(accounts, base, strings.TrimRight(c.RefunddURL, "/"))
	path := filepath.Join(root, MerchantsFile)
	if err := os.WriteFile(path, file, 0o600); err != nil {
		ln.Close()
		mu.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	m.multi = mu
	m.serve(mu, ln)
	m.reportMulti(base, path, file, mu)
	return nil
}

// bookName names a merchant's books: its mchid, or sp_mchid-sub_mchid, as
// in the sandbox's admin routes.
func bookName(mchID, sub string) string {
	if sub == "" {
		return mchID
	}
	return mchID + "-" + sub
}

// merchantsTOML writes the merchants file refundd reads (--merchants-file,
// format of internal/merchant and docs/MERCHANTS.md; TestRun_SeveralMerchants
// reads it back with merchant.ReadFile): one account per
// mchid with its key files, one merchant per direct merchant and
// sub-merchant. Secrets are referenced by file, never inline. Refund
// prefixes are two letters, D? for direct merchants and S? for
// sub-merchants, so none starts another.
func merchantsTOML(accounts []multiAccount, base, refunddURL string) []byte {
	// Each account's notifications go to its own route, where refundd
	// verifies them with that account's keys (docs/MERCHANTS.md); the
	// legacy route serves the first account only.
	notifyURL := func(a multiAccount) string {
		return refunddURL + "/v1/notify/wechatpay/accounts/" + accountName(a) + "/refund"
	}
	var b strings.Builder
	b.WriteString("# refundd --merchants-file for the wxpaysim sandbox at " + base + ".\n")
	b.WriteString("# Written by wxpaysim; keys are the sandbox's own, in the directories named.\n\n")
	for _, a := range accounts {
		kind := "direct"
		if a.subs != nil {
			kind = "service_provider"
		}
		f := func(name string) string { return tomlString(filepath.Join(a.dir, name)) }
		fmt.Fprintf(&b, "[[accounts]]\nname = %s\nkind = %q\nmchid = %s\nbase_url = %s\nserial = %s\n",
			tomlString(accountName(a)), kind, tomlString(a.keys.MchID), tomlString(base), tomlString(a.keys.MerchantSerial))
		fmt.Fprintf(&b, "private_key = %s\napiv3_key = %s\napiv2_key = %s\npublic_key_id = %s\npublic_key_file = %s\n\n",
			tomlString("file:"+filepath.Join(a.dir, sandbox.MerchantKeyFile)), tomlString("file:"+filepath.Join(a.dir, sandbox.APIv3KeyFile)),
			tomlString("file:"+filepath.Join(a.dir, sandbox.APIv2KeyFile)), tomlString(a.keys.PublicKeyID), f(sandbox.PublicKeyFile))
	}
	d, s := 0, 0
	for _, a := range accounts {
		if a.subs == nil {
			fmt.Fprintf(&b, "[[merchants]]\nname = %s\nkind = \"direct\"\naccount = %s\nrefund_prefix = %s\nnotify_url = %s\n\n",
				tomlString("direct-"+a.keys.MchID), tomlString(accountName(a)), tomlString("D"+string(rune('A'+d))), tomlString(notifyURL(a)))
			d++
			continue
		}
		for _, sub := range a.subs {
			fmt.Fprintf(&b, "[[merchants]]\nname = %s\nkind = \"sub_merchant\"\naccount = %s\nsub_mchid = %s\nrefund_prefix = %s\nnotify_url = %s\n\n",
				tomlString("sub-"+sub), tomlString(accountName(a)), tomlString(sub), tomlString("S"+string(rune('A'+s))), tomlString(notifyURL(a)))
			s++
		}
	}
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

func accountName(a multiAccount) string {
	if a.subs != nil {
		return "provider-" + a.keys.MchID
	}
	return "direct-" + a.keys.MchID
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// reportMulti prints where the sandbox listens, what it serves and the
// merchants file.
func (m *Main) reportMulti(base, path string, file []byte, mu *sandbox.Multi) {
	w := m.Stdout
	fmt.Fprintf(w, "wxpaysim: WeChat Pay refund sandbox listening on %s\n", base)
	fmt.Fprintf(w, "wxpaysim: time factor %g, processing delay %s\n", m.Config.TimeFactor, m.Config.ProcessingDelay)
	for _, mc := range mu.Books() {
		if mc.SubMchID == "" {
			fmt.Fprintf(w, "wxpaysim: direct merchant %s, admin %s/sandbox/books/%s/\n", mc.MchID, base, bookName(mc.MchID, ""))
		} else {
			fmt.Fprintf(w, "wxpaysim: sub-merchant %s of service provider %s, admin %s/sandbox/books/%s/\n",
				mc.SubMchID, mc.MchID, base, bookName(mc.MchID, mc.SubMchID))
		}
	}
	if m.Config.SPMchID != "" {
		fmt.Fprintf(w, "wxpaysim: other sub_mchids of %s are refused with 403 NO_AUTH\n", m.Config.SPMchID)
	}
	fmt.Fprintf(w, "wxpaysim: point refundd at it with --merchants-file=%s:\n\n%s\n", path, file)
}

// books is for tests: the merchants served.
func (m *Main) books() []wechatpay.Merchant {
	if m.multi == nil {
		return nil
	}
	return m.multi.Books()
}
