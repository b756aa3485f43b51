package metrics_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/wechatpay"
)

// selfSigned returns a certificate with the given serial and NotAfter, as
// WeChat Pay's platform certificates carry theirs.
func selfSigned(t *testing.T, key *rsa.PrivateKey, serial int64, notAfter time.Time) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "Tenpay.com test"},
		NotBefore: notAfter.AddDate(-5, 0, 0), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The expiry gauge is each platform certificate's NotAfter in Unix seconds,
// read from the verifier at scrape time; a public key has no expiry and no
// series.
func TestWatch_PlatformCertificateExpiry(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	notAfter := time.Date(2031, 6, 30, 12, 0, 0, 0, time.UTC)
	cert := selfSigned(t, key, 0x5157F09E, notAfter)
	const series = `refundd_wechatpay_certificate_expiry_timestamp_seconds{kind="platform",serial="5157F09E"}`
	for _, tc := range []struct {
		name      string
		cert, pub bool
		want      float64 // -1: no series
		series    int     // how many expiry series in all
	}{
		{"platform certificate", true, false, float64(notAfter.Unix()), 1},
		{"public key only", false, true, -1, 0},
		{"both, during the switchover", true, true, float64(notAfter.Unix()), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &wechatpay.Verifier{}
			if tc.pub {
				if err := v.AddPublicKey("PUB_KEY_ID_0114232134912410000000000012345678", &key.PublicKey); err != nil {
					t.Fatal(err)
				}
			}
			if tc.cert {
				if err := v.AddCertificate(cert); err != nil {
					t.Fatal(err)
				}
			}
			m := metrics.New(metrics.Options{NoRuntime: true, Logger: quiet()})
			if err := m.Watch(metrics.Sources{PlatformCertificates: v.CertificateExpiries}); err != nil {
				t.Fatal(err)
			}
			text := scrape(t, m)
			want(t, text, series, tc.want)
			if n := strings.Count(text, "\nrefundd_wechatpay_certificate_expiry_timestamp_seconds{"); n != tc.series {
				t.Errorf("%d expiry series, want %d:\n%s", n, tc.series, text)
			}
			if tc.series > 0 && !strings.Contains(text, "public key (PUB_KEY_ID_...) does not expire") {
				t.Errorf("the help does not say a public key has no series:\n%s", text)
			}
		})
	}
}

// TestCertificateDownloadMetrics: a failing download is visible by mchid;
// the last-success series is absent until one succeeds.
func TestCertificateDownloadMetrics(t *testing.T) {
	ok := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	m := metrics.New(metrics.Options{NoRuntime: true, Logger: quiet()})
	if err := m.Watch(metrics.Sources{CertificateDownloads: func() map[string]metrics.CertificateDownloads {
		return map[string]metrics.CertificateDownloads{
			"1900000100": {Failures: 3, ConsecutiveFailures: 2, LastSuccess: ok},
			"1900000200": {Failures: 1, ConsecutiveFailures: 1},
		}
	}}); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, m)
	want(t, text, `refundd_wechatpay_certificate_download_failures_total{mchid="1900000100"}`, 3)
	want(t, text, `refundd_wechatpay_certificate_download_consecutive_failures{mchid="1900000100"}`, 2)
	want(t, text, `refundd_wechatpay_certificate_download_last_success_timestamp_seconds{mchid="1900000100"}`, float64(ok.Unix()))
	want(t, text, `refundd_wechatpay_certificate_download_consecutive_failures{mchid="1900000200"}`, 1)
	want(t, text, `refundd_wechatpay_certificate_download_last_success_timestamp_seconds{mchid="1900000200"}`, -1)
}
