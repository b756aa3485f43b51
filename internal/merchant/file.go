package merchant

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/refundd/refundd/internal/reservation"
)

// The merchants file as TOML sees it. Strings stay strings here (durations,
// secret references) so that validation can name the field of every bad
// value and report them all, rather than stop at the decoder's first.
type fileFormat struct {
	Accounts  []fileAccount  `toml:"accounts"`
	Merchants []fileMerchant `toml:"merchants"`
}

type fileAccount struct {
	Name              string   `toml:"name"`
	Kind              string   `toml:"kind"`
	MchID             string   `toml:"mchid"`
	BaseURL           string   `toml:"base_url,omitempty"`
	Serial            string   `toml:"serial"`
	PrivateKey        string   `toml:"private_key"`
	APIv3Key          string   `toml:"apiv3_key"`
	APIv2Key          string   `toml:"apiv2_key,omitempty"`
	PublicKeyID       string   `toml:"public_key_id,omitempty"`
	PublicKeyFile     string   `toml:"public_key_file,omitempty"`
	PlatformCertFiles []string `toml:"platform_cert_files,omitempty"`
	// DownloadCertificates: platform certificate mode (Account).
	DownloadCertificates bool `toml:"download_certificates,omitempty"`
	// Outbound pacing, calls per second (PacingOverrides).
	PaceCreates       *float64 `toml:"pace_creates,omitempty"`
	PaceFailedCreates *float64 `toml:"pace_failed_creates,omitempty"`
	PaceQueries       *float64 `toml:"pace_queries,omitempty"`
}

type fileMerchant struct {
	Name         string      `toml:"name"`
	Kind         string      `toml:"kind"`
	Account      string      `toml:"account"`
	SubMchID     string      `toml:"sub_mchid,omitempty"`
	SubAppID     string      `toml:"sub_appid,omitempty"`
	RefundPrefix string      `toml:"refund_prefix"`
	NotifyURL    string      `toml:"notify_url,omitempty"`
	Policy       *filePolicy `toml:"policy,omitempty"`
}

type filePolicy struct {
	RefundSpacing    *string `toml:"refund_spacing,omitempty"`
	RefundWindow     *string `toml:"refund_window,omitempty"`
	RetryMaxAttempts *int64  `toml:"retry_max_attempts,omitempty"`
	RetryBackoff     *string `toml:"retry_backoff,omitempty"`
	RetryBackoffMax  *string `toml:"retry_backoff_max,omitempty"`
	// Four-eyes approval.
	ApproveAll          *bool   `toml:"approve_all,omitempty"`
	ApproveAbove        *int64  `toml:"approve_above,omitempty"`
	ApproveAbovePercent *int64  `toml:"approve_above_percent,omitempty"`
	ApproveNonService   *bool   `toml:"approve_non_service,omitempty"`
	ApprovalTimeout     *string `toml:"approval_timeout,omitempty"`
}

// keyHints answer the unknown keys people are likely to guess.
var keyHints = map[string]string{
	"private_key_file": `write private_key = "file:PATH"`,
	"apiv3_key_file":   `write apiv3_key = "file:PATH" or "env:NAME"`,
	"apiv3_key_env":    `write apiv3_key = "env:NAME" or "file:PATH"`,
	"apiv2_key_file":   `write apiv2_key = "file:PATH" or "env:NAME"`,
	"apiv2_key_env":    `write apiv2_key = "env:NAME" or "file:PATH"`,
	"sp_mchid":         "a service provider's id is the account's mchid",
	"sub_mch_id":       "write sub_mchid",
	"refund_no_prefix": "write refund_prefix",
	"platform_certs":   "write platform_cert_files",
	"public_key":       "write public_key_file (and public_key_id)",
}

