package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/refundd/refundd/api/console"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

func rejectSubmissions(op, _ string, _ int) (simprovider.Injected, bool) {
	if op == "submit" {
		return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "NOT_ENOUGH", Message: "balance"}}, true
	}
	return simprovider.Injected{}, false
}

func TestConsole_FilesAndHeaders(t *testing.T) {
	e := newOpsEnv(t, opsOptions{tokens: "operator:" + tokOperator}) // the files are open even with tokens
	for _, tc := range []struct {
		method, path, ctype, contains string
	}{
		{http.MethodGet, "/console/", "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{http.MethodGet, "/console/app.js", "text/javascript; charset=utf-8", "textContent"},
		{http.MethodGet, "/console/app.css", "text/css; charset=utf-8", ".state"},
		{http.MethodGet, "/console/favicon.svg", "image/svg+xml", "<svg"},
		{http.MethodHead, "/console/", "text/html; charset=utf-8", ""},
	} {
		r := e.do(t, tc.method, tc.path, "")
		if r.status != http.StatusOK || r.header.Get("Content-Type") != tc.ctype || !strings.Contains(string(r.body), tc.contains) {
			t.Fatalf("%s %s: %d %q %.80q", tc.method, tc.path, r.status, r.header.Get("Content-Type"), r.body)
		}
		for h, want := range map[string]string{
			"Content-Security-Policy": console.ContentSecurityPolicy, "X-Content-Type-Options": "nosniff",
			"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
		} {
			if got := r.header.Get(h); got != want {
				t.Fatalf("%s: %s = %q, want %q", tc.path, h, got, want)
			}
		}
	}
	for _, p := range []string{"/console/missing.js", "/console/x/", "/console/.%2e/openapi.json", "/console//app.js", "/console/app.js/"} {
		if r := e.do(t, http.MethodGet, p, ""); r.status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, r.status)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/console", nil)
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/console/" {
		t.Fatalf("GET /console: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	// Data needs the token: the console has no side door.
	if r := e.do(t, http.MethodGet, "/v1/summary", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("summary without a token: %d", r.status)
	}
	if r := e.do(t, http.MethodGet, "/v1/summary", "", bearer(tokOperator)...); r.status != http.StatusOK {
		t.Fatalf("summary with a token: %d %s", r.status, r.body)
	}
}

// The CSP is strict: nothing inline, nothing foreign, no HTML sinks.
func TestConsole_PolicyIsStrict(t *testing.T) {
	csp := console.ContentSecurityPolicy
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
		"frame-ancestors 'none'", "require-trusted-types-for 'script'", "trusted-types 'none'", "form-action 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
	for _, banned := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*", "data:"} {
		if strings.Contains(csp, banned) {
			t.Errorf("CSP allows %q", banned)
		}
	}
}

// The console's files never use an HTML string sink or inline code, and
// load nothing from elsewhere (it works offline).
func TestConsole_NoHTMLSinksOrForeignResources(t *testing.T) {
	e := newOpsEnv(t, opsOptions{})
	files := map[string]string{}
	for _, name := range []string{"index.html", "app.js", "app.css"} {
		files[name] = string(e.do(t, http.MethodGet, "/console/"+name, "").body)
		if name == "index.html" {
			files[name] = string(e.do(t, http.MethodGet, "/console/", "").body)
		}
	}
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setTimeout\(\s*['"]|srcdoc|createContextualFragment`)
	if m := sinks.FindString(files["app.js"]); m != "" {
		t.Errorf("app.js uses %s", m)
	}
	if m := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>[^<\s]|\son[a-z]+=|\sstyle=|javascript:`).FindString(files["index.html"]); m != "" {
		t.Errorf("index.html has inline code or style: %q", m)
	}
	for name, body := range files {
		if m := regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}`).FindString(body); m != "" {
			t.Errorf("%s refers to another origin: %q", name, m)
		}
	}
}

func TestSummary_Counts(t *testing.T) {
	e := newOpsEnv(t, opsOptions{fault: rejectSubmissions})
	for _, id := range []string{"s1", "s2"} {
		e.register(t, id, 1000)
		rf := decodeRefund(t, e.refund(t, id, "k", `{"user_id":"u-`+id+`"}`), http.StatusAccepted)
		waitFor(t, "REJECTED", func() bool { return e.refundState(t, id, rf.RefundNo) == "REJECTED" })
	}
	r := e.do(t, http.MethodGet, "/v1/summary", "")
	var s struct {
		Attention map[string]struct {
			Count int  `json:"count"`
			More  bool `json:"more"`
		} `json:"attention"`
		Active        *int            `json:"active_actors"`
		Notifications map[string]int  `json:"notifications"`
		Webhooks      json.RawMessage `json:"webhooks"`
	}
	if err := json.Unmarshal(r.body, &s); err != nil || r.status != http.StatusOK {
		t.Fatalf("%d %s %v", r.status, r.body, err)
	}
	if s.Attention["REJECTED"].Count != 2 || s.Attention["UNKNOWN"].Count != 0 || s.Attention["stuck"].Count != 0 || s.Attention["REJECTED"].More {
		t.Fatalf("attention %+v", s.Attention)
	}
	if s.Active == nil || *s.Active != 2 {
		t.Fatalf("active actors %v", s.Active)
	}
	if s.Notifications != nil || s.Webhooks != nil {
		t.Fatalf("parts the server does not have must be absent: %s", r.body)
	}
}

func TestTimeline_ListsTheJournal(t *testing.T) {
	e := newOpsEnv(t, opsOptions{})
	e.register(t, "t1", 1000)
	rf := decodeRefund(t, e.refund(t, "t1", "k", `{"user_id":"u-t1","amount":300,"reason":"<b>late</b>"}`), http.StatusAccepted)
	waitFor(t, "SUCCEEDED", func() bool { return e.refundState(t, "t1", rf.RefundNo) == "SUCCEEDED" })
	r := e.do(t, http.MethodGet, "/v1/reservations/t1/events", "")
	var tl struct {
		ReservationID string `json:"reservation_id"`
		Events        []struct {
			Seq      int                        `json:"seq"`
			Type     string                     `json:"type"`
			By       string                     `json:"by"`
			RefundNo string                     `json:"refund_no"`
			Data     map[string]json.RawMessage `json:"data"`
		} `json:"events"`
	}
	if err := json.Unmarshal(r.body, &tl); err != nil || r.status != http.StatusOK {
		t.Fatalf("%d %s %v", r.status, r.body, err)
	}
	var types []string
	for i, ev := range tl.Events {
		types = append(types, ev.Type)
		if ev.Seq != i+1 || ev.By == "" {
			t.Fatalf("event %d: %+v", i, ev)
		}
		if _, ok := ev.Data["request"]; ok {
			t.Fatalf("provider request bytes shown: %s", r.body)
		}
		if ev.Type == reservation.TypeSubmissionStarted && (string(ev.Data["request_bytes"]) == "0" || ev.RefundNo != rf.RefundNo) {
			t.Fatalf("submission: %+v", ev)
		}
	}
	want := []string{reservation.TypeRegistered, reservation.TypeRefundRequested, reservation.TypeSubmissionStarted, reservation.TypeProviderResult}
	if strings.Join(types, " ") != strings.Join(want, " ") || tl.ReservationID != "t1" {
		t.Fatalf("timeline %v", types)
	}
	if !strings.Contains(string(r.body), `"reason":"\u003cb\u003elate\u003c/b\u003e"`) {
		t.Fatalf("the reason is JSON-escaped text: %s", r.body)
	}
	wantError(t, e.do(t, http.MethodGet, "/v1/reservations/none/events", ""), http.StatusNotFound, "not_found", "")
	wantError(t, e.do(t, http.MethodGet, "/v1/reservations/bad%20id/events", ""), http.StatusNotFound, "not_found", "")
}

func TestMetrics_Exposition(t *testing.T) {
	e := newOpsEnv(t, opsOptions{})
	e.register(t, "x1", 1000)
	rf := decodeRefund(t, e.refund(t, "x1", "k", `{"user_id":"u-x1"}`), http.StatusAccepted)
	waitFor(t, "SUCCEEDED", func() bool { return e.refundState(t, "x1", rf.RefundNo) == "SUCCEEDED" })
	res, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("content type %q", res.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`refundd_refund_transitions_total{from="PROCESSING",merchant="default",to="SUCCEEDED"} 1`,
		`refundd_provider_calls_total{merchant="_other",op="submit",outcome="SUCCEEDED"} 1`,
		`refundd_actors_active 1`,
		`refundd_refunds_attention{kind="stuck"} 0`,
		`refundd_http_request_duration_seconds_count{code="202",method="POST",route="/v1/reservations/{id}/refunds"} 1`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
}

// The console offers only what the token's role may do: GET /v1/whoami
// says who the token is and what its role is granted, for every role.
func TestWhoami_SaysPrincipalAndPermissions(t *testing.T) {
	e := newOpsEnv(t, opsOptions{tokens: "operator:" + tokOperator + ",service:" + tokService +
		",reader:" + tokReader + ",auditor:" + tokAuditor})
	tests := []struct {
		token, role string
		perms       []string
	}{
		{tokReader, "reader", []string{"read"}},
		{tokService, "service", []string{"read", "write"}},
		{tokAuditor, "auditor", []string{"read", "audit"}},
		{tokOperator, "operator", []string{"read", "audit", "operate"}},
	}
	for _, tc := range tests {
		t.Run(tc.role, func(t *testing.T) {
			r := e.do(t, http.MethodGet, "/v1/whoami", "", bearer(tc.token)...)
			if r.status != http.StatusOK {
				t.Fatalf("whoami: %d %s", r.status, r.body)
			}
			var got struct {
				Principal   string   `json:"principal"`
				Role        string   `json:"role"`
				Merchants   []string `json:"merchants"`
				Permissions []string `json:"permissions"`
			}
			if err := json.Unmarshal(r.body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Role != tc.role || !strings.HasPrefix(got.Principal, tc.role+":") || !slices.Equal(got.Permissions, tc.perms) || got.Merchants == nil {
				t.Fatalf("whoami as %s: %+v, want role %s, permissions %v", tc.role, got, tc.role, tc.perms)
			}
		})
	}
	if r := e.do(t, http.MethodGet, "/v1/whoami", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("whoami without a token: %d, want 401", r.status)
	}
}

// The console offers, for an abnormal refund paid to the user's card, the
// bank types the API accepts: app.js's BANK_TYPES are exactly those.
func TestConsole_BankTypesAreTheAPIs(t *testing.T) {
	e := newOpsEnv(t, opsOptions{})
	js := string(e.do(t, http.MethodGet, "/console/app.js", "").body)
	m := regexp.MustCompile(`(?s)const BANK_TYPES = \[(.*?)\];`).FindStringSubmatch(js)
	if m == nil {
		t.Fatal("app.js has no BANK_TYPES list")
	}
	var got []string
	for _, q := range regexp.MustCompile(`'([A-Z_]+)'`).FindAllStringSubmatch(m[1], -1) {
		got = append(got, q[1])
	}
	if want := reservation.BankTypes(); !slices.Equal(got, want) {
		t.Fatalf("app.js offers bank types %v, the API accepts %v", got, want)
	}
}
