package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMain_RateLimits: the flags reach the API of a running refundd: an
// operator token over its rate and a notification flood from one address
// are answered 429 with Retry-After, other roles are not limited, and
// /metrics counts the refusals.
func TestMain_RateLimits(t *testing.T) {
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	// One request per 10 s: a burst of one, and the second is refused
	// however slow the machine.
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--sandbox-delay", "0",
		"--rate-limit-operator", "0.1", "--notify-rate-limit", "0.1"}, testEnv); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	base := "http://" + m.Addr()
	send := func(method, path, token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if r := send("GET", "/v1/refunds?state=UNKNOWN", testOperatorToken); r.StatusCode != 200 {
		t.Fatalf("operator's first request: %d", r.StatusCode)
	}
	r := send("GET", "/v1/refunds?state=UNKNOWN", testOperatorToken)
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("operator's second request: %d, Retry-After %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
	for range 5 {
		if r := send("GET", "/v1/refunds?state=UNKNOWN", testServiceToken); r.StatusCode != 200 {
			t.Fatalf("service (not limited): %d", r.StatusCode)
		}
	}
	if r := send("POST", "/v1/notify/wechatpay/refund", ""); r.StatusCode == http.StatusTooManyRequests {
		t.Fatal("first notification refused")
	}
	if r := send("POST", "/v1/notify/wechatpay/refund", ""); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second notification from the address: %d", r.StatusCode)
	}
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testServiceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, series := range []string{`refundd_http_requests_rate_limited_total{class="token",role="operator"} 1`,
		`refundd_http_requests_rate_limited_total{class="notify",role=""} 1`} {
		if !strings.Contains(string(b), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}
