package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/api/console/consoletest"
	"github.com/refundd/refundd/internal/quarantine"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/webhook"
)

// The console in a real browser: Debian's chromium, headless, driven over
// the DevTools protocol on a pipe (--remote-debugging-pipe: NUL-separated
// JSON on fds 3 and 4), with the standard library only.
//
// An operator logs in with a token, finds a stuck refund created through
// the simulated provider (its reason is an HTML injection attempt, shown as
// text), clicks Reconcile and sees it resolve, then reads its timeline.
//
// The test skips when no browser is installed, except under CI, where it
// fails: scripts/install-chromium installs one. REFUNDD_CHROMIUM overrides
// the browser's path; REFUNDD_CONSOLE_SCREENSHOT names where the screenshot
// goes (default: the test's temporary directory, logged).
func TestConsole_InBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	const payload = `<img src=x onerror=alert(1)>`
	var providerDown atomic.Bool
	providerDown.Store(true)
	fault := func(op, no string, _ int) (simprovider.Injected, bool) {
		switch {
		case op == "submit" && strings.Contains(no, "-hotel-42-"):
			// The provider books the refund (and succeeds) but the answer is
			// lost: UNKNOWN.
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "TIMEOUT"}, Apply: true}, true
		case op == "submit" && strings.Contains(no, "-spa-3-"):
			// WeChat could not return the money to the user's account.
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeAbnormal,
				ProviderID: "50300000012026120500000003", Code: "USER_ACCOUNT_ABNORMAL"}}, true
		case op == "submit" && strings.Contains(no, "-tour-7-"):
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "NOT_ENOUGH", Message: "merchant balance too low"}}, true
		case op == "query" && providerDown.Load():
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "SYSTEM_ERROR"}}, true
		}
		return simprovider.Injected{}, false
	}
	e := newOpsEnv(t, opsOptions{
		fault:  fault,
		tokens: "operator:" + tokOperator + ",service:" + tokService + ",reader:" + tokReader + ",approver:" + tokApprover,
		policy: reservation.Policy{RefundNoPrefix: "T", MaxAttempts: 1, RecheckAfter: time.Hour,
			QueryBackoff: []time.Duration{time.Hour}, StuckAfter: time.Millisecond, ApproveAbove: 50000},
	})
	svc := bearer(tokService)
	for _, id := range []string{"hotel-42", "tour-7", "villa-9", "villa-10"} {
		if r := e.do(t, http.MethodPost, "/v1/reservations", registerBody(id, 88800), svc...); r.status != http.StatusCreated {
			t.Fatalf("register %s: %d %s", id, r.status, r.body)
		}
	}
	stuck := decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/hotel-42/refunds",
		`{"user_id":"u-hotel-42","amount":12345,"reason":"`+payload+`"}`, append(svc, "Idempotency-Key", "cancel-1")...), http.StatusAccepted)
	rejected := decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/tour-7/refunds",
		`{"user_id":"u-tour-7","amount":500,"reason":"weather"}`, append(svc, "Idempotency-Key", "k")...), http.StatusAccepted)
	refund := func(id, no string) refundJSON {
		return decodeRefund(t, e.do(t, http.MethodGet, "/v1/reservations/"+id+"/refunds/"+no, "", svc...), http.StatusOK)
	}
	// Above 500.00 a refund waits for a second person.
	toApprove := decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/villa-9/refunds",
		`{"user_id":"u-villa-9","amount":60000,"reason":"flood"}`, append(svc, "Idempotency-Key", "k")...), http.StatusAccepted)
	toReject := decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/villa-10/refunds",
		`{"user_id":"u-villa-10","amount":70000,"reason":"changed mind"}`, append(svc, "Idempotency-Key", "k")...), http.StatusAccepted)
	if toApprove.State != "PENDING_APPROVAL" || toReject.State != "PENDING_APPROVAL" {
		t.Fatalf("refunds above the approval threshold are %s and %s, want PENDING_APPROVAL", toApprove.State, toReject.State)
	}
	waitFor(t, "UNKNOWN", func() bool { return refund("hotel-42", stuck.RefundNo).State == "UNKNOWN" })
	waitFor(t, "REJECTED", func() bool { return refund("tour-7", rejected.RefundNo).State == "REJECTED" })
	// Its check falls due (the scheduler, fast-forwarded): it is flagged
	// stuck and queried, and the provider is still down.
	if _, err := e.engine.FireDue(t.Context(), time.Now().Add(2*time.Hour), 10); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stuck flag", func() bool {
		st, err := e.engine.Get(t.Context(), "hotel-42")
		return err == nil && st.Refund(stuck.RefundNo).Stuck
	})

	b := launch(t, chromium)
	page := b.newPage(t)
	page.navigate(t, e.srv.URL+"/console/")
	page.waitTrue(t, "the 401 hint", `document.getElementById('status').textContent.includes('token is missing')`)

	page.click(t, "#token")
	page.insertText(t, tokOperator)
	page.click(t, "#token-use")
	row := `#kind-stuck tr[data-refund-no="` + stuck.RefundNo + `"]`
	page.waitTrue(t, "the stuck refund listed", `!!document.querySelector('`+row+`')`)
	page.waitTrue(t, "the rejected refund listed", `!!document.querySelector('#kind-REJECTED tr[data-refund-no="`+rejected.RefundNo+`"]')`)
	page.waitTrue(t, "headline numbers", `document.getElementById('headline').textContent.includes('Stuck')`)
	page.waitTrue(t, "who is signed in", `document.getElementById('whoami').textContent.includes('signed in as operator:')`)
	// Stuck and UNKNOWN at once: one row on the page, in the stuck table.
	if n := page.eval(t, `document.querySelectorAll('#attention tr[data-refund-no="`+stuck.RefundNo+`"]').length`); n != float64(1) {
		t.Fatalf("the stuck UNKNOWN refund has %v rows on the overview, want 1", n)
	}
	shots := os.Getenv("REFUNDD_CONSOLE_SHOTS") // default: the test's temporary directory
	if shots == "" {
		shots = t.TempDir()
	}
	t.Logf("screenshots at 1440 and 760 px: %s", shots)
	for _, w := range []int{1440, 760} {
		page.resize(t, w)
		page.checkLayout(t, fmt.Sprintf("overview at %d px", w))
		page.screenshot(t, filepath.Join(shots, fmt.Sprintf("overview-%d.png", w)))
	}
	page.resize(t, 1280)

	// The injected reason is text, not an element: no <img>, no alert.
	if got := page.eval(t, `document.querySelector('`+row+` td.reason').textContent`); got != payload {
		t.Fatalf("reason cell shows %q", got)
	}
	if n := page.eval(t, `document.querySelectorAll('img, [onerror]').length`); n != float64(0) {
		t.Fatalf("%v injected elements in the page", n)
	}
	// The amount in yuan with its currency; the time with how long ago the
	// refund was requested.
	if got := page.eval(t, `document.querySelector('`+row+` td.num').textContent`); got != "\u00a5123.45 CNY" {
		t.Errorf("amount cell shows %q, want \u00a5123.45 CNY", got)
	}
	if got := page.eval(t, `document.querySelector('`+row+` td.when').textContent`).(string); !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTCrequested \d+ (s|min) ago$`).MatchString(got) {
		t.Errorf("time cell shows %q, want the time in UTC and how long ago the refund was requested", got)
	}
	if got := page.eval(t, `sessionStorage.getItem('refundd.console.token') === '`+tokOperator+`'`); got != true {
		t.Fatal("the token is not kept in sessionStorage")
	}

	shot := os.Getenv("REFUNDD_CONSOLE_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "console.png")
	}
	page.screenshot(t, shot)
	t.Logf("screenshot of the console: %s", shot)

	// One click: reconcile asks the provider, which is back.
	providerDown.Store(false)
	page.click(t, row+` button[data-action="reconcile"]`)
	page.waitTrue(t, "the outcome", `document.getElementById('status').textContent.includes('`+stuck.RefundNo+` is now SUCCEEDED')`)
	page.waitTrue(t, "the refund gone from the stuck list", `!document.querySelector('`+row+`') && !!document.getElementById('kind-stuck')`)
	if got := refund("hotel-42", stuck.RefundNo); got.State != "SUCCEEDED" {
		t.Fatalf("after reconcile the API says %s", got.State)
	}

	// The reservation page: state and journal timeline.
	page.click(t, "#lookup-id")
	page.insertText(t, "hotel-42")
	page.click(t, `#lookup button[type="submit"]`)
	page.waitTrue(t, "the timeline", `document.querySelectorAll('#timeline li').length >= 7`)
	text := page.eval(t, `document.getElementById('reservation').textContent`).(string)
	for _, want := range []string{"refund.flagged_stuck", "refund.query_started", "SUCCEEDED", "operator:", payload} {
		if !strings.Contains(text, want) {
			t.Errorf("reservation page lacks %q", want)
		}
	}
	if n := page.eval(t, `document.querySelectorAll('img, [onerror]').length`); n != float64(0) {
		t.Fatalf("%v injected elements on the reservation page", n)
	}
	// Flagged stuck once, SUCCEEDED now: no stuck mark beside it.
	if got := page.eval(t, `document.querySelector('#reservation tr[data-refund-no="`+stuck.RefundNo+`"] .state-cell').textContent`); got != "SUCCEEDED" {
		t.Fatalf("the succeeded refund's state cell reads %q, want SUCCEEDED alone", got)
	}
	// The refund's own page: its reason, in the facts and in its story,
	// is text.
	page.click(t, `#reservation tr[data-refund-no="`+stuck.RefundNo+`"] a.refund-link`)
	page.waitTrue(t, "the refund page", `!!document.getElementById('refund-story') && !document.getElementById('refund').hidden`)
	if got := page.eval(t, `document.querySelector('#refund dd .reason').textContent`); got != payload {
		t.Fatalf("the refund page's reason reads %q", got)
	}
	if got := page.eval(t, `document.querySelector('#refund-story li[data-type="refund.requested"] .story-what').textContent`).(string); !strings.Contains(got, payload) {
		t.Fatalf("the story's request reads %q, want the reason %q as text", got, payload)
	}
	if n := page.eval(t, `document.querySelectorAll('img, [onerror]').length`); n != float64(0) {
		t.Fatalf("%v injected elements on the refund page", n)
	}
	page.eval(t, `history.back()`)
	page.waitTrue(t, "the reservation page again", `!document.getElementById('reservation').hidden`)
	for _, w := range []int{1440, 760} {
		page.resize(t, w)
		page.checkLayout(t, fmt.Sprintf("reservation page at %d px", w))
		page.screenshot(t, filepath.Join(shots, fmt.Sprintf("reservation-%d.png", w)))
	}

	// The search box: a refund number and WeChat's refund_id land on the
	// refund's own page; an out_trade_no on the reservation's; a user id
	// with two reservations lists both, its markup as text; an unknown id
	// says so.
	find := func(q string) {
		t.Helper()
		page.eval(t, `document.getElementById('lookup-id').value = ''`)
		page.click(t, "#lookup-id")
		page.insertText(t, q)
		page.click(t, `#lookup button[type="submit"]`)
	}
	refundPage := `location.hash === '#/refund/hotel-42/` + stuck.RefundNo + `' && !document.getElementById('refund').hidden && ` +
		`document.querySelector('#refund h1') !== null && document.querySelector('#refund h1').textContent === 'Refund ` + stuck.RefundNo + `'`
	page.navigate(t, e.srv.URL+"/console/")
	find(stuck.RefundNo)
	page.waitTrue(t, "landing on the refund's page by its number", refundPage)
	st, err := e.engine.Get(t.Context(), "hotel-42")
	if err != nil || st.Refund(stuck.RefundNo).ProviderID == "" {
		t.Fatalf("no WeChat refund_id for %s: %v", stuck.RefundNo, err)
	}
	page.navigate(t, e.srv.URL+"/console/")
	find(st.Refund(stuck.RefundNo).ProviderID)
	page.waitTrue(t, "landing on the refund's page by WeChat's refund_id", refundPage)
	// The search is replaced in the history: Back returns to where it began.
	page.eval(t, `history.back()`)
	page.waitTrue(t, "back on the overview", `!document.getElementById('overview').hidden && !location.hash.startsWith('#/search/')`)
	find("ORD-tour-7")
	page.waitTrue(t, "landing on the reservation's page by its out_trade_no",
		`location.hash === '#/reservation/tour-7' && !document.getElementById('reservation').hidden && `+
			`!!document.querySelector('#reservation tr[data-refund-no="`+rejected.RefundNo+`"]')`)
	const hostileUser = `<img src=x onerror=alert(2)>`
	for _, id := range []string{"trip-1", "trip-2"} {
		body, _ := json.Marshal(map[string]any{"id": id, "user_id": hostileUser, "out_trade_no": "ORD-" + id, "amount": 100, "currency": "CNY"})
		if r := e.do(t, http.MethodPost, "/v1/reservations", string(body), svc...); r.status != http.StatusCreated {
			t.Fatalf("register %s: %d %s", id, r.status, r.body)
		}
	}
	find(hostileUser)
	page.waitTrue(t, "both of the user's reservations listed", `document.querySelectorAll('#search-results tbody tr').length === 2`)
	if got := page.eval(t, `[...document.querySelectorAll('#search-results tbody tr')].map((tr) => tr.dataset.reservation + ' ' + tr.cells[7].textContent).join('|')`); got != "trip-1 "+hostileUser+"|trip-2 "+hostileUser {
		t.Fatalf("search results read %q", got)
	}
	// Each row leads to the page of what it names: here a reservation.
	if got := page.eval(t, `[...document.querySelectorAll('#search-results tbody tr a.search-open')].map((a) => a.getAttribute('href')).join('|')`); got != "#/reservation/trip-1|#/reservation/trip-2" {
		t.Fatalf("search results open %q", got)
	}
	if n := page.eval(t, `document.querySelectorAll('img, [onerror]').length`); n != float64(0) {
		t.Fatalf("%v injected elements on the search page", n)
	}
	for _, w := range []int{1440, 760} {
		page.resize(t, w)
		page.checkLayout(t, fmt.Sprintf("search results at %d px", w))
		page.screenshot(t, filepath.Join(shots, fmt.Sprintf("search-%d.png", w)))
	}
	page.resize(t, 1280)
	find("no-such-id")
	page.waitTrue(t, "nothing found", `!!document.getElementById('search-none') && !document.getElementById('search').hidden`)

	// A reader sees the lists and who it is, and no action buttons.
	reader := b.newPage(t)
	reader.navigate(t, e.srv.URL+"/console/")
	reader.click(t, "#token")
	reader.insertText(t, tokReader)
	reader.click(t, "#token-use")
	reader.waitTrue(t, "the rejected refund listed to the reader", `!!document.querySelector('#kind-REJECTED tr[data-refund-no="`+rejected.RefundNo+`"]')`)
	reader.waitTrue(t, "the reader named", `document.getElementById('whoami').textContent.includes('signed in as reader:')`)
	if n := reader.eval(t, `document.querySelectorAll('button[data-action]').length`); n != float64(0) {
		t.Fatalf("a reader is offered %v action buttons", n)
	}

	// Four eyes. The operator sees the refunds awaiting approval, with who
	// asked, and may neither approve, reject nor reconcile them.
	pending := func(no string) string { return `#kind-PENDING_APPROVAL tr[data-refund-no="` + no + `"]` }
	// The overview, shown (not a hidden copy drawn earlier, or never).
	page.eval(t, `location.hash = '#/'`)
	page.waitTrue(t, "the refunds awaiting approval listed", `!document.getElementById('overview').hidden && !!document.querySelector('`+pending(toApprove.RefundNo)+`') && !!document.querySelector('`+pending(toReject.RefundNo)+`')`)
	// Resubmit asks once more, naming the refund and its amount; Cancel
	// sends nothing.
	rejectedRow := `#kind-REJECTED tr[data-refund-no="` + rejected.RefundNo + `"]`
	page.eval(t, `location.hash = '#/'`)
	page.waitTrue(t, "the overview shown again", `!document.getElementById('overview').hidden && !!document.querySelector('`+rejectedRow+` button[data-action="resubmit"]')`)
	sent := e.sim.Submissions()
	page.click(t, rejectedRow+` button[data-action="resubmit"]`)
	page.waitTrue(t, "the resubmit confirmation", `!!document.querySelector('`+rejectedRow+` button[data-action="resubmit-confirm"]')`)
	if got := page.eval(t, `document.querySelector('`+rejectedRow+` .confirm').textContent`).(string); !strings.Contains(got, rejected.RefundNo) || !strings.Contains(got, "5.00") {
		t.Fatalf("the resubmit confirmation reads %q, want the refund number and 5.00", got)
	}
	page.click(t, rejectedRow+` .confirm-box button:not([data-action])`)
	page.waitTrue(t, "the resubmit button back after Cancel", `!!document.querySelector('`+rejectedRow+` button[data-action="resubmit"]')`)
	if n := e.sim.Submissions(); n != sent {
		t.Fatalf("a cancelled resubmit made %d submissions", n-sent)
	}
	if got := page.eval(t, `document.querySelector('`+pending(toApprove.RefundNo)+` .approval').textContent`).(string); !strings.Contains(got, "requested by service:") {
		t.Fatalf("the pending refund's note reads %q, want who requested it", got)
	}
	if n := page.eval(t, `document.querySelectorAll('#kind-PENDING_APPROVAL button[data-action]').length`); n != float64(0) {
		t.Fatalf("an operator who is not an approver is offered %v buttons on refunds awaiting approval", n)
	}
	// The approver approves one, after a confirmation naming the refund
	// and its amount, and rejects the other with a reason.
	approver := b.newPage(t)
	approver.navigate(t, e.srv.URL+"/console/")
	approver.click(t, "#token")
	approver.insertText(t, tokApprover)
	approver.click(t, "#token-use")
	approver.waitTrue(t, "the approver named", `document.getElementById('whoami').textContent.includes('signed in as approver:')`)
	approver.waitTrue(t, "the approve button", `!!document.querySelector('`+pending(toApprove.RefundNo)+` button[data-action="approve"]')`)
	if n := approver.eval(t, `document.querySelectorAll('button[data-action="reconcile"], button[data-action="resubmit"]').length`); n != float64(0) {
		t.Fatalf("an approver is offered %v operator buttons", n)
	}
	approver.click(t, pending(toApprove.RefundNo)+` button[data-action="approve"]`)
	approver.waitTrue(t, "the confirmation", `!!document.querySelector('`+pending(toApprove.RefundNo)+` button[data-action="approve-confirm"]')`)
	if got := approver.eval(t, `document.querySelector('`+pending(toApprove.RefundNo)+` .confirm').textContent`).(string); !strings.Contains(got, toApprove.RefundNo) || !strings.Contains(got, "600.00") {
		t.Fatalf("the approval's confirmation reads %q, want the refund number and 600.00", got)
	}
	before := e.sim.Submissions()
	approver.click(t, pending(toApprove.RefundNo)+` button[data-action="approve-confirm"]`)
	approver.waitTrue(t, "the approved refund's outcome", `document.getElementById('status').textContent.includes('`+toApprove.RefundNo+` is now SUCCEEDED')`)
	if got := refund("villa-9", toApprove.RefundNo); got.State != "SUCCEEDED" {
		t.Fatalf("after approval the API says %s", got.State)
	}
	// The lists are drawn again after an action: the approved refund
	// leaves its table.
	approver.waitTrue(t, "the approved refund gone from the list", `!document.querySelector('`+pending(toApprove.RefundNo)+`')`)
	approver.waitTrue(t, "the reject button", `!!document.querySelector('`+pending(toReject.RefundNo)+` button[data-action="reject"]')`)
	approver.click(t, pending(toReject.RefundNo)+` button[data-action="reject"]`)
	approver.click(t, pending(toReject.RefundNo)+` input`)
	approver.insertText(t, "<b>not</b> covered")
	approver.click(t, pending(toReject.RefundNo)+` button[data-action="reject-confirm"]`)
	approver.waitTrue(t, "the rejected refund's outcome", `document.getElementById('status').textContent.includes('`+toReject.RefundNo+` is now FAILED')`)
	if got := refund("villa-10", toReject.RefundNo); got.State != "FAILED" {
		t.Fatalf("after rejection the API says %s", got.State)
	}
	if n := e.sim.Submissions() - before; n != 1 {
		t.Fatalf("%d submissions for one approval and one rejection, want 1", n)
	}
	approver.waitTrue(t, "the rejected refund gone from the list", `!document.querySelector('`+pending(toReject.RefundNo)+`')`)
	if n := approver.eval(t, `document.querySelectorAll('img, [onerror], b').length`); n != float64(0) {
		t.Fatalf("%v injected elements on the approver's page", n)
	}

	// An ABNORMAL refund: an operator has WeChat Pay pay it out elsewhere.
	// The form asks where, naming the refund and its amount; the API's
	// refusal names the field; the card holder's name does not stay in the
	// page.
	if r := e.do(t, http.MethodPost, "/v1/reservations", registerBody("spa-3", 88800), svc...); r.status != http.StatusCreated {
		t.Fatalf("register spa-3: %d %s", r.status, r.body)
	}
	abnormal := decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/spa-3/refunds",
		`{"user_id":"u-spa-3","amount":30000,"reason":"closed"}`, append(svc, "Idempotency-Key", "k")...), http.StatusAccepted)
	waitFor(t, "ABNORMAL", func() bool { return refund("spa-3", abnormal.RefundNo).State == "ABNORMAL" })
	abnormalPage := e.srv.URL + "/console/" + "#/refund/spa-3/" + abnormal.RefundNo
	drawn := `!document.getElementById('refund').hidden && !!document.getElementById('refund-now') && ` +
		`document.getElementById('refund-now').dataset.kind === 'operator_must_act'`
	reader.navigate(t, abnormalPage)
	reader.waitTrue(t, "the abnormal refund's page to the reader", drawn)
	if n := reader.eval(t, `document.querySelectorAll('[data-action="apply-abnormal"], form[data-form="apply-abnormal"], input[name="bank_account"]').length`); n != float64(0) {
		t.Fatalf("a reader is offered the apply-abnormal form (%v elements)", n)
	}
	page.navigate(t, abnormalPage)
	page.waitTrue(t, "the apply-abnormal button", drawn+` && !!document.querySelector('#refund-now button[data-action="apply-abnormal"]')`)
	page.click(t, `#refund-now button[data-action="apply-abnormal"]`)
	form := `#refund-now form[data-form="apply-abnormal"]`
	page.waitTrue(t, "the apply-abnormal form", `!!document.querySelector('`+form+` select[name="bank_type"]')`)
	if got := page.eval(t, `document.querySelector('`+form+` .confirm').textContent`).(string); !strings.Contains(got, abnormal.RefundNo) || !strings.Contains(got, "300.00") {
		t.Fatalf("the apply-abnormal confirmation reads %q, want the refund number and 300.00", got)
	}
	if got := page.eval(t, `[...document.querySelectorAll('`+form+` input')].map((i) => i.name + ':' + i.getAttribute('autocomplete')).join(' ')`); got != "bank_account:off real_name:off" {
		t.Fatalf("the form's inputs are %q, want bank_account and real_name with autocomplete off", got)
	}
	for _, w := range []int{1440, 760} {
		page.resize(t, w)
		page.checkLayout(t, fmt.Sprintf("apply-abnormal form at %d px", w))
		page.screenshot(t, filepath.Join(shots, fmt.Sprintf("apply-abnormal-%d.png", w)))
	}
	page.resize(t, 1280)
	// The user's card, its number left out: the API refuses it and names
	// bank_account.
	const holder = "Zhang San <i>x</i>"
	page.eval(t, `(() => { const s = document.querySelector('`+form+` select[name="bank_type"]'); s.value = 'ICBC_DEBIT'; s.dispatchEvent(new Event('change')); })()`)
	page.click(t, form+` input[name="real_name"]`)
	page.insertText(t, holder)
	page.click(t, form+` button[data-action="apply-abnormal-confirm"]`)
	page.waitTrue(t, "the API's refusal naming bank_account", `document.getElementById('status').className === 'error' && `+
		`document.getElementById('status').textContent.includes('bank_account must be the card number')`)
	if got := refund("spa-3", abnormal.RefundNo); got.State != "ABNORMAL" {
		t.Fatalf("after a refused apply-abnormal the API says %s", got.State)
	}
	if got := page.eval(t, `[...document.querySelectorAll('input')].some((i) => i.value.includes('Zhang')) || document.body.textContent.includes('Zhang')`); got != false {
		t.Fatal("the card holder's name stays in the page after submit")
	}
	// The merchant's bank account: no other field. The refund is paid out
	// again (PROCESSING) and waits for WeChat.
	page.waitTrue(t, "the apply-abnormal button again", drawn+` && !!document.querySelector('#refund-now button[data-action="apply-abnormal"]')`)
	page.click(t, `#refund-now button[data-action="apply-abnormal"]`)
	page.waitTrue(t, "the apply-abnormal form again", `!!document.querySelector('`+form+` select[name="type"]')`)
	page.eval(t, `(() => { const s = document.querySelector('`+form+` select[name="type"]'); s.value = 'MERCHANT_BANK_CARD'; s.dispatchEvent(new Event('change')); })()`)
	if got := page.eval(t, `document.querySelector('`+form+` .bank-card').hidden`); got != true {
		t.Fatal("the card fields stay shown for MERCHANT_BANK_CARD")
	}
	page.click(t, form+` button[data-action="apply-abnormal-confirm"]`)
	page.waitTrue(t, "the paid-out refund's outcome", `document.getElementById('status').textContent.includes('`+abnormal.RefundNo+` is now PROCESSING')`)
	var paid struct {
		State        string `json:"state"`
		AbnormalType string `json:"abnormal_type"`
		NextStep     struct {
			Kind    string   `json:"kind"`
			Actions []string `json:"actions"`
		} `json:"next_step"`
	}
	if r := e.do(t, http.MethodGet, "/v1/reservations/spa-3/refunds/"+abnormal.RefundNo, "", svc...); r.status != http.StatusOK || json.Unmarshal(r.body, &paid) != nil {
		t.Fatalf("the paid-out refund: %d %s", r.status, r.body)
	}
	if paid.State != "PROCESSING" || paid.AbnormalType != "MERCHANT_BANK_CARD" || paid.NextStep.Kind != "wait_for_wechat" || slices.Contains(paid.NextStep.Actions, "apply-abnormal") {
		t.Fatalf("after apply-abnormal the API says %+v", paid)
	}
	page.waitTrue(t, "the refund page redrawn as waiting for WeChat", `!document.getElementById('refund').hidden && !!document.getElementById('refund-now') && `+
		`document.getElementById('refund-now').dataset.kind === 'wait_for_wechat' && `+
		`document.getElementById('refund-why').textContent.includes('the merchant\'s bank account') && `+
		`!document.querySelector('[data-action="apply-abnormal"]')`)

	// A server without webhooks, notifications or the audit head: the
	// operations view says so, section by section.
	page.click(t, "#nav-ops")
	page.waitTrue(t, "the operations view", `!!document.getElementById('ops-credentials')`)
	for sec, want := range map[string]string{
		"ops-webhooks": "Not enabled on this server.", "ops-quarantine": "Not enabled on this server.",
		"ops-audit": "Not enabled on this server.", "ops-credentials": "No WeChat Pay accounts configured.",
		"ops-counters": "This server keeps no durable counters.", "ops-totals": "Not enabled on this server.",
	} {
		if got := page.eval(t, `document.querySelector('#`+sec+` p:last-child').textContent`); got != want {
			t.Errorf("%s reads %q, want %q", sec, got, want)
		}
	}

	// Nothing was blocked by the policy and nothing threw: the console
	// lives within its own CSP.
	for _, ev := range b.eventsNamed("Log.entryAdded", "Runtime.exceptionThrown", "Page.javascriptDialogOpening") {
		s := string(ev.Params)
		if ev.Method != "Log.entryAdded" || strings.Contains(s, "Content Security Policy") || strings.Contains(s, "Trusted Type") {
			t.Errorf("%s: %s", ev.Method, s)
		}
	}
	// The browser enforces the policy: an HTML string sink throws.
	if got := page.eval(t, `(() => { try { document.createElement('div').innerHTML = '<i>x</i>'; return 'allowed'; } catch (e) { return e.name; } })()`); got != "TypeError" {
		t.Fatalf("innerHTML with a string: %v, want TypeError (Trusted Types)", got)
	}
}

