package main

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/crashpoint"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// TestAbnormal_PaidOutWithoutClearBankDetails runs apply-abnormal on real
// processes: wxpaysim makes two refunds ABNORMAL; an operator pays one out
// to the user's bank card (refundd is killed with SIGKILL right after the
// payout is journaled, before WeChat is asked; restarted, it finds the
// refund still ABNORMAL and the operator applies again) and one to the
// merchant's account; WeChat
// decrypts the card (it names its last digits in its answer), both settle
// SUCCEEDED by WeChat's answer and notification. The card number and the
// holder's name are then absent, byte for byte, from every file of the
// data directory (the journal included), from refundd's logs, from every
// answer and feed of the API, and from every refundctl export.
func TestAbnormal_PaidOutWithoutClearBankDetails(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real processes")
	}
	refunddBin, simBin := buildCrashBinaries(t)
	ctlBin := filepath.Join(t.TempDir(), "refundctl")
	if out, err := exec.Command("go", "build", "-o", ctlBin, "../refundctl").CombinedOutput(); err != nil {
		t.Fatalf("go build refundctl: %v\n%s", err, out)
	}
	const (
		card = "6222020200118899776"
		name = "李四测试"
		paid = 10000
	)
	secrets := [][]byte{[]byte(card), []byte(name)}
	addr := freeAddr(t)
	sim := startSim(t, simBin, t.TempDir(), simOptions{processingDelay: "2s", timeFactor: "0.05",
		notifyURL: "http://" + addr + "/v1/notify/wechatpay/refund"})
	data := t.TempDir()
	rd := newRefundd(refunddBin, data, addr, sim, false, "--log-level", "debug")
	d := rd.start(t, "REFUNDD_CRASH_AT="+crashpoint.AfterAbnormalJournaled)
	svc := client{t: t, base: "http://" + addr}
	op := client{t: t, base: "http://" + addr, token: testOperatorToken}

	abnormal := func(id, order string) (path, no string) {
		t.Helper()
		sim.createOrder(t, order, paid)
		sim.setFault(t, map[string]any{"kind": "outcome", "out_trade_no": order, "outcome": "ABNORMAL", "count": 1})
		if code, body := svc.do("POST", "/v1/reservations", "", map[string]any{
			"id": id, "user_id": "u", "out_trade_no": order, "amount": paid, "currency": "CNY",
		}); code != 201 {
			t.Fatalf("register %s: %d %v", id, code, body)
		}
		code, body := svc.do("POST", "/v1/reservations/"+id+"/refunds", "k1", map[string]any{"user_id": "u"})
		no, _ = body["refund_no"].(string)
		if code != 202 || no == "" {
			t.Fatalf("request %s: %d %v", id, code, body)
		}
		waitSettled(t, svc, sim, rd, id, no, "ABNORMAL")
		return "/v1/reservations/" + id + "/refunds/" + no, no
	}
	userPath, userNo := abnormal("abn-user", "ORD-ABN-USER")
	merchPath, merchNo := abnormal("abn-merch", "ORD-ABN-MERCH")

	cardBody := map[string]any{"type": "USER_BANK_CARD", "bank_type": "ICBC_DEBIT", "bank_account": card, "real_name": name}
	// The service may not pay out; a malformed card is refused naming the
	// field and echoing nothing.
	if code, body := svc.do("POST", userPath+"/apply-abnormal", "", cardBody); code != 403 || errCode(body) != "forbidden" {
		t.Fatalf("apply-abnormal by the service: %d %v", code, body)
	}
	bad := map[string]any{"type": "USER_BANK_CARD", "bank_type": "ICBC_DEBIT", "bank_account": card + "x", "real_name": name}
	if code, body := op.do("POST", userPath+"/apply-abnormal", "", bad); code != 400 || errCode(body) != "invalid_argument" ||
		body["error"].(map[string]any)["field"] != "bank_account" {
		t.Fatalf("a malformed card: %d %v", code, body)
	}
	// The payout is journaled, then refundd dies before asking WeChat (the
	// answer may or may not get out first).
	if code, body := op.do("POST", userPath+"/apply-abnormal", "", cardBody); code != 0 && code != 200 {
		t.Fatalf("apply-abnormal to the user's card: %d %v", code, body)
	}
	if !d.waitExit(30 * time.Second) {
		t.Fatalf("refundd did not crash after the payout was journaled; logs:\n%s", tail(rd.logs.String(), 40))
	}
	if !d.killedBySIGKILL() {
		t.Fatalf("refundd exited with %v, want SIGKILL at the crash point", d.cmd.ProcessState)
	}
	payoutJournaled(t, data, "abn-user", userNo)
	if rec, _, err := sim.refund(userNo); err != nil || rec.Refund.Status != "ABNORMAL" || rec.Refund.AbnormalType != "" {
		t.Fatalf("WeChat's refund %s after the crash: %+v %v; want ABNORMAL, never asked", userNo, rec.Refund, err)
	}
	// Restarted, refundd queries the refund it journaled as PROCESSING:
	// WeChat still has it ABNORMAL, and so does refundd; the operator
	// applies again.
	d = rd.start(t)
	waitSettled(t, svc, sim, rd, "abn-user", userNo, "ABNORMAL")
	if code, body := op.do("POST", userPath+"/apply-abnormal", "", cardBody); code != 200 || body["state"] != "PROCESSING" {
		t.Fatalf("apply-abnormal to the user's card after the restart: %d %v", code, body)
	}
	if code, body := op.do("POST", merchPath+"/apply-abnormal", "", map[string]any{"type": "MERCHANT_BANK_CARD"}); code != 200 || body["state"] != "PROCESSING" {
		t.Fatalf("apply-abnormal to the merchant's account: %d %v", code, body)
	}
	waitFor(t, 30*time.Second, "WeChat to take both payouts", func() (bool, string) {
		u, _, err1 := sim.refund(userNo)
		m, _, err2 := sim.refund(merchNo)
		return err1 == nil && err2 == nil && u.Refund.AbnormalType != "" && m.Refund.AbnormalType != "",
			fmtAny("user", u.Refund, "merchant", m.Refund, "logs", "\n"+grepLines(rd.logs.String(), "bnormal", 20))
	})
	// WeChat took each payout (it refuses a card it cannot decrypt with
	// the key the request names) and paid it.
	rec := waitSettled(t, svc, sim, rd, "abn-user", userNo, "SUCCEEDED")
	if rec.Refund.AbnormalType != "USER_BANK_CARD" {
		t.Fatalf("WeChat's refund %s after the payout: %+v", userNo, rec.Refund)
	}
	rec = waitSettled(t, svc, sim, rd, "abn-merch", merchNo, "SUCCEEDED")
	if rec.Refund.AbnormalType != "MERCHANT_BANK_CARD" {
		t.Fatalf("WeChat's refund %s after the payout: %+v", merchNo, rec.Refund)
	}
	// Paid once: WeChat holds each amount once, refundd counts it once.
	for _, order := range []string{"ORD-ABN-USER", "ORD-ABN-MERCH"} {
		if o, err := sim.order(order); err != nil || len(o.Refunds) != 1 || o.Refunded != paid {
			t.Fatalf("WeChat's order %s: %+v %v; want one refund of %d", order, o, err, paid)
		}
	}
	for _, id := range []string{"abn-user", "abn-merch"} {
		if _, res := svc.do("GET", "/v1/reservations/"+id, "", nil); res["refunded"] != float64(paid) || res["in_flight"] != float64(0) {
			t.Fatalf("%s after the payout: %v", id, res)
		}
	}
	// A repeat answers the current state and asks WeChat nothing.
	if code, body := op.do("POST", userPath+"/apply-abnormal", "", cardBody); code != 200 || body["state"] != "SUCCEEDED" {
		t.Fatalf("apply-abnormal again: %d %v", code, body)
	}

	// Everything the API can show: the refund, the reservation, the
	// timeline, the attention lists, the feed, the summary, the backup.
	var seen bytes.Buffer
	for _, p := range []string{userPath, "/v1/reservations/abn-user", "/v1/reservations/abn-user/events",
		"/v1/refunds?state=ABNORMAL", "/v1/refunds?state=stuck", "/v1/events?limit=1000", "/v1/summary", "/v1/admin/backup"} {
		code, raw := op.raw("GET", p)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", p, code, raw)
		}
		seen.Write(raw)
		noSecret(t, "GET "+p, raw, secrets)
	}
	// The ciphertext is what the timeline holds: the payout is there.
	if !bytes.Contains(seen.Bytes(), []byte("refund.abnormal_applied")) {
		t.Fatalf("the timeline does not show the payout")
	}
	d.stop(t)

	// The data directory: the journal and anything else refundd wrote.
	files := 0
	err := filepath.WalkDir(data, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		noSecret(t, path, raw, secrets)
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("walking %s: %v (%d files)", data, err, files)
	}
	// refundd's logs, at debug level.
	noSecret(t, "refundd's logs", []byte(rd.logs.String()), secrets)
	// Every export refundctl makes of the journal.
	db := filepath.Join(data, "refundd.db")
	for _, args := range [][]string{
		{"journal", "export", "--file", db, "--format", "jsonl"},
		{"journal", "export", "--file", db, "--format", "csv"},
		{"journal", "show", "--file", db, "abn-user"},
		{"journal", "show", "--file", db, "--json", "abn-user"},
		{"journal", "state", "--file", db, "--at", time.Now().UTC().Format(time.RFC3339), "abn-user"},
		{"journal", "stats", "--file", db},
	} {
		out, err := exec.Command(ctlBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("refundctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[1] == "export" && !bytes.Contains(out, []byte(userNo)) {
			t.Fatalf("refundctl %s does not show refund %s:\n%s", strings.Join(args, " "), userNo, out)
		}
		noSecret(t, "refundctl "+strings.Join(args, " "), out, secrets)
	}
}

