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
			if err := m.Watch(metrics.Sources{AccountKeys: func() map[string][]wechatpay.KeyInfo {
				return map[string][]wechatpay.KeyInfo{"1900000100": v.Keys()}
			}}); err != nil {
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

// TestCertificateExpiring: an account is expiring when it verifies with
// certificates only and the last of them ends within the warning window; a
// public key (which does not expire) clears it, and an account without a
// certificate has no series.
func TestCertificateExpiring(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	cert := func(serial string, left time.Duration) wechatpay.KeyInfo {
		return wechatpay.KeyInfo{Serial: serial, Certificate: true, NotAfter: now.Add(left)}
	}
	pub := wechatpay.KeyInfo{Serial: "PUB_KEY_ID_0114232134912410000000000012345678"}
	for _, tc := range []struct {
		name string
		keys []wechatpay.KeyInfo
		want float64 // -1: no series
	}{
		{"far from expiry", []wechatpay.KeyInfo{cert("A1", 200*day)}, 0},
		{"within 30 days", []wechatpay.KeyInfo{cert("A1", 29*day)}, 1},
		{"a day past the window", []wechatpay.KeyInfo{cert("A1", 31*day)}, 0},
		{"already expired", []wechatpay.KeyInfo{cert("A1", -day)}, 1},
		{"old one expiring, its successor downloaded", []wechatpay.KeyInfo{cert("A1", 10*day), cert("A2", 190*day)}, 0},
		{"expiring, but a public key is held", []wechatpay.KeyInfo{cert("A1", 10*day), pub}, 0},
		{"public key only", []wechatpay.KeyInfo{pub}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New(metrics.Options{NoRuntime: true, Logger: quiet()})
			if err := m.Watch(metrics.Sources{Now: func() time.Time { return now },
				AccountKeys: func() map[string][]wechatpay.KeyInfo { return map[string][]wechatpay.KeyInfo{"1900000100": tc.keys} }}); err != nil {
				t.Fatal(err)
			}
			want(t, scrape(t, m), `refundd_wechatpay_certificate_expiring{mchid="1900000100"}`, tc.want)
		})
	}
	// The window is a setting.
	m := metrics.New(metrics.Options{NoRuntime: true, Logger: quiet(), CertificateWarning: 7 * day})
	if err := m.Watch(metrics.Sources{Now: func() time.Time { return now },
		AccountKeys: func() map[string][]wechatpay.KeyInfo {
			return map[string][]wechatpay.KeyInfo{"1900000100": {cert("A1", 10*day)}, "1900000200": {cert("B1", 6*day)}}
		}}); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, m)
	want(t, text, `refundd_wechatpay_certificate_expiring{mchid="1900000100"}`, 0)
	want(t, text, `refundd_wechatpay_certificate_expiring{mchid="1900000200"}`, 1)
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