// The browser driver is consoletest's; these keep the tests' short names.
func chromiumPath(t *testing.T) string { return consoletest.ChromiumPath(t) }

type browser struct{ *consoletest.Browser }

type page struct{ *consoletest.Page }

func launch(t *testing.T, path string) *browser { return &browser{consoletest.Launch(t, path)} }

func (b *browser) newPage(t *testing.T) *page { return &page{b.NewPage(t)} }

func (b *browser) eventsNamed(methods ...string) []consoletest.Message {
	return b.EventsNamed(methods...)
}

func (p *page) must(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	return p.Must(t, method, params)
}

func (p *page) navigate(t *testing.T, url string) { t.Helper(); p.Navigate(t, url) }
func (p *page) evalErr(expr string) (any, error)  { return p.EvalErr(expr) }
func (p *page) eval(t *testing.T, expr string) any {
	t.Helper()
	return p.Eval(t, expr)
}
func (p *page) waitTrue(t *testing.T, what, expr string) { t.Helper(); p.WaitTrue(t, what, expr) }
func (p *page) waitTrueWithin(t *testing.T, what, expr string, limit time.Duration) {
	t.Helper()
	p.WaitTrueWithin(t, what, expr, limit)
}
func (p *page) click(t *testing.T, selector string)   { t.Helper(); p.Click(t, selector) }
func (p *page) insertText(t *testing.T, text string)  { t.Helper(); p.InsertText(t, text) }
func (p *page) resize(t *testing.T, width int)        { t.Helper(); p.Resize(t, width) }
func (p *page) checkLayout(t *testing.T, what string) { t.Helper(); p.CheckLayout(t, what) }
func (p *page) screenshot(t *testing.T, path string)  { t.Helper(); p.Screenshot(t, path) }

