package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

// TestConsole_Lists: the refund and reservation lists in a real browser.
// An operator filters the refunds to UNKNOWN through the filter form, reads
// a hostile reason as text, exports the list as CSV (the downloaded file
// holds the rows, the hostile reason as a plain cell), reconciles both
// UNKNOWN refunds at once after a confirmation naming the count, and pages
// through the reservations with Next and Previous and sorts them. A reader
// gets the list without the bulk reconcile. Screenshots at 1440 and 760 px.
func TestConsole_Lists(t *testing.T) {
	chromium := chromiumPath(t)
	const payload = `<img src=x onerror=alert(1)>`
	const hostileUser = `<svg onload=alert(2)>"u,1`
	var providerDown atomic.Bool
	providerDown.Store(true)
	fault := func(op, no string, _ int) (simprovider.Injected, bool) {
		switch {
		case op == "submit" && strings.Contains(no, "-unk-"):
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "TIMEOUT"}, Apply: true}, true
		case op == "submit" && strings.Contains(no, "-rej-"):
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "NOT_ENOUGH"}}, true
		case op == "query" && providerDown.Load():
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "SYSTEM_ERROR"}}, true
		}
		return simprovider.Injected{}, false
	}
	e := newOpsEnv(t, opsOptions{
		fault:  fault,
		tokens: "operator:" + tokOperator + ",service:" + tokService + ",reader:" + tokReader,
		policy: reservation.Policy{RefundNoPrefix: "T", MaxAttempts: 1, RecheckAfter: time.Hour, QueryBackoff: []time.Duration{time.Hour}},
	})
	svc := bearer(tokService)
	nos := map[string]string{}
	for i, id := range []string{"unk-1", "unk-2", "rej-1", "ok-1"} {
		user, reason := "u-"+id, "weather"
		if id == "unk-1" {
			user, reason = hostileUser, payload
		}
		reg, _ := json.Marshal(map[string]any{"id": id, "user_id": user, "out_trade_no": "ORD-" + id, "amount": 10000 * (i + 1), "currency": "CNY"})
		if r := e.do(t, http.MethodPost, "/v1/reservations", string(reg), svc...); r.status != http.StatusCreated {
			t.Fatalf("register %s: %s", id, r)
		}
		body := fmt.Sprintf(`{"user_id":%q,"amount":%d,"reason":%q}`, user, 1000*(i+1), reason)
		r := e.do(t, http.MethodPost, "/v1/reservations/"+id+"/refunds", body, append(svc, "Idempotency-Key", "k")...)
		var rf refundJSON
		if err := json.Unmarshal(r.body, &rf); err != nil || r.status >= 300 {
			t.Fatalf("refund %s: %s", id, r)
		}
		nos[id] = rf.RefundNo
	}
	want := map[string]string{"unk-1": "UNKNOWN", "unk-2": "UNKNOWN", "rej-1": "REJECTED", "ok-1": "SUCCEEDED"}
	for id, st := range want {
		waitFor(t, id+" "+st, func() bool {
			return decodeRefund(t, e.do(t, http.MethodGet, "/v1/reservations/"+id+"/refunds/"+nos[id], "", svc...), http.StatusOK).State == st
		})
	}

	b := launch(t, chromium)
	downloads := t.TempDir()
	if _, err := b.Call("Browser.setDownloadBehavior", map[string]any{"behavior": "allow", "downloadPath": downloads}); err != nil {
		t.Fatalf("downloads: %v", err)
	}
	page := b.newPage(t)
	page.navigate(t, e.srv.URL+"/console/")
	page.click(t, "#token")
	page.insertText(t, tokOperator)
	page.click(t, "#token-use")
	page.waitTrue(t, "signed in", `document.getElementById('whoami').textContent.includes('operator:')`)
	page.click(t, "#nav-refunds")
	rows := `document.querySelectorAll('#list-table tbody tr').length`
	page.waitTrue(t, "every refund listed", rows+` === 4`)

	// Filter to UNKNOWN through the form.
	page.click(t, `#list-filter input[name="state"]`)
	page.insertText(t, "UNKNOWN")
	page.click(t, "#list-apply")
	page.waitTrue(t, "the UNKNOWN refunds only", rows+` === 2 && [...document.querySelectorAll('#list-table tbody tr')].every((tr) => tr.dataset.state === 'UNKNOWN')`)
	if got := page.eval(t, `location.hash`); got != "#/list/refunds?state=UNKNOWN" {
		t.Errorf("the filter's hash is %v", got)
	}
	reasonCell := `document.querySelector('#list-table tr[data-refund-no="` + nos["unk-1"] + `"] td.reason').textContent`
	if got := page.eval(t, reasonCell); got != payload {
		t.Fatalf("the hostile reason shows as %q", got)
	}
	if n := page.eval(t, `document.querySelectorAll('img, [onerror]').length`); n != float64(0) {
		t.Fatalf("%v injected elements in the page", n)
	}
	shots := os.Getenv("REFUNDD_CONSOLE_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	t.Logf("list screenshots at 1440 and 760 px: %s", shots)
	for _, w := range []int{1440, 760} {
		page.resize(t, w)
		page.checkLayout(t, fmt.Sprintf("refund list at %d px", w))
		page.screenshot(t, filepath.Join(shots, fmt.Sprintf("refunds-list-%d.png", w)))
	}
	page.resize(t, 1280)

	// CSV of the list shown, from the rows the API answered.
	page.click(t, "#list-csv")
	csvPath := filepath.Join(downloads, "refunds.csv")
	var csv string
	waitFor(t, "refunds.csv downloaded", func() bool {
		b, err := os.ReadFile(csvPath)
		csv = string(b)
		return err == nil && strings.HasSuffix(csv, "\r\n") && strings.Count(csv, "\r\n") == 3
	})
	lines := strings.Split(strings.TrimSuffix(csv, "\r\n"), "\r\n")
	if !strings.HasPrefix(lines[0], "refund_no,reservation_id,merchant,out_trade_no,state,amount,") {
		t.Errorf("CSV header %q", lines[0])
	}
	for _, id := range []string{"unk-1", "unk-2"} {
		if !strings.Contains(csv, nos[id]+","+id+",default,ORD-"+id+",UNKNOWN,") {
			t.Errorf("CSV lacks %s's row:\n%s", id, csv)
		}
	}
	if !strings.Contains(csv, ","+payload+",") || strings.Contains(csv, "rej-1") {
		t.Errorf("CSV rows:\n%s", csv)
	}

	// Bulk reconcile of the UNKNOWN refunds shown, once confirmed.
	providerDown.Store(false)
	page.waitTrue(t, "the bulk button counting 2", `document.getElementById('list-bulk').textContent === 'Reconcile 2\u2026'`)
	page.click(t, "#list-bulk")
	page.waitTrue(t, "the confirmation naming the count", `document.getElementById('list-bulk-box').textContent.includes('Reconcile 2 refunds')`)
	page.click(t, "#list-bulk-confirm")
	page.waitTrue(t, "both reconciled", `document.getElementById('status').textContent.includes('Reconciled 2 of 2')`)
	for _, id := range []string{"unk-1", "unk-2"} {
		waitFor(t, id+" SUCCEEDED", func() bool {
			return decodeRefund(t, e.do(t, http.MethodGet, "/v1/reservations/"+id+"/refunds/"+nos[id], "", svc...), http.StatusOK).State == "SUCCEEDED"
		})
	}
	page.click(t, "#list-apply")
	page.waitTrue(t, "no UNKNOWN refund left", `!!document.getElementById('list-empty')`)

	// Reservations: two a page, Next and Previous, sorted by amount.
	page.navigate(t, e.srv.URL+"/console/#/list/reservations?limit=2")
	ids := `[...document.querySelectorAll('#list-table tbody tr')].map((tr) => tr.dataset.reservation).join(',')`
	page.waitTrue(t, "the newest two", ids+` === 'ok-1,rej-1'`)
	page.click(t, "#list-next")
	page.waitTrue(t, "the next two", ids+` === 'unk-2,unk-1'`)
	if got := page.eval(t, `document.getElementById('list-next').disabled`); got != true {
		t.Error("Next is offered on the last page")
	}
	page.click(t, "#list-prev")
	page.waitTrue(t, "back to the newest two", ids+` === 'ok-1,rej-1' && document.getElementById('list-prev').disabled`)
	page.click(t, `th[data-sort="time"] button`)
	page.waitTrue(t, "oldest first", ids+` === 'unk-1,unk-2'`)
	// The hostile user id is text in its cell.
	if got := page.eval(t, `document.querySelector('#list-table tr[data-reservation="unk-1"] td:nth-child(5)').textContent`); got != hostileUser {
		t.Errorf("the hostile user id shows as %q", got)
	}
	if n := page.eval(t, `document.querySelectorAll('svg, img, [onload], [onerror]').length`); n != float64(0) {
		t.Fatalf("%v injected elements in the page", n)
	}
	page.click(t, `th[data-sort="amount"] button`)
	page.waitTrue(t, "this page by amount, largest first", ids+` === 'unk-2,unk-1'`)
	for _, w := range []int{1440, 760} {
		page.resize(t, w)
		page.checkLayout(t, fmt.Sprintf("reservation list at %d px", w))
		page.screenshot(t, filepath.Join(shots, fmt.Sprintf("reservations-list-%d.png", w)))
	}
	page.resize(t, 1280)

	// A reader reads the list, without the bulk reconcile or row actions.
	page.click(t, "#token")
	page.insertText(t, tokReader)
	page.click(t, "#token-use")
	page.navigate(t, e.srv.URL+"/console/#/list/refunds")
	page.waitTrue(t, "the reader's list", rows+` === 4 && document.getElementById('whoami').textContent.includes('reader:')`)
	if got := page.eval(t, `!!document.getElementById('list-bulk') || document.querySelectorAll('#list-table button[data-action]').length > 0`); got != false {
		t.Error("a reader is offered actions on the list")
	}

	for _, ev := range b.eventsNamed("Log.entryAdded", "Runtime.exceptionThrown", "Page.javascriptDialogOpening") {
		s := string(ev.Params)
		if ev.Method != "Log.entryAdded" || strings.Contains(s, "Content Security Policy") || strings.Contains(s, "Trusted Type") {
			t.Errorf("%s: %s", ev.Method, s)
		}
	}
}
