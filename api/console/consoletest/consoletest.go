// Package consoletest drives the operator console (api/console) in a real
// browser for tests: Debian's chromium, headless, over the DevTools
// protocol on a pipe (--remote-debugging-pipe: NUL-separated JSON on fds 3
// and 4), with the standard library only. The API's own console tests and
// cmd/refundd's, which run the console on real processes, share it.
//
// Tests skip when no browser is installed, except under CI, where they
// fail: scripts/install-chromium installs one, with the CJK fonts the
// console names. REFUNDD_CHROMIUM overrides the browser's path.
package consoletest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ChromiumPath returns the browser to run, or skips (fails under CI) when
// there is none.
func ChromiumPath(t testing.TB) string {
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

// Message is one DevTools protocol message in either direction.
type Message struct {
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

// Browser is a running headless chromium; Launch stops it when the test ends.
type Browser struct {
	cmd    *exec.Cmd
	w      *os.File    // the browser reads fd 3
	stderr *syncBuffer // written by exec's copier while the browser runs

	mu      sync.Mutex
	next    int64
	waiting map[int64]chan Message
	events  []Message
	readErr error
	done    chan struct{}
}

// Launch starts the browser at path, stopped (its process group killed if
// need be) when the test ends. A browser that quits before it answers its
// first call is started once more: on a loaded 2-core machine Chromium
// quit at start about once in twenty runs of a browser test, with nothing
// in its stderr but the launcher's warnings; a launch failed there, not
// the page under test. A second early quit fails the test with the exit
// status and stderr.
func Launch(t testing.TB, path string) *Browser {
	t.Helper()
	for attempt := 1; ; attempt++ {
		b := start(t, path)
		_, err := b.call("", "Browser.getVersion", struct{}{})
		if err == nil {
			t.Cleanup(func() { b.close(t) })
			return b
		}
		exit := b.stop()
		msg := fmt.Sprintf("chromium quit before its first answer (%v; exit status: %v); stderr (tail):\n%s",
			err, exit, tail(b.stderr.String(), 2000))
		if attempt == 2 {
			t.Fatal(msg)
		}
		t.Log(msg + "\nstarting it once more")
	}
}

func start(t testing.TB, path string) *Browser {
	t.Helper()
	toR, toW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &Browser{w: toW, stderr: &syncBuffer{}, waiting: map[int64]chan Message{}, done: make(chan struct{})}
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
	return b
}

func (b *Browser) read(r *os.File) {
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
		var m Message
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
func (b *Browser) call(session, method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return nil, fmt.Errorf("browser gone: %w", b.readErr)
	}
	b.next++
	id := b.next
	ch := make(chan Message, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	msg, _ := json.Marshal(Message{ID: id, Method: method, Params: raw, SessionID: session})
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
	case <-time.After(time.Minute): // a bound on a hung browser, see WaitTrue
		return nil, fmt.Errorf("%s: no answer in a minute", method)
	}
}

// EventsNamed returns the events received so far with one of the methods
// Call sends a browser-level DevTools method (no page session), such as
// Browser.setDownloadBehavior, and returns its result.
func (b *Browser) Call(method string, params any) (json.RawMessage, error) {
	return b.call("", method, params)
}

// (Log.entryAdded, Runtime.exceptionThrown...), in order.
func (b *Browser) EventsNamed(methods ...string) []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Message
	for _, ev := range b.events {
		for _, m := range methods {
			if ev.Method == m {
				out = append(out, ev)
			}
		}
	}
	return out
}

func (b *Browser) close(t testing.TB) {
	_, _ = b.call("", "Browser.close", struct{}{})
	b.stop()
	if t.Failed() && b.stderr.Len() > 0 {
		t.Logf("chromium stderr (tail):\n%s", tail(b.stderr.String(), 2000))
	}
}

// stop waits for the browser to exit, ten seconds at most, then kills its
// process group; it returns the exit status.
func (b *Browser) stop() error {
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL) // the group this test started
		err = <-exited
	}
	b.w.Close()
	<-b.done
	return err
}

