package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
)

// tomlEntry is one [[accounts]] or [[merchants]] table of the printed file.
type tomlEntry struct {
	table string
	kv    map[string]string
}

// readEntries reads the flat tables wxpaysim writes: headers and
// key = "string" lines. It is no TOML parser; it checks the shape wxpaysim
// promises, and fails on any other line.
func readEntries(t *testing.T, file string) []tomlEntry {
	t.Helper()
	var out []tomlEntry
	for i, line := range strings.Split(file, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case line == "[[accounts]]" || line == "[[merchants]]":
			out = append(out, tomlEntry{table: strings.Trim(line, "[]"), kv: map[string]string{}})
		default:
			k, v, ok := strings.Cut(line, " = ")
			if !ok || len(out) == 0 || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || strings.ContainsAny(v[1:len(v)-1], `"\`) {
				t.Fatalf("line %d: %q", i+1, line)
			}
			out[len(out)-1].kv[k] = v[1 : len(v)-1]
		}
	}
	return out
}

// TestRun_SeveralMerchants: two direct merchants and a service provider
// with two sub-merchants; a merchant configured only from the printed
// merchants file refunds through each, and the books stay apart.
func TestRun_SeveralMerchants(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	stateDir := t.TempDir()
	m, out := start(t, dir, "--direct-merchants=1900000101,1900000102", "--service-provider=1900000200",
		"--sub-merchants=1900000201,1900000202", "--state-dir="+stateDir, "--refundd-url=http://127.0.0.1:9999/")
	path := filepath.Join(dir, MerchantsFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "--merchants-file="+path) || !strings.Contains(out, string(raw)) {
		t.Fatalf("report does not print the merchants file:\n%s", out)
	}
	if n := len(m.books()); n != 4 {
		t.Fatalf("%d books", n)
	}
	accounts := map[string]*wechatpay.Client{}
	var merchants []tomlEntry
	for _, e := range readEntries(t, string(raw)) {
		if e.table == "merchants" {
			merchants = append(merchants, e)
			continue
		}
		kv := e.kv
		read := func(ref string) []byte {
			b, err := os.ReadFile(strings.TrimPrefix(ref, "file:"))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		key, err := wechatpay.ParsePrivateKey(read(kv["private_key"]))
		if err != nil {
			t.Fatal(err)
		}
		pub, err := wechatpay.ParsePublicKey(read(kv["public_key_file"]))
		if err != nil {
			t.Fatal(err)
		}
		if len(read(kv["apiv3_key"])) != wechatpay.APIv3KeySize {
			t.Fatalf("account %s: APIv3 key file", kv["name"])
		}
		v := &wechatpay.Verifier{}
		if err := v.AddPublicKey(kv["public_key_id"], pub); err != nil {
			t.Fatal(err)
		}
		c, err := wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: kv["base_url"], Partner: kv["kind"] == "service_provider",
			Signer: wechatpay.Signer{MchID: kv["mchid"], SerialNo: kv["serial"], Key: key}, Verifier: v})
		if err != nil {
			t.Fatalf("account %s: %v", kv["name"], err)
		}
		accounts[kv["name"]] = c
	}
	if len(accounts) != 3 || len(merchants) != 4 {
		t.Fatalf("%d accounts, %d merchants:\n%s", len(accounts), len(merchants), raw)
	}
	prefixes := map[string]bool{}
	ctx := context.Background()
	for _, e := range merchants {
		kv := e.kv
		if kv["notify_url"] != "http://127.0.0.1:9999/v1/notify/wechatpay/refund" || prefixes[kv["refund_prefix"]] {
			t.Fatalf("merchant %v", kv)
		}
		prefixes[kv["refund_prefix"]] = true
		p, err := accounts[kv["account"]].For(wechatpay.Target{SubMchID: kv["sub_mchid"]})
		if err != nil {
			t.Fatalf("merchant %s: %v", kv["name"], err)
		}
		book := kv["sub_mchid"]
		// The order is this merchant's only; the same numbers everywhere.
		adminBook(t, m, bookFor(t, m, book, kv), `{"out_trade_no":"O1","total":1000}`)
		req := reservation.RefundRequest{RefundNo: kv["refund_prefix"] + "1", OutTradeNo: "O1", Amount: 600, Total: 1000}
		body, err := p.RequestBody(req)
		if err != nil {
			t.Fatal(err)
		}
		if o := p.Submit(ctx, req.RefundNo, body, 1); o.Kind != reservation.OutcomeProcessing {
			t.Fatalf("merchant %s: submit %+v", kv["name"], o)
		}
		if o := p.Query(ctx, req.RefundNo); o.Kind != reservation.OutcomeSucceeded {
			t.Fatalf("merchant %s: query %+v", kv["name"], o)
		}
		if _, err := os.Stat(filepath.Join(stateDir, "books-"+bookFor(t, m, book, kv)+".json")); err != nil {
			t.Fatalf("merchant %s: books file: %v", kv["name"], err)
		}
	}
	// A sub-merchant the provider is not authorised for.
	p, err := accounts["provider-1900000200"].For(wechatpay.Target{SubMchID: "1900000299"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := p.RequestBody(reservation.RefundRequest{RefundNo: "X1", OutTradeNo: "O1", Amount: 1, Total: 1000})
	if o := p.Submit(ctx, "X1", body, 1); o.Kind != reservation.OutcomeRejected || o.Code != "NO_AUTH" {
		t.Fatalf("unauthorised sub-merchant: %+v", o)
	}
}

// bookFor is the admin name of the merchant kv's books.
func bookFor(t *testing.T, m *Main, sub string, kv map[string]string) string {
	t.Helper()
	for _, b := range m.books() {
		if sub != "" && b.SubMchID == sub || sub == "" && b.SubMchID == "" && "direct-"+b.MchID == kv["account"] {
			return bookName(b.MchID, b.SubMchID)
		}
	}
	t.Fatalf("no books for %v", kv)
	return ""
}

func adminBook(t *testing.T, m *Main, book, body string) {
	t.Helper()
	resp, err := http.Post(m.URL()+"/sandbox/books/"+book+"/orders", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("admin order in %s: %d", book, resp.StatusCode)
	}
}
