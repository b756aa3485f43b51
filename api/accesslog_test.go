package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/logs/logstest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

// accessEnv is an authenticating API, served synchronously (its access
// line is written before do returns), logging to rec.
func accessEnv(t *testing.T, noAccessLog bool) (*testEnv, *logstest.Recorder) {
	t.Helper()
	var ts auth.Tokens
	if err := auth.ParseEnv("service:"+tokService+",reader:"+tokReader, &ts); err != nil {
		t.Fatal(err)
	}
	log, rec := logstest.New(t)
	e := newEnv(t, envOptions{delay: time.Hour, noHTTP: true, api: api.Options{Auth: &ts, Logger: log, NoAccessLog: noAccessLog,
		Notify: &api.NotifyConfig{Accounts: []api.NotifyAccount{{Name: "default", MchID: "1900000109"}}}}})
	return e, rec
}

func TestAccessLog_OneLinePerRequest(t *testing.T) {
	e, rec := accessEnv(t, false)
	for _, tc := range []struct {
		name                 string
		method, path, body   string
		hdr                  []string
		route, principal, id string // id "" wants a generated one
		status               int
	}{
		{name: "register", method: http.MethodPost, path: "/v1/reservations", body: registerBody("a1", 1000),
			hdr: append(bearer(tokService), api.HeaderRequestID, "gateway-id-0001"), id: "gateway-id-0001",
			route: "/v1/reservations", principal: "service:service-1", status: http.StatusCreated},
		{name: "route template, not the path", method: http.MethodGet, path: "/v1/reservations/a1/refunds/no-such",
			hdr: bearer(tokReader), route: "/v1/reservations/{id}/refunds/{refund_no}", principal: "reader:reader-2", status: http.StatusNotFound},
		{name: "forged request id replaced", method: http.MethodGet, path: "/v1/reservations/a1",
			hdr: append(bearer(tokReader), api.HeaderRequestID, "bad id\nlevel=ERROR"), route: "/v1/reservations/{id}",
			principal: "reader:reader-2", status: http.StatusOK},
		{name: "no token: no principal", method: http.MethodGet, path: "/v1/reservations/a1",
			route: "/v1/reservations/{id}", status: http.StatusUnauthorized},
		{name: "no route", method: http.MethodGet, path: "/v1/nowhere", hdr: bearer(tokReader), status: http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.Match(t, "INFO", "request"))
			r := e.do(t, tc.method, tc.path, tc.body, tc.hdr...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			lines := rec.Match(t, "INFO", "request")[before:]
			if len(lines) != 1 {
				t.Fatalf("%d access lines, want 1: %v", len(lines), lines)
			}
			l := lines[0]
			want := map[string]any{"method": tc.method, "route": tc.route, "status": float64(tc.status),
				"request_id": r.header.Get(api.HeaderRequestID), "mchid": "1900000109"}
			if tc.principal != "" {
				want["principal"] = tc.principal
			}
			for k, v := range want {
				if l[k] != v {
					t.Errorf("%s = %v, want %v: %v", k, l[k], v, l)
				}
			}
			if _, ok := l["principal"]; ok && tc.principal == "" {
				t.Errorf("a principal logged for an unauthenticated request: %v", l)
			}
			if tc.id != "" && l.Str("request_id") != tc.id {
				t.Errorf("request_id %q, want the gateway's %q", l.Str("request_id"), tc.id)
			}
			if d, err := time.ParseDuration(l.Str("duration")); err != nil || d < 0 {
				t.Errorf("duration %v is not a duration string: %v", l["duration"], err)
			}
		})
	}
	out := rec.String()
	for _, secret := range []string{tokService, tokReader, "u-a1", "ORD-a1", "no-such", "bad id"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q logged: %s", secret, out)
		}
	}
}

func TestAccessLog_Off(t *testing.T) {
	e, rec := accessEnv(t, true)
	if r := e.do(t, http.MethodGet, "/v1/reservations/a1", "", bearer(tokReader)...); r.status != http.StatusNotFound {
		t.Fatalf("status %d", r.status)
	}
	if lines := rec.Match(t, "INFO", "request"); len(lines) != 0 {
		t.Fatalf("access lines with NoAccessLog: %v", lines)
	}
}

// TestAccessLog_OperatorActionSharesTheRequestID: the engine's line about
// an operator's action carries the id of the request that asked for it, as
// the access line does.
func TestAccessLog_OperatorActionSharesTheRequestID(t *testing.T) {
	var ts auth.Tokens
	if err := auth.ParseEnv("service:"+tokService+",operator:"+tokOperator, &ts); err != nil {
		t.Fatal(err)
	}
	log, rec := logstest.New(t)
	abnormal := func(op, _ string, _ int) (simprovider.Injected, bool) {
		return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeAbnormal, Code: "USER_ACCOUNT_ABNORMAL"}}, op == "submit"
	}
	e := newEnv(t, envOptions{fault: abnormal, noHTTP: true, engineLog: log, api: api.Options{Auth: &ts, Logger: log}})
	if r := e.do(t, http.MethodPost, "/v1/reservations", registerBody("r1", 10000), bearer(tokService)...); r.status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	rf := decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/r1/refunds", `{"user_id":"u-r1"}`,
		append(bearer(tokService), "Idempotency-Key", "k1")...), http.StatusAccepted)
	state := func() reservation.RefundState {
		st, err := e.engine.Get(t.Context(), "r1")
		if err != nil {
			t.Fatal(err)
		}
		return st.Refund(rf.RefundNo).State
	}
	waitFor(t, "ABNORMAL", func() bool { return state() == reservation.Abnormal })
	r := e.do(t, http.MethodPost, "/v1/reservations/r1/refunds/"+rf.RefundNo+"/resolve", `{"reason":"paid by hand"}`,
		append(bearer(tokOperator), api.HeaderRequestID, "op-request-0001")...)
	if r.status != http.StatusOK {
		t.Fatalf("resolve: %d %s", r.status, r.body)
	}
	state() // the actor logs after replying: this read comes after
	var access []logstest.Line
	for _, l := range rec.Match(t, "INFO", "request") {
		if l.Str("request_id") == "op-request-0001" {
			access = append(access, l)
		}
	}
	actions := rec.Match(t, "INFO", "operator action")
	if len(access) != 1 || len(actions) != 1 {
		t.Fatalf("%d access and %d operator lines, want 1 each:\n%s", len(access), len(actions), rec.String())
	}
	const principal = "operator:operator-2"
	if a := actions[0]; a.Str("request_id") != "op-request-0001" || a.Str("principal") != principal ||
		a.Str("action") != "resolve" || a.Str("reservation") != "r1" || a.Str("refund_no") != rf.RefundNo {
		t.Errorf("operator line %v", a)
	}
	if p := access[0].Str("principal"); p != principal {
		t.Errorf("access line principal %q, want %q", p, principal)
	}
}
