package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/journal"
)

// TestAdminCredentials: operators only, and the view is what the wiring
// reports (no key material is in the type to leak).
func TestAdminCredentials(t *testing.T) {
	var ts auth.Tokens
	tokens := map[auth.Role]string{}
	for _, r := range auth.Roles() {
		tok := "token-for-" + string(r) + "-0123456789"
		if err := ts.Add(r, "t", tok); err != nil {
			t.Fatal(err)
		}
		tokens[r] = tok
	}
	view := api.CredentialsView{Accounts: []api.AccountCredentials{{Account: "default", MchID: "1900000100",
		MerchantSerial: "ABC", APIv3Key: true,
		Keys:     []api.CredentialKey{{Serial: "PUB_KEY_ID_01", Kind: api.KeyKindPublicKey, Source: api.KeySourceFile}},
		Download: &api.CertificateDownloadView{Refresh: "1h0m0s", Failures: 2, ConsecutiveFailures: 2, LastError: "no route"}}}}
	e := newAuditEnv(t, &journal.Options{NoSync: true}, nil, api.Options{Auth: &ts, Credentials: func() api.CredentialsView { return view }})
	for _, tt := range []struct {
		role auth.Role
		want int
	}{
		{auth.RoleService, http.StatusForbidden}, {auth.RoleReader, http.StatusForbidden},
		{auth.RoleAuditor, http.StatusForbidden}, {auth.RoleOperator, http.StatusOK}, {"", http.StatusUnauthorized},
	} {
		resp, b := e.get(t, "/v1/admin/credentials", tokens[tt.role])
		if resp.StatusCode != tt.want {
			t.Errorf("%q: %d %s, want %d", tt.role, resp.StatusCode, b, tt.want)
			continue
		}
		if tt.want != http.StatusOK {
			continue
		}
		var got api.CredentialsView
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Accounts) != 1 || got.Accounts[0].Download.ConsecutiveFailures != 2 || got.Accounts[0].Keys[0].Serial != "PUB_KEY_ID_01" {
			t.Fatalf("view %s", b)
		}
		if strings.Contains(string(b), "not_after") {
			t.Fatalf("a public key has no dates: %s", b)
		}
	}
	// Without a source the route answers no accounts, not an error.
	e2 := newAuditEnv(t, &journal.Options{NoSync: true}, nil, api.Options{Auth: &ts})
	if resp, b := e2.get(t, "/v1/admin/credentials", tokens[auth.RoleOperator]); resp.StatusCode != 200 || !strings.Contains(string(b), `"accounts":[]`) {
		t.Fatalf("no source: %d %s", resp.StatusCode, b)
	}
}

// TestReloadCredentials: operators only; a reload's refusal is answered
// with its code and message (the wiring's, naming the file), success with
// the credentials then held.
func TestReloadCredentials(t *testing.T) {
	var ts auth.Tokens
	for _, r := range []auth.Role{auth.RoleOperator, auth.RoleService} {
		if err := ts.Add(r, "t", "token-for-"+string(r)+"-0123456789"); err != nil {
			t.Fatal(err)
		}
	}
	var next error
	calls := 0
	view := api.CredentialsView{Accounts: []api.AccountCredentials{{Account: "default", MchID: "1900000100", MerchantSerial: "NEW",
		Keys: []api.CredentialKey{}}}}
	e := newAuditEnv(t, &journal.Options{NoSync: true}, nil, api.Options{Auth: &ts, Credentials: func() api.CredentialsView { return view },
		ReloadCredentials: func(context.Context) error { calls++; return next }})
	post := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/admin/credentials/reload", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post("token-for-service-0123456789"); code != http.StatusForbidden || calls != 0 {
		t.Fatalf("service token: %d, %d reloads", code, calls)
	}
	for _, tt := range []struct {
		err      error
		code     int
		contains string
	}{
		{nil, http.StatusOK, `"merchant_serial":"NEW"`},
		{fmt.Errorf("%w: --wechatpay-private-key /k/key.pem: no PEM block", api.ErrCredentialsInvalid), http.StatusBadRequest,
			`"code":"credentials_invalid","message":"credentials not reloaded: --wechatpay-private-key /k/key.pem: no PEM block"`},
		{fmt.Errorf("%w: account \"shop\": mchid changed", api.ErrRestartRequired), http.StatusConflict, `"code":"restart_required"`},
	} {
		next = tt.err
		if code, body := post("token-for-operator-0123456789"); code != tt.code || !strings.Contains(body, tt.contains) {
			t.Errorf("%v: %d %s, want %d with %s", tt.err, code, body, tt.code, tt.contains)
		}
	}
	e2 := newAuditEnv(t, &journal.Options{NoSync: true}, nil, api.Options{Auth: &ts})
	req, _ := http.NewRequest(http.MethodPost, e2.srv.URL+"/v1/admin/credentials/reload", nil)
	req.Header.Set("Authorization", "Bearer token-for-operator-0123456789")
	resp, err := e2.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("no reload source: %d", resp.StatusCode)
	}
}
