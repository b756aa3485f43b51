package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// TestReload_AddAccount, on real processes: refundd starts on a merchants
// file with one direct account (A) and its merchant, while wxpaysim also
// serves a second direct account (B) with its own keys. A is refunded.
// B's account and merchant are added to the file with B's key file
// broken: SIGHUP is refused and B stays unknown. With the key file
// mended, SIGHUP adds B: B's refund is made under B's prefix with B's
// key (WeChat Pay refused nothing), and settled by B's notification,
// signed with B's platform key, which is applied at B's route and counted
// under B. The same notification signed with A's keys is refused, at B's
// route and at A's, while with B's keys it is a duplicate; A keeps
// working.
func TestReload_AddAccount(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs refundd and wxpaysim")
	}
	p := startPlatformPair(t, [2]string{"1900000101", ""}, [2]string{"1900000102", ""})
	refunddBin, dir, addr, sim, a, b, raw := p.refunddBin, p.dir, p.addr, p.sim, p.a, p.b, p.raw
	// The file's account and merchant blocks of the accounts named.
	only := func(accounts ...string) string {
		parts := strings.Split(string(raw), "\n[[")
		out := parts[0]
		for _, p := range parts[1:] {
			for _, name := range accounts {
				if strings.Contains(p, fmt.Sprintf("%q", name)) {
					out += "\n[[" + p
					break
				}
			}
		}
		return out + "\n"
	}
	// B's private key, copied where the test can break it.
	keyB := filepath.Join(dir, "b_apiclient_key.pem")
	pemB, err := os.ReadFile(filepath.Join(dir, "keys", b.Account.MchID, sandbox.MerchantKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	withB := strings.Replace(only(a.Account.Name, b.Account.Name),
		fmt.Sprintf("%q", "file:"+filepath.Join(dir, "keys", b.Account.MchID, sandbox.MerchantKeyFile)), fmt.Sprintf("%q", "file:"+keyB), 1)
	if !strings.Contains(withB, keyB) {
		t.Fatalf("B's private key is not where expected in:\n%s", withB)
	}
	file := filepath.Join(dir, "merchants.toml")
	write := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(file, only(a.Account.Name))

	h := startReloadHarness(t, refunddBin, dir, addr, file, sim)
	h.refund(a, "a-1")
	if code, body := h.register(b, "b-early"); code != http.StatusBadRequest {
		t.Fatalf("register on %s before it is added: %d %v", b.Name, code, body)
	}

	// B added with a broken key file: refused, B stays unknown.
	write(keyB, "-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n")
	write(file, withB)
	if err := h.d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	h.logged("the refusal logged", "credentials reload refused", 1)
	if line := grepLines(h.rd.logs.String(), "credentials reload refused", 1); !strings.Contains(line, `"result":"invalid"`) ||
		!strings.Contains(line, "private_key") || !strings.Contains(line, b.Account.Name) {
		t.Fatalf("refusal of a broken key of the added account: %s", line)
	}
	if code, body := h.register(b, "b-refused"); code != http.StatusBadRequest {
		t.Fatalf("register on %s after a refused reload: %d %v", b.Name, code, body)
	}

	// The key mended: B's account and merchant are added.
	write(keyB, string(pemB))
	if err := h.d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	h.logged("the addition logged", `"msg":"merchant added"`, 1)
	line := grepLines(h.rd.logs.String(), `"msg":"account added"`, 1)
	if !strings.Contains(line, `"account":"`+b.Account.Name+`"`) || !strings.Contains(line, `"mchid":"`+b.Account.MchID+`"`) ||
		!strings.Contains(line, `"trigger":"SIGHUP"`) {
		t.Fatalf("account addition log line: %q", line)
	}
	no := h.refund(b, "b-1")
	h.refund(a, "a-2")
	text := h.metricsText()
	if got := grepLines(text, `refundd_notifications_total{merchant="`+b.Name+`",outcome="applied"}`, 1); !strings.HasSuffix(strings.TrimSpace(got), " 1") {
		t.Fatalf("B's applied notifications: %q\n%s", got, grepLines(text, "refundd_notifications_total", 20))
	}
	var rec simRefund
	if _, err := sim.admin("GET", "/sandbox/books/"+book(b)+"/refunds/"+no, nil, &rec); err != nil {
		t.Fatal(err)
	}
	applied := false
	for _, d := range rec.Deliveries {
		applied = applied || d.Channel == sandbox.ChannelV3 && d.Acked && strings.HasSuffix(d.URL, accountNotifyPath(b.Account.Name))
	}
	if !applied {
		t.Fatalf("no v3 notification acknowledged at B's route: %+v", rec.Deliveries)
	}

	// B's refund notified again, signed with A's keys and with B's.
	keysA, err := sandbox.LoadKeys(filepath.Join(dir, "keys", a.Account.MchID))
	if err != nil {
		t.Fatal(err)
	}
	keysB, err := sandbox.LoadKeys(filepath.Join(dir, "keys", b.Account.MchID))
	if err != nil {
		t.Fatal(err)
	}
	notify := func(k sandbox.Keys, account string) (int, string) {
		t.Helper()
		n := wechatpay.Notification{ID: "EV-" + k.MchID + "-" + account, CreateTime: time.Now().Format(time.RFC3339)}
		n.Resource.AssociatedData = "refund"
		r := rec.Refund
		body, err := wechatpay.BuildRefundNotification(k.APIv3Key, n, wechatpay.RefundResource{
			MchID: b.Account.MchID, TransactionID: r.TransactionID, OutTradeNo: r.OutTradeNo, RefundID: r.RefundID, OutRefundNo: r.OutRefundNo,
			RefundStatus: wechatpay.RefundSuccess, SuccessTime: r.SuccessTime.Format(time.RFC3339), UserReceivedAccount: "支付用户零钱",
			Amount: wechatpay.RefundAmount{Total: r.Total, Refund: r.Refund, PayerTotal: r.Total, PayerRefund: r.Refund},
		})
		if err != nil {
			t.Fatal(err)
		}
		hd, err := wechatpay.SignHeaders(k.PlatformKey, k.PublicKeyID, time.Now().Unix(), wechatpay.NewNonce(), body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, h.base+accountNotifyPath(account), strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		hd.Set(req.Header)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		got, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(got)
	}
	if code, body := notify(keysA, b.Account.Name); code != http.StatusUnauthorized {
		t.Fatalf("B's refund signed by A at B's route: %d %s", code, body)
	}
	if code, body := notify(keysA, a.Account.Name); code != http.StatusBadRequest || !strings.Contains(body, "merchant does not match") {
		t.Fatalf("B's refund signed by A at A's route: %d %s", code, body)
	}
	if code, body := notify(keysB, b.Account.Name); code != http.StatusNoContent {
		t.Fatalf("B's refund signed by B at B's route: %d %s", code, body)
	}
	text = h.metricsText()
	for _, want := range []string{
		`refundd_notifications_total{merchant="` + b.Name + `",outcome="duplicate"} 1`,
		`refundd_notifications_total{merchant="_none",outcome="rejected"} 1`,
		`refundd_notifications_total{merchant="_none",outcome="mismatch"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(text, "refundd_notifications_total", 20))
		}
	}
	if code, r := h.c.do("GET", "/v1/reservations/b-1/refunds/"+no, "", nil); code != http.StatusOK || r["state"] != "SUCCEEDED" {
		t.Fatalf("B's refund after the refused notifications: %d %v", code, r)
	}
	checkNoRefusals(t, sim, h.rd)
	h.d.stop(t)
}
