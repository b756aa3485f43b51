package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/audit/audittest"
	"github.com/refundd/refundd/internal/auth"
)

// TestCredentials: refundctl credentials shows what the API's credentials
// route answers, and exits 1 exactly when an account must act; credentials
// reload reports a refused reload without touching anything.
func TestCredentials(t *testing.T) {
	const opToken, readerToken = "operator-token-0123456789", "reader-token-0123456789ab"
	var tokens auth.Tokens
	if err := tokens.Add(auth.RoleOperator, "alice", opToken); err != nil {
		t.Fatal(err)
	}
	if err := tokens.Add(auth.RoleReader, "bob", readerToken); err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	at := func(d time.Duration) *time.Time { v := time.Now().Add(d).UTC().Truncate(time.Second); return &v }
	cert := func(serial string, left time.Duration) api.CredentialKey {
		return api.CredentialKey{Serial: serial, Kind: api.KeyKindCertificate, Source: api.KeySourceDownload,
			NotBefore: at(-day), NotAfter: at(left)}
	}
	pub := api.CredentialKey{Serial: "PUB_KEY_ID_0114232134912410000000000012345678", Kind: api.KeyKindPublicKey, Source: api.KeySourceFile}
	var view atomic.Pointer[api.CredentialsView]
	var reloadErr atomic.Pointer[error]
	w := audittest.New(t, audittest.Options{Prefix: "R"})
	srv := httptest.NewServer(api.New(w.Engine, api.Options{Logger: slog.New(slog.DiscardHandler), Auth: &tokens,
		Credentials: func() api.CredentialsView { return *view.Load() },
		ReloadCredentials: func(context.Context) error {
			if e := reloadErr.Load(); e != nil {
				return *e
			}
			return nil
		}}))
	t.Cleanup(srv.Close)
	show := func(args ...string) result {
		return ctl(t, append([]string{"credentials", "--server", srv.URL, "--token", opToken}, args...)...)
	}

	healthy := api.CredentialsView{Accounts: []api.AccountCredentials{
		{Account: "brand-a", MchID: "1900000100", MerchantSerial: "3775B6A45ACD588826D15E583A95F5DD", APIv3Key: true,
			Keys:     []api.CredentialKey{cert("5157F09E", 200*day)},
			Download: &api.CertificateDownloadView{Refresh: "12h0m0s", Downloads: 3, LastSuccess: time.Now().UTC()}},
		{Account: "platform", MchID: "1900000200", APIv3Key: true, APIv2Key: true, Keys: []api.CredentialKey{cert("A1", 5*day), pub}},
	}}
	view.Store(&healthy)
	r := show()
	if r.code != 0 {
		t.Fatalf("healthy credentials: %v", r)
	}
	for _, want := range []string{"account brand-a  mchid 1900000100", "APIv3 key loaded  APIv2 key none",
		"5157F09E", "from download", "199 days left", "downloads every 12h0m0s: 3 ok, 0 failed (0 in a row)",
		"account platform  mchid 1900000200", "public_key", "PUB_KEY_ID_0114232134912410000000000012345678"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if got := decode[api.CredentialsView](t, show("--json")); len(got.Accounts) != 2 || got.Accounts[0].Keys[0].Serial != "5157F09E" {
		t.Fatalf("--json: %+v", got)
	}

	for _, tc := range []struct {
		name string
		edit func(*api.CredentialsView)
		want string // in stderr; "" means exit 0
	}{
		{"certificate within 30 days, no public key", func(v *api.CredentialsView) {
			v.Accounts[0].Keys = []api.CredentialKey{cert("5157F09E", 20*day)}
		}, "account brand-a (mchid 1900000100): its last platform certificate expires within 30 days"},
		{"old certificate expiring beside its successor", func(v *api.CredentialsView) {
			v.Accounts[0].Keys = []api.CredentialKey{cert("5157F09E", 20*day), cert("6A2B", 190*day)}
		}, ""},
		{"downloads failing", func(v *api.CredentialsView) {
			d := *v.Accounts[0].Download
			d.ConsecutiveFailures, d.Failures, d.LastError = 2, 2, "download: 401 SIGN_ERROR"
			v.Accounts[0].Download = &d
		}, "the last 2 certificate downloads failed: download: 401 SIGN_ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := healthy
			v.Accounts = append([]api.AccountCredentials(nil), healthy.Accounts...)
			tc.edit(&v)
			view.Store(&v)
			defer view.Store(&healthy)
			r := show()
			switch {
			case tc.want == "" && r.code != 0:
				t.Fatalf("want exit 0: %v", r)
			case tc.want != "" && (r.code != 1 || !strings.Contains(r.stderr, tc.want)):
				t.Fatalf("want exit 1 naming %q: %v", tc.want, r)
			}
		})
	}

	if r := ctl(t, "credentials", "--server", srv.URL, "--token", readerToken); r.code != 3 || !strings.Contains(r.stderr, "403") {
		t.Fatalf("a reader's token: %v, want exit 3 with the 403", r)
	}
	if r := ctl(t, "credentials"); r.code != 2 || !strings.Contains(r.stderr, "--server is required") {
		t.Fatalf("without --server: %v", r)
	}

	if r := ctl(t, "credentials", "reload", "--server", srv.URL, "--token", opToken); r.code != 0 || !strings.Contains(r.stdout, "account brand-a") {
		t.Fatalf("reload: %v", r)
	}
	bad := fmt.Errorf("%w: account brand-a: key_file /etc/refundd/a.pem: no PEM block", api.ErrCredentialsInvalid)
	reloadErr.Store(&bad)
	r = ctl(t, "credentials", "reload", "--server", srv.URL, "--token", opToken)
	if r.code != 1 || !strings.Contains(r.stderr, "refused, the running credentials stay") || !strings.Contains(r.stderr, "no PEM block") {
		t.Fatalf("a refused reload: %v", r)
	}
}
