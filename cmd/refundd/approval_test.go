package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/crashpoint"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// TestCrash_ApprovalSubmittedOnce runs four-eyes approval on real processes
// with two principals: the service requests, an approver approves. The
// requester's own name is refused; refundd is killed with SIGKILL right
// after the approval is journaled, before the submission is made; after a
// restart exactly one submission reaches WeChat (wxpaysim) and the refund
// settles. A refund nobody approves expires and releases its amount.
func TestCrash_ApprovalSubmittedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	refunddBin, simBin := buildCrashBinaries(t)
	const paid, amount = 10000, 6000
	const approverToken, selfToken = "test-approver-token-0123456789", "test-self-approver-token-012345"
	tokens := filepath.Join(t.TempDir(), "tokens")
	// selfToken is an approver token under the service's own name.
	if err := os.WriteFile(tokens, []byte("approver "+auth.HashHex(approverToken)+" carol\n"+
		"approver "+auth.HashHex(selfToken)+" service-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	sim := startSim(t, simBin, t.TempDir(), simOptions{processingDelay: "20s", timeFactor: "0.01",
		notifyURL: "http://" + addr + "/v1/notify/wechatpay/refund"})
	data := t.TempDir()
	rd := newRefundd(refunddBin, data, addr, sim, false, "--approve-all", "--approval-timeout", "3s", "--tokens-file", tokens)
	d := rd.start(t, "REFUNDD_CRASH_AT="+crashpoint.AfterApprovalJournaled)
	svc := client{t: t, base: "http://" + addr}
	approver := client{t: t, base: "http://" + addr, token: approverToken}
	self := client{t: t, base: "http://" + addr, token: selfToken}

	id, order := "appr-1", "ORD-APPR-1"
	sim.createOrder(t, order, paid)
	if code, body := svc.do("POST", "/v1/reservations", "", map[string]any{
		"id": id, "user_id": "u", "out_trade_no": order, "amount": paid, "currency": "CNY",
	}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	code, body := svc.do("POST", "/v1/reservations/"+id+"/refunds", "k1", map[string]any{"user_id": "u", "amount": amount})
	no, _ := body["refund_no"].(string)
	if code != 202 || body["state"] != "PENDING_APPROVAL" || no == "" {
		t.Fatalf("request: %d %v", code, body)
	}
	if _, found, err := sim.refund(no); err != nil || found {
		t.Fatalf("WeChat knows refund %s before its approval (%v)", no, err)
	}
	path := "/v1/reservations/" + id + "/refunds/" + no
	// The requester's name may not approve, whatever its token; the
	// service may not either.
	if code, body := self.do("POST", path+"/approve", "", nil); code != 403 || errCode(body) != "self_approval" {
		t.Fatalf("self-approval: %d %v", code, body)
	}
	if code, body := svc.do("POST", path+"/approve", "", nil); code != 403 || errCode(body) != "forbidden" {
		t.Fatalf("approval by the service: %d %v", code, body)
	}
	// The approver's approval is journaled, then refundd dies before the
	// submission (the answer may or may not get out first).
	if code, body := approver.do("POST", path+"/approve", "", nil); code != 0 && code != 200 {
		t.Fatalf("approve: %d %v", code, body)
	}
	if !d.waitExit(30 * time.Second) {
		t.Fatalf("refundd did not crash after the approval; logs:\n%s", tail(rd.logs.String(), 40))
	}
	if !d.killedBySIGKILL() {
		t.Fatalf("refundd exited with %v, want SIGKILL at the crash point", d.cmd.ProcessState)
	}
	approvedJournal(t, data, id, no)
	if _, found, err := sim.refund(no); err != nil || found {
		t.Fatalf("WeChat knows refund %s: the crash was not before the submission (%v)", no, err)
	}

	rd.start(t)
	rec := waitSettled(t, svc, sim, rd, id, no, "SUCCEEDED")
	if len(rec.Refund.BodyHashes) != 1 || rec.Refund.Refund != amount {
		t.Fatalf("WeChat's refund %s: %d bodies, amount %d; want one submission of %d", no, len(rec.Refund.BodyHashes), rec.Refund.Refund, amount)
	}
	o, err := sim.order(order)
	if err != nil || len(o.Refunds) != 1 || o.Refunds[0] != no || o.Refunded != amount {
		t.Fatalf("WeChat's order: %+v %v; want exactly one refund %s of %d", o, err, no, amount)
	}
	// Approving again answers the current state and sends nothing.
	if code, body := approver.do("POST", path+"/approve", "", nil); code != 200 || body["approved_by"] != "approver:carol" ||
		body["requested_by"] != "service:service-1" {
		t.Fatalf("approve again: %d %v", code, body)
	}

	// A refund nobody approves expires after --approval-timeout and
	// releases its amount; WeChat never hears of it.
	code, body = svc.do("POST", "/v1/reservations/"+id+"/refunds", "k2", map[string]any{"user_id": "u", "amount": 1000})
	no2, _ := body["refund_no"].(string)
	if code != 202 || body["state"] != "PENDING_APPROVAL" {
		t.Fatalf("second request: %d %v", code, body)
	}
	waitFor(t, 30*time.Second, "refund "+no2+" to expire", func() (bool, string) {
		_, r := svc.do("GET", "/v1/reservations/"+id+"/refunds/"+no2, "", nil)
		return r["state"] == "FAILED" && r["code"] == reservation.CodeApprovalExpired, fmtAny("refund", r)
	})
	_, res := svc.do("GET", "/v1/reservations/"+id, "", nil)
	if res["refundable"] != float64(paid-amount) || res["refunded"] != float64(amount) {
		t.Fatalf("after the expiry: %v", res)
	}
	if _, found, err := sim.refund(no2); err != nil || found {
		t.Fatalf("WeChat knows the expired refund %s (%v)", no2, err)
	}
	if o, err := sim.order(order); err != nil || len(o.Refunds) != 1 {
		t.Fatalf("WeChat's order after the expiry: %+v %v", o, err)
	}
}

// approvedJournal checks what the crash left: the approval journaled with
// both principals and the first submission it starts, and no provider
// answer.
func approvedJournal(t *testing.T, data, id, no string) {
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
	var approved, submitted bool
	for _, e := range events {
		switch d := e.Data.(type) {
		case reservation.Approved:
			approved = d.RefundNo == no && e.By == "approver:carol" && d.RequestedBy == "service:service-1"
		case reservation.SubmissionStarted:
			submitted = d.RefundNo == no && d.Attempt == 1 && len(d.Request) > 0
		case reservation.ProviderResult:
			t.Fatalf("a provider answer was journaled before the crash: %+v", d)
		}
	}
	if !approved || !submitted {
		t.Fatalf("the journal lacks the approval by approver:carol of service:service-1's refund, or its submission: %+v", events)
	}
}
