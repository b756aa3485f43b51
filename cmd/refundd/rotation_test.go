package main

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// TestCertificateMode_RotationUnderLoad: refunds flow while WeChat Pay
// (the sandbox) starts signing with a certificate refundd has never seen.
// Every refund ends SUCCEEDED on both sides; the one download the unknown
// serial triggers brings the certificate; a notification refused meanwhile
// is refused for its signature (401, so WeChat retries) and accepted on a
// later attempt; no refund's notification is refused more than once.
func TestCertificateMode_RotationUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	keys, err := sandbox.GenerateKeys("1900000001")
	if err != nil {
		t.Fatal(err)
	}
	keyDir := filepath.Join(t.TempDir(), "keys")
	if _, err := keys.WriteDir(keyDir, ""); err != nil {
		t.Fatal(err)
	}
	cfg := keys.Config()
	// Retries 300ms apart (15s scaled): the one download, a few ms, lands
	// between two attempts as it does between WeChat Pay's real ones.
	cfg.CertificateMode, cfg.TimeFactor, cfg.ProcessingDelay = true, 0.02, 50*time.Millisecond
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	hs := httptest.NewServer(sb)
	defer hs.Close()
	env := func(k string) string {
		if k == "REFUNDD_WECHATPAY_APIV3_KEY" {
			return string(keys.APIv3Key)
		}
		return testEnv(k)
	}
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--provider", "wechatpay",
		"--wechatpay-base-url", hs.URL, "--wechatpay-mchid", keys.MchID, "--wechatpay-serial", keys.MerchantSerial,
		"--wechatpay-private-key", filepath.Join(keyDir, sandbox.MerchantKeyFile), "--wechatpay-download-certificates",
		"--refund-spacing", "0", "--reconcile-after", "300ms", "--reconcile-schedule", "200ms", "--retry-backoff", "30ms",
		"--retry-backoff-max", "100ms", "--scheduler-interval", "20ms"}, env); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := client{t: t, base: "http://" + m.Addr()}

	const n = 24
	nos := make([]string, n)
	var wg sync.WaitGroup
	refund := func(i int) {
		defer wg.Done()
		id, order := fmt.Sprintf("rot-%d", i), fmt.Sprintf("ROT-%d", i)
		if err := sb.CreateOrder(order, "", 10000); err != nil {
			t.Error(err)
			return
		}
		if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
			"id": id, "user_id": "u", "out_trade_no": order, "amount": 10000, "currency": "CNY"}); code != 201 {
			t.Errorf("register %s: %d %v", id, code, body)
			return
		}
		code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", "k", map[string]any{"user_id": "u", "amount": 6000})
		if code != 202 && code != 200 {
			t.Errorf("refund %s: %d %v", id, code, body)
			return
		}
		nos[i] = body["refund_no"].(string)
	}
	for i := range n {
		if i == n/3 {
			wg.Wait() // some refunds done under the old certificate
			if _, err := sb.RotateCertificate(0, true); err != nil {
				t.Fatal(err)
			}
		}
		wg.Add(1)
		go refund(i)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, no := range nos {
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, r := c.do("GET", fmt.Sprintf("/v1/reservations/rot-%d/refunds/%s?wait=1s", i, no), "", nil)
			rec, ok := sb.Refund(no)
			if ok && r["state"] == "SUCCEEDED" && rec.Status == "SUCCESS" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("refund %s: refundd says %v, sandbox %+v", no, r["state"], rec)
			}
		}
	}
	// None is refused for good: every refund's notification is acked.
	waitFor(t, 20*time.Second, "every notification acked", func() (bool, string) {
		for _, no := range nos {
			acked := false
			for _, d := range sb.Deliveries(no) {
				acked = acked || d.Acked
			}
			if !acked {
				return false, no + " not acked"
			}
		}
		return true, ""
	})
	refused := 0
	for _, no := range nos {
		var bad int
		for _, d := range sb.Deliveries(no) {
			switch {
			case d.Acked:
			case d.HTTPStatus == 401:
				bad++
			case d.Channel == sandbox.ChannelV3:
				t.Errorf("%s: attempt %d refused with %d %s", no, d.Attempt, d.HTTPStatus, d.Err)
			}
		}
		if bad > 1 {
			t.Errorf("%s: notification refused %d times; the certificate should arrive with one download", no, bad)
		}
		refused += bad
	}
	st := m.provider.accounts.certificates()[keys.MchID].Status()
	if st.Downloads != 2 || st.OnDemand != 1 || len(st.Certificates) != 2 {
		t.Fatalf("downloads %d, on demand %d, certificates %d; want 2, 1, 2 (%+v)", st.Downloads, st.OnDemand, len(st.Certificates), st)
	}
	t.Logf("%d notifications refused before the new certificate arrived; %d unknown serials dropped by the rate limit", refused, st.OnDemandDropped)
	for _, c := range st.Certificates {
		if c.Source != wechatpay.CertSourceDownload {
			t.Fatalf("certificate %s from %s", c.Serial, c.Source)
		}
	}
}
