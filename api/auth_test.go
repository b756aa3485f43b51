package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
)

const (
	tokService  = "service-token-000000000001"
	tokReader   = "reader-token-0000000000001"
	tokAuditor  = "auditor-token-000000000001"
	tokOperator = "operator-token-00000000001"
)

func authEnv(t *testing.T) *testEnv {
	var ts auth.Tokens
	if err := auth.ParseEnv("service:"+tokService+",reader:"+tokReader+",auditor:"+tokAuditor+",operator:"+tokOperator, &ts); err != nil {
		t.Fatal(err)
	}
	return newEnv(t, envOptions{delay: 3600e9, api: api.Options{Auth: &ts}})
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func TestAuth_TokensAndRoles(t *testing.T) {
	e := authEnv(t)
	reg := registerBody("a1", 1000)
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations", reg), http.StatusUnauthorized, "unauthenticated", "")
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations", reg, bearer("wrong-token-00000000000")...), http.StatusUnauthorized, "unauthenticated", "")
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations", reg, "Authorization", "Basic "+tokService), http.StatusUnauthorized, "unauthenticated", "")
	for _, tok := range []string{tokReader, tokAuditor, tokOperator} {
		wantError(t, e.do(t, http.MethodPost, "/v1/reservations", reg, bearer(tok)...), http.StatusForbidden, "forbidden", "")
	}
	if r := e.do(t, http.MethodPost, "/v1/reservations", reg, bearer(tokService)...); r.status != http.StatusCreated {
		t.Fatalf("service registers: %d %s", r.status, r.body)
	}
	// Nothing refused was journaled: the reservation exists once, registered by the service.
	for _, tok := range []string{tokService, tokReader, tokAuditor, tokOperator} {
		if r := e.do(t, http.MethodGet, "/v1/reservations/a1", "", bearer(tok)...); r.status != http.StatusOK {
			t.Fatalf("read with %s: %d", tok, r.status)
		}
	}
	st, err := e.engine.Get(t.Context(), "a1")
	if err != nil || st.RegisteredBy != "service:service-1" {
		t.Fatalf("registered by %q (%v), want the service principal", st.RegisteredBy, err)
	}
	refund := `{"user_id":"u-a1","amount":100}`
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations/a1/refunds", refund, append(bearer(tokOperator), "Idempotency-Key", "k")...), http.StatusForbidden, "forbidden", "")
	r := e.do(t, http.MethodPost, "/v1/reservations/a1/refunds", refund, append(bearer(tokService), "Idempotency-Key", "k")...)
	rf := decodeRefund(t, r, http.StatusAccepted)
	recon := "/v1/reservations/a1/refunds/" + rf.RefundNo + "/reconcile"
	wantError(t, e.do(t, http.MethodPost, recon, "", bearer(tokService)...), http.StatusForbidden, "forbidden", "")
	wantError(t, e.do(t, http.MethodPost, recon, "", bearer(tokAuditor)...), http.StatusForbidden, "forbidden", "")
	if r := e.do(t, http.MethodPost, recon, "", bearer(tokOperator)...); r.status != http.StatusOK {
		t.Fatalf("operator reconcile: %d %s", r.status, r.body)
	}
	// Health stays open.
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := e.do(t, http.MethodGet, p, ""); r.status != http.StatusOK {
			t.Fatalf("%s without a token: %d", p, r.status)
		}
	}
	if r := e.do(t, http.MethodGet, "/v1/reservations/a1", ""); r.header.Get("WWW-Authenticate") == "" {
		t.Fatal("401 without WWW-Authenticate")
	}
}

// Every route the server registers is either in the permission table or
// deliberately public: a route cannot be exposed by forgetting it.
func TestAuth_EveryRouteIsClassified(t *testing.T) {
	e := authEnv(t)
	err := e.handler.(*api.Server).Router().Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return nil
		}
		methods, _ := route.GetMethods()
		for _, m := range methods {
			r := e.do(t, m, strings.NewReplacer("{id}", "x", "{refund_no}", "x", "{endpoint}", "x", "{event_id}", "x").Replace(tpl), "", bearer(tokOperator)...)
			if r.status == http.StatusForbidden && strings.Contains(string(r.body), "no role may do this") {
				t.Errorf("%s %s is refused to everyone: missing from the permission table", m, tpl)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
