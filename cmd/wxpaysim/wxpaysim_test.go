package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/logs/logstest"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

func TestParseFlags_Invalid(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"zero time factor", []string{"--time-factor=0"}},
		{"negative delay", []string{"--processing-delay=-1s"}},
		{"negative spacing", []string{"--min-refund-spacing=-1s"}},
		{"negative create limit", []string{"--max-creates=-1"}},
		{"empty keys dir", []string{"--keys-dir="}},
		{"bad log level", []string{"--log-level=loud"}},
		{"bad log format", []string{"--log-format=xml"}},
		{"extra argument", []string{"serve"}},
		{"sub-merchants without provider", []string{"--sub-merchants=1900000201"}},
		{"provider without sub-merchants", []string{"--service-provider=1900000200"}},
		{"mchid with several merchants", []string{"--mchid=1900000101", "--direct-merchants=1900000102"}},
		{"state file with several merchants", []string{"--direct-merchants=1900000102", "--state-file=x.json"}},
		{"state dir with one merchant", []string{"--state-dir=x"}},
		{"merchant id twice", []string{"--direct-merchants=1900000102", "--service-provider=1900000200", "--sub-merchants=1900000102"}},
		{"merchant id not digits", []string{"--direct-merchants=19000a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMain()
			m.Stderr = io.Discard
			if err := m.ParseFlags(tt.args); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"-h"}); !errors.Is(err, errHelp) {
		t.Fatalf("help: %v", err)
	}
}

func start(t *testing.T, dir string, extra ...string) (*Main, string) {
	t.Helper()
	m := NewMain()
	var out bytes.Buffer
	m.Stdout, m.Stderr = &out, io.Discard
	args := append([]string{"--listen=127.0.0.1:0", "--keys-dir=" + dir, "--time-factor=0.001", "--processing-delay=0"}, extra...)
	if err := m.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, out.String()
}

