package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/wechatpay"
)

// limitClock is the rate limits' clock, moved by the test.
type limitClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *limitClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *limitClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// limitCounts counts refused requests by class and role.
type limitCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *limitCounts) ObserveRateLimited(class, role string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[class+"/"+role]++
}

func (c *limitCounts) get(k string) int { c.mu.Lock(); defer c.mu.Unlock(); return c.n[k] }

func limitEnv(t *testing.T, perRole map[auth.Role]float64) (*testEnv, *limitClock, *limitCounts) {
	t.Helper()
	var ts auth.Tokens
	if err := auth.ParseEnv("service:"+tokService+",reader:"+tokReader+",operator:"+tokOperator+",reader:"+tokReader+"-2", &ts); err != nil {
		t.Fatal(err)
	}
	clock := &limitClock{t: time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)}
	counts := &limitCounts{}
	e := newEnv(t, envOptions{delay: time.Hour, noHTTP: true, api: api.Options{Auth: &ts,
		RateLimits: &api.RateLimits{PerRole: perRole, Now: clock.Now, Observer: counts}}})
	return e, clock, counts
}

// wantLimited checks a 429: the API's error body and a Retry-After of
// whole seconds.
func wantLimited(t *testing.T, r response, retryAfter string) {
	t.Helper()
	wantError(t, r, http.StatusTooManyRequests, "rate_limited", "")
	if got := r.header.Get("Retry-After"); got != retryAfter {
		t.Fatalf("Retry-After = %q, want %q", got, retryAfter)
	}
}

func TestRateLimit_PerToken(t *testing.T) {
	// A reader may make 2 requests a second, so bursts of 4; operators
	// are not limited.
	e, clock, counts := limitEnv(t, map[auth.Role]float64{auth.RoleReader: 2, auth.RoleService: 0.5})
	get := func(tok string) response {
		return e.do(t, http.MethodGet, "/v1/refunds?state=UNKNOWN", "", bearer(tok)...)
	}
	for i := range 4 {
		if r := get(tokReader); r.status != http.StatusOK {
			t.Fatalf("request %d of the burst: %s", i+1, r)
		}
	}
	wantLimited(t, get(tokReader), "1") // the next token comes in 0.5s
	// A second token of another reader has its own budget; operators have
	// none.
	for i := range 4 {
		if r := get(tokReader + "-2"); r.status != http.StatusOK {
			t.Fatalf("other reader, request %d: %s", i+1, r)
		}
	}
	for i := range 50 {
		if r := get(tokOperator); r.status != http.StatusOK {
			t.Fatalf("operator, request %d: %s", i+1, r)
		}
	}
	// A bad token is a 401 however often it comes: nothing to count.
	for range 10 {
		wantError(t, get("not-a-token-0000000000000"), http.StatusUnauthorized, "unauthenticated", "")
	}
	// Time passes: one more request a half second.
	clock.Add(500 * time.Millisecond)
	if r := get(tokReader); r.status != http.StatusOK {
		t.Fatalf("after 0.5s: %s", r)
	}
	wantLimited(t, get(tokReader), "1")
	clock.Add(2 * time.Second)
	for i := range 4 {
		if r := get(tokReader); r.status != http.StatusOK {
			t.Fatalf("after 2s, request %d: %s", i+1, r)
		}
	}
	// A slow role: 0.5 a second, a burst of 1, then a 2s wait.
	reg := registerBody("r2", 1000)
	if r := e.do(t, http.MethodPost, "/v1/reservations", reg, bearer(tokService)...); r.status != http.StatusCreated {
		t.Fatalf("service: %s", r)
	}
	wantLimited(t, e.do(t, http.MethodPost, "/v1/reservations", reg, bearer(tokService)...), "2")
	if got := counts.get("token/reader"); got != 2 {
		t.Fatalf("refused readers counted %d, want 2", got)
	}
	if got := counts.get("token/service"); got != 1 {
		t.Fatalf("refused services counted %d, want 1", got)
	}
}

