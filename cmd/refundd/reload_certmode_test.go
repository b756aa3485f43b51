package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// TestReload_AddCertificateModeAccount: an account in platform
// certificate mode added by a reload has its certificate downloaded
// before it is used. While WeChat Pay is unreachable (nothing stored, so
// nothing to verify with) the reload is refused and the account stays
// unknown: no credentials, no notification route. Once reachable, the
// reload downloads and stores the certificate, the account is listed with
// it, a notification signed with it is verified at the account's route
// (404: a refund refundd does not know), and its download is in the
// metrics under its mchid.
func TestReload_AddCertificateModeAccount(t *testing.T) {
	dir := t.TempDir()
	accountFile := func(name, mchid, base string, keys sandbox.Keys, certMode bool) string {
		t.Helper()
		kd := filepath.Join(dir, name)
		if _, err := keys.WriteDir(kd, ""); err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("[[accounts]]\nname = %q\nkind = \"direct\"\nmchid = %q\nbase_url = %q\nserial = %q\nprivate_key = %q\napiv3_key = %q\n",
			name, mchid, base, keys.MerchantSerial, "file:"+filepath.Join(kd, sandbox.MerchantKeyFile), "file:"+filepath.Join(kd, sandbox.APIv3KeyFile))
		if certMode {
			return s + "download_certificates = true\n\n"
		}
		return s + fmt.Sprintf("public_key_id = %q\npublic_key_file = %q\n\n", keys.PublicKeyID, filepath.Join(kd, sandbox.PublicKeyFile))
	}
	merchantBlock := func(name, prefix string) string {
		return fmt.Sprintf("[[merchants]]\nname = %q\nkind = \"direct\"\naccount = %q\nrefund_prefix = %q\n\n", name, name, prefix)
	}
	keysA, err := sandbox.GenerateKeys("1900000101")
	if err != nil {
		t.Fatal(err)
	}
	keysB, err := sandbox.GenerateKeys("1900000102")
	if err != nil {
		t.Fatal(err)
	}
	cfg := keysB.Config()
	cfg.CertificateMode = true
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	cert, err := sandbox.StablePlatformCertificate(keysB.PlatformKey, keysB.MchID)
	if err != nil {
		t.Fatal(err)
	}
	serial := wechatpay.CertificateSerial(cert)
	// B's WeChat Pay is unreachable at first: a closed server's address.
	down := httptest.NewServer(sb)
	down.Close()

	a := accountFile("a", keysA.MchID, "http://127.0.0.1:1", keysA, false)
	file := filepath.Join(dir, "merchants.toml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(a + merchantBlock("a", "AA"))
	data := t.TempDir()
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", data, "--provider", "wechatpay",
		"--merchants-file", file}, testEnv); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	notify := func() (int, string) {
		t.Helper()
		n := wechatpay.Notification{ID: "EV-1", CreateTime: time.Now().Format(time.RFC3339)}
		n.Resource.AssociatedData = "refund"
		body, err := wechatpay.BuildRefundNotification(keysB.APIv3Key, n, wechatpay.RefundResource{
			MchID: keysB.MchID, TransactionID: "4200", OutTradeNo: "O1", RefundID: "5030", OutRefundNo: "BB-unknown-1",
			RefundStatus: wechatpay.RefundSuccess, SuccessTime: time.Now().Format(time.RFC3339), UserReceivedAccount: "支付用户零钱",
			Amount: wechatpay.RefundAmount{Total: 100, Refund: 100, PayerTotal: 100, PayerRefund: 100},
		})
		if err != nil {
			t.Fatal(err)
		}
		h, err := wechatpay.SignHeaders(keysB.PlatformKey, serial, time.Now().Unix(), wechatpay.NewNonce(), body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+m.Addr()+accountNotifyPath("b"), strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		h.Set(req.Header)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		got, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(got)
	}
	get := func(path, token string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+m.Addr()+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
		}
		return string(b)
	}
	credentials := func() api.CredentialsView {
		t.Helper()
		var v api.CredentialsView
		if err := json.Unmarshal([]byte(get("/v1/admin/credentials", testOperatorToken)), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	// Unreachable, nothing stored: refused, B stays unknown.
	write(a + accountFile("b", keysB.MchID, down.URL, keysB, true) + merchantBlock("a", "AA") + merchantBlock("b", "BB"))
	err = m.ReloadCredentials(context.Background(), "test")
	if !errors.Is(err, merchant.ErrReloadInvalid) || !strings.Contains(err.Error(), `account "b"`) ||
		!strings.Contains(err.Error(), "no platform certificate stored") {
		t.Fatalf("reload with B's WeChat Pay unreachable: %v", err)
	}
	if v := credentials(); len(v.Accounts) != 1 || v.Accounts[0].Account != "a" {
		t.Fatalf("credentials after the refused reload: %+v", v)
	}
	if status, body := notify(); status != http.StatusNotFound || !strings.Contains(body, "no such account") {
		t.Fatalf("B's route after the refused reload: %d %s", status, body)
	}

	// Reachable: downloaded, stored and used.
	up := httptest.NewServer(sb)
	defer up.Close()
	write(a + accountFile("b", keysB.MchID, up.URL, keysB, true) + merchantBlock("a", "AA") + merchantBlock("b", "BB"))
	if err := m.ReloadCredentials(context.Background(), "test"); err != nil {
		t.Fatalf("reload with B's WeChat Pay reachable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "wechatpay-certificates", keysB.MchID, serial+".pem")); err != nil {
		t.Fatalf("B's certificate not stored: %v", err)
	}
	v := credentials()
	if len(v.Accounts) != 2 || v.Accounts[1].Account != "b" {
		t.Fatalf("credentials after the reload: %+v", v)
	}
	if b := v.Accounts[1]; b.MchID != keysB.MchID || len(b.Keys) != 1 || b.Keys[0].Serial != serial ||
		b.Keys[0].Source != api.KeySourceDownload || b.Download == nil || b.Download.Downloads != 1 {
		t.Fatalf("B's credentials: %+v", b)
	}
	if status, body := notify(); status != http.StatusNotFound || !strings.Contains(body, "unknown out_refund_no") {
		t.Fatalf("notification signed with B's downloaded certificate: %d %s, want 404 (verified, unknown refund)", status, body)
	}
	text := get("/metrics", testOperatorToken)
	for _, want := range []string{
		`refundd_wechatpay_certificate_download_consecutive_failures{mchid="` + keysB.MchID + `"} 0`,
		`refundd_wechatpay_certificate_expiring{mchid="` + keysB.MchID + `"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
