package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
)

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
	// refundd's own reader of --merchants-file takes it as written.
	reg, err := merchant.ReadFile(path, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := reg.LoadCredentials(merchant.Sources{Getenv: func(string) string { return "" }, ReadFile: os.ReadFile})
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.Accounts()) != 3 || len(reg.Merchants()) != 4 {
		t.Fatalf("%d accounts, %d merchants:\n%s", len(reg.Accounts()), len(reg.Merchants()), raw)
	}
	accounts := map[string]*wechatpay.Client{}
	for name, cr := range creds {
		cfg := cr.ClientConfig()
		cfg.Partner = cr.Kind == merchant.AccountServiceProvider
		c, err := wechatpay.NewClient(cfg)
		if err != nil {
			t.Fatalf("account %s: %v", name, err)
		}
		accounts[name] = c
	}
	ctx := context.Background()
	for _, mc := range reg.Merchants() {
		if mc.NotifyURL != "http://127.0.0.1:9999/v1/notify/wechatpay/accounts/"+mc.Account.Name+"/refund" {
			t.Fatalf("merchant %s: notify_url %q", mc.Name, mc.NotifyURL)
		}
		if _, ok := reg.ByMchID(mc.Account.MchID, mc.SubMchID); !ok {
			t.Fatalf("merchant %s: not found by its ids", mc.Name)
		}
		p, err := accounts[mc.Account.Name].For(wechatpay.Target{SubMchID: mc.SubMchID, NotifyURL: mc.NotifyURL})
		if err != nil {
			t.Fatalf("merchant %s: %v", mc.Name, err)
		}
		// The order is this merchant's only; the same numbers everywhere.
		book := bookName(mc.Account.MchID, mc.SubMchID)
		adminBook(t, m, book, `{"out_trade_no":"O1","total":1000}`)
		req := reservation.RefundRequest{RefundNo: mc.RefundNoPrefix + "1", OutTradeNo: "O1", Amount: 600, Total: 1000}
		body, err := p.RequestBody(req)
		if err != nil {
			t.Fatal(err)
		}
		if o := p.Submit(ctx, req.RefundNo, body, 1); o.Kind != reservation.OutcomeProcessing {
			t.Fatalf("merchant %s: submit %+v", mc.Name, o)
		}
		if o := p.Query(ctx, req.RefundNo); o.Kind != reservation.OutcomeSucceeded {
			t.Fatalf("merchant %s: query %+v", mc.Name, o)
		}
		if _, err := os.Stat(filepath.Join(stateDir, "books-"+book+".json")); err != nil {
			t.Fatalf("merchant %s: books file: %v", mc.Name, err)
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