// payoutJournaled checks what the crash left: the payout journaled with
// the bank fields as ciphertext for a named key, and no provider answer
// after it.
func payoutJournaled(t *testing.T, data, id, no string) {
	t.Helper()
	db, err := journal.Open(filepath.Join(data, "refundd.db"), &journal.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("journal after SIGKILL: %v", err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.Verify(ctx); err != nil {
		t.Fatalf("journal after SIGKILL: %v", err)
	}
	events, _, err := eventstore.New(db).Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	applied := false
	for _, e := range events {
		switch d := e.Data.(type) {
		case reservation.AbnormalApplied:
			applied = d.RefundNo == no && d.Type == reservation.AbnormalUserBankCard && d.BankType == "ICBC_DEBIT" &&
				len(d.EncryptedAccount) > 300 && len(d.EncryptedName) > 300 && d.KeySerial != "" && e.By == "operator:operator-2"
		case reservation.ProviderResult:
			if applied {
				t.Fatalf("a provider answer was journaled after the payout, before the crash: %+v", d)
			}
		}
	}
	if !applied {
		t.Fatalf("the journal lacks the payout of %s with its ciphertext: %+v", no, events)
	}
}

// noSecret fails if raw holds any of secrets.
func noSecret(t *testing.T, where string, raw []byte, secrets [][]byte) {
	t.Helper()
	for _, s := range secrets {
		if i := bytes.Index(raw, s); i >= 0 {
			t.Errorf("%s holds %q in clear at byte %d: %q", where, s, i, raw[max(i-80, 0):min(i+80, len(raw))])
		}
	}
}

// raw GETs path with c's token and returns the status and the body's bytes.
func (c client) raw(method, path string) (int, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}
