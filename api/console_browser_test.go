package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
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
		case op == "submit" && strings.Contains(no, "-tour-7-"):
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "NOT_ENOUGH", Message: "merchant balance too low"}}, true
		case op == "query" && providerDown.Load():
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "SYSTEM_ERROR"}}, true
		}
		return simprovider.Injected{}, false
	}
	e := newOpsEnv(t, opsOptions{
		fault:  fault,
		tokens: "operator:" + tokOperator + ",service:" + tokService + ",reader:" + tokReader,
		policy: reservation.Policy{RefundNoPrefix: "T", MaxAttempts: 1, RecheckAfter: time.Hour,
			QueryBackoff: []time.Duration{time.Hour}, StuckAfter: time.Millisecond},
	})
	svc := bearer(tokService)
	for _, id := range []string{"hotel-42", "tour-7"} {
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
	for _, w := range []int{1440, 760} {
		page.resize(t, w)
		page.checkLayout(t, fmt.Sprintf("reservation page at %d px", w))
		page.screenshot(t, filepath.Join(shots, fmt.Sprintf("reservation-%d.png", w)))
	}

	// The search box: a refund number and WeChat's refund_id land on the
	// reservation with that refund marked; a user id with two
	// reservations lists both, its markup as text; an unknown id says so.
	find := func(q string) {
		t.Helper()
		page.eval(t, `document.getElementById('lookup-id').value = ''`)
		page.click(t, "#lookup-id")
		page.insertText(t, q)
		page.click(t, `#lookup button[type="submit"]`)
	}
	focused := `#reservation tr.focus[data-refund-no="` + stuck.RefundNo + `"]`
	page.navigate(t, e.srv.URL+"/console/")
	find(stuck.RefundNo)
	page.waitTrue(t, "landing on the refund by its number", `!!document.querySelector('`+focused+`') && !document.getElementById('reservation').hidden`)
	st, err := e.engine.Get(t.Context(), "hotel-42")
	if err != nil || st.Refund(stuck.RefundNo).ProviderID == "" {
		t.Fatalf("no WeChat refund_id for %s: %v", stuck.RefundNo, err)
	}
	page.navigate(t, e.srv.URL+"/console/")
	find(st.Refund(stuck.RefundNo).ProviderID)
	page.waitTrue(t, "landing on the refund by WeChat's refund_id", `!!document.querySelector('`+focused+`') && location.hash.includes('/refund/')`)
	const hostileUser = `<img src=x onerror=alert(2)>`
	for _, id := range []string{"trip-1", "trip-2"} {
		body, _ := json.Marshal(map[string]any{"id": id, "user_id": hostileUser, "out_trade_no": "ORD-" + id, "amount": 100, "currency": "CNY"})
		if r := e.do(t, http.MethodPost, "/v1/reservations", string(body), svc...); r.status != http.StatusCreated {
			t.Fatalf("register %s: %d %s", id, r.status, r.body)
		}
	}
	find(hostileUser)
	page.waitTrue(t, "both of the user's reservations listed", `document.querySelectorAll('#search-results tbody tr').length === 2`)
	if got := page.eval(t, `[...document.querySelectorAll('#search-results tbody tr')].map((tr) => tr.dataset.reservation + ' ' + tr.cells[6].textContent).join('|')`); got != "trip-1 "+hostileUser+"|trip-2 "+hostileUser {
		t.Fatalf("search results read %q", got)
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

func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("REFUNDD_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but there is no browser at %s: run scripts/install-chromium (apt-get install -y chromium) first", p)
		}
		t.Skipf("no browser at %s: install Debian's chromium (scripts/install-chromium) to run the console's browser test", p)
	}
	return p
}

// cdpMessage is one DevTools protocol message in either direction.
type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

type browser struct {
	cmd    *exec.Cmd
	w      *os.File // the browser reads fd 3
	stderr *bytes.Buffer

	mu      sync.Mutex
	next    int64
	waiting map[int64]chan cdpMessage
	events  []cdpMessage
	readErr error
	done    chan struct{}
}

func launch(t *testing.T, path string) *browser {
	t.Helper()
	toR, toW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{w: toW, stderr: &bytes.Buffer{}, waiting: map[int64]chan cdpMessage{}, done: make(chan struct{})}
	b.cmd = exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-dev-shm-usage", "--window-size=1280,960",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	b.cmd.ExtraFiles = []*os.File{toR, fromW} // fds 3 and 4
	b.cmd.Stderr = b.stderr
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its helpers die with it
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	toR.Close()
	fromW.Close()
	go b.read(fromR)
	t.Cleanup(func() { b.close(t) })
	return b
}

func (b *browser) read(r *os.File) {
	defer close(b.done)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			for id, ch := range b.waiting {
				close(ch)
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		var m cdpMessage
		if err := json.Unmarshal(line[:len(line)-1], &m); err != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.waiting[m.ID]; ok {
				ch <- m
				delete(b.waiting, m.ID)
			}
		} else {
			b.events = append(b.events, m)
		}
		b.mu.Unlock()
		if m.Method == "Page.javascriptDialogOpening" {
			// An alert would block the page: dismiss it (the test fails on
			// the recorded event).
			go func() { _, _ = b.call(m.SessionID, "Page.handleJavaScriptDialog", map[string]any{"accept": false}) }()
		}
	}
}

// call sends one command and waits for its answer.
func (b *browser) call(session, method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return nil, fmt.Errorf("browser gone: %w", b.readErr)
	}
	b.next++
	id := b.next
	ch := make(chan cdpMessage, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	msg, _ := json.Marshal(cdpMessage{ID: id, Method: method, Params: raw, SessionID: session})
	if _, err := b.w.Write(append(msg, 0)); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%s: browser gone", method)
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		return m.Result, nil
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%s: no answer in 30s", method)
	}
}

