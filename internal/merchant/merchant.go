package merchant

import (
	"strings"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// DefaultName is the name of the merchant that today's --wechatpay-* flags
// define (NewDefault). Reservations journaled before merchants existed
// carry no merchant and belong to the merchant of this name: a merchants
// file that takes over such a journal defines a merchant named "default"
// with that account and refund-number prefix.
const DefaultName = "default"

// DefaultBaseURL is WeChat Pay's API host, used when an account in a
// merchants file sets no base_url.
const DefaultBaseURL = "https://api.mch.weixin.qq.com"

// AccountKind says how a WeChat Pay account takes part in refunds.
type AccountKind string

const (
	// AccountDirect is an ordinary merchant (直连商户): it signs for its own
	// orders.
	AccountDirect AccountKind = "direct"
	// AccountServiceProvider is a service provider (服务商): it signs, with
	// its own keys, for the orders of its sub-merchants.
	AccountServiceProvider AccountKind = "service_provider"
)

// MerchantKind says whose orders a merchant's reservations are.
type MerchantKind string

const (
	// MerchantDirect refunds through a direct account: requests carry only
	// the account's mchid.
	MerchantDirect MerchantKind = "direct"
	// MerchantSub is a sub-merchant (特约商户) of a service provider: its
	// requests are signed by the provider and carry sub_mchid.
	MerchantSub MerchantKind = "sub_merchant"
)

// Account is one WeChat Pay merchant id with the keys that sign its
// requests and verify WeChat Pay's answers. Secrets are references (Secret);
// LoadCredentials reads them.
type Account struct {
	Name string
	Kind AccountKind
	// MchID is the account's merchant id: mchid of a direct merchant,
	// sp_mchid of a service provider.
	MchID string
	// BaseURL is scheme and host of the API.
	BaseURL string
	// Serial is the serial of the account's API certificate (signing).
	Serial string
	// PrivateKey is the API private key PEM (apiclient_key.pem).
	PrivateKey Secret
	// APIv3Key decrypts notifications; required.
	APIv3Key Secret
	// APIv2Key checks APIv2 notifications; zero means the account has none.
	APIv2Key Secret
	// PublicKeyID and PublicKeyFile are the WeChat Pay public key
	// (PUB_KEY_ID_...); both or neither.
	PublicKeyID   string
	PublicKeyFile string
	// PlatformCertFiles are platform certificate PEM files. With the
	// public key too, both are accepted (WeChat's switchover).
	PlatformCertFiles []string
	// DownloadCertificates puts the account in platform certificate mode:
	// its certificates are downloaded from WeChat Pay at start and kept
	// current (wechatpay.CertificateManager), in addition to any public key
	// or certificate file, which then are optional.
	DownloadCertificates bool
	// Pacing is the account's rates of refund creates and queries where
	// they differ from the engine-wide --wechatpay-pace-* (PacingOf).
	Pacing PacingOverrides

	// where maps a setting's key to the name an operator knows it by.
	where func(key string) string
}

// field names a setting of the account in messages.
func (a *Account) field(key string) string {
	if a.where == nil {
		return key
	}
	return a.where(key)
}

// key names a setting inside a message about another: the flag for the
// default account, the bare key in a file.
func (a *Account) key(k string) string {
	if f := a.field(k); strings.HasPrefix(f, "--") {
		return f
	}
	return k
}

// Merchant is what a reservation belongs to: whose order was paid, which
// account refunds it, and the merchant's refund rules.
type Merchant struct {
	Name string
	Kind MerchantKind
	// Account signs the merchant's requests: a direct account for
	// MerchantDirect, a service provider for MerchantSub. Nil only for a
	// default merchant built without --wechatpay-* settings (the sandbox
	// and memory providers bring their own).
	Account *Account
	// SubMchID and SubAppID identify a sub-merchant; empty for a direct
	// merchant. SubAppID is optional.
	SubMchID string
	SubAppID string
	// RefundNoPrefix starts every refund number of the merchant
	// (reservation.RefundNo); unique across merchants, and no prefix starts
	// another (see Registry.ByRefundNo).
	RefundNoPrefix string
	// NotifyURL is sent as notify_url with the merchant's refunds; empty
	// leaves the choice to the wiring (today: refundd's own
	// /v1/notify/wechatpay/refund).
	NotifyURL string
	// Overrides are the merchant's differences from the engine-wide policy.
	Overrides Overrides
}

// Overrides are a merchant's differences from the engine-wide policy (the
// flags of the same names). A nil field keeps the engine-wide value.
type Overrides struct {
	RefundSpacing    *time.Duration // --refund-spacing; 0 disables spacing
	RefundWindow     *time.Duration // --refund-window
	RetryMaxAttempts *int           // --retry-max-attempts
	RetryBackoff     *time.Duration // --retry-backoff
	RetryBackoffMax  *time.Duration // --retry-backoff-max
	// Four-eyes approval (reservation.Policy's Approve* fields).
	ApproveAll          *bool          // --approve-all
	ApproveAbove        *int64         // --approve-above, fen; 0: no such rule
	ApproveAbovePercent *int           // --approve-above-percent; 0: no such rule
	ApproveNonService   *bool          // --approve-non-service
	ApprovalTimeout     *time.Duration // --approval-timeout
}

// IsZero reports whether nothing is overridden.
func (o Overrides) IsZero() bool {
	return o.RefundSpacing == nil && o.RefundWindow == nil && o.RetryMaxAttempts == nil &&
		o.RetryBackoff == nil && o.RetryBackoffMax == nil && o.ApproveAll == nil && o.ApproveAbove == nil &&
		o.ApproveAbovePercent == nil && o.ApproveNonService == nil && o.ApprovalTimeout == nil
}

// Policy returns base with the merchant's refund-number prefix and
// overrides applied: the policy of the merchant's reservations.
func (m *Merchant) Policy(base reservation.Policy) reservation.Policy {
	p := base
	p.RefundNoPrefix = m.RefundNoPrefix
	o := m.Overrides
	if o.RefundSpacing != nil {
		p.RefundSpacing = *o.RefundSpacing
	}
	if o.RefundWindow != nil {
		p.RefundWindow = *o.RefundWindow
	}
	if o.RetryMaxAttempts != nil {
		p.MaxAttempts = *o.RetryMaxAttempts
	}
	if o.RetryBackoff != nil {
		p.RetryBackoff = *o.RetryBackoff
	}
	if o.RetryBackoffMax != nil {
		p.RetryBackoffMax = *o.RetryBackoffMax
	}
	if o.ApproveAll != nil {
		p.ApproveAll = *o.ApproveAll
	}
	if o.ApproveAbove != nil {
		p.ApproveAbove = *o.ApproveAbove
	}
	if o.ApproveAbovePercent != nil {
		p.ApproveAbovePercent = *o.ApproveAbovePercent
	}
	if o.ApproveNonService != nil {
		p.ApproveNonService = *o.ApproveNonService
	}
	if o.ApprovalTimeout != nil {
		p.ApprovalTimeout = *o.ApprovalTimeout
	}
	return p
}

// Registry is the configured accounts and merchants. It is built once
// (Parse, ReadFile, NewDefault) and read-only afterwards: safe for
// concurrent use as long as no caller modifies what it returns.
type Registry struct {
	accounts  []*Account
	merchants []*Merchant
	account   map[string]*Account
	byName    map[string]*Merchant
	byPrefix  map[string]*Merchant
	byMchID   map[mchKey]*Merchant
}

// mchKey identifies a merchant at WeChat Pay: (mchid, "") for a direct
// merchant, (sp_mchid, sub_mchid) for a sub-merchant.
type mchKey struct{ mchID, subMchID string }

func newRegistry(accounts []*Account, merchants []*Merchant) *Registry {
	r := &Registry{
		accounts: accounts, merchants: merchants,
		account: map[string]*Account{}, byName: map[string]*Merchant{},
		byPrefix: map[string]*Merchant{}, byMchID: map[mchKey]*Merchant{},
	}
	for _, a := range accounts {
		r.account[a.Name] = a
	}
	for _, m := range merchants {
		r.byName[m.Name] = m
		r.byPrefix[m.RefundNoPrefix] = m
		if m.Account != nil {
			r.byMchID[mchKey{m.Account.MchID, m.SubMchID}] = m
		}
	}
	return r
}

// Merchants returns the merchants in file order.
func (r *Registry) Merchants() []*Merchant { return append([]*Merchant(nil), r.merchants...) }

// Accounts returns the accounts in file order.
func (r *Registry) Accounts() []*Account { return append([]*Account(nil), r.accounts...) }

// Account returns the account of that name.
func (r *Registry) Account(name string) (*Account, bool) {
	a, ok := r.account[name]
	return a, ok
}

// ByName returns the merchant of that name.
func (r *Registry) ByName(name string) (*Merchant, bool) {
	m, ok := r.byName[name]
	return m, ok
}

// Single returns the only merchant when exactly one is configured: the
// merchant of a request that names none.
func (r *Registry) Single() (*Merchant, bool) {
	if len(r.merchants) != 1 {
		return nil, false
	}
	return r.merchants[0], true
}

// ByPrefix returns the merchant whose refund-number prefix is exactly
// prefix (case-sensitive, as refund numbers are compared).
func (r *Registry) ByPrefix(prefix string) (*Merchant, bool) {
	m, ok := r.byPrefix[prefix]
	return m, ok
}

// ByRefundNo returns the merchant a refund number made by
// reservation.RefundNo belongs to. The prefix is read exactly, up to the
// number's first '-' (prefixes hold none), not by longest match; the
// registry's rule that no prefix starts another (ignoring case) is kept
// anyway, so that people and tools matching "starts with" on bills and
// exports cannot mix two merchants up either.
func (r *Registry) ByRefundNo(no string) (*Merchant, bool) {
	prefix, _, _, ok := reservation.ParseRefundNo(no)
	if !ok {
		return nil, false
	}
	return r.ByPrefix(prefix)
}

// ByMchID returns the merchant WeChat Pay identifies by mchid (a direct
// merchant; subMchID empty) or by sp_mchid and sub_mchid (a sub-merchant),
// as notifications and bills name them. At most one merchant matches: the
// registry refuses two merchants on one direct account or on one
// provider's sub_mchid.
func (r *Registry) ByMchID(mchID, subMchID string) (*Merchant, bool) {
	m, ok := r.byMchID[mchKey{mchID, subMchID}]
	return m, ok
}

// foldPrefixConflict reports whether two prefixes would be confused: equal
// or one starting the other, ignoring case.
func foldPrefixConflict(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	return strings.HasPrefix(a, b) || strings.HasPrefix(b, a)
}
