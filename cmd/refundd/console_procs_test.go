package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/api/console/consoletest"
	"github.com/refundd/refundd/internal/auth"
)

// TestConsole_RefundPageOnRealProcesses runs the console in a real browser
// against refundd and wxpaysim as processes, the state made through
// WeChat's (wxpaysim's) fault routes:
//
//   - an operator opens a stuck UNKNOWN refund (every answer of WeChat
//     lost, every query failing) and reads why it is there and what happens
//     next, its story in words, its raw events behind a toggle; WeChat
//     comes back and the operator reconciles it to SUCCEEDED;
//   - a refund WeChat refused offers the operator resubmit and abandon,
//     each confirmed naming its number and amount;
//   - an approver approves one refund and rejects another from their pages;
//   - a reader sees the same pages and no button.
//
// Its reason is markup with Chinese text: shown as text, drawn with CJK
// glyphs. Screenshots at 1440 and 760 px of every view go to
// REFUNDD_CONSOLE_SHOTS (default: a temporary directory), logged.
func TestConsole_RefundPageOnRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs real processes and a browser")
	}
	chromium := consoletest.ChromiumPath(t)
	refunddBin, simBin := buildCrashBinaries(t)
	const approverToken, readerToken = "test-approver-token-0123456789", "test-reader-token-0123456789"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("approver "+auth.HashHex(approverToken)+" carol\n"+
		"reader "+auth.HashHex(readerToken)+" rita\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	sim := startSim(t, simBin, t.TempDir(), simOptions{processingDelay: "1s", timeFactor: "0.1",
		notifyURL: "http://" + addr + "/v1/notify/wechatpay/refund"})
	// Two attempts, then UNKNOWN; flagged stuck at its first check; then
	// asked about hourly, so the story stays short.
	rd := newRefundd(refunddBin, t.TempDir(), addr, sim, false, "--tokens-file", tokens, "--retry-max-attempts", "2",
		"--stuck-after", "1ms", "--reconcile-schedule", "1h", "--approve-above", "50000")
	rd.start(t)
	base := "http://" + addr
	svc := client{t: t, base: base}

	const payload = `<img src=x onerror=alert(1)> 酒店取消，全额退款`
	register := func(id, order, user string, paid int64) {
		t.Helper()
		sim.createOrder(t, order, paid)
		if code, body := svc.do("POST", "/v1/reservations", "", map[string]any{
			"id": id, "user_id": user, "out_trade_no": order, "amount": paid, "currency": "CNY",
		}); code != 201 {
			t.Fatalf("register %s: %d %v", id, code, body)
		}
	}
	request := func(id, user string, amount int64, reason string) string {
		t.Helper()
		code, body := svc.do("POST", "/v1/reservations/"+id+"/refunds", "k", map[string]any{"user_id": user, "amount": amount, "reason": reason})
		no, _ := body["refund_no"].(string)
		if code != 202 || no == "" {
			t.Fatalf("refund of %s: %d %v", id, code, body)
		}
		return no
	}
	refund := func(id, no string) map[string]any {
		_, r := svc.do("GET", "/v1/reservations/"+id+"/refunds/"+no, "", nil)
		return r
	}
	// WeChat takes every create of the stuck refund's order but the answer
	// is lost, every query of it fails, and its notification never comes.
	register("hotel-42", "ORD-HOTEL-42", "u-42", 88800)
	sim.setFault(t, map[string]any{"kind": "notify_drop", "out_trade_no": "ORD-HOTEL-42"})
	sim.setFault(t, map[string]any{"kind": "response_lost", "out_trade_no": "ORD-HOTEL-42", "op": "create"})
	sim.setFault(t, map[string]any{"kind": "system_error", "out_trade_no": "ORD-HOTEL-42", "op": "query"})
	stuck := request("hotel-42", "u-42", 12345, payload)
	// WeChat refuses the tour's refund: the merchant's balance is short.
	register("tour-7", "ORD-TOUR-7", "u-7", 88800)
	sim.setFault(t, map[string]any{"kind": "not_enough", "out_trade_no": "ORD-TOUR-7", "op": "create"})
	refused := request("tour-7", "u-7", 500, "weather")
	// Above 500.00 a refund waits for a second person. Both villas are
	// the same user's: a search by user id lists two reservations.
	register("villa-9", "ORD-VILLA-9", "u-villa", 88800)
	register("villa-10", "ORD-VILLA-10", "u-villa", 88800)
	toApprove := request("villa-9", "u-villa", 60000, "flood")
	toReject := request("villa-10", "u-villa", 70000, "changed mind")
	waitFor(t, 30*time.Second, "the stuck refund UNKNOWN and flagged, the tour's REJECTED", func() (bool, string) {
		s, r := refund("hotel-42", stuck), refund("tour-7", refused)
		return s["state"] == "UNKNOWN" && s["stuck"] == true && r["state"] == "REJECTED", fmtAny("stuck", s) + " " + fmtAny("refused", r)
	})

	shots := os.Getenv("REFUNDD_CONSOLE_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	t.Logf("screenshots at 1440 and 760 px: %s", shots)
	shoot := func(p *consoletest.Page, view string) {
		t.Helper()
		for _, w := range []int{1440, 760} {
			p.Resize(t, w)
			p.CheckLayout(t, fmt.Sprintf("%s at %d px", view, w))
			p.Screenshot(t, filepath.Join(shots, fmt.Sprintf("%s-%d.png", view, w)))
		}
		p.Resize(t, 1280)
	}
	b := consoletest.Launch(t, chromium)
	signIn := func(token, role string) *consoletest.Page {
		t.Helper()
		p := b.NewPage(t)
		p.Navigate(t, base+"/console/")
		p.Click(t, "#token")
		p.InsertText(t, token)
		p.Click(t, "#token-use")
		// REFUNDD_TOKENS names its principals ROLE:ROLE-N.
		p.WaitTrue(t, role+" signed in", `/^signed in as `+role+`(-\d+)? \u00b7 all merchants$/.test(document.getElementById('whoami').textContent)`)
		return p
	}
	open := func(p *consoletest.Page, id, no string) {
		t.Helper()
		p.Eval(t, `location.hash = '#/refund/`+id+`/`+no+`'`)
		p.WaitTrue(t, "the page of "+no, `!document.getElementById('refund').hidden && !!document.querySelector('#refund h1') &&
			document.querySelector('#refund h1').textContent === 'Refund `+no+`'`)
	}
	text := func(p *consoletest.Page, sel string) string {
		t.Helper()
		s, _ := p.Eval(t, `(document.querySelector('`+sel+`') || {}).textContent || ''`).(string)
		return s
	}
	mustContain := func(what, got string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s lacks %q: %s", what, w, got)
			}
		}
	}
	noInjected := func(p *consoletest.Page, where string) {
		t.Helper()
		if n := p.Eval(t, `document.querySelectorAll('img, [onerror], b').length`); n != float64(0) {
			t.Fatalf("%v injected elements on %s", n, where)
		}
	}

	// The operator reads why the stuck refund is UNKNOWN and what happens next.
	op := signIn(testOperatorToken, "operator:operator")
	op.WaitTrue(t, "the overview", `!!document.querySelector('#kind-stuck tr[data-refund-no="`+stuck+`"]')`)
	shoot(op, "overview")
	op.Click(t, `#kind-stuck tr[data-refund-no="`+stuck+`"] a.refund-link`)
	op.WaitTrue(t, "the refund page", `!!document.getElementById('refund-why')`)
	mustContain("why", text(op, "#refund-why"), "answers to its 2 attempts did not say whether the refund was made",
		"only WeChat can tell", "flagged stuck")
	mustContain("next", text(op, "#refund-next"), "refundd asks WeChat about it at ", " UTC (in ")
	mustContain("who", text(op, "#refund-who"), "Who must act: refundd (WeChat must answer)")
	story := text(op, "#refund-story ol.story")
	mustContain("story", story, "Requested by service:service", "attempt 1 sent to WeChat", "WeChat answered attempt 1: no clear answer",
		"attempt 2 sent to WeChat", "Flagged stuck", "query 1: refundd asked WeChat", payload)
	if strings.Contains(story, "Resubmitted") {
		t.Errorf("the story calls a first submission or a retry a resubmission: %s", story)
	}
	if got := text(op, "#refund dd .reason"); got != payload {
		t.Errorf("the reason reads %q, want %q as text", got, payload)
	}
	noInjected(op, "the refund page")
	fonts := op.CheckCJK(t, "#refund dd .reason")
	t.Logf("the reason is drawn with %v", fonts)
	if !strings.Contains(strings.Join(fonts, ","), "Noto Sans CJK") {
		t.Errorf("the reason's CJK text is drawn with %v, want Noto Sans CJK (app.css, scripts/install-chromium)", fonts)
	}
	// The raw events are behind a toggle.
	if open := op.Eval(t, `document.getElementById('refund-raw').open`); open != false {
		t.Fatal("the raw events are open before the toggle")
	}
	op.Click(t, "#refund-raw summary")
	op.WaitTrue(t, "the raw events", `document.getElementById('refund-raw').open && document.querySelectorAll('#refund-raw pre').length >= 6`)
	shoot(op, "refund")

	// WeChat is back: one click asks it, and the refund settles.
	sim.clearFaults(t)
	op.Click(t, `#refund-now button[data-action="reconcile"]`)
	op.WaitTrue(t, "the outcome", `document.getElementById('status').textContent.includes('`+stuck+` is now SUCCEEDED')`)
	op.WaitTrue(t, "the page redrawn", `document.getElementById('refund-now').dataset.kind === 'none'`)
	mustContain("why after reconcile", text(op, "#refund-why"), "WeChat refunded the money")
	mustContain("story after reconcile", text(op, "#refund-story ol.story"), "Reconcile by operator:operator", "WeChat answered the query: refunded")
	if n := op.Eval(t, `document.querySelectorAll('#refund-now button[data-action]').length`); n != float64(0) {
		t.Errorf("a SUCCEEDED refund offers %v buttons", n)
	}

	// The refused refund: resubmit and abandon, each asking once more.
	open(op, "tour-7", refused)
	mustContain("the request's age", text(op, "#refund dl.facts"), "requested ", " s ago by service:service")
	// Beijing time: the story's times 8 hours ahead, marked UTC+8.
	op.Eval(t, `(() => { const s = document.getElementById('zone'); s.value = 'beijing'; s.dispatchEvent(new Event('change')); return true; })()`)
	op.WaitTrue(t, "the story in Beijing time", `[...document.querySelectorAll('#refund-story ol.story time')].every((e) => e.textContent.endsWith(' UTC+8')) &&
		document.querySelectorAll('#refund-story ol.story time').length > 0`)
	op.Eval(t, `(() => { const s = document.getElementById('zone'); s.value = 'utc'; s.dispatchEvent(new Event('change')); return true; })()`)
	op.WaitTrue(t, "the story in UTC again", `!!document.querySelector('#refund-story ol.story time') && document.querySelector('#refund-story ol.story time').textContent.endsWith(' UTC')`)
	mustContain("why of the refused refund", text(op, "#refund-why"), "WeChat refused attempt 1 (code NOT_ENOUGH)")
	mustContain("who of the refused refund", text(op, "#refund-who"), "an operator")
	for _, action := range []string{"resubmit", "abandon"} {
		op.Click(t, `#refund-now button[data-action="`+action+`"]`)
		op.WaitTrue(t, action+"'s confirmation", `!!document.querySelector('#refund-now button[data-action="`+action+`-confirm"]')`)
		mustContain(action+"'s confirmation", text(op, "#refund-now .confirm"), refused, "\u00a55.00 CNY")
		op.Click(t, `#refund-now .confirm-box button:not([data-action])`)
	}
	if o, err := sim.order("ORD-TOUR-7"); err != nil || len(o.Refunds) != 0 {
		t.Fatalf("WeChat's order after two cancelled confirmations: %+v %v", o, err)
	}

	// The reservation page, the search results and the operations view.
	op.Eval(t, `location.hash = '#/reservation/hotel-42'`)
	op.WaitTrue(t, "the reservation page", `document.querySelectorAll('#timeline li').length >= 8`)
	shoot(op, "reservation")
	op.Eval(t, `location.hash = '#/search/u-villa'`)
	op.WaitTrue(t, "both villas found", `document.querySelectorAll('#search-results tbody tr').length === 2`)
	shoot(op, "search")
	op.Click(t, "#nav-ops")
	op.WaitTrue(t, "the operations view", `!!document.getElementById('ops-credentials') && !document.getElementById('ops').hidden`)
	op.WaitTrue(t, "the empty quarantine said so", `document.getElementById('ops-quarantine').textContent.includes('Nothing quarantined.')`)
	shoot(op, "ops")

	// The approver approves one and rejects the other from their pages,
	// and may not reconcile.
	ap := signIn(approverToken, "approver:carol")
	// The overview, drawn first, lists both pending refunds with their
	// approve and reject buttons and stays in the page, hidden, when a
	// refund is opened: the counts of buttons below look in #refund only
	// (counting the whole document failed whenever the overview was drawn
	// before the navigation, which is a race this wait makes certain).
	ap.WaitTrue(t, "the approver's overview drawn", `!document.body.hasAttribute('aria-busy') && document.querySelectorAll('button[data-action]').length > 0`)
	open(ap, "villa-9", toApprove)
	mustContain("why of a pending refund", text(ap, "#refund-why"), "waits for an approver other than its requester (service:service")
	mustContain("who of a pending refund", text(ap, "#refund-who"), "an approver")
	ap.Click(t, `#refund-now button[data-action="approve"]`)
	mustContain("the approval's confirmation", text(ap, "#refund-now .confirm"), toApprove, "\u00a5600.00 CNY")
	ap.Click(t, `#refund-now button[data-action="approve-confirm"]`)
	ap.WaitTrue(t, "the approved refund settled", `document.getElementById('status').textContent.includes('`+toApprove+` is now SUCCEEDED')`)
	ap.WaitTrue(t, "the page redrawn", `document.getElementById('refund-story').textContent.includes('Approved by approver:carol')`)
	open(ap, "villa-10", toReject)
	ap.Click(t, `#refund-now button[data-action="reject"]`)
	mustContain("the rejection's confirmation", text(ap, "#refund-now .confirm"), toReject, "\u00a5700.00 CNY")
	ap.Click(t, `#refund-now .confirm-box input`)
	ap.InsertText(t, "<b>not</b> covered 不在保障范围")
	ap.Click(t, `#refund-now button[data-action="reject-confirm"]`)
	ap.WaitTrue(t, "the rejected refund closed", `document.getElementById('status').textContent.includes('`+toReject+` is now FAILED')`)
	ap.WaitTrue(t, "the rejection in its story", `document.getElementById('refund-story').textContent.includes('Rejected by approver:carol: \u201c<b>not</b> covered 不在保障范围\u201d')`)
	noInjected(ap, "the approver's pages")
	if got := refund("villa-10", toReject); got["state"] != "FAILED" || got["rejected_by"] != "approver:carol" {
		t.Fatalf("after the rejection the API says %v", got)
	}
	open(ap, "tour-7", refused)
	if n := ap.Eval(t, `document.querySelectorAll('#refund button[data-action]').length`); n != float64(0) {
		t.Errorf("an approver is offered %v operator buttons on a refused refund", n)
	}

	// A reader reads the same page, and is offered nothing.
	rdr := signIn(readerToken, "reader:rita")
	open(rdr, "tour-7", refused)
	mustContain("why for a reader", text(rdr, "#refund-why"), "An operator must fix the cause")
	if n := rdr.Eval(t, `document.querySelectorAll('#refund button[data-action]').length`); n != float64(0) {
		t.Errorf("a reader is offered %v buttons", n)
	}

	for _, ev := range b.EventsNamed("Log.entryAdded", "Runtime.exceptionThrown", "Page.javascriptDialogOpening") {
		s := string(ev.Params)
		if ev.Method != "Log.entryAdded" || strings.Contains(s, "Content Security Policy") || strings.Contains(s, "Trusted Type") {
			t.Errorf("%s: %s", ev.Method, s)
		}
	}
}
