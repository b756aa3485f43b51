package main

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay/sandbox"
	"github.com/refundd/refundd/journal"
)

// A refund made after the backup is paid by WeChat Pay and lost with the
// restore. refundd, started on the restored journal, journals it from
// WeChat Pay's answer before it takes refunds again, so that the client's
// retry of the lost request (its idempotency key unknown to the restored
// journal) is refused with 409 instead of being paid a second time.
func TestRestore_RetryOfALostRefundIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	keys, err := sandbox.GenerateKeys("1900000109")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(keys.Config())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sb) // WeChat Pay outlives every refundd below
	t.Cleanup(func() { srv.Close(); sb.Close() })
	keyDir := t.TempDir()
	man, err := keys.WriteDir(keyDir, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	start := func() (*Main, client) {
		t.Helper()
		m := NewMain()
		m.Stdout, m.Stderr = io.Discard, io.Discard
		f := func(name string) string { return filepath.Join(keyDir, name) }
		args := []string{"--listen", "127.0.0.1:0", "--data", data, "--refund-prefix", "R", "--refund-spacing", "0",
			"--reconcile-after", "100ms", "--reconcile-schedule", "100ms", "--scheduler-interval", "20ms",
			"--provider", "wechatpay", "--wechatpay-base-url", man.BaseURL, "--wechatpay-mchid", man.MchID,
			"--wechatpay-serial", man.MerchantSerial, "--wechatpay-private-key", f(man.Files.MerchantPrivateKey),
			"--wechatpay-apiv3-key-file", f(man.Files.APIv3Key), "--wechatpay-public-key", f(man.Files.WechatpayPublicKey),
			"--wechatpay-public-key-id", man.PublicKeyID}
		if err := m.ParseFlags(args, testEnv); err != nil {
			t.Fatal(err)
		}
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return m, client{t: t, base: "http://" + m.Addr()}
	}
	refund := func(c client, key string, amount int64) string {
		t.Helper()
		code, body := c.do("POST", "/v1/reservations/r1/refunds", key, map[string]any{"user_id": "u", "amount": amount})
		if code != 202 && code != 200 {
			t.Fatalf("refund %s: %d %v", key, code, body)
		}
		no := body["refund_no"].(string)
		deadline := time.Now().Add(15 * time.Second)
		for {
			_, r := c.do("GET", "/v1/reservations/r1/refunds/"+no+"?wait=1s", "", nil)
			if r["state"] == "SUCCEEDED" {
				return no
			}
			if time.Now().After(deadline) {
				t.Fatalf("refund %s: %v", no, r)
			}
		}
	}

	if err := sb.CreateOrder("ORD-1", "", 10000); err != nil {
		t.Fatal(err)
	}
	m, c := start()
	if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
		"id": "r1", "user_id": "u", "out_trade_no": "ORD-1", "amount": 10000, "currency": "CNY"}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	refund(c, "k1", 1000)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	journalPath := filepath.Join(data, "refundd.db")
	backup := filepath.Join(t.TempDir(), "backup.db")
	raw, err := os.ReadFile(journalPath) // a stopped file is a consistent backup
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(backup, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	m, c = start()
	lost := refund(c, "k2", 6000) // paid by WeChat Pay, then lost with the restore
	rec, ok := sb.Refund(lost)
	if !ok || rec.Status != "SUCCESS" {
		t.Fatalf("sandbox has %s: %+v %v", lost, rec, ok)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	if _, err := journal.Restore(context.Background(), backup, journalPath, &journal.RestoreOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	m, c = start()
	t.Cleanup(func() { _ = m.Close() })
	// Refunds are paused (503) until the gate is done; then the retry of
	// the lost request must be refused, not made again.
	var code int
	var body map[string]any
	waitFor(t, 15*time.Second, "refunds to resume after the restore", func() (bool, string) {
		code, body = c.do("POST", "/v1/reservations/r1/refunds", "k2", map[string]any{"user_id": "u", "amount": 6000})
		return code != 503, fmtAny("code", code, "body", body)
	})
	_, res := c.do("GET", "/v1/reservations/r1", "", nil)
	if code != 409 || body["error"].(map[string]any)["code"] != "insufficient_refundable" {
		t.Fatalf("retry of the lost request: %d %v, want 409 insufficient_refundable; reservation %v", code, body, res)
	}
	if got := sb.Refunded("ORD-1"); got != 7000 {
		t.Fatalf("WeChat Pay refunded %d of ORD-1, want 7000", got)
	}
	var found map[string]any
	for _, r := range res["refunds"].([]any) {
		if r := r.(map[string]any); r["refund_no"] == lost {
			found = r
		}
	}
	if found == nil || found["amount"].(float64) != 6000 || found["state"] != "SUCCEEDED" || found["provider_refund_id"] != rec.RefundID ||
		res["refundable"].(float64) != 3000 {
		t.Fatalf("reservation after the restore: %v; want %s recovered (6000 fen SUCCEEDED, id %s)", res, lost, rec.RefundID)
	}
}
