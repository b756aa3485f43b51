package merchant

import (
	"errors"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/reservation"
)

// flagSettings are complete --wechatpay-* settings, keys by environment.
func flagSettings() DefaultSettings {
	return DefaultSettings{
		BaseURL: "https://api.mch.weixin.qq.com", MchID: "1900000101", Serial: "5157F09EFDC096DE15EBE81A47057A7232F1B8E1",
		PrivateKeyFile: "/k/shop.pem", PublicKeyFile: "/k/pub.pem", PublicKeyID: "PUB_KEY_ID_0100000000000001",
		NotifyURL: "https://refundd.example.com/v1/notify/wechatpay/refund",
	}
}

func TestNewDefault_WithoutAccount(t *testing.T) {
	r, err := NewDefault(DefaultSettings{})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := r.ByName(DefaultName)
	if !ok || m.Kind != MerchantDirect || m.Account != nil || m.RefundNoPrefix != reservation.DefaultRefundNoPrefix || len(r.Accounts()) != 0 {
		t.Fatalf("default merchant: %+v", m)
	}
	// A journal written before merchants existed has refund numbers with
	// the default prefix: they belong to the default merchant.
	if got, ok := r.ByRefundNo("R-res-1-1"); !ok || got != m {
		t.Errorf("old refund number: %v %v", got, ok)
	}
	if _, err := r.Encode(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Encode of a merchant without account: %v", err)
	}
}

func TestNewDefault_FromFlags(t *testing.T) {
	s := flagSettings()
	s.RefundNoPrefix = "PROD"
	r, err := NewDefault(s)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := r.Single()
	a := m.Account
	if m.Name != DefaultName || m.RefundNoPrefix != "PROD" || m.NotifyURL != s.NotifyURL || !m.Overrides.IsZero() {
		t.Errorf("merchant: %+v", m)
	}
	if a == nil || a.Name != DefaultName || a.Kind != AccountDirect || a.MchID != s.MchID || a.PrivateKey.File != "/k/shop.pem" {
		t.Fatalf("account: %+v", a)
	}
	if a.APIv3Key.String() != "env:"+EnvAPIv3Key || a.APIv2Key.String() != "env:"+EnvAPIv2Key {
		t.Errorf("without key files the keys come from the environment: %v %v", a.APIv3Key, a.APIv2Key)
	}
	if got, ok := r.ByMchID(s.MchID, ""); !ok || got != m {
		t.Errorf("ByMchID: %v", got)
	}
	if _, err := r.Encode(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Encode of an optional environment key: %v", err)
	}

	// Today's behaviour: the APIv3 key is required, the APIv2 key optional.
	k, err := testKeys()
	if err != nil {
		t.Fatal(err)
	}
	w := world{env: map[string]string{}, files: map[string][]byte{"/k/shop.pem": k.privatePEM, "/k/pub.pem": k.publicPEM}}
	_, err = r.LoadCredentials(w.sources())
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), `account "default": --wechatpay-apiv3-key-file (or REFUNDD_WECHATPAY_APIV3_KEY): `) {
		t.Errorf("no APIv3 key: %v", err)
	}
	w.env[EnvAPIv3Key] = shopV3
	c, err := r.LoadCredentials(w.sources())
	if err != nil {
		t.Fatal(err)
	}
	if got := c[DefaultName]; string(got.APIv3Key) != shopV3 || got.APIv2Key != nil {
		t.Errorf("keys from the environment: v3 %d bytes, v2 %v", len(got.APIv3Key), got.APIv2Key != nil)
	}
	w.env[EnvAPIv2Key] = "v2key"
	if c, err = r.LoadCredentials(w.sources()); err != nil || string(c[DefaultName].APIv2Key) != "v2key" {
		t.Errorf("APIv2 key from the environment: %v", err)
	}

	// A key file wins over the environment, as --wechatpay-apiv3-key-file
	// does today.
	s.APIv3KeyFile, s.APIv2KeyFile = "/k/v3", "/k/v2"
	r, err = NewDefault(s)
	if err != nil {
		t.Fatal(err)
	}
	w.files["/k/v3"], w.files["/k/v2"] = []byte(spV3+"\n"), []byte("file-v2\n")
	c, err = r.LoadCredentials(w.sources())
	if err != nil {
		t.Fatal(err)
	}
	if got := c[DefaultName]; string(got.APIv3Key) != spV3 || string(got.APIv2Key) != "file-v2" {
		t.Error("key files were not preferred")
	}
	if _, err := r.Encode(); err != nil {
		t.Errorf("a default with key files encodes: %v", err)
	}
}

