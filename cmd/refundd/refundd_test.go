package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// Tokens every test process accepts (REFUNDD_TOKENS).
const (
	testServiceToken  = "test-service-token-0123456789"
	testOperatorToken = "test-operator-token-0123456789"
	testTokens        = "service:" + testServiceToken + ",operator:" + testOperatorToken
)

// testEnv is the environment of in-process test instances.
func testEnv(k string) string {
	if k == "REFUNDD_TOKENS" {
		return testTokens
	}
	return ""
}

// client is a tiny JSON client for the tests; it authenticates as the
// service unless token is set.
type client struct {
	t     testing.TB
	base  string
	token string
}

func (c client) do(method, path, key string, body any) (int, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	tok := c.token
	if tok == "" {
		tok = testServiceToken
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestMain_WalkThroughAndSecondInstanceFailsFast(t *testing.T) {
	dir := t.TempDir()
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", dir, "--sandbox-delay", "0"}, testEnv); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := client{t: t, base: "http://" + m.Addr()}
	if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
		"id": "res-1", "user_id": "u1", "out_trade_no": "ORD-1", "amount": 10000, "currency": "CNY",
	}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	code, body := c.do("POST", "/v1/reservations/res-1/refunds?wait=5s", "k1", map[string]any{"user_id": "u1", "amount": 2500})
	if code != 200 || body["state"] != "SUCCEEDED" || body["refund_no"] != "R-res-1-1" {
		t.Fatalf("refund: %d %v", code, body)
	}

	second := NewMain()
	second.Stdout, second.Stderr = io.Discard, io.Discard
	_ = second.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", dir, "--lock-timeout", "200ms"}, testEnv)
	start := time.Now()
	err := second.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "in use by another refundd process") {
		t.Fatalf("second instance: err = %v, want a clear 'in use' error", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("second instance took %s to fail", time.Since(start))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestParseFlags_EnvAndErrors(t *testing.T) {
	env := map[string]string{"REFUNDD_LISTEN": "127.0.0.1:9999", "REFUNDD_REFUND_PREFIX": "staging", "REFUNDD_RECONCILE_AFTER": "5s"}
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if m.Config.Listen != "127.0.0.1:9999" || m.Config.RefundNoPrefix != "staging" || m.Config.ReconcileAfter != 5*time.Second {
		t.Fatalf("config from env: %+v", m.Config)
	}
	m = NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:1"}, func(k string) string { return env[k] }); err != nil || m.Config.Listen != "127.0.0.1:1" {
		t.Fatalf("flag must override env: %v %s", err, m.Config.Listen)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
	}{
		{args: []string{"--refund-prefix", "bad-prefix"}},
		{args: []string{"--refund-prefix", "waytoolongprefix123"}},
		{args: []string{"--idle-timeout", "0s"}},
		{env: map[string]string{"REFUNDD_RECONCILE_AFTER": "soon"}},
		{args: []string{"--log-format", "xml"}},
		{args: []string{"stray"}},
	} {
		m := NewMain()
		m.Stderr = io.Discard
		if err := m.ParseFlags(tc.args, func(k string) string { return tc.env[k] }); err == nil {
			t.Errorf("ParseFlags(%v, %v) = nil, want an error", tc.args, tc.env)
		}
	}
}

// The settle horizon reaches the policy: by default, from the environment
// and from a flag; it must be positive.
func TestParseFlags_SettleHorizon(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		{want: reservation.DefaultSettleHorizon},
		{env: map[string]string{"REFUNDD_SETTLE_HORIZON": "72h"}, want: 72 * time.Hour},
		{args: []string{"--settle-horizon", "30h"}, env: map[string]string{"REFUNDD_SETTLE_HORIZON": "72h"}, want: 30 * time.Hour},
		{args: []string{"--settle-horizon", "0s"}},
	} {
		m := NewMain()
		m.Stderr = io.Discard
		err := m.ParseFlags(tc.args, func(k string) string { return tc.env[k] })
		if tc.want == 0 {
			if err == nil {
				t.Errorf("ParseFlags(%v) = nil, want an error", tc.args)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ParseFlags(%v, %v): %v", tc.args, tc.env, err)
		}
		p, err := m.Config.policy()
		if err != nil || p.SettleHorizon != tc.want {
			t.Errorf("ParseFlags(%v, %v): policy settle horizon %v (%v), want %v", tc.args, tc.env, p.SettleHorizon, err, tc.want)
		}
	}
}

// --- crash test: a real process, SIGKILL, restart, invariants ---

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "refundd")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type proc struct {
	cmd  *exec.Cmd
	addr string
	logs *lockedWriter
}

func startProc(t *testing.T, bin, dir string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"--listen", "127.0.0.1:0", "--data", dir, "--sandbox-delay", "200ms",
		"--reconcile-after", "500ms", "--reconcile-schedule", "200ms", "--retry-backoff", "50ms", "--retry-backoff-max", "200ms",
		"--refund-spacing", "100ms", "--sandbox-time-factor", "0.01", "--scheduler-interval", "50ms", "--lock-timeout", "5s"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TEST_WEBHOOK_SECRET=whsec-test-0123456789abcdef", "REFUNDD_TOKENS="+testTokens)
	stdout, _ := cmd.StdoutPipe()
	logs := &lockedWriter{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "refundd listening on http://"); ok {
				addr <- a
			}
		}
		close(addr) // stdout closed: the process exited
	}()
	select {
	case a, ok := <-addr:
		if ok {
			return &proc{cmd: cmd, addr: a, logs: logs}
		}
		t.Fatalf("refundd exited before listening; logs:\n%s", logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("refundd did not start; logs:\n%s", logs)
	}
	return nil
}

