package merchant

import (
	"strings"

	"github.com/refundd/refundd/internal/reservation"
)

// DefaultSettings are today's single-merchant settings, named after the
// flags cmd/refundd reads them from. Secrets keep their current sources: a
// key file when its flag is set, otherwise REFUNDD_WECHATPAY_APIV3_KEY /
// REFUNDD_WECHATPAY_APIV2_KEY.
type DefaultSettings struct {
	BaseURL        string   // --wechatpay-base-url
	MchID          string   // --wechatpay-mchid
	Serial         string   // --wechatpay-serial
	PrivateKeyFile string   // --wechatpay-private-key
	APIv3KeyFile   string   // --wechatpay-apiv3-key-file
	APIv2KeyFile   string   // --wechatpay-apiv2-key-file
	PublicKeyFile  string   // --wechatpay-public-key
	PublicKeyID    string   // --wechatpay-public-key-id
	PlatformCerts  []string // --wechatpay-platform-cert
	// DownloadCertificates is --wechatpay-download-certificates.
	DownloadCertificates bool
	NotifyURL            string // --wechatpay-notify-url
	RefundNoPrefix       string // --refund-prefix; empty means reservation.DefaultRefundNoPrefix
}

// Environment variables that hold the default account's keys when no key
// file is set (today's behaviour).
const (
	EnvAPIv3Key = "REFUNDD_WECHATPAY_APIV3_KEY"
	EnvAPIv2Key = "REFUNDD_WECHATPAY_APIV2_KEY"
)

// defaultFlags names the settings of the default account in messages.
var defaultFlags = map[string]string{
	"base_url":              "--wechatpay-base-url",
	"mchid":                 "--wechatpay-mchid",
	"serial":                "--wechatpay-serial",
	"private_key":           "--wechatpay-private-key",
	"apiv3_key":             "--wechatpay-apiv3-key-file (or " + EnvAPIv3Key + ")",
	"apiv2_key":             "--wechatpay-apiv2-key-file (or " + EnvAPIv2Key + ")",
	"public_key_file":       "--wechatpay-public-key",
	"public_key_id":         "--wechatpay-public-key-id",
	"platform_cert_files":   "--wechatpay-platform-cert",
	"download_certificates": "--wechatpay-download-certificates",
	"notify_url":            "--wechatpay-notify-url",
	"refund_prefix":         "--refund-prefix",
}

func defaultField(key string) string {
	if f, ok := defaultFlags[key]; ok {
		return f
	}
	return key
}

// NewDefault returns a registry of one direct merchant named DefaultName,
// with one account of the same name, from today's flags: what refundd runs
// without --merchants-file, so current deployments change nothing. Its
// policy is the engine-wide one (no overrides).
//
// When no account setting is given at all (BaseURL through PlatformCerts
// empty) the merchant has no account: the sandbox and memory providers
// bring their own keys. Otherwise the settings are checked as an account in
// a file is, and errors (Errors) name the flags.
func NewDefault(s DefaultSettings) (*Registry, error) {
	var ps problems
	m := &Merchant{Name: DefaultName, Kind: MerchantDirect, RefundNoPrefix: s.RefundNoPrefix, NotifyURL: s.NotifyURL}
	if m.RefundNoPrefix == "" {
		m.RefundNoPrefix = reservation.DefaultRefundNoPrefix
	}
	checkMerchantFields(m, defaultField, &ps)
	var accounts []*Account
	if s.hasAccount() {
		a := &Account{
			Name: DefaultName, Kind: AccountDirect, MchID: s.MchID, BaseURL: s.BaseURL, Serial: s.Serial,
			PublicKeyID: s.PublicKeyID, PublicKeyFile: s.PublicKeyFile,
			PlatformCertFiles: append([]string(nil), s.PlatformCerts...), DownloadCertificates: s.DownloadCertificates,
			where: defaultField,
		}
		if s.PrivateKeyFile == "" {
			ps.add(a.field("private_key"), ErrMissing, "required")
		}
		a.PrivateKey = Secret{File: s.PrivateKeyFile}
		a.APIv3Key = Secret{File: s.APIv3KeyFile}
		if s.APIv3KeyFile == "" {
			a.APIv3Key = Secret{Env: EnvAPIv3Key}
		}
		a.APIv2Key = Secret{File: s.APIv2KeyFile}
		if s.APIv2KeyFile == "" {
			a.APIv2Key = Secret{Env: EnvAPIv2Key, ifSet: true}
		}
		checkAccountFields(a, &ps)
		m.Account = a
		accounts = append(accounts, a)
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return newRegistry(accounts, []*Merchant{m}), nil
}

func (s DefaultSettings) hasAccount() bool {
	return strings.Join([]string{s.BaseURL, s.MchID, s.Serial, s.PrivateKeyFile, s.APIv3KeyFile, s.APIv2KeyFile,
		s.PublicKeyFile, s.PublicKeyID}, "") != "" || len(s.PlatformCerts) > 0 || s.DownloadCertificates
}
