package main

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// TestReload_SIGHUP, on real processes: refundd runs on a merchants file
// against wxpaysim. A broken key file on SIGHUP is refused, logged and
// counted, and refunds keep working on the old key; a new key and serial
// on the next SIGHUP are logged and used by the next request (WeChat Pay
// has revoked the old certificate by then, so only the new key can sign
// it). The operator route refuses a broken file with 400 naming it.
func TestReload_SIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	refunddBin, simBin := buildCrashBinaries(t)
	addr := freeAddr(t)
	sim := startSim(t, simBin, t.TempDir(), simOptions{processingDelay: "50ms", timeFactor: "0.01",
		notifyURL: "http://" + addr + accountNotifyPath("shop")})
	dir := t.TempDir()
	oldKey := filepath.Join(dir, "apiclient_key.pem")
	pemBytes, err := os.ReadFile(filepath.Join(sim.keys, sim.man.Files.MerchantPrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(oldKey, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "merchants.toml")
	writeFile := func(serial, key string) {
		t.Helper()
		f := func(name string) string { return filepath.Join(sim.keys, name) }
		toml := fmt.Sprintf(`[[accounts]]
name = "shop"
kind = "direct"
mchid = %q
base_url = %q
serial = %q
private_key = "file:%s"
apiv3_key = "file:%s"
public_key_id = %q
public_key_file = %q

[[merchants]]
name = "shop"
kind = "direct"
account = "shop"
refund_prefix = "R"
`, sim.man.MchID, sim.man.BaseURL, serial, key, f(sim.man.Files.APIv3Key), sim.man.PublicKeyID, f(sim.man.Files.WechatpayPublicKey))
		if err := os.WriteFile(file, []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(sim.man.MerchantSerial, oldKey)
	data := t.TempDir()
	rd := &refunddProc{bin: refunddBin, data: data, addr: addr, logs: &lockedWriter{}, flags: []string{
		"--listen", addr, "--data", data, "--provider", "wechatpay", "--merchants-file", file,
		"--reconcile-after", "300ms", "--reconcile-schedule", "200ms", "--retry-backoff", "30ms",
		"--retry-backoff-max", "200ms", "--refund-spacing", "0", "--scheduler-interval", "20ms",
		"--lock-timeout", "5s", "--shutdown-timeout", "10s"}}
	d := rd.start(t)
	c := client{t: t, base: "http://" + addr}
	op := client{t: t, base: c.base, token: testOperatorToken}

	refund := func(i int) {
		t.Helper()
		id, order := fmt.Sprintf("rl-%d", i), fmt.Sprintf("ORD-RL-%d", i)
		sim.createOrder(t, order, 10000)
		if code, body := c.do("POST", "/v1/reservations", "", map[string]any{"id": id, "user_id": "u", "out_trade_no": order,
			"amount": 10000, "currency": "CNY", "merchant": "shop"}); code != 201 {
			t.Fatalf("register %s: %d %v", id, code, body)
		}
		code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", id, map[string]any{"user_id": "u", "amount": 100})
		if code != 202 {
			t.Fatalf("refund %s: %d %v; logs:\n%s", id, code, body, tail(rd.logs.String(), 30))
		}
		waitSettled(t, c, sim, rd, id, body["refund_no"].(string), "SUCCEEDED")
	}
	reloads := func(result string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", c.base+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+testOperatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return grepLines(string(b), `refundd_credentials_reload_total{result="`+result+`"}`, 1)
	}
	logged := func(what, sub string, n int) {
		t.Helper()
		waitFor(t, 10*time.Second, what, func() (bool, string) {
			return strings.Count(rd.logs.String(), sub) >= n, tail(rd.logs.String(), 10)
		})
	}
	refund(1)

	// A broken key file: refused, logged naming the file, counted; the
	// old key keeps signing.
	if err := os.WriteFile(oldKey, []byte("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logged("the refusal logged", "credentials reload refused", 1)
	if line := grepLines(rd.logs.String(), "credentials reload refused", 1); !strings.Contains(line, `"trigger":"SIGHUP"`) ||
		!strings.Contains(line, "private_key") || !strings.Contains(line, `"result":"invalid"`) {
		t.Fatalf("refusal log line does not name the trigger and the setting: %s", line)
	}
	// The reload logs before it counts: wait for the count.
	waitFor(t, 10*time.Second, "the refusal counted", func() (bool, string) {
		got := reloads("invalid")
		return strings.HasSuffix(got, " 1"), got
	})
	refund(2)
	// The operator route refuses it too, naming the setting.
	code, body := op.do("POST", "/v1/admin/credentials/reload", "", nil)
	if e, _ := body["error"].(map[string]any); code != 400 || e["code"] != "credentials_invalid" || !strings.Contains(fmt.Sprint(e["message"]), "private_key") {
		t.Fatalf("reload route with a broken file: %d %v", code, body)
	}

	// A new API certificate: WeChat Pay accepts it, the files name it, a
	// SIGHUP loads it, then the old one is revoked.
	keys, err := sandbox.GenerateKeys(sim.man.MchID)
	if err != nil {
		t.Fatal(err)
	}
	const newSerial = "6E6577000000000000000000000000000000CAFE"
	newKey := filepath.Join(dir, "apiclient_key_2026.pem")
	keyPEM, err := keys.MerchantKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newKey, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.admin("POST", "/sandbox/credentials/merchant-keys", map[string]any{"serial": newSerial,
		"public_key": publicPEM(t, &keys.MerchantKey.PublicKey)}, nil); err != nil {
		t.Fatal(err)
	}
	writeFile(newSerial, newKey)
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logged("the reload logged", "credentials reloaded", 1)
	if line := grepLines(rd.logs.String(), "credentials reloaded", 1); !strings.Contains(line, `"merchant_serial":"`+newSerial) ||
		!strings.Contains(line, `"previous_merchant_serial":"`+sim.man.MerchantSerial) || !strings.Contains(line, `"trigger":"SIGHUP"`) {
		t.Fatalf("reload log line: %s", line)
	}
	if _, err := sim.admin("DELETE", "/sandbox/credentials/merchant-keys/"+sim.man.MerchantSerial, nil, nil); err != nil {
		t.Fatal(err)
	}
	refund(3)
	// The reload logs before it counts: wait for the count.
	waitFor(t, 10*time.Second, "the reload counted", func() (bool, string) {
		got := reloads("ok")
		return strings.HasSuffix(got, " 1"), got
	})
	if _, v := op.do("GET", "/v1/admin/credentials", "", nil); !strings.Contains(fmt.Sprint(v), newSerial) {
		t.Fatalf("credentials view after the reload: %v", v)
	}
	d.stop(t)
}

func publicPEM(t *testing.T, pub *rsa.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// TestReload_APIv3KeyChange: WeChat Pay (the sandbox) changes the APIv3
// key; until the reload its notifications are refused 400 and retried, and
// a retry after the reload is applied. A second change reloaded before
// WeChat Pay makes it: notifications still under the previous key are
// opened by it during --wechatpay-apiv3-key-grace.
func TestReload_APIv3KeyChange(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	keys, err := sandbox.GenerateKeys("1900000001")
	if err != nil {
		t.Fatal(err)
	}
	keyDir := t.TempDir()
	man, err := keys.WriteDir(keyDir, "")
	if err != nil {
		t.Fatal(err)
	}
	f := func(name string) string { return filepath.Join(keyDir, name) }
	cfg := keys.Config()
	// WeChat Pay's retries 150ms, 150ms, 300ms, 1.8s, ... apart.
	cfg.TimeFactor, cfg.ProcessingDelay, cfg.MinRefundSpacing = 0.01, 50*time.Millisecond, 0
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	hs := httptest.NewServer(sb)
	defer hs.Close()
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	// No reconciliation query: only a notification settles a refund.
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--provider", "wechatpay",
		"--wechatpay-base-url", hs.URL, "--wechatpay-mchid", keys.MchID, "--wechatpay-serial", keys.MerchantSerial,
		"--wechatpay-private-key", f(man.Files.MerchantPrivateKey), "--wechatpay-public-key", f(man.Files.WechatpayPublicKey),
		"--wechatpay-public-key-id", man.PublicKeyID, "--wechatpay-apiv3-key-file", f(man.Files.APIv3Key),
		"--wechatpay-apiv3-key-grace", "1h", "--refund-spacing", "0", "--reconcile-after", "1h", "--scheduler-interval", "20ms"},
		testEnv); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := client{t: t, base: "http://" + m.Addr()}
	refund := func(i int) (id, no string) {
		t.Helper()
		id, order := fmt.Sprintf("k3-%d", i), fmt.Sprintf("ORD-K3-%d", i)
		if err := sb.CreateOrder(order, "", 10000); err != nil {
			t.Fatal(err)
		}
		if code, body := c.do("POST", "/v1/reservations", "", map[string]any{"id": id, "user_id": "u", "out_trade_no": order,
			"amount": 10000, "currency": "CNY"}); code != 201 {
			t.Fatalf("register %s: %d %v", id, code, body)
		}
		code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", "k", map[string]any{"user_id": "u", "amount": 100})
		if code != 202 {
			t.Fatalf("refund %s: %d %v", id, code, body)
		}
		return id, body["refund_no"].(string)
	}
	succeeded := func(id, no string) {
		t.Helper()
		waitFor(t, 20*time.Second, no+" SUCCEEDED", func() (bool, string) {
			_, r := c.do("GET", "/v1/reservations/"+id+"/refunds/"+no+"?wait=500ms", "", nil)
			return r["state"] == "SUCCEEDED", fmtAny("refundd", r, "deliveries", sb.Deliveries(no))
		})
	}
	setKey := func(key string) {
		t.Helper()
		if err := os.WriteFile(f(man.Files.APIv3Key), []byte(key), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := m.ReloadCredentials(context.Background(), "test"); err != nil {
			t.Fatal(err)
		}
	}
	succeeded(refund(1))

	// WeChat Pay changes the key; refundd does not know it yet.
	const k2, k3 = "k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2k2", "k3k3k3k3k3k3k3k3k3k3k3k3k3k3k3k3"
	if err := sb.ChangeAPIv3Key([]byte(k2), time.Time{}); err != nil {
		t.Fatal(err)
	}
	id, no := refund(2)
	waitFor(t, 10*time.Second, "a refused delivery", func() (bool, string) {
		for _, d := range sb.Deliveries(no) {
			if d.HTTPStatus == http.StatusBadRequest {
				return true, ""
			}
		}
		return false, fmtAny("deliveries", sb.Deliveries(no))
	})
	if _, r := c.do("GET", "/v1/reservations/"+id+"/refunds/"+no, "", nil); r["state"] == "SUCCEEDED" {
		t.Fatalf("applied a notification under an unknown key: %v", r)
	}
	setKey(k2)
	succeeded(id, no)

	// refundd learns k3 first; WeChat Pay still encrypts with k2, which
	// the grace keeps opening.
	setKey(k3)
	id, no = refund(3)
	succeeded(id, no)
	for _, d := range sb.Deliveries(no) {
		if !d.Acked {
			t.Fatalf("a notification under the previous key refused during the grace: %+v", d)
		}
	}
}