// TestConsole_MerchantFilter: with two merchants configured, the overview
// offers the merchants the token sees and, once one is chosen, lists and
// counts only its refunds; the choice survives a reload of the tab and
// "All merchants" brings every refund back.
func TestConsole_MerchantFilter(t *testing.T) {
	chromium := chromiumPath(t)
	reject := func(op, _ string, _ int) (simprovider.Injected, bool) {
		return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "NOT_ENOUGH"}}, op == "submit"
	}
	e := newOpsEnv(t, opsOptions{
		fault:     reject,
		tokens:    "operator:" + tokOperator + ",service:" + tokService,
		merchants: []string{"hotel-sh", "hotel-bj"},
		policy:    reservation.Policy{RefundNoPrefix: "T", MaxAttempts: 1, RecheckAfter: time.Hour},
	})
	svc := bearer(tokService)
	nos := map[string]string{}
	for _, r := range []struct{ id, merchant string }{{"sh-1", "hotel-sh"}, {"bj-1", "hotel-bj"}, {"bj-2", "hotel-bj"}} {
		if resp := e.do(t, http.MethodPost, "/v1/reservations", registerFor(r.id, r.merchant, "O-"+r.id), svc...); resp.status != http.StatusCreated {
			t.Fatalf("register %s: %s", r.id, resp)
		}
		rf := decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/"+r.id+"/refunds", `{"user_id":"u-`+r.id+`","amount":100}`,
			append(svc, "Idempotency-Key", "k")...), http.StatusAccepted)
		nos[r.id] = rf.RefundNo
		waitFor(t, r.id+" REJECTED", func() bool {
			got := decodeRefund(t, e.do(t, http.MethodGet, "/v1/reservations/"+r.id+"/refunds/"+rf.RefundNo, "", svc...), http.StatusOK)
			return got.State == "REJECTED"
		})
	}
	listed := func(id string) string {
		return `!!document.querySelector('#kind-REJECTED tr[data-refund-no="` + nos[id] + `"]')`
	}

	b := launch(t, chromium)
	page := b.newPage(t)
	page.navigate(t, e.srv.URL+"/console/")
	page.click(t, "#token")
	page.insertText(t, tokOperator)
	page.click(t, "#token-use")
	page.waitTrue(t, "every merchant's refunds", listed("sh-1")+` && `+listed("bj-1")+` && `+listed("bj-2"))
	page.waitTrue(t, "the filter offered", `!document.getElementById('merchant-box').hidden &&
		[...document.querySelectorAll('#merchant-filter option')].map((o) => o.value).join(',') === ',hotel-bj,hotel-sh'`)

	choose := func(m string) {
		t.Helper()
		page.eval(t, `(() => { const s = document.getElementById('merchant-filter'); s.value = '`+m+`';
			s.dispatchEvent(new Event('change')); return true; })()`)
	}
	choose("hotel-bj")
	page.waitTrue(t, "hotel-bj's refunds only", listed("bj-1")+` && `+listed("bj-2")+` && !`+listed("sh-1"))
	page.waitTrue(t, "the headline counting hotel-bj's", `document.getElementById('headline').textContent.includes('Rejected2')`)
	if got := page.eval(t, `document.getElementById('headline').textContent.includes('Active reservations')`); got != false {
		t.Fatal("the filtered headline shows every merchant's actors")
	}
	// A reload keeps the choice for this tab.
	page.navigate(t, e.srv.URL+"/console/")
	page.waitTrue(t, "hotel-bj kept after a reload", `document.getElementById('merchant-filter').value === 'hotel-bj' && `+
		listed("bj-1")+` && !`+listed("sh-1"))
	choose("hotel-sh")
	page.waitTrue(t, "hotel-sh's refund only", listed("sh-1")+` && !`+listed("bj-1"))
	choose("")
	page.waitTrue(t, "every merchant again", listed("sh-1")+` && `+listed("bj-1")+` && `+listed("bj-2"))
	page.checkLayout(t, "overview with the merchant filter")

	// The reservation page names the merchant.
	page.navigate(t, e.srv.URL+"/console/#/reservation/bj-2")
	page.waitTrue(t, "the merchant on the reservation page", `document.getElementById('reservation').textContent.includes('Merchanthotel-bj')`)

	for _, ev := range b.eventsNamed("Log.entryAdded", "Runtime.exceptionThrown", "Page.javascriptDialogOpening") {
		s := string(ev.Params)
		if ev.Method != "Log.entryAdded" || strings.Contains(s, "Content Security Policy") || strings.Contains(s, "Trusted Type") {
			t.Errorf("%s: %s", ev.Method, s)
		}
	}
}

