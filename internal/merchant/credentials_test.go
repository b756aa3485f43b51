package merchant

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// testKeys are generated once: RSA-2048 generation is slow under -race.
var testKeys = sync.OnceValues(func() (keyFiles, error) {
	k, err := sandbox.GenerateKeys("1900000101")
	if err != nil {
		return keyFiles{}, err
	}
	var f keyFiles
	if f.privatePEM, err = k.MerchantKeyPEM(); err != nil {
		return f, err
	}
	if f.publicPEM, err = k.PlatformPublicKeyPEM(); err != nil {
		return f, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(0x5157F09E), Subject: pkix.Name{CommonName: "Tenpay.com Root CA test"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<33, 0),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PlatformKey.PublicKey, k.PlatformKey)
	if err != nil {
		return f, err
	}
	f.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return f, nil
})

type keyFiles struct {
	privatePEM, publicPEM, certPEM []byte
}

// world is a fake environment and file system.
type world struct {
	env   map[string]string
	files map[string][]byte
}

func (w world) sources() Sources {
	return Sources{
		Getenv: func(k string) string { return w.env[k] },
		ReadFile: func(name string) ([]byte, error) {
			if b, ok := w.files[name]; ok {
				return b, nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		},
	}
}

// credFile has a direct account on a public key and a service provider on a
// platform certificate, each with every kind of secret reference.
const credFile = `[[accounts]]
name = "shop"
kind = "direct"
mchid = "1900000101"
serial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
private_key = "file:/k/shop.pem"
apiv3_key = "env:SHOP_APIV3_KEY"
apiv2_key = "file:/k/shop.v2"
public_key_id = "PUB_KEY_ID_0100000000000001"
public_key_file = "/k/pub.pem"

[[accounts]]
name = "sp"
kind = "service_provider"
mchid = "1900000200"
serial = "7132D72A03E93CDDF8C03BBD1F37EEDF6EBDE3C3"
private_key = "env:SP_PRIVATE_KEY"
apiv3_key = "file:/k/sp.v3"
platform_cert_files = ["/k/cert.pem"]

[[merchants]]
name = "shop"
kind = "direct"
account = "shop"
refund_prefix = "SH"

[[merchants]]
name = "inn"
kind = "sub_merchant"
account = "sp"
sub_mchid = "1900000201"
refund_prefix = "IN"
`

const (
	shopV3 = "SHOPshopSHOPshopSHOPshopSHOPshop"
	spV3   = "spSPspSPspSPspSPspSPspSPspSPspSP"
)

func goodWorld(t *testing.T) world {
	t.Helper()
	k, err := testKeys()
	if err != nil {
		t.Fatal(err)
	}
	return world{
		env: map[string]string{"SHOP_APIV3_KEY": shopV3, "SP_PRIVATE_KEY": string(k.privatePEM)},
		files: map[string][]byte{
			"/k/shop.pem": k.privatePEM, "/k/shop.v2": []byte("v2key-of-the-shop\n"), "/k/pub.pem": k.publicPEM,
			"/k/sp.v3": []byte(spV3 + "\n"), "/k/cert.pem": k.certPEM,
		},
	}
}

func TestLoadCredentials(t *testing.T) {
	r := mustParse(t, credFile)
	creds, err := r.LoadCredentials(goodWorld(t).sources())
	if err != nil {
		t.Fatal(err)
	}
	shop, sp := creds["shop"], creds["sp"]
	if shop == nil || sp == nil || len(creds) != 2 {
		t.Fatalf("credentials: %v", creds)
	}
	if string(shop.APIv3Key) != shopV3 || string(shop.APIv2Key) != "v2key-of-the-shop" || string(sp.APIv3Key) != spV3 || sp.APIv2Key != nil {
		t.Error("keys not read as given (trailing newline dropped, no APIv2 key for sp)")
	}
	if shop.Signer.MchID != "1900000101" || shop.Signer.SerialNo != "5157F09EFDC096DE15EBE81A47057A7232F1B8E1" || shop.Signer.Key == nil {
		t.Errorf("shop signer: %+v", shop.Signer)
	}
	if sp.Signer.MchID != "1900000200" || sp.Signer.Key == nil || sp.Kind != AccountServiceProvider {
		t.Errorf("sp signer: %+v", sp.Signer)
	}
	if got := strings.Join(shop.Verifier.Serials(), ","); got != "PUB_KEY_ID_0100000000000001" {
		t.Errorf("shop verifier holds %s", got)
	}
	if got := strings.Join(sp.Verifier.Serials(), ","); got != "5157F09E" {
		t.Errorf("sp verifier holds %s", got)
	}
	// What was loaded is what the client takes; a provider's client is a
	// partner one, whose refunds must name a sub-merchant.
	if shop.ClientConfig().Partner || !sp.ClientConfig().Partner {
		t.Errorf("Partner: shop %v, sp %v; want false, true", shop.ClientConfig().Partner, sp.ClientConfig().Partner)
	}
	for _, c := range []*Credentials{shop, sp} {
		cfg := c.ClientConfig()
		cfg.NotifyURL = "https://refundd.example.com/v1/notify/wechatpay/refund"
		if _, err := wechatpay.NewClient(cfg); err != nil {
			t.Errorf("%s: wechatpay.NewClient: %v", c.Account, err)
		}
	}
}

func TestLoadCredentials_Errors(t *testing.T) {
	k, err := testKeys()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		change func(w world)
		want   []want // path is a substring of the FieldError's Path
	}{
		{"env unset", func(w world) { delete(w.env, "SHOP_APIV3_KEY") },
			[]want{{path: `account "shop": accounts[0].apiv3_key`, sentinel: ErrMissing, text: "SHOP_APIV3_KEY is empty or not set"}}},
		{"env blank", func(w world) { w.env["SP_PRIVATE_KEY"] = " \n" },
			[]want{{path: `account "sp": accounts[1].private_key`, sentinel: ErrMissing}}},
		{"file missing", func(w world) { delete(w.files, "/k/shop.pem") },
			[]want{{path: `account "shop": accounts[0].private_key`, sentinel: fs.ErrNotExist, text: "/k/shop.pem"}}},
		{"file empty", func(w world) { w.files["/k/sp.v3"] = []byte("\n") },
			[]want{{path: `account "sp": accounts[1].apiv3_key`, sentinel: ErrMissing, text: "/k/sp.v3 is empty"}}},
		{"private key not PEM", func(w world) { w.files["/k/shop.pem"] = []byte("not a key") },
			[]want{{path: `account "shop": accounts[0].private_key`, sentinel: wechatpay.ErrInvalidKey}}},
		{"private key in env is a public key", func(w world) { w.env["SP_PRIVATE_KEY"] = string(k.publicPEM) },
			[]want{{path: `account "sp": accounts[1].private_key`, sentinel: wechatpay.ErrInvalidKey}}},
		{"APIv3 key of the wrong length", func(w world) { w.env["SHOP_APIV3_KEY"] = shopV3 + "x" },
			[]want{{path: `account "shop": accounts[0].apiv3_key`, sentinel: wechatpay.ErrInvalidKey, text: "33 bytes, want 32"}}},
		{"public key file missing", func(w world) { delete(w.files, "/k/pub.pem") },
			[]want{{path: `account "shop": accounts[0].public_key_file`, sentinel: fs.ErrNotExist}}},
		{"public key file holds a certificate", func(w world) { w.files["/k/pub.pem"] = k.certPEM },
			[]want{{path: `account "shop": accounts[0].public_key_file`, sentinel: wechatpay.ErrInvalidKey}}},
		{"certificate file holds a public key", func(w world) { w.files["/k/cert.pem"] = k.publicPEM },
			[]want{{path: `account "sp": accounts[1].platform_cert_files`, sentinel: wechatpay.ErrInvalidKey, text: "/k/cert.pem"}}},
		{"every problem of every account at once", func(w world) {
			delete(w.env, "SHOP_APIV3_KEY")
			delete(w.files, "/k/shop.v2")
			w.files["/k/sp.v3"] = []byte("short")
		}, []want{
			{path: `account "shop": accounts[0].apiv3_key`, sentinel: ErrMissing},
			{path: `account "shop": accounts[0].apiv2_key`, sentinel: fs.ErrNotExist},
			{path: `account "sp": accounts[1].apiv3_key`, sentinel: wechatpay.ErrInvalidKey},
		}},
	}
	r := mustParse(t, credFile)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := goodWorld(t)
			tc.change(w)
			creds, err := r.LoadCredentials(w.sources())
			if err == nil {
				t.Fatalf("loaded %v", creds)
			}
			var es Errors
			if !errors.As(err, &es) || len(es) != len(tc.want) {
				t.Fatalf("%v: want %d problems", err, len(tc.want))
			}
			for i, w := range tc.want {
				e := es[i]
				if e.Path != w.path || !errors.Is(e, w.sentinel) || !strings.Contains(e.Error(), w.text) {
					t.Errorf("problem %d: %q, want path %q, %v, containing %q", i, e.Error(), w.path, w.sentinel, w.text)
				}
			}
			for _, secret := range []string{shopV3, spV3, "v2key", "PRIVATE KEY"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a secret: %v", err)
				}
			}
		})
	}
}

func TestCredentials_Redacted(t *testing.T) {
	r := mustParse(t, credFile)
	creds, err := r.LoadCredentials(goodWorld(t).sources())
	if err != nil {
		t.Fatal(err)
	}
	c := creds["shop"]
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("loaded", "credentials", c, "value", *c)
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%v", *c), fmt.Sprintf("%+v", *c), logged.String()} {
		leaks := []string{shopV3, "v2key", strings.Trim(fmt.Sprint([]byte(shopV3)), "[]"), fmt.Sprintf("%x", shopV3),
			c.Signer.Key.D.String(), "Primes"}
		if containsAny(out, leaks) {
			t.Errorf("printed credentials show a key: %s", out)
		}
		if !strings.Contains(out, "shop") {
			t.Errorf("printed credentials do not name the account: %s", out)
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
