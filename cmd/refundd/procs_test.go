package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/freeport"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// Helpers for the tests that run refundd and wxpaysim as real processes:
// WeChat Pay (wxpaysim) keeps running while refundd is SIGKILLed and
// restarted on the same data directory and the same port.

// buildCrashBinaries builds refundd with its crash points compiled in and
// wxpaysim into one temporary directory, both at once.
func buildCrashBinaries(t *testing.T) (refundd, wxpaysim string) {
	t.Helper()
	dir := t.TempDir()
	refundd, wxpaysim = filepath.Join(dir, "refundd"), filepath.Join(dir, "wxpaysim")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, b := range []struct{ out, pkg, tags string }{
		{refundd, ".", "crashpoints"}, {wxpaysim, "../wxpaysim", ""},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := []string{"build", "-o", b.out}
			if b.tags != "" {
				args = append(args, "-tags", b.tags)
			}
			out, err := exec.Command("go", append(args, b.pkg)...).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return refundd, wxpaysim
}

// freeAddr returns a loopback address that was free a moment ago, below
// the ephemeral range and never handed out twice in this test binary.
// refundd keeps it across restarts, so WeChat's notify_url stays valid.
func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := ports.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// ports hands out every address of this test binary's daemons.
var ports freeport.Picker

// daemon is a child process whose exit is observed by one goroutine.
type daemon struct {
	cmd    *exec.Cmd
	out    *lockedWriter // stdout
	logs   *lockedWriter // stderr
	exited chan struct{} // closed once the process has been reaped
}

// startDaemon starts bin and waits until its stdout has a line starting
// with ready. It fails the test if the process exits first. logs receives
// stderr (a fresh writer when nil), so a caller can keep the logs of every
// incarnation of a restarted process in one place.
func startDaemon(t *testing.T, bin, ready string, env []string, logs *lockedWriter, args ...string) *daemon {
	t.Helper()
	if logs == nil {
		logs = &lockedWriter{}
	}
	d := &daemon{cmd: exec.Command(bin, args...), out: &lockedWriter{}, logs: logs, exited: make(chan struct{})}
	// Settings come from flags and env only, never from the developer's
	// shell (a stray REFUNDD_CRASH_AT would crash every incarnation).
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REFUNDD_") {
			d.cmd.Env = append(d.cmd.Env, kv)
		}
	}
	d.cmd.Env = append(d.cmd.Env, env...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, logs
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(d.kill)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(d.out.String(), ready) {
		select {
		case <-d.exited:
			t.Fatalf("%s exited before it was ready (%v); stdout:\n%s\nlogs:\n%s", filepath.Base(bin), d.cmd.ProcessState, d.out, tail(logs.String(), 60))
		case <-time.After(10 * time.Millisecond): // poll interval
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 30s; logs:\n%s", filepath.Base(bin), tail(logs.String(), 60))
		}
	}
	return d
}

// kill SIGKILLs the process (if it still runs) and reaps it.
func (d *daemon) kill() {
	_ = d.cmd.Process.Kill()
	<-d.exited
}

// running reports whether the process has not exited yet.
func (d *daemon) running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// waitExit waits up to timeout for the process to exit by itself.
func (d *daemon) waitExit(timeout time.Duration) bool {
	select {
	case <-d.exited:
		return true
	case <-time.After(timeout):
		return false
	}
}

// killedBySIGKILL reports whether the reaped process died of SIGKILL.
func (d *daemon) killedBySIGKILL() bool {
	ws, ok := d.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// stop asks for a graceful shutdown (SIGINT) and fails unless the process
// exits with status 0 in time.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	if !d.waitExit(30 * time.Second) {
		t.Fatalf("no graceful exit within 30s; logs:\n%s", tail(d.logs.String(), 60))
	}
	if !d.cmd.ProcessState.Success() {
		t.Fatalf("graceful shutdown: %v; logs:\n%s", d.cmd.ProcessState, tail(d.logs.String(), 60))
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// grepLines returns the lines of s containing sub, at most n of them.
func grepLines(s, sub string, n int) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	if len(out) > n {
		out = append([]string{fmt.Sprintf("... (%d earlier lines)", len(out)-n)}, out[len(out)-n:]...)
	}
	return strings.Join(out, "\n")
}

// simOptions configures a wxpaysim process.
type simOptions struct {
	processingDelay string // before the time factor
	timeFactor      string // scales the delay and WeChat's notification retry schedule
	notifyURL       string // v3 notifications of refunds without notify_url
	notifyURLV2     string // empty: no APIv2 notifications
	extra           []string
}

// wxsim is a running wxpaysim: WeChat Pay for the tests. It is never killed
// during a test; its books are also kept in a state file.
type wxsim struct {
	d    *daemon
	url  string
	keys string
	man  sandbox.Manifest
	http *http.Client
}

