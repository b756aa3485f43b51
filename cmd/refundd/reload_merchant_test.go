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

	"github.com/refundd/refundd/internal/merchant"
)

// TestReload_AddMerchant, on real processes: refundd starts on a merchants
// file with a service provider's first sub-merchant (A) only, while
// wxpaysim serves two. A is registered and refunded. A file adding the
// second sub-merchant (B) under A's refund-number prefix is refused on
// SIGHUP and B stays unknown; a file without A is refused by the reload
// route with 409 naming A. Then B is added with its own prefix by SIGHUP:
// B is registered and refunded through the sandbox under B's prefix and
// sub_mchid, its notification is applied (queries are put off for an
// hour, so only the notification can settle it) and counted under B's
// own metric label, and A keeps working.
func TestReload_AddMerchant(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs refundd and wxpaysim")
	}
	refunddBin, simBin := buildCrashBinaries(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	sim, reg, full := startPlatformSim(t, simBin, dir, addr)
	a, okA := reg.ByMchID("1900000200", "1900000201")
	b, okB := reg.ByMchID("1900000200", "1900000202")
	if !okA || !okB {
		t.Fatal("wxpaysim's merchants file lacks the sub-merchants")
	}
	raw, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	// The file's merchant blocks, by name, to leave B's out.
	blocks := strings.Split(string(raw), "[[merchants]]")
	var without, bBlock string
	for i, bl := range blocks {
		switch {
		case i == 0:
			without += bl
		case strings.Contains(bl, fmt.Sprintf("name = %q", b.Name)):
			bBlock = "[[merchants]]" + bl
		default:
			without += "[[merchants]]" + bl
		}
	}
	if bBlock == "" {
		t.Fatalf("no block for %s in:\n%s", b.Name, raw)
	}
	file := filepath.Join(dir, "merchants.toml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(without)

	data := filepath.Join(dir, "data")
	rd := &refunddProc{bin: refunddBin, data: data, addr: addr, logs: &lockedWriter{}, flags: []string{
		"--listen", addr, "--data", data, "--provider", "wechatpay", "--merchants-file", file,
		// Only a notification settles a refund: queries wait an hour.
		"--reconcile-after", "1h", "--retry-backoff", "30ms", "--retry-backoff-max", "200ms", "--refund-spacing", "0",
		"--scheduler-interval", "20ms", "--lock-timeout", "5s", "--shutdown-timeout", "10s"}}
	d := rd.start(t)
	c := client{t: t, base: "http://" + addr}
	op := client{t: t, base: c.base, token: testOperatorToken}

	register := func(m *merchant.Merchant, id string) (int, map[string]any) {
		t.Helper()
		order := "O-" + id
		if _, err := sim.admin("POST", "/sandbox/books/"+book(m)+"/orders", map[string]any{"out_trade_no": order, "total": 10000}, nil); err != nil {
			t.Fatal(err)
		}
		return c.do("POST", "/v1/reservations", "", map[string]any{"id": id, "user_id": "u", "out_trade_no": order,
			"amount": 10000, "currency": "CNY", "merchant": m.Name})
	}
	refund := func(m *merchant.Merchant, id string) {
		t.Helper()
		if code, body := register(m, id); code != http.StatusCreated {
			t.Fatalf("register %s on %s: %d %v", id, m.Name, code, body)
		}
		code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", id, map[string]any{"user_id": "u", "amount": 100})
		if code != http.StatusAccepted {
			t.Fatalf("refund %s: %d %v; logs:\n%s", id, code, body, tail(rd.logs.String(), 30))
		}
		no, _ := body["refund_no"].(string)
		if !strings.HasPrefix(no, m.RefundNoPrefix+"-") {
			t.Fatalf("refund %s of %s numbered %q, want prefix %s", id, m.Name, no, m.RefundNoPrefix)
		}
		waitFor(t, 30*time.Second, "refund "+no+" settled by its notification", func() (bool, string) {
			_, r := c.do("GET", "/v1/reservations/"+id+"/refunds/"+no+"?wait=500ms", "", nil)
			var rec simRefund
			_, err := sim.admin("GET", "/sandbox/books/"+book(m)+"/refunds/"+no, nil, &rec)
			return err == nil && r["state"] == "SUCCEEDED" && rec.Refund.Status == "SUCCESS",
				fmtAny("refundd", r, "wechat", rec.Refund, "err", err, "logs", "\n"+grepLines(rd.logs.String(), no, 20))
		})
	}
	metricsText := func() string {
		t.Helper()
		req, _ := http.NewRequest("GET", c.base+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+testOperatorToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return string(body)
	}
	logged := func(what, sub string, n int) {
		t.Helper()
		waitFor(t, 10*time.Second, what, func() (bool, string) {
			return strings.Count(rd.logs.String(), sub) >= n, tail(rd.logs.String(), 10)
		})
	}

	refund(a, "a-1")
	if code, body := register(b, "b-early"); code != http.StatusBadRequest {
		t.Fatalf("register on %s before it is added: %d %v", b.Name, code, body)
	}

	// B under A's prefix: refused, and B stays unknown.
	write(without + strings.Replace(bBlock, fmt.Sprintf("refund_prefix = %q", b.RefundNoPrefix), fmt.Sprintf("refund_prefix = %q", a.RefundNoPrefix), 1))
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logged("the refusal logged", "credentials reload refused", 1)
	if line := grepLines(rd.logs.String(), "credentials reload refused", 1); !strings.Contains(line, `"result":"invalid"`) ||
		!strings.Contains(line, "refund_prefix") {
		t.Fatalf("refusal of a clashing prefix: %s", line)
	}
	if code, body := register(b, "b-refused"); code != http.StatusBadRequest {
		t.Fatalf("register on %s after a refused reload: %d %v", b.Name, code, body)
	}
	// A taken out (B added in its place): a restart is needed, says the
	// route, naming A.
	write(strings.Replace(string(raw), fmt.Sprintf("name = %q", a.Name), `name = "renamed"`, 1))
	code, body := op.do("POST", "/v1/admin/credentials/reload", "", nil)
	if e, _ := body["error"].(map[string]any); code != http.StatusConflict || e["code"] != "restart_required" ||
		!strings.Contains(fmt.Sprint(e["message"]), fmt.Sprintf("merchant %q removed", a.Name)) {
		t.Fatalf("reload without %s: %d %v", a.Name, code, body)
	}

	// B added as wxpaysim wrote it.
	write(string(raw))
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logged("the addition logged", `"msg":"merchant added"`, 1)
	if line := grepLines(rd.logs.String(), `"msg":"merchant added"`, 1); !strings.Contains(line, `"merchant":"`+b.Name+`"`) ||
		!strings.Contains(line, `"trigger":"SIGHUP"`) || !strings.Contains(line, `"refund_prefix":"`+b.RefundNoPrefix+`"`) {
		t.Fatalf("addition log line: %s", line)
	}
	refund(b, "b-1")
	refund(a, "a-2")
	text := metricsText()
	if got := grepLines(text, `refundd_notifications_total{merchant="`+b.Name+`",outcome="applied"}`, 1); !strings.HasSuffix(strings.TrimSpace(got), " 1") {
		t.Fatalf("B's applied notifications: %q\n%s", got, grepLines(text, "refundd_notifications_total", 20))
	}
	if got := grepLines(text, `refundd_refund_transitions_total{from="PROCESSING",merchant="`+b.Name+`",to="SUCCEEDED"}`, 1); got == "" {
		t.Fatalf("no transition series under B's label:\n%s", grepLines(text, "refundd_refund_transitions_total", 20))
	}
	checkNoRefusals(t, sim, rd)
	d.stop(t)
}