func TestNewDefault_Errors(t *testing.T) {
	cases := []struct {
		name   string
		change func(*DefaultSettings)
		want   []want
	}{
		{"only a mchid", func(s *DefaultSettings) { *s = DefaultSettings{MchID: "1900000101"} }, []want{
			{path: "--wechatpay-private-key", sentinel: ErrMissing},
			{path: "--wechatpay-serial", sentinel: ErrMissing},
			{path: "--wechatpay-base-url", sentinel: ErrMissing},
			{path: "--wechatpay-public-key", sentinel: ErrMissing, text: "set --wechatpay-public-key-id and --wechatpay-public-key, or --wechatpay-platform-cert"},
		}},
		{"public key without id", func(s *DefaultSettings) { s.PublicKeyID = "" }, []want{
			{path: "--wechatpay-public-key-id", sentinel: ErrMissing},
		}},
		{"bad prefix", func(s *DefaultSettings) { s.RefundNoPrefix = "A-B" }, []want{
			{path: "--refund-prefix", sentinel: ErrInvalid},
		}},
		{"bad notify url", func(s *DefaultSettings) { s.NotifyURL = "https://x/?a=1" }, []want{
			{path: "--wechatpay-notify-url", sentinel: ErrInvalid},
		}},
		{"bad mchid and serial", func(s *DefaultSettings) { s.MchID, s.Serial = "shop", "serial" }, []want{
			{path: "--wechatpay-mchid", sentinel: ErrInvalid},
			{path: "--wechatpay-serial", sentinel: ErrInvalid},
		}},
		{"certificates listed twice", func(s *DefaultSettings) { s.PlatformCerts = []string{"/c.pem", "/c.pem"} }, []want{
			{path: "--wechatpay-platform-cert[1]", sentinel: ErrConflict},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := flagSettings()
			tc.change(&s)
			r, err := NewDefault(s)
			if err == nil {
				t.Fatalf("built %v", r)
			}
			var es Errors
			if !errors.As(err, &es) || len(es) != len(tc.want) {
				t.Fatalf("%v: want %d problems", err, len(tc.want))
			}
			for i, w := range tc.want {
				if e := es[i]; e.Path != w.path || !errors.Is(e, w.sentinel) || !strings.Contains(e.Error(), w.text) {
					t.Errorf("problem %d: %q, want path %q, %v, containing %q", i, e.Error(), w.path, w.sentinel, w.text)
				}
			}
		})
	}
}

// TestNewDefault_DownloadCertificates: certificate mode needs neither a
// public key nor a certificate file; without it one of them is required,
// and the message names the flag.
func TestNewDefault_DownloadCertificates(t *testing.T) {
	s := flagSettings()
	s.PublicKeyFile, s.PublicKeyID, s.PlatformCerts = "", "", nil
	_, err := NewDefault(s)
	if err == nil || !strings.Contains(err.Error(), "--wechatpay-download-certificates") {
		t.Fatalf("no key and no download: %v", err)
	}
	s.DownloadCertificates = true
	r, err := NewDefault(s)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := r.Account(DefaultName)
	if !ok || !a.DownloadCertificates {
		t.Fatalf("account %+v", a)
	}
}
