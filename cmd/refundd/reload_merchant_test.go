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
	p := startPlatformPair(t, [2]string{"1900000200", "1900000201"}, [2]string{"1900000200", "1900000202"})
	refunddBin, dir, addr, sim, a, b, raw := p.refunddBin, p.dir, p.addr, p.sim, p.a, p.b, p.raw
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

	h := startReloadHarness(t, refunddBin, dir, addr, file, sim)
	d, rd, op := h.d, h.rd, h.op
	register, refund, metricsText, logged := h.register, h.refund, h.metricsText, h.logged

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

// reloadHarness is refundd on a merchants file next to wxpaysim, for the
// reload tests: merchants are registered and refunded by name, and only
// a notification settles a refund (queries wait an hour).
type reloadHarness struct {
	t     *testing.T
	sim   *wxsim
	rd    *refunddProc
	d     *daemon
	c, op client
	base  string
}

// startReloadHarness starts refundd at addr on the merchants file.
func startReloadHarness(t *testing.T, bin, dir, addr, file string, sim *wxsim) *reloadHarness {
	t.Helper()
	data := filepath.Join(dir, "data")
	rd := &refunddProc{bin: bin, data: data, addr: addr, logs: &lockedWriter{}, flags: []string{
		"--listen", addr, "--data", data, "--provider", "wechatpay", "--merchants-file", file,
		// Only a notification settles a refund: queries wait an hour.
		"--reconcile-after", "1h", "--retry-backoff", "30ms", "--retry-backoff-max", "200ms", "--refund-spacing", "0",
		"--scheduler-interval", "20ms", "--lock-timeout", "5s", "--shutdown-timeout", "10s"}}
	h := &reloadHarness{t: t, sim: sim, rd: rd, base: "http://" + addr}
	h.d = rd.start(t)
	h.c = client{t: t, base: h.base}
	h.op = client{t: t, base: h.base, token: testOperatorToken}
	return h
}

// register pays order O-id in m's books at the sandbox and registers
// reservation id for it under m.
func (h *reloadHarness) register(m *merchant.Merchant, id string) (int, map[string]any) {
	h.t.Helper()
	order := "O-" + id
	if _, err := h.sim.admin("POST", "/sandbox/books/"+book(m)+"/orders", map[string]any{"out_trade_no": order, "total": 10000}, nil); err != nil {
		h.t.Fatal(err)
	}
	return h.c.do("POST", "/v1/reservations", "", map[string]any{"id": id, "user_id": "u", "out_trade_no": order,
		"amount": 10000, "currency": "CNY", "merchant": m.Name})
}

// refund registers id under m, refunds 100 fen of it and waits until
// both refundd and the sandbox say it succeeded; it returns the refund
// number, which carries m's prefix.
func (h *reloadHarness) refund(m *merchant.Merchant, id string) string {
	h.t.Helper()
	if code, body := h.register(m, id); code != http.StatusCreated {
		h.t.Fatalf("register %s on %s: %d %v", id, m.Name, code, body)
	}
	code, body := h.c.do("POST", "/v1/reservations/"+id+"/refunds", id, map[string]any{"user_id": "u", "amount": 100})
	if code != http.StatusAccepted {
		h.t.Fatalf("refund %s: %d %v; logs:\n%s", id, code, body, tail(h.rd.logs.String(), 30))
	}
	no, _ := body["refund_no"].(string)
	if !strings.HasPrefix(no, m.RefundNoPrefix+"-") {
		h.t.Fatalf("refund %s of %s numbered %q, want prefix %s", id, m.Name, no, m.RefundNoPrefix)
	}
	waitFor(h.t, 30*time.Second, "refund "+no+" settled by its notification", func() (bool, string) {
		_, r := h.c.do("GET", "/v1/reservations/"+id+"/refunds/"+no+"?wait=500ms", "", nil)
		var rec simRefund
		_, err := h.sim.admin("GET", "/sandbox/books/"+book(m)+"/refunds/"+no, nil, &rec)
		return err == nil && r["state"] == "SUCCEEDED" && rec.Refund.Status == "SUCCESS",
			fmtAny("refundd", r, "wechat", rec.Refund, "err", err, "logs", "\n"+grepLines(h.rd.logs.String(), no, 20))
	})
	return no
}

// metricsText is refundd's /metrics.
func (h *reloadHarness) metricsText() string {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testOperatorToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return string(body)
}

// logged waits until refundd logged sub at least n times.
func (h *reloadHarness) logged(what, sub string, n int) {
	h.t.Helper()
	waitFor(h.t, 10*time.Second, what, func() (bool, string) {
		return strings.Count(h.rd.logs.String(), sub) >= n, tail(h.rd.logs.String(), 10)
	})
}

// platformPair is wxpaysim serving the platform's merchants, two of which
// (A and B) a reload test starts refundd with or adds, and its merchants
// file as written.
type platformPair struct {
	refunddBin, dir, addr string
	sim                   *wxsim
	a, b                  *merchant.Merchant
	raw                   []byte
}

// startPlatformPair builds refundd and wxpaysim, starts wxpaysim, and finds
// the merchants named by mchid and sub_mchid ("" for a direct merchant).
func startPlatformPair(t *testing.T, a, b [2]string) platformPair {
	t.Helper()
	refunddBin, simBin := buildCrashBinaries(t)
	p := platformPair{refunddBin: refunddBin, dir: t.TempDir(), addr: freeAddr(t)}
	sim, reg, full := startPlatformSim(t, simBin, p.dir, p.addr)
	p.sim = sim
	var okA, okB bool
	p.a, okA = reg.ByMchID(a[0], a[1])
	p.b, okB = reg.ByMchID(b[0], b[1])
	if !okA || !okB {
		t.Fatalf("wxpaysim's merchants file lacks %v or %v", a, b)
	}
	var err error
	if p.raw, err = os.ReadFile(full); err != nil {
		t.Fatal(err)
	}
	return p
}