// TestRun_EndToEnd starts the command, configures a merchant only from the
// files it wrote, and refunds through the real protocol.
func TestRun_EndToEnd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	m, out := start(t, dir)
	if !strings.Contains(out, "listening on "+m.URL()) || !strings.Contains(out, "--wechatpay-public-key-id=PUB_KEY_ID_") {
		t.Fatalf("report:\n%s", out)
	}
	var man sandbox.Manifest
	raw, err := os.ReadFile(filepath.Join(dir, sandbox.ManifestFile))
	if err != nil || json.Unmarshal(raw, &man) != nil || man.BaseURL != m.URL() || man.MchID != "1900000109" {
		t.Fatalf("manifest %s (%v)", raw, err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key, err := wechatpay.ParsePrivateKey(read(man.Files.MerchantPrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := wechatpay.ParsePublicKey(read(man.Files.WechatpayPublicKey))
	if err != nil {
		t.Fatal(err)
	}
	v := &wechatpay.Verifier{}
	if err := v.AddPublicKey(man.PublicKeyID, pub); err != nil {
		t.Fatal(err)
	}
	signer := wechatpay.Signer{MchID: man.MchID, SerialNo: man.MerchantSerial, Key: key}

	resp, err := http.Post(m.URL()+"/sandbox/orders", "application/json", strings.NewReader(`{"out_trade_no":"O1","total":1000}`))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("admin order: %v %v", resp, err)
	}
	resp.Body.Close()

	do := func(method, target string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(method, m.URL()+target, bytes.NewReader(body))
		auth, err := signer.Authorization(method, req.URL.RequestURI(), body, time.Now().Unix(), wechatpay.NewNonce())
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", auth)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := v.Verify(wechatpay.HeadersFrom(resp.Header), b); err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		return resp.StatusCode, b
	}
	status, body := do("POST", "/v3/refund/domestic/refunds",
		[]byte(`{"out_trade_no":"O1","out_refund_no":"R1","amount":{"refund":100,"total":1000,"currency":"CNY"}}`))
	if status != 200 || !strings.Contains(string(body), `"status":"PROCESSING"`) {
		t.Fatalf("create: %d %s", status, body)
	}
	status, body = do("GET", "/v3/refund/domestic/refunds/R1", nil)
	if status != 200 || !strings.Contains(string(body), `"status":"SUCCESS"`) {
		t.Fatalf("query: %d %s", status, body)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(m.URL() + "/sandbox/faults"); err == nil {
		t.Fatal("still serving after Close")
	}
}

func TestRun_ReusesKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	m1, out1 := start(t, dir)
	m1.Close()
	first, err := sandbox.LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, out2 := start(t, dir)
	second, err := sandbox.LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out1, "keys generated") || !strings.Contains(out2, "keys reused") ||
		second.MerchantSerial != first.MerchantSerial || !second.PlatformKey.Equal(first.PlatformKey) {
		t.Fatalf("keys not reused:\n%s\n%s", out1, out2)
	}
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.ParseFlags([]string{"--listen=127.0.0.1:0", "--keys-dir=" + dir, "--mchid=1234567890"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "1900000109") {
		m.Close()
		t.Fatalf("mchid mismatch accepted: %v", err)
	}
}

// merchantFor is a signed-request helper for a running wxpaysim, built
// only from the files in its key directory.
func merchantFor(t *testing.T, m *Main, dir string) func(method, target string, body []byte) (int, []byte) {
	t.Helper()
	k, err := sandbox.LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := k.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	signer := k.Signer()
	return func(method, target string, body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, m.URL()+target, bytes.NewReader(body))
		auth, err := signer.Authorization(method, req.URL.RequestURI(), body, time.Now().Unix(), wechatpay.NewNonce())
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", auth)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := v.Verify(wechatpay.HeadersFrom(resp.Header), b); err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		return resp.StatusCode, b
	}
}

func adminOrder(t *testing.T, m *Main, body string) {
	t.Helper()
	resp, err := http.Post(m.URL()+"/sandbox/orders", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("admin order: %d", resp.StatusCode)
	}
}

func TestRun_MinRefundSpacing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	m, out := start(t, dir, "--min-refund-spacing=1h")
	if !strings.Contains(out, "at least 1h0m0s apart") {
		t.Fatalf("report:\n%s", out)
	}
	do := merchantFor(t, m, dir)
	adminOrder(t, m, `{"out_trade_no":"O1","total":1000}`)
	r1 := []byte(`{"out_trade_no":"O1","out_refund_no":"R1","amount":{"refund":100,"total":1000,"currency":"CNY"}}`)
	if status, body := do("POST", "/v3/refund/domestic/refunds", r1); status != 200 {
		t.Fatalf("first refund: %d %s", status, body)
	}
	status, body := do("POST", "/v3/refund/domestic/refunds",
		[]byte(`{"out_trade_no":"O1","out_refund_no":"R2","amount":{"refund":100,"total":1000,"currency":"CNY"}}`))
	if status != 429 || !strings.Contains(string(body), `"code":"FREQUENCY_LIMITED"`) {
		t.Fatalf("second refund within the spacing: %d %s", status, body)
	}
	if status, body := do("POST", "/v3/refund/domestic/refunds", r1); status != 200 {
		t.Fatalf("resubmission of the first: %d %s", status, body)
	}
}