// ReadFile reads and checks a merchants file (--merchants-file). Relative
// paths in it are relative to the file's directory. Errors are prefixed with
// the path; see Parse.
func ReadFile(path string, readFile func(string) ([]byte, error)) (*Registry, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("merchants file: %w", err)
	}
	r, err := Parse(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("merchants file %s:\n%w", path, err)
	}
	return r, nil
}

// Parse reads a merchants file and checks it. dir is the directory relative
// paths are relative to; "" leaves them as written.
//
// Errors are always Errors. A malformed document, or a value of the wrong
// TOML type, is one problem wrapping ErrSyntax, with its line. Otherwise
// every problem is reported at once: unknown keys (ErrUnknownKey, with key
// and line), then each setting by its path, merchants[2].sub_mchid
// (ErrMissing, ErrInvalid, ErrInlineSecret, ErrConflict). Nothing is read
// from the environment or from the files named; LoadCredentials does that.
func Parse(data []byte, dir string) (*Registry, error) {
	var f fileFormat
	var ps problems
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		var strict *toml.StrictMissingError
		var de *toml.DecodeError
		switch {
		case errors.As(err, &strict):
			// The known keys were decoded; check them too, so one round
			// fixes both the typo and what it left missing.
			headers := arrayTableLines(data)
			for i := range strict.Errors {
				e := &strict.Errors[i]
				line, _ := e.Position()
				key := keyPath(e.Key(), line, headers)
				msg := "not a setting of the merchants file"
				if h, ok := keyHints[lastKey(e.Key())]; ok {
					msg += "; " + h
				}
				ps.list = append(ps.list, &FieldError{Path: key, Line: line, Err: fmt.Errorf("%w: %s", ErrUnknownKey, msg)})
			}
		case errors.As(err, &de):
			line, _ := de.Position()
			path := keyPath(de.Key(), line, arrayTableLines(data))
			return nil, Errors{{Path: path, Line: line, Err: fmt.Errorf("%w: %s", ErrSyntax, decodeMessage(de))}}
		default:
			return nil, Errors{{Err: fmt.Errorf("%w: %s", ErrSyntax, strings.TrimPrefix(err.Error(), "toml: "))}}
		}
	}
	r := f.build(dir, &ps)
	if err := ps.err(); err != nil {
		return nil, err
	}
	return r, nil
}

// typeMismatch matches the decoder's message for a value of the wrong
// type, which names this package's Go types rather than the file's.
var typeMismatch = regexp.MustCompile(`^cannot decode TOML (\w+) into struct field \S+ of type (\S+)$`)

// goTypes say in the file's terms what a Go field type wants.
var goTypes = map[string]string{"string": "a string", "*string": "a string", "int64": "an integer", "*int64": "an integer",
	"[]string": "an array of strings"}

func decodeMessage(de *toml.DecodeError) string {
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	if m := typeMismatch.FindStringSubmatch(msg); m != nil {
		want, ok := goTypes[m[2]]
		if !ok {
			want = "a table"
		}
		return fmt.Sprintf("a TOML %s where %s belongs", m[1], want)
	}
	return msg
}

// arrayTableLines returns, for each array table name ("merchants"), the
// lines of its [[headers]] in order: the nth is the entry merchants[n].
func arrayTableLines(data []byte) map[string][]int {
	out := map[string][]int{}
	var p unstable.Parser
	p.Reset(data)
	for p.NextExpression() {
		n := p.Expression()
		if n.Kind != unstable.ArrayTable {
			continue
		}
		var parts []string
		for it := n.Key(); it.Next(); {
			parts = append(parts, string(it.Node().Data))
		}
		if len(parts) == 1 {
			line := p.Shape(n.Child().Raw).Start.Line
			out[parts[0]] = append(out[parts[0]], line)
		}
	}
	return out
}