func startSim(t *testing.T, bin, dir string, o simOptions) *wxsim {
	t.Helper()
	keys := filepath.Join(dir, "keys")
	args := []string{"--listen", "127.0.0.1:0", "--keys-dir", keys, "--state-file", filepath.Join(dir, "books.json"),
		"--processing-delay", o.processingDelay, "--time-factor", o.timeFactor, "--log-level", "info"}
	if o.notifyURL != "" {
		args = append(args, "--notify-url", o.notifyURL)
	}
	if o.notifyURLV2 != "" {
		args = append(args, "--notify-url-v2", o.notifyURLV2)
	}
	d := startDaemon(t, bin, "wxpaysim: point refundd at it with:", nil, nil, append(args, o.extra...)...)
	raw, err := os.ReadFile(filepath.Join(keys, sandbox.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	s := &wxsim{d: d, keys: keys, http: &http.Client{Timeout: 10 * time.Second}}
	if err := json.Unmarshal(raw, &s.man); err != nil || s.man.BaseURL == "" {
		t.Fatalf("wxpaysim manifest %s: %v", raw, err)
	}
	s.url = s.man.BaseURL
	return s
}

// refunddFlags configures refundd for this sandbox from the files it
// wrote, as an operator would.
func (s *wxsim) refunddFlags(v2 bool) []string {
	f := func(name string) string { return filepath.Join(s.keys, name) }
	flags := []string{"--provider", "wechatpay", "--wechatpay-base-url", s.man.BaseURL, "--wechatpay-mchid", s.man.MchID,
		"--wechatpay-serial", s.man.MerchantSerial, "--wechatpay-private-key", f(s.man.Files.MerchantPrivateKey),
		"--wechatpay-apiv3-key-file", f(s.man.Files.APIv3Key), "--wechatpay-public-key", f(s.man.Files.WechatpayPublicKey),
		"--wechatpay-public-key-id", s.man.PublicKeyID}
	if v2 {
		flags = append(flags, "--wechatpay-apiv2-key-file", f(s.man.Files.APIv2Key))
	}
	return flags
}

// admin calls a /sandbox/ route; out (may be nil) receives a 2xx JSON body.
func (s *wxsim) admin(method, path string, in, out any) (int, error) {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(body))
	}
	if out != nil && len(body) > 0 {
		if err := json.Unmarshal(body, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w: %s", method, path, err, body)
		}
	}
	return resp.StatusCode, nil
}

// createOrder tells WeChat about a paid order.
func (s *wxsim) createOrder(t *testing.T, outTradeNo string, total int64) {
	t.Helper()
	if _, err := s.admin("POST", "/sandbox/orders", map[string]any{"out_trade_no": outTradeNo, "total": total}, nil); err != nil {
		t.Fatal(err)
	}
}

// setFault injects a fault (JSON as POST /sandbox/faults takes it).
func (s *wxsim) setFault(t *testing.T, f map[string]any) {
	t.Helper()
	if _, err := s.admin("POST", "/sandbox/faults", f, nil); err != nil {
		t.Fatal(err)
	}
}

func (s *wxsim) clearFaults(t *testing.T) {
	t.Helper()
	if _, err := s.admin("DELETE", "/sandbox/faults", nil, nil); err != nil {
		t.Fatal(err)
	}
}

// simRefund is GET /sandbox/refunds/{no}.
type simRefund struct {
	Refund     sandbox.RefundRecord `json:"refund"`
	Deliveries []sandbox.Delivery   `json:"deliveries"`
}

// refund returns WeChat's record of a refund number; found is false on 404.
func (s *wxsim) refund(no string) (r simRefund, found bool, err error) {
	status, err := s.admin("GET", "/sandbox/refunds/"+no, nil, &r)
	if status == http.StatusNotFound {
		return r, false, nil
	}
	return r, err == nil, err
}

// simOrder is GET /sandbox/orders/{out_trade_no}. Refunded counts every
// refund that holds money (PROCESSING, SUCCESS, ABNORMAL).
type simOrder struct {
	OutTradeNo string   `json:"out_trade_no"`
	Total      int64    `json:"total"`
	Refunded   int64    `json:"refunded"`
	Refunds    []string `json:"refunds"`
}

func (s *wxsim) order(outTradeNo string) (o simOrder, err error) {
	_, err = s.admin("GET", "/sandbox/orders/"+outTradeNo, nil, &o)
	return o, err
}

// refunddProc runs refundd incarnations on one data directory and one
// fixed address against a wxsim, keeping all their logs.
type refunddProc struct {
	bin, data, addr string
	flags           []string
	logs            *lockedWriter
	starts          int
}

// newRefundd prepares refundd with short schedules so that retries,
// reconciliation and recovery run in well under a second.
func newRefundd(bin, data, addr string, sim *wxsim, v2 bool, extra ...string) *refunddProc {
	flags := append([]string{"--listen", addr, "--data", data,
		"--reconcile-after", "300ms", "--reconcile-schedule", "200ms", "--retry-backoff", "30ms",
		"--retry-backoff-max", "200ms", "--refund-spacing", "0", "--scheduler-interval", "20ms",
		"--lock-timeout", "5s", "--shutdown-timeout", "10s"}, sim.refunddFlags(v2)...)
	return &refunddProc{bin: bin, data: data, addr: addr, flags: append(flags, extra...), logs: &lockedWriter{}}
}

// start starts one incarnation; env adds variables (REFUNDD_CRASH_AT).
func (r *refunddProc) start(t *testing.T, env ...string) *daemon {
	t.Helper()
	r.starts++
	fmt.Fprintf(r.logs, "===== refundd start #%d %s =====\n", r.starts, strings.Join(env, " "))
	return startDaemon(t, r.bin, "refundd listening on ", append([]string{"REFUNDD_TOKENS=" + testTokens}, env...), r.logs, r.flags...)
}

// apiCall is client.do with a deadline and the transport error, for
// callers that must tell "no answer" from an answer and must not hang.
func apiCall(ctx context.Context, base, method, path, key string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testServiceToken)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err // the answer was cut: as good as none
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, nil
}

// waitFor polls cond until it holds, failing after timeout with what and
// cond's last description of what it saw.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last seen: %s", timeout, what, seen)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// fmtAny formats key, value pairs for failure messages.
func fmtAny(kv ...any) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "%v=%+v ", kv[i], kv[i+1])
	}
	return b.String()
}
