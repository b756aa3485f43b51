package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// TestMain_CertificateModeRestartWithoutNetwork: with
// --wechatpay-download-certificates refundd downloads the platform
// certificate before it is ready and stores it under --data; restarted
// while WeChat Pay is unreachable it still verifies notifications with the
// stored certificate, and reports the failing download. Without a stored
// certificate and without network it refuses to start.
func TestMain_CertificateModeRestartWithoutNetwork(t *testing.T) {
	keys, err := sandbox.GenerateKeys("1900000001")
	if err != nil {
		t.Fatal(err)
	}
	keyDir := filepath.Join(t.TempDir(), "keys")
	if _, err := keys.WriteDir(keyDir, ""); err != nil {
		t.Fatal(err)
	}
	cfg := keys.Config()
	cfg.CertificateMode = true
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	hs := httptest.NewServer(sb)
	defer hs.Close()
	cert, err := sandbox.StablePlatformCertificate(keys.PlatformKey, keys.MchID)
	if err != nil {
		t.Fatal(err)
	}
	serial := wechatpay.CertificateSerial(cert)

	env := func(k string) string {
		if k == "REFUNDD_WECHATPAY_APIV3_KEY" {
			return string(keys.APIv3Key)
		}
		return testEnv(k)
	}
	start := func(data, base string) (*Main, error) {
		m := NewMain()
		m.Stdout, m.Stderr = io.Discard, io.Discard
		if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", data, "--provider", "wechatpay",
			"--wechatpay-base-url", base, "--wechatpay-mchid", keys.MchID, "--wechatpay-serial", keys.MerchantSerial,
			"--wechatpay-private-key", filepath.Join(keyDir, sandbox.MerchantKeyFile), "--wechatpay-download-certificates"}, env); err != nil {
			t.Fatal(err)
		}
		return m, m.Run(context.Background())
	}
	// notify posts a notification signed with the platform certificate for
	// a refund refundd does not know: 404 once verified, 401 if not.
	notify := func(m *Main) (int, string) {
		n := wechatpay.Notification{ID: "EV-1", CreateTime: time.Now().Format(time.RFC3339)}
		n.Resource.AssociatedData = "refund"
		body, err := wechatpay.BuildRefundNotification(keys.APIv3Key, n, wechatpay.RefundResource{
			MchID: keys.MchID, TransactionID: "4200", OutTradeNo: "O1", RefundID: "5030", OutRefundNo: "RF-unknown-1",
			RefundStatus: wechatpay.RefundSuccess, SuccessTime: time.Now().Format(time.RFC3339), UserReceivedAccount: "支付用户零钱",
			Amount: wechatpay.RefundAmount{Total: 100, Refund: 100, PayerTotal: 100, PayerRefund: 100},
		})
		if err != nil {
			t.Fatal(err)
		}
		h, err := wechatpay.SignHeaders(keys.PlatformKey, serial, time.Now().Unix(), wechatpay.NewNonce(), body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+m.Addr()+"/v1/notify/wechatpay/refund", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		h.Set(req.Header)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	credentials := func(m *Main) api.CredentialsView {
		req, _ := http.NewRequest(http.MethodGet, "http://"+m.Addr()+"/v1/admin/credentials", nil)
		req.Header.Set("Authorization", "Bearer "+testOperatorToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var v api.CredentialsView
		if err := json.NewDecoder(res.Body).Decode(&v); err != nil || res.StatusCode != 200 || len(v.Accounts) != 1 {
			t.Fatalf("credentials: %d %v %+v", res.StatusCode, err, v)
		}
		return v
	}
	metricsText := func(m *Main) string {
		req, _ := http.NewRequest(http.MethodGet, "http://"+m.Addr()+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+testServiceToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}

	data := t.TempDir()
	m, err := start(data, hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	stored := filepath.Join(data, "wechatpay-certificates", keys.MchID, serial+".pem")
	if _, err := os.Stat(stored); err != nil {
		m.Close()
		t.Fatalf("certificate not stored: %v", err)
	}
	if status, body := notify(m); status != http.StatusNotFound {
		m.Close()
		t.Fatalf("notification with the downloaded certificate: %d %s, want 404 (verified, unknown refund)", status, body)
	}
	if a := credentials(m).Accounts[0]; len(a.Keys) != 1 || a.Keys[0].Serial != serial || a.Keys[0].Source != api.KeySourceDownload ||
		a.Download == nil || a.Download.Downloads != 1 || a.Download.Failures != 0 || a.MerchantSerial != keys.MerchantSerial {
		m.Close()
		t.Fatalf("credentials after the first start: %+v", a)
	}
	m.Close()

	// WeChat Pay unreachable: the same data directory still verifies.
	hs.Close()
	m, err = start(data, hs.URL)
	if err != nil {
		t.Fatalf("restart without network: %v", err)
	}
	defer m.Close()
	if status, body := notify(m); status != http.StatusNotFound {
		t.Fatalf("notification after a restart without network: %d %s, want 404 (verified with the stored certificate)", status, body)
	}
	if a := credentials(m).Accounts[0]; len(a.Keys) != 1 || a.Keys[0].Source != api.KeySourceStore ||
		a.Download.ConsecutiveFailures != 1 || a.Download.LastError == "" || a.Keys[0].NotAfter == nil {
		t.Fatalf("credentials after a restart without network: %+v %+v", a, a.Download)
	}
	text := metricsText(m)
	for _, want := range []string{
		`refundd_wechatpay_certificate_expiry_timestamp_seconds{kind="platform",serial="` + serial + `"}`,
		`refundd_wechatpay_certificate_download_consecutive_failures{mchid="` + keys.MchID + `"} 1`,
		// The sandbox's certificate is good for years: not expiring.
		`refundd_wechatpay_certificate_expiring{mchid="` + keys.MchID + `"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// Nothing stored, no network: refundd does not start half-blind.
	m2, err := start(t.TempDir(), hs.URL)
	if err == nil {
		m2.Close()
		t.Fatal("started without any platform certificate")
	}
	if !strings.Contains(err.Error(), "no platform certificate stored") {
		t.Fatalf("error does not say why: %v", err)
	}
}
