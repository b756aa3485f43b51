package merchant

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
)

const (
	maxNameLen    = 64
	maxMchIDLen   = 32 // WeChat's string(32) for mchid and sub_mchid
	maxAppIDLen   = 32
	maxSerialLen  = 64
	publicKeyPref = "PUB_KEY_ID_"
	maxValueShown = 40
)

// checkName enforces the form of account and merchant names: they appear in
// API requests, metric labels and notify paths, so they are short, lower
// case and URL-safe: 1..64 of [a-z0-9_-], starting with a letter or digit.
func checkName(path, name string, ps *problems) {
	if name == "" {
		ps.add(path, ErrMissing, "required: 1..64 of [a-z0-9_-]")
		return
	}
	ok := len(name) <= maxNameLen && name[0] != '-' && name[0] != '_'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	if !ok {
		ps.add(path, ErrInvalid, "%q: want 1..64 of [a-z0-9_-], starting with a letter or digit", limit(name))
	}
}

func digits(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func hexDigits(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func word(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// checkAccountFields checks an account's own settings (not its secrets'
// contents, which LoadCredentials reads).
func checkAccountFields(a *Account, ps *problems) {
	switch {
	case a.MchID == "":
		ps.add(a.field("mchid"), ErrMissing, "required: the merchant id (a service provider's sp_mchid)")
	case !digits(a.MchID, maxMchIDLen):
		ps.add(a.field("mchid"), ErrInvalid, "%q: want 1..32 digits", limit(a.MchID))
	}
	switch {
	case a.Serial == "":
		ps.add(a.field("serial"), ErrMissing, "required: the serial of the account's API certificate")
	case !hexDigits(a.Serial, maxSerialLen):
		ps.add(a.field("serial"), ErrInvalid, "%q: want 1..64 hex digits", limit(a.Serial))
	}
	if a.BaseURL == "" {
		ps.add(a.field("base_url"), ErrMissing, "required")
	} else if err := wechatpay.CheckBaseURL(a.BaseURL); err != nil {
		ps.add(a.field("base_url"), ErrInvalid, "%v", err)
	}
	switch {
	case a.PublicKeyID != "" && a.PublicKeyFile == "":
		ps.add(a.field("public_key_file"), ErrMissing, "public_key_id needs the key's file")
	case a.PublicKeyID == "" && a.PublicKeyFile != "":
		ps.add(a.field("public_key_id"), ErrMissing, "public_key_file needs the key's id, PUB_KEY_ID_...")
	case a.PublicKeyID != "" && !(strings.HasPrefix(a.PublicKeyID, publicKeyPref) && word(a.PublicKeyID, maxNameLen)):
		ps.add(a.field("public_key_id"), ErrInvalid, "%q: want PUB_KEY_ID_ followed by letters and digits", limit(a.PublicKeyID))
	}
	if a.PublicKeyFile == "" && len(a.PlatformCertFiles) == 0 && !a.DownloadCertificates {
		ps.add(a.field("public_key_file"), ErrMissing, "WeChat Pay's answers cannot be verified: set %s and %s, or %s, or %s",
			a.key("public_key_id"), a.key("public_key_file"), a.key("platform_cert_files"), a.key("download_certificates"))
	}
	checkPlainPath(a.field("public_key_file"), a.PublicKeyFile, ps)
	seen := map[string]bool{}
	for i, c := range a.PlatformCertFiles {
		path := fmt.Sprintf("%s[%d]", a.field("platform_cert_files"), i)
		switch {
		case c == "":
			ps.add(path, ErrMissing, "empty path")
		case seen[c]:
			ps.add(path, ErrConflict, "%q is listed twice", limit(c))
		}
		checkPlainPath(path, c, ps)
		seen[c] = true
	}
}

// checkPlainPath refuses, for the public key and certificates (named by
// plain paths), what belongs elsewhere: a secret's env:/file: reference, or
// the PEM itself.
func checkPlainPath(path, p string, ps *problems) {
	switch {
	case strings.Contains(p, "-----BEGIN") || strings.ContainsAny(p, "\n\r"):
		ps.add(path, ErrInvalid, "holds a PEM, not a path to one")
	case strings.HasPrefix(p, "file:") || strings.HasPrefix(p, "env:"):
		ps.add(path, ErrInvalid, "public keys and certificates are named by a plain path, without env: or file:")
	}
}

// checkMerchantFields checks a merchant's own settings.
func checkMerchantFields(m *Merchant, where func(string) string, ps *problems) {
	if m.SubMchID != "" && !digits(m.SubMchID, maxMchIDLen) {
		ps.add(where("sub_mchid"), ErrInvalid, "%q: want 1..32 digits", limit(m.SubMchID))
	}
	if m.SubAppID != "" && !word(m.SubAppID, maxAppIDLen) {
		ps.add(where("sub_appid"), ErrInvalid, "%q: want 1..32 of [0-9A-Za-z_]", limit(m.SubAppID))
	}
	if m.RefundNoPrefix != "" {
		// The engine's own rule, so that a prefix accepted here is one the
		// engine accepts.
		if err := (reservation.Policy{RefundNoPrefix: m.RefundNoPrefix}).Validate(); err != nil {
			ps.add(where("refund_prefix"), ErrInvalid, "%q: want 1..16 of [0-9A-Za-z]", limit(m.RefundNoPrefix))
		}
	}
	if err := wechatpay.CheckNotifyURL(m.NotifyURL); err != nil {
		ps.add(where("notify_url"), ErrInvalid, "%v", err)
	}
}

// checkRegistry checks what involves several entries: names, merchant ids
// and prefixes used twice, sub_mchids, accounts nobody uses.
func checkRegistry(accounts []*Account, merchants []*Merchant, ps *problems) {
	accountAt := map[string]int{}
	mchAt := map[string]int{}
	for i, a := range accounts {
		if j, ok := accountAt[a.Name]; ok && a.Name != "" {
			ps.add(a.field("name"), ErrConflict, "%q is also the name of accounts[%d]", a.Name, j)
		} else {
			accountAt[a.Name] = i
		}
		// One merchant id with two key sets would make "which keys verify
		// this" ambiguous.
		if j, ok := mchAt[a.MchID]; ok && a.MchID != "" {
			ps.add(a.field("mchid"), ErrConflict, "%s is also the mchid of accounts[%d]", a.MchID, j)
		} else {
			mchAt[a.MchID] = i
		}
	}
	nameAt := map[string]int{}
	keyAt := map[mchKey]int{}
	used := map[*Account]bool{}
	for i, m := range merchants {
		where := filePath("merchants", i)
		if j, ok := nameAt[m.Name]; ok && m.Name != "" {
			ps.add(where("name"), ErrConflict, "%q is also the name of merchants[%d]", m.Name, j)
		} else {
			nameAt[m.Name] = i
		}
		for j := 0; j < i && m.RefundNoPrefix != ""; j++ {
			o := merchants[j].RefundNoPrefix
			if o != "" && foldPrefixConflict(m.RefundNoPrefix, o) {
				ps.add(where("refund_prefix"), ErrConflict,
					"%q and merchants[%d]'s %q: no prefix may equal or start another, ignoring case, so each refund number names one merchant",
					m.RefundNoPrefix, j, o)
			}
		}
		a := m.Account
		if a == nil {
			continue
		}
		used[a] = true
		if m.Kind == MerchantSub && m.SubMchID != "" && m.SubMchID == a.MchID {
			ps.add(where("sub_mchid"), ErrInvalid, "is the service provider's own mchid (WeChat refuses this)")
		}
		k := mchKey{a.MchID, m.SubMchID}
		if j, ok := keyAt[k]; ok {
			what := fmt.Sprintf("account %q", a.Name)
			path := where("account")
			if m.SubMchID != "" {
				what = fmt.Sprintf("sub_mchid %s of account %q", m.SubMchID, a.Name)
				path = where("sub_mchid")
			}
			ps.add(path, ErrConflict, "merchants[%d] already refunds for %s; notifications and bills must map to one merchant", j, what)
		} else {
			keyAt[k] = i
		}
	}
	for _, a := range accounts {
		if !used[a] && a.Name != "" {
			ps.add(a.field("name"), ErrInvalid, "account %q is used by no merchant", a.Name)
		}
	}
}

// limit shortens a value quoted in an error.
func limit(s string) string {
	if len(s) <= maxValueShown {
		return s
	}
	cut := maxValueShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