// keyPath names an unknown key as validation names settings,
// "merchants[2].policy.x": the entry is the last [[merchants]] header at
// or above the key's line (TOML cannot reopen an earlier entry). Without
// a header (an inline array) the key is named as written.
func keyPath(key []string, line int, headers map[string][]int) string {
	path := strings.Join(key, ".")
	if len(key) < 2 {
		return path
	}
	idx := -1
	for i, l := range headers[key[0]] {
		if l <= line {
			idx = i
		}
	}
	if idx < 0 {
		return path
	}
	return fmt.Sprintf("%s[%d].%s", key[0], idx, strings.Join(key[1:], "."))
}

func lastKey(k []string) string {
	if len(k) == 0 {
		return ""
	}
	return k[len(k)-1]
}

// build turns the decoded file into a Registry, adding every problem to ps.
// It always returns a registry (possibly partial); the caller discards it
// when ps holds problems.
func (f *fileFormat) build(dir string, ps *problems) *Registry {
	if len(f.Merchants) == 0 {
		ps.add("merchants", ErrMissing, "the file defines no [[merchants]]")
	}
	accounts := make([]*Account, 0, len(f.Accounts))
	for i := range f.Accounts {
		accounts = append(accounts, f.Accounts[i].account(i, dir, ps))
	}
	merchants := make([]*Merchant, 0, len(f.Merchants))
	byName := map[string]*Account{}
	for _, a := range accounts {
		if _, ok := byName[a.Name]; !ok { // a second of the same name is reported by checkRegistry
			byName[a.Name] = a
		}
	}
	for i := range f.Merchants {
		merchants = append(merchants, f.Merchants[i].merchant(i, byName, ps))
	}
	checkRegistry(accounts, merchants, ps)
	return newRegistry(accounts, merchants)
}

func filePath(kind string, i int) func(string) string {
	return func(key string) string { return fmt.Sprintf("%s[%d].%s", kind, i, key) }
}

func (fa *fileAccount) account(i int, dir string, ps *problems) *Account {
	where := filePath("accounts", i)
	a := &Account{
		Name: fa.Name, Kind: AccountKind(fa.Kind), MchID: fa.MchID, BaseURL: fa.BaseURL, Serial: fa.Serial,
		PublicKeyID: fa.PublicKeyID, PublicKeyFile: resolvePath(dir, fa.PublicKeyFile),
		DownloadCertificates: fa.DownloadCertificates, where: where,
	}
	if a.BaseURL == "" {
		a.BaseURL = DefaultBaseURL
	}
	for _, c := range fa.PlatformCertFiles {
		a.PlatformCertFiles = append(a.PlatformCertFiles, resolvePath(dir, c))
	}
	secret := func(key, ref string, required bool) Secret {
		if ref == "" {
			if required {
				ps.add(where(key), ErrMissing, "required: env:NAME or file:PATH")
			}
			return Secret{}
		}
		s, err := ParseSecret(ref)
		if err != nil {
			ps.wrap(where(key), err)
		}
		return s.resolve(dir)
	}
	a.PrivateKey = secret("private_key", fa.PrivateKey, true)
	a.APIv3Key = secret("apiv3_key", fa.APIv3Key, true)
	a.APIv2Key = secret("apiv2_key", fa.APIv2Key, false)
	checkName(where("name"), a.Name, ps)
	switch a.Kind {
	case AccountDirect, AccountServiceProvider:
	case "":
		ps.add(where("kind"), ErrMissing, "required: direct or service_provider")
	default:
		ps.add(where("kind"), ErrInvalid, "%q: want direct or service_provider", limit(fa.Kind))
	}
	for _, p := range []struct {
		key string
		v   *float64
		dst **float64
	}{{"pace_creates", fa.PaceCreates, &a.Pacing.Creates}, {"pace_failed_creates", fa.PaceFailedCreates, &a.Pacing.FailedCreates},
		{"pace_queries", fa.PaceQueries, &a.Pacing.Queries}} {
		switch {
		case p.v == nil:
		case !(*p.v >= 0) || *p.v > maxPace:
			ps.add(where(p.key), ErrInvalid, "must be 0..1000000 calls per second (0: unpaced)")
		default:
			v := *p.v
			*p.dst = &v
		}
	}
	checkAccountFields(a, ps)
	return a
}