func (b *browser) eventsNamed(methods ...string) []cdpMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []cdpMessage
	for _, ev := range b.events {
		for _, m := range methods {
			if ev.Method == m {
				out = append(out, ev)
			}
		}
	}
	return out
}

func (b *browser) close(t *testing.T) {
	_, _ = b.call("", "Browser.close", struct{}{})
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL) // the group this test started
		<-exited
	}
	b.w.Close()
	<-b.done
	if t.Failed() && b.stderr.Len() > 0 {
		t.Logf("chromium stderr (tail):\n%s", tail(b.stderr.String(), 2000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// page is one tab, attached with a flat session.
type page struct {
	b       *browser
	session string
}

func (b *browser) newPage(t *testing.T) *page {
	t.Helper()
	res, err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"})
	if err != nil {
		t.Fatalf("%v\n%s", err, tail(b.stderr.String(), 2000))
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	_ = json.Unmarshal(res, &target)
	res, err = b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true})
	if err != nil {
		t.Fatal(err)
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(res, &att)
	p := &page{b: b, session: att.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		p.must(t, m, struct{}{})
	}
	p.must(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 960, "deviceScaleFactor": 1, "mobile": false})
	return p
}

func (p *page) must(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	res, err := p.b.call(p.session, method, params)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (p *page) navigate(t *testing.T, url string) {
	t.Helper()
	p.must(t, "Page.navigate", map[string]any{"url": url})
	p.waitTrue(t, "the page to load", `document.readyState === 'complete' && !!document.getElementById('status')`)
}

// evalErr evaluates an expression in the page and returns its JSON value.
func (p *page) evalErr(expr string) (any, error) {
	res, err := p.b.call(p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true})
	if err != nil {
		return nil, err
	}
	var out struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return nil, err
	}
	if out.Exception != nil {
		return nil, errors.New("exception: " + out.Exception.Text)
	}
	return out.Result.Value, nil
}

func (p *page) eval(t *testing.T, expr string) any {
	t.Helper()
	v, err := p.evalErr(expr)
	if err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// waitTrue polls a boolean expression until it holds or 15s pass.
func (p *page) waitTrue(t *testing.T, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		v, err := p.evalErr(expr)
		if err == nil && v == true {
			return
		}
		select {
		case <-ctx.Done():
			status, _ := p.evalErr(`document.getElementById('status') && document.getElementById('status').textContent + ' | page text: ' + document.body.innerText.slice(0, 800)`)
			for _, ev := range p.b.eventsNamed("Runtime.exceptionThrown") {
				t.Logf("page exception: %s", tail(string(ev.Params), 1500))
			}
			t.Fatalf("timed out waiting for %s (%s): last %v %v; status line %q", what, expr, v, err, status)
		case <-tick.C:
		}
	}
}

// click presses and releases the left mouse button at the element's
// centre, as a user would.
func (p *page) click(t *testing.T, selector string) {
	t.Helper()
	p.waitTrue(t, selector, `(() => { const el = document.querySelector('`+selector+`'); return !!el && !el.disabled; })()`)
	v := p.eval(t, `(() => { const el = document.querySelector('`+selector+`'); el.scrollIntoView({block: 'center'});
		const r = el.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()`)
	xy, ok := v.([]any)
	if !ok || len(xy) != 2 {
		t.Fatalf("position of %s: %v", selector, v)
	}
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		p.must(t, "Input.dispatchMouseEvent", map[string]any{"type": typ, "x": xy[0], "y": xy[1], "button": "left", "clickCount": 1})
	}
}

// insertText types into the focused element.
func (p *page) insertText(t *testing.T, text string) {
	t.Helper()
	p.must(t, "Input.insertText", map[string]any{"text": text})
}

func (p *page) resize(t *testing.T, width int) {
	t.Helper()
	p.must(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": 960, "deviceScaleFactor": 1, "mobile": false})
	p.waitTrue(t, "the new width", fmt.Sprintf("window.innerWidth === %d", width))
}

// layoutProblems lists, for the page as laid out now, elements that stick
// out of the viewport horizontally (outside any scroll container) and
// words broken across lines.
const layoutProblems = `(() => {
  const out = [];
  const vw = document.documentElement.clientWidth;
  const scrolls = (el) => { for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
    const o = getComputedStyle(a).overflowX; if (o === 'auto' || o === 'scroll') return true; } return false; };
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('[hidden]') || !el.getClientRects().length) continue;
    const r = el.getBoundingClientRect();
    if ((r.right > vw + 0.5 || r.left < -0.5) && !scrolls(el)) out.push('overflows: <' + el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' class="' + el.className + '"> right ' + Math.round(r.right) + ' > ' + vw);
  }
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    if (!n.parentElement || n.parentElement.closest('[hidden]')) continue;
    const re = /\S+/g; let m;
    while ((m = re.exec(n.data))) {
      const rg = document.createRange(); rg.setStart(n, m.index); rg.setEnd(n, m.index + m[0].length);
      const tops = new Set([...rg.getClientRects()].filter((c) => c.width > 0).map((c) => Math.round(c.top)));
      if (tops.size > 1) out.push('word broken across lines: ' + JSON.stringify(m[0].slice(0, 40)));
    }
  }
  return out.slice(0, 10);
})()`

func (p *page) checkLayout(t *testing.T, what string) {
	t.Helper()
	if got, _ := p.eval(t, layoutProblems).([]any); len(got) > 0 {
		t.Errorf("%s: %d layout problems: %v", what, len(got), got)
	}
}

func (p *page) screenshot(t *testing.T, path string) {
	t.Helper()
	res := p.must(t, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true})
	var shot struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(res, &shot); err != nil {
		t.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

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