func TestRun_StateFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	state := filepath.Join(t.TempDir(), "books.json")
	m, out := start(t, dir, "--state-file="+state, "--processing-delay=1h", "--time-factor=1")
	if !strings.Contains(out, "books kept in "+state) {
		t.Fatalf("report:\n%s", out)
	}
	do := merchantFor(t, m, dir)
	adminOrder(t, m, `{"out_trade_no":"O1","total":1000}`)
	body := []byte(`{"out_trade_no":"O1","out_refund_no":"R1","amount":{"refund":100,"total":1000,"currency":"CNY"}}`)
	status, first := do("POST", "/v3/refund/domestic/refunds", body)
	if status != 200 || !strings.Contains(string(first), `"status":"PROCESSING"`) {
		t.Fatalf("create: %d %s", status, first)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Restarted without a processing delay: R1 is known and finishes.
	m2, _ := start(t, dir, "--state-file="+state)
	do = merchantFor(t, m2, dir)
	status, again := do("POST", "/v3/refund/domestic/refunds", body)
	var a, b struct {
		RefundID string `json:"refund_id"`
	}
	json.Unmarshal(first, &a)
	json.Unmarshal(again, &b)
	if status != 200 || a.RefundID == "" || a.RefundID != b.RefundID {
		t.Fatalf("resubmission after restart: %d %s, first %s", status, again, first)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, q := do("GET", "/v3/refund/domestic/refunds/R1", nil)
		if status == 200 && strings.Contains(string(q), `"status":"SUCCESS"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("R1 not SUCCESS after restart: %d %s", status, q)
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
}

// TestRun_LogsThroughRefunddsHandler: the sandbox's lines come out of the
// same handler as refundd's, each key once.
func TestRun_LogsThroughRefunddsHandler(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	rec := &logstest.Recorder{}
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, rec
	if err := m.ParseFlags([]string{"--listen=127.0.0.1:0", "--keys-dir=" + dir, "--processing-delay=0",
		"--log-format=json", "--log-level=debug"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	do := merchantFor(t, m, dir)
	adminOrder(t, m, `{"out_trade_no":"O1","total":1000}`)
	if status, body := do("POST", "/v3/refund/domestic/refunds",
		[]byte(`{"out_trade_no":"O1","out_refund_no":"R1","amount":{"refund":100,"total":1000,"currency":"CNY"}}`)); status != 200 {
		t.Fatalf("refund: %d %s", status, body)
	}
	m.Close()
	accepted := rec.Match(t, "DEBUG", "refund accepted") // fails on a duplicate key
	if len(accepted) != 1 || accepted[0].Str("component") != "wxpay-sandbox" || accepted[0].Str("out_refund_no") != "R1" {
		t.Fatalf("want one \"refund accepted\" line of the sandbox, got %v", accepted)
	}
}

// TestRun_CertificateMode: the command serves the stable platform
// certificate, encrypted with the APIv3 key it wrote, signs with its
// serial, and rotates it through the admin route.
func TestRun_CertificateMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	m, out := start(t, dir, "--certificate-mode")
	k, err := sandbox.LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	stable, err := sandbox.StablePlatformCertificate(k.PlatformKey, k.MchID)
	if err != nil {
		t.Fatal(err)
	}
	serial := wechatpay.CertificateSerial(stable)
	if !strings.Contains(out, "platform certificate "+serial) || strings.Contains(out, "--wechatpay-public-key=") {
		t.Fatalf("report:\n%s", out)
	}
	get := func() (http.Header, []*x509.Certificate) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, m.URL()+wechatpay.CertificatesPath, nil)
		auth, err := k.Signer().Authorization(http.MethodGet, wechatpay.CertificatesPath, nil, time.Now().Unix(), wechatpay.NewNonce())
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", auth)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		certs, err := wechatpay.DecryptCertificates(k.APIv3Key, body)
		if resp.StatusCode != 200 || err != nil {
			t.Fatalf("download: %d %s (%v)", resp.StatusCode, body, err)
		}
		v := &wechatpay.Verifier{}
		for _, c := range certs {
			if err := v.AddCertificate(c); err != nil {
				t.Fatal(err)
			}
		}
		if err := v.Verify(wechatpay.HeadersFrom(resp.Header), body); err != nil {
			t.Fatalf("download signature: %v", err)
		}
		return resp.Header, certs
	}
	h, certs := get()
	if len(certs) != 1 || !certs[0].Equal(stable) || h.Get(wechatpay.HeaderSerial) != serial {
		t.Fatalf("served %d certificates, signed by %s", len(certs), h.Get(wechatpay.HeaderSerial))
	}
	resp, err := http.Post(m.URL()+"/sandbox/credentials/certificates", "application/json", strings.NewReader(`{"sign":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("rotate: %d", resp.StatusCode)
	}
	h, certs = get()
	if len(certs) != 2 || h.Get(wechatpay.HeaderSerial) != wechatpay.CertificateSerial(certs[1]) {
		t.Fatalf("after rotation: %d certificates, signed by %s", len(certs), h.Get(wechatpay.HeaderSerial))
	}
}