func (fm *fileMerchant) merchant(i int, accounts map[string]*Account, ps *problems) *Merchant {
	where := filePath("merchants", i)
	m := &Merchant{
		Name: fm.Name, Kind: MerchantKind(fm.Kind), SubMchID: fm.SubMchID, SubAppID: fm.SubAppID,
		RefundNoPrefix: fm.RefundPrefix, NotifyURL: fm.NotifyURL,
	}
	checkName(where("name"), m.Name, ps)
	var want AccountKind
	switch m.Kind {
	case MerchantDirect:
		want = AccountDirect
		if m.SubMchID != "" {
			ps.add(where("sub_mchid"), ErrInvalid, "only a sub_merchant has one (WeChat refuses it from a direct merchant)")
		}
		if m.SubAppID != "" {
			ps.add(where("sub_appid"), ErrInvalid, "only a sub_merchant has one")
		}
	case MerchantSub:
		want = AccountServiceProvider
		if m.SubMchID == "" {
			ps.add(where("sub_mchid"), ErrMissing, "required for a sub_merchant")
		}
	case "":
		ps.add(where("kind"), ErrMissing, "required: direct or sub_merchant")
	default:
		ps.add(where("kind"), ErrInvalid, "%q: want direct or sub_merchant", limit(fm.Kind))
	}
	switch a, ok := accounts[fm.Account]; {
	case fm.Account == "":
		ps.add(where("account"), ErrMissing, "required: the name of an [[accounts]] entry")
	case !ok:
		ps.add(where("account"), ErrInvalid, "no account is named %q", limit(fm.Account))
	default:
		m.Account = a
		if want != "" && a.Kind != want && a.Kind.valid() {
			ps.add(where("account"), ErrInvalid, "a %s merchant needs a %s account; %q is %s", m.Kind, want, a.Name, a.Kind)
		}
	}
	if m.RefundNoPrefix == "" {
		ps.add(where("refund_prefix"), ErrMissing, "required: 1..16 of [0-9A-Za-z], unique across merchants")
	}
	checkMerchantFields(m, where, ps)
	if fm.Policy != nil {
		m.Overrides = fm.Policy.overrides(where, ps)
	}
	return m
}

func (k AccountKind) valid() bool { return k == AccountDirect || k == AccountServiceProvider }

func (fp *filePolicy) overrides(where func(string) string, ps *problems) Overrides {
	var o Overrides
	dur := func(key string, s *string, min time.Duration) *time.Duration {
		if s == nil {
			return nil
		}
		d, err := time.ParseDuration(*s)
		switch {
		case err != nil:
			ps.add(where("policy."+key), ErrInvalid, "%q is not a Go duration (e.g. \"60s\", \"8760h\")", limit(*s))
			return nil
		case d < min:
			if min == 0 {
				ps.add(where("policy."+key), ErrInvalid, "must not be negative")
			} else {
				ps.add(where("policy."+key), ErrInvalid, "must be positive")
			}
			return nil
		}
		return &d
	}
	o.RefundSpacing = dur("refund_spacing", fp.RefundSpacing, 0)
	o.RefundWindow = dur("refund_window", fp.RefundWindow, 1)
	o.RetryBackoff = dur("retry_backoff", fp.RetryBackoff, 1)
	o.RetryBackoffMax = dur("retry_backoff_max", fp.RetryBackoffMax, 1)
	o.ApprovalTimeout = dur("approval_timeout", fp.ApprovalTimeout, 1)
	o.ApproveAll, o.ApproveNonService = fp.ApproveAll, fp.ApproveNonService
	if n := fp.ApproveAbove; n != nil {
		if *n < 0 || *n > reservation.MaxAmount {
			ps.add(where("policy.approve_above"), ErrInvalid, "must be 0..%d fen (0: no such rule)", reservation.MaxAmount)
		} else {
			v := *n
			o.ApproveAbove = &v
		}
	}
	if n := fp.ApproveAbovePercent; n != nil {
		if *n < 0 || *n > 100 {
			ps.add(where("policy.approve_above_percent"), ErrInvalid, "must be 0..100 (0: no such rule)")
		} else {
			v := int(*n)
			o.ApproveAbovePercent = &v
		}
	}
	if n := fp.RetryMaxAttempts; n != nil {
		if *n < 1 || *n > maxAttempts {
			ps.add(where("policy.retry_max_attempts"), ErrInvalid, "must be 1..%d", maxAttempts)
		} else {
			v := int(*n)
			o.RetryMaxAttempts = &v
		}
	}
	return o
}