// lockedWriter collects a child process's log while the test reads it.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type accepted struct {
	reservation, key, refundNo string
	amount                     float64
}

func TestCrash_SIGKILLKeepsEveryAcceptedRefund(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real process")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	p := startProc(t, bin, dir)
	c := client{t: t, base: "http://" + p.addr}

	const reservations = 20
	for i := range reservations {
		if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
			"id": fmt.Sprintf("res-%d", i), "user_id": "u", "out_trade_no": fmt.Sprintf("ORD-%d", i), "amount": 10000, "currency": "CNY",
		}); code != 201 {
			t.Fatalf("register %d: %d %v", i, code, body)
		}
	}
	// Clients keep requesting refunds (30% each, so some are refused) while
	// the process is killed under them.
	var mu sync.Mutex
	var got []accepted
	var wg sync.WaitGroup
	stop := make(chan struct{})
	first := make(chan struct{}) // closed when the first refund is accepted
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				res := fmt.Sprintf("res-%d", (w*7+n)%reservations)
				key := fmt.Sprintf("w%d-n%d", w, n)
				code, body := c.do("POST", "/v1/reservations/"+res+"/refunds", key, map[string]any{"user_id": "u", "amount": 3000})
				if code == 202 || code == 200 {
					mu.Lock()
					got = append(got, accepted{res, key, body["refund_no"].(string), body["amount"].(float64)})
					if len(got) == 1 {
						close(first)
					}
					mu.Unlock()
				}
				if code == 0 {
					return // the process is gone
				}
			}
		}()
	}
	// Kill at a random moment after the first refund was accepted (on a
	// loaded machine the first answer can take longer than the shortest
	// draw), so runs cover refunds in every state: requested, submitted,
	// answered, notified.
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("no refund was accepted in 30s")
	}
	killAfter := time.Duration(rand.IntN(300)) * time.Millisecond
	t.Logf("SIGKILL %s after the first accepted refund", killAfter)
	time.Sleep(killAfter) // the random moment itself, not a wait for an event
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	close(stop)
	wg.Wait()
	if len(got) == 0 {
		t.Fatal("no refund was accepted before the kill")
	}
	t.Logf("%d refunds accepted before SIGKILL", len(got))

	p2 := startProc(t, bin, dir)
	c2 := client{t: t, base: "http://" + p2.addr}
	for _, a := range got {
		code, body := c2.do("GET", "/v1/reservations/"+a.reservation+"/refunds/"+a.refundNo, "", nil)
		if code != 200 || body["amount"].(float64) != a.amount {
			t.Fatalf("accepted refund %s lost after restart: %d %v", a.refundNo, code, body)
		}
		// A replay of the accepted request names the same refund.
		code, body = c2.do("POST", "/v1/reservations/"+a.reservation+"/refunds", a.key, map[string]any{"user_id": "u", "amount": 3000})
		if code != 200 || body["refund_no"] != a.refundNo {
			t.Fatalf("replay of %s after restart: %d %v", a.key, code, body)
		}
	}
	// Every refund is resolved by the journaled due times, with no new
	// refund number, and money never exceeds what was paid.
	deadline := time.Now().Add(30 * time.Second)
	for i := range reservations {
		for {
			code, body := c2.do("GET", fmt.Sprintf("/v1/reservations/res-%d?", i), "", nil)
			if code != 200 {
				t.Fatalf("get res-%d: %d %v", i, code, body)
			}
			refunded, inFlight := body["refunded"].(float64), body["in_flight"].(float64)
			if refunded+inFlight > 10000 {
				t.Fatalf("res-%d: refunded %v + in flight %v > paid", i, refunded, inFlight)
			}
			seen := map[string]bool{}
			for _, r := range body["refunds"].([]any) {
				no := r.(map[string]any)["refund_no"].(string)
				if seen[no] {
					t.Fatalf("res-%d: refund number %s twice", i, no)
				}
				seen[no] = true
			}
			if inFlight == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("res-%d still has %v in flight after restart: %v; logs:\n%s", i, inFlight, body, p2.logs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := p2.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := p2.cmd.Wait(); err != nil {
		t.Fatalf("graceful shutdown: %v\n%s", err, p2.logs)
	}
	db, err := journal.Open(filepath.Join(dir, "refundd.db"), &journal.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Verify(context.Background()); err != nil {
		t.Fatalf("journal after crash and restart: %v", err)
	}
}

func TestMain_LocalTokensWhenNoneConfigured(t *testing.T) {
	dir := t.TempDir()
	m := NewMain()
	var out strings.Builder
	m.Stdout, m.Stderr = &out, io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", dir, "--provider", "memory"}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	path := filepath.Join(dir, "tokens", "service.token")
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("service token file: %v %v", info, err)
	}
	tok, _ := os.ReadFile(path)
	if !strings.Contains(out.String(), path) || strings.Contains(out.String(), string(tok)) {
		t.Fatalf("startup output must name the file and never the token:\n%s", out.String())
	}
	c := client{t: t, base: "http://" + m.Addr(), token: "not-the-token-000000000"}
	if code, _ := c.do("GET", "/v1/refunds?state=UNKNOWN", "", nil); code != 401 {
		t.Fatalf("wrong token: %d", code)
	}
	c.token = strings.TrimSpace(string(tok))
	if code, body := c.do("GET", "/v1/refunds?state=UNKNOWN", "", nil); code != 200 {
		t.Fatalf("local service token: %d %v", code, body)
	}
}