// TestConsole_Operations: the operations view in a real browser. An
// operator sees the webhook endpoint with its parked events, the
// notification quarantine, the audit head and the credentials with the key
// that expires within 30 days flagged; replays a parked event with its
// button, after one confirmation; switches to Beijing time and reads the
// same instant 8 hours ahead; and sees a new quarantine entry appear by
// itself (auto-refresh). A reader sees the webhooks without buttons and is
// told the other sections are not for its role. Hostile text in the
// quarantine and the credentials stays text.
func TestConsole_Operations(t *testing.T) {
	chromium := chromiumPath(t)
	const payload = `<img src=x onerror=alert(1)>`
	var receiverDown atomic.Bool
	receiverDown.Store(true)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if receiverDown.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(payload))
		}
	}))
	t.Cleanup(receiver.Close)
	q, err := quarantine.Open(t.TempDir(), quarantine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Keep(quarantine.Entry{At: time.Date(2026, 12, 1, 20, 30, 0, 0, time.UTC), Endpoint: payload, Reason: "rejected",
		Body: []byte(`{"id":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	soon, later, before := now.Add(10*24*time.Hour+time.Hour), now.Add(200*24*time.Hour+time.Hour), now.Add(-300*24*time.Hour)
	creds := func() api.CredentialsView {
		return api.CredentialsView{Accounts: []api.AccountCredentials{{
			Account: "hotel-" + payload, MchID: "1900000109", MerchantSerial: "5157F09EFDC096DE15EBE81A47057A72", APIv3Key: true,
			Keys: []api.CredentialKey{
				{Serial: "PUB_KEY_ID_0114232134912410000000000001", Kind: api.KeyKindPublicKey, Source: api.KeySourceFile, NotAfter: &soon},
				{Serial: "7132D72A03E93CDDF8C03BBD1F37EEDF", Kind: api.KeyKindCertificate, Source: api.KeySourceDownload, NotBefore: &before, NotAfter: &later},
			},
			Download: &api.CertificateDownloadView{Refresh: "12h0m0s", LastAttempt: now.Add(-time.Hour), LastSuccess: now.Add(-3 * time.Hour),
				LastError: "download: " + payload, Downloads: 4, Failures: 1, ConsecutiveFailures: 1},
		}}}
	}
	e := newOpsEnv(t, opsOptions{
		tokens:     "operator:" + tokOperator + ",service:" + tokService + ",reader:" + tokReader,
		webhookURL: receiver.URL, quarantine: q, audit: true, credentials: creds,
	})
	svc, op := bearer(tokService), bearer(tokOperator)
	// Two reservations refunded: each has two events parked at the
	// endpoint, requested and succeeded.
	for _, r := range []struct {
		id     string
		amount int64
	}{{"hotel-42", 12345}, {"tour-7", 500}} {
		if resp := e.do(t, http.MethodPost, "/v1/reservations", registerBody(r.id, 88800), svc...); resp.status != http.StatusCreated {
			t.Fatalf("register: %s", resp)
		}
		decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/"+r.id+"/refunds?wait=5s", fmt.Sprintf(`{"user_id":"u-%s","amount":%d}`, r.id, r.amount),
			append(svc, "Idempotency-Key", "k")...), http.StatusOK)
	}
	type parkedBody struct {
		Parked []webhook.ParkedEvent `json:"parked"`
	}
	parked := func() []webhook.ParkedEvent {
		var p parkedBody
		r := e.do(t, http.MethodGet, "/v1/webhooks/crm/parked", "", op...)
		if r.status != http.StatusOK {
			t.Fatalf("parked: %s", r)
		}
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		return p.Parked
	}
	waitFor(t, "four events parked", func() bool { return len(parked()) == 4 })
	all := parked()
	i := slices.IndexFunc(all, func(p webhook.ParkedEvent) bool {
		return p.Event.ReservationID == "hotel-42" && p.Event.Type == "refund.requested"
	})
	if i < 0 {
		t.Fatalf("no refund.requested of hotel-42 parked: %+v", all)
	}
	first := all[i]

	b := launch(t, chromium)
	page := b.newPage(t)
	page.navigate(t, e.srv.URL+"/console/")
	page.click(t, "#token")
	page.insertText(t, tokOperator)
	page.click(t, "#token-use")
	page.waitTrue(t, "who is signed in", `document.getElementById('whoami').textContent.includes('signed in as operator:')`)
	page.click(t, "#nav-ops")
	eventRow := `#ops-webhooks tr[data-event-id="` + first.Event.ID + `"]`
	page.waitTrue(t, "the parked event", `!!document.querySelector('`+eventRow+` button[data-action="replay"]')`)
	page.waitTrue(t, "the quarantine entry", `!!document.querySelector('#ops-quarantine tbody tr')`)
	page.waitTrue(t, "the audit head", `document.getElementById('ops-audit').textContent.includes('Head hash')`)
	page.waitTrue(t, "the credentials", `!!document.querySelector('#ops-credentials tr[data-serial="7132D72A03E93CDDF8C03BBD1F37EEDF"]')`)
	if got := page.eval(t, `document.querySelector('#ops-webhooks tr[data-endpoint="crm"]').textContent`).(string); !strings.Contains(got, "parked") {
		t.Errorf("the endpoint row reads %q, want its parked count", got)
	}
	if got := page.eval(t, `document.querySelector('`+eventRow+`').textContent`).(string); !strings.Contains(got, "\u00a5123.45 CNY") || !strings.Contains(got, "refund.requested") {
		t.Errorf("the parked event's row reads %q, want its type and \u00a5123.45 CNY", got)
	}
	// The key expiring within 30 days is flagged; the other is not.
	flagged := page.eval(t, `[...document.querySelectorAll('#ops-credentials .tag.expiring')].map((e) => e.closest('tr').dataset.serial + ': ' + e.textContent).join('; ')`)
	if flagged != "PUB_KEY_ID_0114232134912410000000000001: expires in 10 days" {
		t.Errorf("flagged keys: %q, want only the public key, expiring in 10 days", flagged)
	}
	cred := page.eval(t, `document.getElementById('ops-credentials').textContent`).(string)
	for _, want := range []string{"expires in 200 days", "platform certificate", "download", "failures 1", "hotel-" + payload, "download: " + payload, "Last success"} {
		if !strings.Contains(cred, want) {
			t.Errorf("credentials section lacks %q: %s", want, cred)
		}
	}
	if got := page.eval(t, `document.querySelector('#ops-quarantine tbody tr td.message').textContent`); got != payload {
		t.Errorf("quarantine endpoint cell shows %q", got)
	}
	if n := page.eval(t, `document.querySelectorAll('img, [onerror]').length`); n != float64(0) {
		t.Fatalf("%v injected elements on the operations view", n)
	}
	page.waitTrue(t, "updated n s ago", `/^updated \d+ s ago$/.test(document.getElementById('updated').textContent)`)

	shots := os.Getenv("REFUNDD_CONSOLE_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	t.Logf("screenshots of the operations view at 1440 and 760 px: %s", shots)
	for _, w := range []int{1440, 760} {
		page.resize(t, w)
		page.checkLayout(t, fmt.Sprintf("operations view at %d px", w))
		page.screenshot(t, filepath.Join(shots, fmt.Sprintf("ops-%d.png", w)))
	}
	page.resize(t, 1280)

	// UTC, then Beijing time: the same instant, 8 hours ahead.
	quarantined := `document.querySelector('#ops-quarantine tbody time')`
	if got := page.eval(t, quarantined+`.textContent`); got != "2026-12-01 20:30:00 UTC" {
		t.Fatalf("the quarantine entry's time reads %q in UTC", got)
	}
	page.eval(t, `(() => { const s = document.getElementById('zone'); s.value = 'beijing'; s.dispatchEvent(new Event('change')); return true; })()`)
	page.waitTrue(t, "Beijing time", quarantined+`.textContent.endsWith('UTC+8')`)
	utc, err := time.Parse("2006-01-02 15:04:05 UTC", "2026-12-01 20:30:00 UTC")
	if err != nil {
		t.Fatal(err)
	}
	shown := page.eval(t, quarantined+`.textContent`).(string)
	bj, err := time.Parse("2006-01-02 15:04:05 UTC+8", shown)
	if err != nil {
		t.Fatalf("Beijing time %q: %v", shown, err)
	}
	if d := bj.Sub(utc); d != 8*time.Hour {
		t.Fatalf("Beijing time %q is %v after the UTC one, want 8h", shown, d)
	}
	if got := page.eval(t, quarantined+`.getAttribute('datetime')`); got != "2026-12-01T20:30:00.000Z" {
		t.Fatalf("the instant behind the time is %v", got)
	}
	page.navigate(t, e.srv.URL+"/console/#/ops")
	page.waitTrue(t, "Beijing time kept for the tab", `document.getElementById('zone').value === 'beijing' && !!`+quarantined+` && `+quarantined+`.textContent === '2026-12-02 04:30:00 UTC+8'`)

	// A reader sees the endpoint and its parked events, no buttons, and
	// a line instead of each section its role may not see.
	reader := b.newPage(t)
	reader.navigate(t, e.srv.URL+"/console/")
	reader.click(t, "#token")
	reader.insertText(t, tokReader)
	reader.click(t, "#token-use")
	reader.waitTrue(t, "the reader named", `document.getElementById('whoami').textContent.includes('signed in as reader:')`)
	reader.click(t, "#nav-ops")
	reader.waitTrue(t, "the parked event shown to the reader", `!!document.querySelector('`+eventRow+`')`)
	if n := reader.eval(t, `document.querySelectorAll('#ops button[data-action]').length`); n != float64(0) {
		t.Fatalf("a reader is offered %v buttons on the operations view", n)
	}
	for _, sec := range []string{"ops-quarantine", "ops-audit", "ops-credentials"} {
		if got := reader.eval(t, `document.querySelector('#`+sec+` .denied') && document.querySelector('#`+sec+` .denied').textContent`); got != "The role reader may not see this." {
			t.Errorf("%s shows the reader %v", sec, got)
		}
	}
	if n := reader.eval(t, `document.querySelectorAll('#ops-credentials table, #ops-quarantine table').length`); n != float64(0) {
		t.Errorf("the reader is shown %v credential or quarantine tables", n)
	}
	reader.checkLayout(t, "operations view for a reader")

	// Replay, confirmed once: the receiver is back and takes the event.
	receiverDown.Store(false)
	page.must(t, "Page.bringToFront", struct{}{})
	page.click(t, eventRow+` button[data-action="replay"]`)
	if got := page.eval(t, `document.querySelector('`+eventRow+` .confirm').textContent`).(string); !strings.Contains(got, first.Event.ID) || !strings.Contains(got, "crm") {
		t.Fatalf("the replay's confirmation reads %q, want the event id and the endpoint", got)
	}
	if still := len(parked()); still != 4 {
		t.Fatalf("%d parked before the confirmation, want 4", still)
	}
	page.click(t, eventRow+` button[data-action="replay-confirm"]`)
	page.waitTrue(t, "the replay's outcome", `document.getElementById('status').textContent.includes('queued for delivery')`)
	// The event goes out with the one held behind it (same reservation);
	// the other reservation's stay parked.
	waitFor(t, "hotel-42's events delivered", func() bool {
		return !slices.ContainsFunc(parked(), func(p webhook.ParkedEvent) bool { return p.Event.ReservationID == "hotel-42" })
	})
	if n := len(parked()); n != 2 {
		t.Fatalf("%d events parked after replaying hotel-42's, want tour-7's 2", n)
	}
	// Replay all, confirmed once with the count.
	// The view the replay drew again first: a draw still running when the
	// refresh is clicked could be taken for the refresh's, and the
	// refresh's would then replace the confirmation opened on it.
	page.waitTrue(t, "the replay's redraw", `!document.body.hasAttribute('aria-busy')`)
	// Marked, the section drawn now is told from the one drawn after the click.
	page.eval(t, `document.getElementById('ops-webhooks').dataset.old = '1'`)
	page.click(t, "#refresh-ops")
	page.waitTrue(t, "hotel-42's events gone from the page", `!document.querySelector('#ops-webhooks[data-old]') && `+
		`!document.querySelector('`+eventRow+`') && document.querySelectorAll('#ops-webhooks tr[data-event-id]').length === 2 && `+
		`!document.body.hasAttribute('aria-busy')`)
	page.click(t, `#ops-webhooks button[data-action="replay-all"]`)
	if got := page.eval(t, `document.querySelector('#ops-webhooks .confirm').textContent`); got != "Replay all 2 parked events of crm?" {
		t.Fatalf("the replay-all confirmation reads %q", got)
	}
	page.click(t, `#ops-webhooks button[data-action="replay-all-confirm"]`)
	page.waitTrue(t, "the replay-all outcome", `document.getElementById('status').textContent.includes('Replaying 2 parked events of crm.')`)
	waitFor(t, "every event delivered", func() bool { return len(parked()) == 0 })
	page.waitTrue(t, "none parked on the page", `document.getElementById('ops-webhooks').textContent.includes('None parked.')`)

	// Auto-refresh: a notification quarantined now shows up without a
	// click within the 15 s period.
	if err := q.Keep(quarantine.Entry{At: time.Now().UTC(), Endpoint: "v3/late", Reason: "mismatch", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	page.waitTrueWithin(t, "the new entry, by auto-refresh", `document.getElementById('ops-quarantine').textContent.includes('v3/late')`, time.Minute)

	for _, ev := range b.eventsNamed("Log.entryAdded", "Runtime.exceptionThrown", "Page.javascriptDialogOpening") {
		s := string(ev.Params)
		if ev.Method != "Log.entryAdded" || strings.Contains(s, "Content Security Policy") || strings.Contains(s, "Trusted Type") {
			t.Errorf("%s: %s", ev.Method, s)
		}
	}
}