// maxAttempts bounds retry_max_attempts: beyond it the setting is surely a
// mistake, and it keeps the int conversion safe.
const maxAttempts = 1000

// Encode writes the registry as a merchants file that Parse reads back to
// an equal registry (comments are not kept). The default merchant of
// NewDefault cannot be encoded when it has no account, and a default
// account's optional environment variables have no file form: Encode
// refuses both with ErrInvalid.
func (r *Registry) Encode() ([]byte, error) {
	var f fileFormat
	for _, a := range r.accounts {
		if a.APIv2Key.ifSet || a.APIv3Key.ifSet || a.PrivateKey.ifSet {
			return nil, fmt.Errorf("%w: account %q: its keys come from settings a file cannot express", ErrInvalid, a.Name)
		}
		fa := fileAccount{
			Name: a.Name, Kind: string(a.Kind), MchID: a.MchID, Serial: a.Serial,
			PrivateKey: a.PrivateKey.String(), APIv3Key: a.APIv3Key.String(), APIv2Key: a.APIv2Key.String(),
			PublicKeyID: a.PublicKeyID, PublicKeyFile: a.PublicKeyFile, PlatformCertFiles: a.PlatformCertFiles,
			DownloadCertificates: a.DownloadCertificates,
			PaceCreates:          a.Pacing.Creates, PaceFailedCreates: a.Pacing.FailedCreates, PaceQueries: a.Pacing.Queries,
		}
		if a.BaseURL != DefaultBaseURL {
			fa.BaseURL = a.BaseURL
		}
		f.Accounts = append(f.Accounts, fa)
	}
	for _, m := range r.merchants {
		if m.Account == nil {
			return nil, fmt.Errorf("%w: merchant %q has no account", ErrInvalid, m.Name)
		}
		fm := fileMerchant{
			Name: m.Name, Kind: string(m.Kind), Account: m.Account.Name, SubMchID: m.SubMchID, SubAppID: m.SubAppID,
			RefundPrefix: m.RefundNoPrefix, NotifyURL: m.NotifyURL,
		}
		if o := m.Overrides; !o.IsZero() {
			fp := &filePolicy{}
			str := func(d *time.Duration) *string {
				if d == nil {
					return nil
				}
				s := d.String()
				return &s
			}
			fp.RefundSpacing, fp.RefundWindow = str(o.RefundSpacing), str(o.RefundWindow)
			fp.RetryBackoff, fp.RetryBackoffMax = str(o.RetryBackoff), str(o.RetryBackoffMax)
			if o.RetryMaxAttempts != nil {
				n := int64(*o.RetryMaxAttempts)
				fp.RetryMaxAttempts = &n
			}
			fp.ApprovalTimeout, fp.ApproveAll, fp.ApproveNonService, fp.ApproveAbove = str(o.ApprovalTimeout), o.ApproveAll, o.ApproveNonService, o.ApproveAbove
			if o.ApproveAbovePercent != nil {
				n := int64(*o.ApproveAbovePercent)
				fp.ApproveAbovePercent = &n
			}
			fm.Policy = fp
		}
		f.Merchants = append(f.Merchants, fm)
	}
	return toml.Marshal(f)
}