// syncBuffer is the browser's stderr: exec's copying goroutine writes it
// until the process and its helpers close the pipe, and a failing NewPage
// reads it meanwhile, so its methods lock.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Page is one tab, attached with a flat session.
type Page struct {
	b       *Browser
	session string
}

// NewPage opens a tab of 1280 by 960 px.
func (b *Browser) NewPage(t testing.TB) *Page {
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
	p := &Page{b: b, session: att.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		p.Must(t, m, struct{}{})
	}
	p.Must(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 960, "deviceScaleFactor": 1, "mobile": false})
	return p
}

// Must calls a DevTools method on the tab and fails the test on an error.
func (p *Page) Must(t testing.TB, method string, params any) json.RawMessage {
	t.Helper()
	res, err := p.b.call(p.session, method, params)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Navigate loads url and waits until the console's page is complete.
func (p *Page) Navigate(t testing.TB, url string) {
	t.Helper()
	p.Must(t, "Page.navigate", map[string]any{"url": url})
	p.WaitTrue(t, "the page to load", `document.readyState === 'complete' && !!document.getElementById('status')`)
}

// EvalErr evaluates an expression in the page and returns its JSON value.
func (p *Page) EvalErr(expr string) (any, error) {
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

// Eval is EvalErr failing the test on an error.
func (p *Page) Eval(t testing.TB, expr string) any {
	t.Helper()
	v, err := p.EvalErr(expr)
	if err != nil {
		t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// WaitTrue polls a boolean expression until it holds or a minute passes.
// The bound only decides how long a broken page takes to fail: CI runs the
// browser tests beside every other package's -race tests on two cores,
// where 15 s was once not enough for a page that was fine.
func (p *Page) WaitTrue(t testing.TB, what, expr string) {
	t.Helper()
	p.WaitTrueWithin(t, what, expr, time.Minute)
}

// WaitTrueWithin is WaitTrue with another limit.
func (p *Page) WaitTrueWithin(t testing.TB, what, expr string, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		v, err := p.EvalErr(expr)
		if err == nil && v == true {
			return
		}
		select {
		case <-ctx.Done():
			status, _ := p.EvalErr(`document.getElementById('status') && document.getElementById('status').textContent + ' | page text: ' + document.body.innerText.slice(0, 800)`)
			for _, ev := range p.b.EventsNamed("Runtime.exceptionThrown") {
				t.Logf("page exception: %s", tail(string(ev.Params), 1500))
			}
			t.Fatalf("timed out waiting for %s (%s): last %v %v; status line %q", what, expr, v, err, status)
		case <-tick.C:
		}
	}
}

// Click presses and releases the left mouse button at the element's
// centre, as a user would.
func (p *Page) Click(t testing.TB, selector string) {
	t.Helper()
	p.WaitTrue(t, selector, `(() => { const el = document.querySelector('`+selector+`'); return !!el && !el.disabled; })()`)
	v := p.Eval(t, `(() => { const el = document.querySelector('`+selector+`'); el.scrollIntoView({block: 'center'});
		const r = el.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()`)
	xy, ok := v.([]any)
	if !ok || len(xy) != 2 {
		t.Fatalf("position of %s: %v", selector, v)
	}
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		p.Must(t, "Input.dispatchMouseEvent", map[string]any{"type": typ, "x": xy[0], "y": xy[1], "button": "left", "clickCount": 1})
	}
}

// InsertText types into the focused element.
func (p *Page) InsertText(t testing.TB, text string) {
	t.Helper()
	p.Must(t, "Input.insertText", map[string]any{"text": text})
}

// Resize sets the viewport's width (960 px high) and waits until the page has it.
func (p *Page) Resize(t testing.TB, width int) {
	t.Helper()
	p.Must(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": 960, "deviceScaleFactor": 1, "mobile": false})
	p.WaitTrue(t, "the new width", fmt.Sprintf("window.innerWidth === %d", width))
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
    // Chinese and Japanese break between characters, as they should:
    // each of their characters is a word of its own here.
    const re = /[^\s\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]+/g; let m;
    while ((m = re.exec(n.data))) {
      const rg = document.createRange(); rg.setStart(n, m.index); rg.setEnd(n, m.index + m[0].length);
      const tops = new Set([...rg.getClientRects()].filter((c) => c.width > 0).map((c) => Math.round(c.top)));
      if (tops.size > 1) out.push('word broken across lines: ' + JSON.stringify(m[0].slice(0, 40)));
    }
  }
  return out.slice(0, 10);
})()`

// CheckLayout fails the test (without stopping it) for each layout problem
// of the page as laid out now (layoutProblems).
func (p *Page) CheckLayout(t testing.TB, what string) {
	t.Helper()
	if got, _ := p.Eval(t, layoutProblems).([]any); len(got) > 0 {
		t.Errorf("%s: %d layout problems: %v", what, len(got), got)
	}
}

// Screenshot saves the whole page as a PNG at path.
func (p *Page) Screenshot(t testing.TB, path string) {
	t.Helper()
	res := p.Must(t, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true})
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

// cjkDrawn draws each of the first three CJK characters of an element's
// text on a canvas in the element's own font, and a private-use character
// no font has, which draws as the missing-glyph box ("tofu"). It answers
// "" when every character drew something, differently from the others and
// from the box; otherwise what went wrong.
const cjkDrawn = `((sel) => {
  const el = document.querySelector(sel);
  if (!el) return 'no element ' + sel;
  const chars = [...el.textContent].filter((c) => /[\u3400-\u9fff]/.test(c)).slice(0, 3);
  if (chars.length < 2) return 'fewer than 2 CJK characters in ' + sel;
  const font = getComputedStyle(el).font;
  const draw = (c) => {
    const cv = document.createElement('canvas');
    cv.width = 48; cv.height = 48;
    const x = cv.getContext('2d');
    x.font = font; x.textBaseline = 'top'; x.fillText(c, 4, 4);
    return Array.from(x.getImageData(0, 0, 48, 48).data).join(',');
  };
  const tofu = draw('\uE000');
  const seen = chars.map(draw);
  if (seen.some((s) => !/[1-9]/.test(s))) return 'a CJK character drew nothing in font ' + font;
  if (seen.some((s) => s === tofu)) return 'a CJK character drew the missing-glyph box in font ' + font;
  if (new Set(seen).size !== seen.length) return 'different CJK characters drew alike in font ' + font;
  return '';
})`

// CheckCJK fails the test unless the CJK text of the element matching
// selector renders with real glyphs (see cjkDrawn), and returns the
// platform fonts the browser used for the element's text
// (CSS.getPlatformFontsForNode), so a test can name the face.
func (p *Page) CheckCJK(t testing.TB, selector string) []string {
	t.Helper()
	if got := p.Eval(t, cjkDrawn+`(`+jsString(selector)+`)`); got != "" {
		t.Fatalf("CJK text of %s: %v", selector, got)
	}
	p.Must(t, "DOM.enable", struct{}{})
	p.Must(t, "CSS.enable", struct{}{})
	var doc struct {
		Root struct {
			NodeID int `json:"nodeId"`
		} `json:"root"`
	}
	if err := json.Unmarshal(p.Must(t, "DOM.getDocument", map[string]any{"depth": 0}), &doc); err != nil {
		t.Fatal(err)
	}
	var node struct {
		NodeID int `json:"nodeId"`
	}
	if err := json.Unmarshal(p.Must(t, "DOM.querySelector", map[string]any{"nodeId": doc.Root.NodeID, "selector": selector}), &node); err != nil || node.NodeID == 0 {
		t.Fatalf("DOM.querySelector %s: %v", selector, err)
	}
	var fonts struct {
		Fonts []struct {
			FamilyName string `json:"familyName"`
			GlyphCount int    `json:"glyphCount"`
		} `json:"fonts"`
	}
	if err := json.Unmarshal(p.Must(t, "CSS.getPlatformFontsForNode", map[string]any{"nodeId": node.NodeID}), &fonts); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fonts.Fonts {
		out = append(out, fmt.Sprintf("%s (%d glyphs)", f.FamilyName, f.GlyphCount))
	}
	return out
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