// TestRateLimit_RefusedChangesNothing: a refund request refused for its
// rate journals nothing; the same request later creates the refund.
func TestRateLimit_RefusedChangesNothing(t *testing.T) {
	e, clock, _ := limitEnv(t, map[auth.Role]float64{auth.RoleService: 1})
	if r := e.do(t, http.MethodPost, "/v1/reservations", registerBody("r1", 10000), bearer(tokService)...); r.status != http.StatusCreated {
		t.Fatalf("register: %s", r)
	}
	refund := func() response {
		return e.do(t, http.MethodPost, "/v1/reservations/r1/refunds", `{"user_id":"u-r1","amount":100}`,
			append(bearer(tokService), "Idempotency-Key", "k1")...)
	}
	if r := refund(); r.status != http.StatusAccepted {
		t.Fatalf("first refund: %s", r)
	}
	refund2 := e.do(t, http.MethodPost, "/v1/reservations/r1/refunds", `{"user_id":"u-r1","amount":100}`,
		append(bearer(tokService), "Idempotency-Key", "k2")...)
	wantLimited(t, refund2, "1")
	if st, err := e.engine.Get(t.Context(), "r1"); err != nil || len(st.Refunds) != 1 {
		t.Fatalf("after a refused request: %v refunds, %v", len(st.Refunds), err)
	}
	clock.Add(time.Second)
	if r := e.do(t, http.MethodPost, "/v1/reservations/r1/refunds", `{"user_id":"u-r1","amount":100}`,
		append(bearer(tokService), "Idempotency-Key", "k2")...); r.status != http.StatusAccepted {
		t.Fatalf("after the wait: %s", r)
	}
}

// TestRateLimit_NotifyPerAddress: the public notification endpoint is
// bounded per source address, before any verification: one address's
// flood is refused 429 while another address's notifications go on to be
// verified (and refused there, being unsigned).
func TestRateLimit_NotifyPerAddress(t *testing.T) {
	clock := &limitClock{t: time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)}
	counts := &limitCounts{}
	var ts auth.Tokens
	if err := auth.ParseEnv("service:"+tokService, &ts); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{delay: time.Hour, noHTTP: true})
	s := api.New(e.engine, api.Options{Logger: quietLogger(), Auth: &ts,
		Notify: &api.NotifyConfig{Accounts: []api.NotifyAccount{{Name: "default", MchID: "1900000001",
			Verifier: &wechatpay.Verifier{}, APIv3Key: []byte("0123456789abcdef0123456789abcdef")}}},
		RateLimits: &api.RateLimits{Notify: 5, PerRole: map[auth.Role]float64{auth.RoleService: 1}, Now: clock.Now, Observer: counts}})
	post := func(addr string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/notify/wechatpay/refund", strings.NewReader(`{"id":"x"}`))
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	for i := range 10 { // a burst of two seconds' worth
		if rec := post("203.0.113.7:4000"); rec.Code == http.StatusTooManyRequests {
			t.Fatalf("notification %d of the burst refused", i+1)
		}
	}
	rec := post("203.0.113.7:4001") // another port, the same address
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), `"code":"rate_limited"`) {
		t.Fatalf("past the bound: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if rec := post("198.51.100.1:4000"); rec.Code == http.StatusTooManyRequests {
		t.Fatal("another address refused")
	}
	clock.Add(time.Second)
	for i := range 5 {
		if rec := post("203.0.113.7:4000"); rec.Code == http.StatusTooManyRequests {
			t.Fatalf("a second later, notification %d refused", i+1)
		}
	}
	if rec := post("203.0.113.7:4000"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a second later, the sixth: %d", rec.Code)
	}
	if got := counts.get("notify/"); got != 2 {
		t.Fatalf("refused notifications counted %d, want 2", got)
	}
	// The authenticated routes are not bounded by address: a token's
	// requests from the flooding address count against the token.
	req := httptest.NewRequest(http.MethodGet, "/v1/refunds?state=UNKNOWN", nil)
	req.RemoteAddr = "203.0.113.7:4000"
	req.Header.Set("Authorization", "Bearer "+tokService)
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("token request from the flooding address: %d %s", rec.Code, rec.Body)
	}
}

// TestRateLimit_Off: without RateLimits, or at 0, nothing is refused.
func TestRateLimit_Off(t *testing.T) {
	e, _, counts := limitEnv(t, map[auth.Role]float64{auth.RoleReader: 0})
	for i := range 100 {
		if r := e.do(t, http.MethodGet, "/v1/refunds?state=UNKNOWN", "", bearer(tokReader)...); r.status != http.StatusOK {
			t.Fatalf("request %d: %s", i+1, r)
		}
	}
	if counts.get("token/reader") != 0 {
		t.Fatal("counted a refusal")
	}
}
