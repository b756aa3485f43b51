package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// refundd serves the expiry of every platform certificate it was given
// (--wechatpay-platform-cert) and none for the sandbox, whose verifier
// holds a WeChat Pay public key, which does not expire.
func TestMain_MetricsCertificateExpiry(t *testing.T) {
	keys, err := sandbox.GenerateKeys("1900000001")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyDir := filepath.Join(dir, "keys")
	if _, err := keys.WriteDir(keyDir, ""); err != nil {
		t.Fatal(err)
	}
	notAfter := time.Date(2031, 6, 30, 12, 0, 0, 0, time.UTC)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(0x5157F09E), Subject: pkix.Name{CommonName: "Tenpay.com test"},
		NotBefore: notAfter.AddDate(-5, 0, 0), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &keys.PlatformKey.PublicKey, keys.PlatformKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(dir, "wechatpay_cert.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	const series = `refundd_wechatpay_certificate_expiry_timestamp_seconds{kind="platform",serial="5157F09E"} `
	for _, tc := range []struct {
		name string
		args []string
		want string // "": no expiry series at all
	}{
		{"platform certificate", []string{"--provider", "wechatpay", "--wechatpay-base-url", "http://127.0.0.1:1",
			"--wechatpay-mchid", keys.MchID, "--wechatpay-serial", keys.MerchantSerial,
			"--wechatpay-private-key", filepath.Join(keyDir, sandbox.MerchantKeyFile), "--wechatpay-platform-cert", certFile},
			series + strconv.FormatFloat(float64(notAfter.Unix()), 'g', -1, 64)},
		{"sandbox", []string{"--provider", "sandbox"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := func(k string) string {
				if k == "REFUNDD_WECHATPAY_APIV3_KEY" {
					return string(keys.APIv3Key)
				}
				return testEnv(k)
			}
			m := NewMain()
			m.Stdout, m.Stderr = io.Discard, io.Discard
			if err := m.ParseFlags(append([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir()}, tc.args...), env); err != nil {
				t.Fatal(err)
			}
			if err := m.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			req, _ := http.NewRequest("GET", "http://"+m.Addr()+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+testServiceToken)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("/metrics: %d %v", res.StatusCode, err)
			}
			text := string(b)
			var got []string
			for _, l := range strings.Split(text, "\n") {
				if strings.HasPrefix(l, "refundd_wechatpay_certificate_expiry_timestamp_seconds") {
					got = append(got, l)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("expiry series for no certificate: %q", got)
			case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
				t.Fatalf("expiry series %q, want [%q]", got, tc.want)
			}
		})
	}
}
