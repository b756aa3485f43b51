package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
	"github.com/refundd/refundd/journal"
)

// writeMerchantsFile writes a merchants file of one direct account and one
// service provider with two sub-merchants, with real (sandbox-generated)
// keys; keyFile names the direct account's private key file, so a test can
// point it elsewhere.
func writeMerchantsFile(t *testing.T, dir string, keyFile func(real string) string) string {
	path, _ := merchantsFixture(t, dir, "http://127.0.0.1:1", keyFile)
	return path
}

// merchantsFixture is writeMerchantsFile for WeChat Pay at baseURL; it
// returns the accounts' keys by mchid, for a sandbox.NewMulti.
func merchantsFixture(t *testing.T, dir, baseURL string, keyFile func(real string) string) (string, map[string]sandbox.Keys) {
	t.Helper()
	var b strings.Builder
	all := map[string]sandbox.Keys{}
	for _, a := range []struct{ name, kind, mchid string }{{"shop", "direct", "1900000101"}, {"sp", "service_provider", "1900000200"}} {
		keys, err := sandbox.GenerateKeys(a.mchid)
		if err != nil {
			t.Fatal(err)
		}
		all[a.mchid] = keys
		kd := filepath.Join(dir, a.name)
		if _, err := keys.WriteDir(kd, ""); err != nil {
			t.Fatal(err)
		}
		pk := filepath.Join(kd, sandbox.MerchantKeyFile)
		if a.name == "shop" && keyFile != nil {
			pk = keyFile(pk)
		}
		fmt.Fprintf(&b, "[[accounts]]\nname = %q\nkind = %q\nmchid = %q\nbase_url = %q\nserial = %q\n"+
			"private_key = %q\napiv3_key = %q\npublic_key_id = %q\npublic_key_file = %q\n\n",
			a.name, a.kind, a.mchid, baseURL, keys.MerchantSerial, "file:"+pk, "file:"+filepath.Join(kd, sandbox.APIv3KeyFile),
			keys.PublicKeyID, filepath.Join(kd, sandbox.PublicKeyFile))
	}
	b.WriteString(`[[merchants]]
name = "shop"
kind = "direct"
account = "shop"
refund_prefix = "SH"

[[merchants]]
name = "inn-1"
kind = "sub_merchant"
account = "sp"
sub_mchid = "1900000201"
refund_prefix = "IA"

[[merchants]]
name = "inn-2"
kind = "sub_merchant"
account = "sp"
sub_mchid = "1900000202"
refund_prefix = "IB"
[merchants.policy]
retry_max_attempts = 2
`)
	path := filepath.Join(dir, "merchants.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, all
}

// --merchants-file is checked, with every account's keys, before anything
// is created (Run and check-config), and the combinations that would leave
// a merchant's keys unclear are refused naming both settings.
func TestMerchantsFile_CheckedBeforeStart(t *testing.T) {
	dir := t.TempDir()
	good := writeMerchantsFile(t, filepath.Join(dir, "good"), nil)
	missingKey := writeMerchantsFile(t, filepath.Join(dir, "missing"), func(string) string { return filepath.Join(dir, "nope.pem") })
	garbled := filepath.Join(dir, "garbled.toml")
	if err := os.WriteFile(garbled, []byte("[[accounts]\nname = "), 0o600); err != nil {
		t.Fatal(err)
	}
	scoped := filepath.Join(dir, "tokens")
	if err := os.WriteFile(scoped, []byte("reader "+strings.Repeat("ab", 32)+" ledger merchants=inn-1,inn-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hooks := func(name, merchants string) string {
		f := filepath.Join(dir, name)
		secret := filepath.Join(dir, "hook-secret")
		line := "erp https://erp.example/hook file:" + secret + " merchants=" + merchants + "\n"
		if err := os.WriteFile(secret, []byte(strings.Repeat("s", 32)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	wx := []string{"--provider", "wechatpay", "--merchants-file", good}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		want     []string // in stderr when failing, in stdout when not
	}{
		{"good", wx, 0, []string{"configuration OK", "merchants-file"}},
		{"token limited to merchants of the file", append([]string{"--tokens-file", scoped}, wx...), 0, []string{"configuration OK"}},
		{"memory provider reads no keys", []string{"--provider", "memory", "--merchants-file", missingKey}, 0, []string{"configuration OK"}},
		{"an account's key file missing", []string{"--provider", "wechatpay", "--merchants-file", missingKey}, 1,
			[]string{"--merchants-file", `account "shop"`, "private_key"}},
		{"not TOML", []string{"--provider", "wechatpay", "--merchants-file", garbled}, 1, []string{"--merchants-file", garbled}},
		{"with a --wechatpay-* flag", append([]string{"--wechatpay-mchid", "1900000001"}, wx...), 1,
			[]string{"--merchants-file", "--wechatpay-mchid"}},
		{"with the sandbox", []string{"--provider", "sandbox", "--merchants-file", good}, 1, []string{"--merchants-file", "--provider sandbox"}},
		{"webhook endpoint subscribed to merchants of the file", append([]string{"--webhooks-file", hooks("hooks-ok", "inn-1,shop")}, wx...), 0,
			[]string{"configuration OK"}},
		{"webhook endpoint subscribed to a merchant not in the file", append([]string{"--webhooks-file", hooks("hooks-bad", "inn-1,inn-9")}, wx...), 1,
			[]string{"--webhooks-file", "erp", `"inn-9"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			var stdout, stderr bytes.Buffer
			code := checkConfig(append([]string{"--data", data}, tc.args...), func(string) string { return "" }, &stdout, &stderr)
			if code != tc.wantCode {
				t.Fatalf("exit %d; want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, stdout.String(), stderr.String())
			}
			out := stderr.String()
			if code == 0 {
				out = stdout.String()
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not name %q:\n%s", w, out)
				}
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("check-config created %s (stat: %v)", data, err)
			}
			if tc.wantCode == 0 {
				return
			}
			// Run refuses the same, creating nothing.
			m := NewMain()
			m.Stdout, m.Stderr = io.Discard, io.Discard
			if err := m.ParseFlags(append([]string{"--listen", "127.0.0.1:0", "--data", data}, tc.args...), testEnv); err != nil {
				t.Fatal(err)
			}
			err := m.Run(context.Background())
			m.Close()
			if err == nil || !strings.Contains(err.Error(), tc.want[len(tc.want)-1]) {
				t.Fatalf("Run: %v, want an error naming %q", err, tc.want[len(tc.want)-1])
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("Run created %s (stat: %v)", data, err)
			}
		})
	}
}

// With --provider memory, a merchants file's merchants each refund under
// their own prefix and policy; a registration must name one.
func TestMerchantsFile_MemoryProvider(t *testing.T) {
	// With a delay the stand-in answers PROCESSING and pushes the outcome
	// later: the push must name the refund's merchant, or the core refuses
	// it as another merchant's and the refund waits for its next query.
	for _, delay := range []string{"0", "20ms"} {
		t.Run("delay="+delay, func(t *testing.T) { testMemoryProviderMerchants(t, delay) })
	}
}

func testMemoryProviderMerchants(t *testing.T, delay string) {
	path := writeMerchantsFile(t, t.TempDir(), nil)
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--provider", "memory",
		"--sandbox-delay", delay, "--merchants-file", path}, testEnv); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	c := client{t: t, base: "http://" + m.Addr()}
	reg := func(id, merchant string) (int, map[string]any) {
		body := map[string]any{"id": id, "user_id": "u-" + id, "out_trade_no": "O-" + id, "amount": 1000, "currency": "CNY"}
		if merchant != "" {
			body["merchant"] = merchant
		}
		return c.do("POST", "/v1/reservations", "", body)
	}
	if code, body := reg("r0", ""); code != 400 || !strings.Contains(fmt.Sprint(body), "merchant") {
		t.Fatalf("a registration naming no merchant: %d %v, want 400 naming merchant", code, body)
	}
	if code, body := reg("r9", "default"); code != 400 {
		t.Fatalf("a registration under the default merchant, not in the file: %d %v, want 400", code, body)
	}
	for _, tc := range []struct{ merchant, prefix string }{{"shop", "SH-"}, {"inn-1", "IA-"}, {"inn-2", "IB-"}} {
		id := "r-" + tc.merchant
		if code, body := reg(id, tc.merchant); code != 201 {
			t.Fatalf("register under %s: %d %v", tc.merchant, code, body)
		}
		code, body := c.do("POST", "/v1/reservations/"+id+"/refunds?wait=5s", "k1", map[string]any{"user_id": "u-" + id, "amount": 300})
		no, _ := body["refund_no"].(string)
		if code != 200 || !strings.HasPrefix(no, tc.prefix) || body["state"] != "SUCCEEDED" {
			t.Fatalf("refund under %s: %d %v, want 200 SUCCEEDED numbered %s...", tc.merchant, code, body, tc.prefix)
		}
	}
	// Series by merchant name the file's merchants, none lumped as _other.
	req, _ := http.NewRequest("GET", c.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testServiceToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	text, _ := io.ReadAll(res.Body)
	for _, name := range []string{"shop", "inn-1", "inn-2"} {
		if !regexp.MustCompile(`(?m)^refundd_refund_transitions_total\{[^}]*merchant="` + name + `"[^}]*to="SUCCEEDED"`).Match(text) {
			t.Errorf("no SUCCEEDED transition series for merchant %s in /metrics", name)
		}
		if !regexp.MustCompile(`(?m)^refundd_provider_calls_total\{merchant="` + name + `",op="submit",`).Match(text) {
			t.Errorf("no provider submit series for merchant %s in /metrics", name)
		}
	}
	if strings.Contains(string(text), `merchant="_other"`) {
		t.Errorf("/metrics counts configured merchants as _other")
	}
}

// Each account's notification settings resolve only its own merchants: a
// notification verified with one account's keys can name no merchant of
// another.
func TestNotifyAccounts_ResolveOnlyTheirOwnMerchants(t *testing.T) {
	path := writeMerchantsFile(t, t.TempDir(), nil)
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.ParseFlags([]string{"--provider", "wechatpay", "--merchants-file", path}, testEnv); err != nil {
		t.Fatal(err)
	}
	ms, err := m.readMerchants()
	if err != nil {
		t.Fatal(err)
	}
	accounts := notifyAccounts(func() *merchant.Registry { return ms.reg }, ms.creds)
	if len(accounts) != 2 || accounts[0].Name != "shop" || accounts[1].Name != "sp" {
		t.Fatalf("accounts %+v, want shop then sp", accounts)
	}
	for _, tc := range []struct {
		account         int
		mchID, subMchID string
		want            string // "" means refused
	}{
		{0, "1900000101", "", "shop"},
		{0, "1900000200", "1900000201", ""}, // sp's sub-merchant, named to shop's route
		{1, "1900000200", "1900000201", "inn-1"},
		{1, "1900000200", "1900000202", "inn-2"},
		{1, "1900000200", "1900000203", ""}, // not a configured sub-merchant
		{1, "1900000101", "", ""},           // shop, named to sp's route
		{1, "1900000200", "", ""},           // the provider itself
	} {
		a := accounts[tc.account]
		got, ok := a.Merchant(tc.mchID, tc.subMchID)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("account %s resolves (%s, %q) to %q %v, want %q", a.Name, tc.mchID, tc.subMchID, got, ok, tc.want)
		}
	}
	n := notifyConfig(accounts)
	if n == nil || len(n.Accounts) != 2 || n.Accounts[0].MchID != "1900000101" || n.Accounts[1].Verifier != accounts[1].Verifier {
		t.Fatalf("the notification config %+v, want both accounts, the first (legacy routes) shop's", n)
	}
}

// A restore with a merchants file: the gate looks for refunds lost with the
// restore under each reservation's own merchant prefix (epoch 0: IA), so
// it finishes, refunds resume, the retry of a lost request is refused, and
// new refunds are numbered in the new epoch (IAE1) and still reach the
// sub-merchant. Before, the gate probed the flags' prefix R, which routes
// to no merchant, and refunds stayed paused (503).
func TestRestore_SeveralMerchants(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	var mu *sandbox.Multi
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mu.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	path, keys := merchantsFixture(t, t.TempDir(), srv.URL, nil)
	var cfgs []sandbox.Config
	for _, b := range []struct{ mchid, sub string }{{"1900000101", ""}, {"1900000200", "1900000201"}, {"1900000200", "1900000202"}} {
		cfg := keys[b.mchid].Config()
		cfg.SubMchID = b.sub
		cfgs = append(cfgs, cfg)
	}
	var err error
	if mu, err = sandbox.NewMulti(cfgs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mu.Close)
	inn1 := mu.Book(wechatpay.Merchant{MchID: "1900000200", SubMchID: "1900000201"})
	if err := inn1.CreateOrder("ORD-1", "", 10000); err != nil {
		t.Fatal(err)
	}

	data := t.TempDir()
	start := func() (*Main, client) {
		t.Helper()
		m := NewMain()
		m.Stdout, m.Stderr = io.Discard, io.Discard
		if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", data, "--refund-spacing", "0",
			"--reconcile-after", "100ms", "--reconcile-schedule", "100ms", "--scheduler-interval", "20ms",
			"--provider", "wechatpay", "--merchants-file", path}, testEnv); err != nil {
			t.Fatal(err)
		}
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return m, client{t: t, base: "http://" + m.Addr()}
	}
	refund := func(c client, key string, amount int64) string {
		t.Helper()
		code, body := c.do("POST", "/v1/reservations/r1/refunds", key, map[string]any{"user_id": "u", "amount": amount})
		if code != 202 && code != 200 {
			t.Fatalf("refund %s: %d %v", key, code, body)
		}
		no := body["refund_no"].(string)
		waitFor(t, 15*time.Second, "refund "+no+" to succeed", func() (bool, string) {
			_, r := c.do("GET", "/v1/reservations/r1/refunds/"+no+"?wait=1s", "", nil)
			return r["state"] == "SUCCEEDED", fmt.Sprint(r)
		})
		return no
	}

	m, c := start()
	if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
		"id": "r1", "user_id": "u", "out_trade_no": "ORD-1", "amount": 10000, "currency": "CNY", "merchant": "inn-1"}); code != 201 {
		t.Fatalf("register: %d %v", code, body)
	}
	refund(c, "k1", 1000)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	journalPath := filepath.Join(data, "refundd.db")
	backup := filepath.Join(t.TempDir(), "backup.db")
	raw, err := os.ReadFile(journalPath) // a stopped file is a consistent backup
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(backup, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	m, c = start()
	lost := refund(c, "k2", 6000) // paid by WeChat Pay, then lost with the restore
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.Restore(context.Background(), backup, journalPath, &journal.RestoreOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}

	m, c = start()
	t.Cleanup(func() { _ = m.Close() })
	var code int
	var body map[string]any
	waitFor(t, 15*time.Second, "refunds to resume after the restore", func() (bool, string) {
		code, body = c.do("POST", "/v1/reservations/r1/refunds", "k2", map[string]any{"user_id": "u", "amount": 6000})
		return code != 503, fmtAny("code", code, "body", body)
	})
	if code != 409 || body["error"].(map[string]any)["code"] != "insufficient_refundable" {
		t.Fatalf("retry of the lost request %s: %d %v, want 409 insufficient_refundable", lost, code, body)
	}
	next := refund(c, "k3", 500)
	if !strings.HasPrefix(lost, "IA-") || !strings.HasPrefix(next, "IAE1-") {
		t.Fatalf("refund numbers %s before and %s after the restore, want IA-... and IAE1-...", lost, next)
	}
	if got := inn1.Refunded("ORD-1"); got != 7500 {
		t.Fatalf("WeChat Pay refunded %d of inn-1's ORD-1, want 7500", got)
	}
	if r := mu.Refusals(); len(r) != 0 {
		t.Fatalf("WeChat Pay refused requests: %v", r)
	}
}
