package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A config file sits beneath the environment, which sits beneath flags.
func TestParseFlags_ConfigFilePrecedence(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "refundd.conf")
	if err := os.WriteFile(conf, []byte("# test\nidle-timeout = 7m\nstuck-after = 3h\nretry-backoff = 2s\nmetrics-public = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"REFUNDD_STUCK_AFTER": "5h"}
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--config", conf, "--retry-backoff", "3s"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	c := m.Config
	if c.IdleTimeout != 7*time.Minute || c.StuckAfter != 5*time.Hour || c.RetryBackoff != 3*time.Second || !c.MetricsPublic {
		t.Fatalf("idle %v stuck %v backoff %v metrics-public %v", c.IdleTimeout, c.StuckAfter, c.RetryBackoff, c.MetricsPublic)
	}
	if err := os.WriteFile(conf, []byte("idle-timout = 7m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := NewMain().ParseFlags([]string{"--config", conf}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "refundd.conf:1") {
		t.Fatalf("a typo in the file: %v", err)
	}
}

func TestMain_MetricsLogsAndEffectiveConfig(t *testing.T) {
	logs := &syncBuf{}
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, logs
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--provider", "sandbox", "--log-format", "json"}, testEnv); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := client{t: t, base: "http://" + m.Addr()}
	if code, _ := c.do("POST", "/v1/reservations", "", map[string]any{"id": "m1", "user_id": "u", "out_trade_no": "o-m1", "amount": 100, "currency": "CNY"}); code != 201 {
		t.Fatalf("register: %d", code)
	}
	get := func(tok string) (int, string) {
		req, _ := http.NewRequest("GET", c.base+"/metrics", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, _ := get(""); code != 401 {
		t.Fatalf("/metrics without a token: %d", code)
	}
	code, text := get(testServiceToken)
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{"refundd_journal_commit_batch_size_count", "refundd_journal_sync_duration_seconds_bucket",
		`refundd_http_request_duration_seconds_count{code="201",method="POST",route="/v1/reservations"} 1`,
		"refundd_actors_active 1", `refundd_refunds_attention{kind="stuck"} 0`, `refundd_notifications_total{merchant="_none",outcome="applied"} 0`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// A refused notification is logged with the request's id.
	req, _ := http.NewRequest("POST", c.base+"/v1/notify/wechatpay/refund", strings.NewReader("{}"))
	req.Header.Set("X-Request-Id", "gateway-req-0001")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	out := logs.String()
	if !strings.Contains(out, `"request_id":"gateway-req-0001"`) {
		t.Errorf("no log line with the request id:\n%s", out)
	}
	if !strings.Contains(out, `"msg":"effective configuration"`) || !strings.Contains(out, `"retry-backoff":"1s"`) {
		t.Errorf("no effective configuration line:\n%s", out)
	}
	if strings.Contains(out, testServiceToken) || strings.Contains(out, testOperatorToken) {
		t.Error("a token was logged")
	}
}
