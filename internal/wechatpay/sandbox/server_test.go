package sandbox

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

func TestNew_InvalidConfig(t *testing.T) {
	k := keys(t)
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no mchid", func(c *Config) { c.MchID = "" }, "MchID"},
		{"no merchant serial", func(c *Config) { c.MerchantSerial = "" }, "MerchantSerial"},
		{"no merchant key", func(c *Config) { c.MerchantPublicKey = nil }, "MerchantPublicKey"},
		{"no platform key", func(c *Config) { c.PlatformKey = nil }, "PlatformKey"},
		{"no public key id", func(c *Config) { c.PublicKeyID = "" }, "PublicKeyID"},
		{"short apiv3 key", func(c *Config) { c.APIv3Key = []byte("short") }, "APIv3Key"},
		{"v2 url without key", func(c *Config) { c.APIv2Key = nil; c.NotifyURLV2 = "http://x/v2" }, "NotifyURLV2"},
		{"relative notify url", func(c *Config) { c.NotifyURL = "/notify" }, "NotifyURL"},
		{"negative factor", func(c *Config) { c.TimeFactor = -1 }, "TimeFactor"},
		{"negative delay", func(c *Config) { c.ProcessingDelay = -time.Second }, "ProcessingDelay"},
		{"negative spacing", func(c *Config) { c.MinRefundSpacing = -time.Second }, "MinRefundSpacing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := k.Config()
			tt.edit(&cfg)
			_, err := New(cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidConfig naming %s", err, tt.want)
			}
		})
	}
}

func TestServeHTTP_SignatureRequired(t *testing.T) {
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherSigner := f.keys.Signer()
	otherSigner.Key = other
	wrongMch := f.keys.Signer()
	wrongMch.MchID = "1900000999"
	wrongSerial := f.keys.Signer()
	wrongSerial.SerialNo = "0123456789ABCDEF"
	body := refundBody("O1", "R1", 100, 1000, "")
	tests := []struct {
		name   string
		method string
		target string
		o      reqOpts
		status int
		code   string
	}{
		{"unsigned create", "POST", refundsPath, reqOpts{noAuth: true}, 401, "SIGN_ERROR"},
		{"unsigned query", "GET", refundsPath + "/R1", reqOpts{noAuth: true}, 401, "SIGN_ERROR"},
		{"tampered body", "POST", refundsPath, reqOpts{signBody: refundBody("O1", "R1", 1, 1000, "")}, 401, "SIGN_ERROR"},
		{"other key", "POST", refundsPath, reqOpts{signer: &otherSigner}, 401, "SIGN_ERROR"},
		{"wrong mchid", "POST", refundsPath, reqOpts{signer: &wrongMch}, 401, "SIGN_ERROR"},
		{"wrong serial", "POST", refundsPath, reqOpts{signer: &wrongSerial}, 401, "SIGN_ERROR"},
		{"stale timestamp", "POST", refundsPath, reqOpts{timestamp: time.Now().Add(-6 * time.Minute).Unix()}, 401, "SIGN_ERROR"},
		{"future timestamp", "POST", refundsPath, reqOpts{timestamp: time.Now().Add(6 * time.Minute).Unix()}, 401, "SIGN_ERROR"},
		{"malformed authorization", "POST", refundsPath, reqOpts{header: map[string]string{"Authorization": "WECHATPAY2-SHA256-RSA2048 mchid=1"}}, 401, "SIGN_ERROR"},
		{"missing accept", "POST", refundsPath, reqOpts{header: map[string]string{"Accept": ""}}, 400, "INVALID_REQUEST"},
		{"accept html", "POST", refundsPath, reqOpts{header: map[string]string{"Accept": "text/html"}}, 400, "INVALID_REQUEST"},
		{"missing user agent", "POST", refundsPath, reqOpts{header: map[string]string{"User-Agent": ""}}, 400, "INVALID_REQUEST"},
		{"form content type", "POST", refundsPath, reqOpts{header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 400, "INVALID_REQUEST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b []byte
			if tt.method == "POST" {
				b = body
			}
			r, err := f.m.send(tt.method, tt.target, b, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != tt.status || r.code() != tt.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tt.status, tt.code)
			}
			if r.verifyErr != nil {
				t.Fatalf("error response not signed: %v", r.verifyErr)
			}
		})
	}
	if _, ok := f.sb.Refund("R1"); ok {
		t.Fatal("a refund was created by an unauthenticated request")
	}
	if got := f.sb.Submissions("R1"); len(got) != 0 {
		t.Fatalf("unauthenticated submissions recorded: %v", got)
	}
	// And the properly signed request still works.
	if got := decodeRefund(t, f.m.create("O1", "R1", 100, 1000, "")); got.Status != "PROCESSING" {
		t.Fatalf("status %q", got.Status)
	}
}

func TestCreate_ProcessingThenSuccess(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ProcessingDelay = 200 * time.Millisecond })
	f.order(t, "O1", 1000)
	got := decodeRefund(t, f.m.create("O1", "R1", 300, 1000, ""))
	if got.Status != "PROCESSING" || got.SuccessTime != "" || got.OutRefundNo != "R1" || got.OutTradeNo != "O1" ||
		got.Amount.Refund != 300 || got.Amount.Total != 1000 || len(got.RefundID) != 29 || !hasPrefix(got.TransactionID, "4200") {
		t.Fatalf("create response %+v", got)
	}
	if _, err := time.Parse(time.RFC3339, got.CreateTime); err != nil || !strings.HasSuffix(got.CreateTime, "+08:00") {
		t.Fatalf("create_time %q", got.CreateTime)
	}
	var last refundResp
	eventually(t, 5*time.Second, "query SUCCESS", func() bool {
		last = decodeRefund(t, f.m.query("R1"))
		return last.Status == "SUCCESS"
	})
	if last.RefundID != got.RefundID || last.SuccessTime == "" {
		t.Fatalf("query after success %+v", last)
	}
	rec, ok := f.sb.Refund("R1")
	if !ok || rec.Status != "SUCCESS" || rec.Refund != 300 || f.sb.Refunded("O1") != 300 {
		t.Fatalf("record %+v ok=%v refunded=%d", rec, ok, f.sb.Refunded("O1"))
	}
}

func TestCreate_ZeroDelayAnswersProcessing(t *testing.T) {
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	if got := decodeRefund(t, f.m.create("O1", "R1", 1000, 1000, "")); got.Status != "PROCESSING" {
		t.Fatalf("create status %q, want PROCESSING", got.Status)
	}
	if got := decodeRefund(t, f.m.query("R1")); got.Status != "SUCCESS" {
		t.Fatalf("query status %q, want SUCCESS at once", got.Status)
	}
}

func TestCreate_Idempotent(t *testing.T) {
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	body := refundBody("O1", "R1", 400, 1000, "")
	first := decodeRefund(t, f.m.must("POST", refundsPath, body))
	again := decodeRefund(t, f.m.must("POST", refundsPath, body))
	if again.RefundID != first.RefundID || again.Status != "SUCCESS" {
		t.Fatalf("resubmission gave %+v, first %+v", again, first)
	}
	if f.sb.Refunded("O1") != 400 {
		t.Fatalf("refunded %d after an identical resubmission, want 400", f.sb.Refunded("O1"))
	}
	for _, other := range [][]byte{
		refundBody("O1", "R1", 401, 1000, ""),
		[]byte(strings.Replace(string(body), `"test"`, `"other reason"`, 1)),
	} {
		r := f.m.must("POST", refundsPath, other)
		if r.status != 400 || r.code() != "INVALID_REQUEST" {
			t.Fatalf("different body: %d %s", r.status, r.body)
		}
	}
	rec, _ := f.sb.Refund("R1")
	if len(rec.BodyHashes) != 3 || rec.BodyHashes[0] != rec.BodyHash || rec.Submissions != 4 || f.sb.Refunded("O1") != 400 {
		t.Fatalf("record %+v refunded %d", rec, f.sb.Refunded("O1"))
	}
}

func TestCreate_Rejections(t *testing.T) {
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	tests := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"unknown order", string(refundBody("NOPE", "R1", 100, 1000, "")), 404, "RESOURCE_NOT_EXISTS"},
		{"unknown transaction", `{"transaction_id":"4200000000","out_refund_no":"R1","amount":{"refund":1,"total":1000,"currency":"CNY"}}`, 404, "RESOURCE_NOT_EXISTS"},
		{"total mismatch", string(refundBody("O1", "R1", 100, 999, "")), 400, "INVALID_REQUEST"},
		{"refund above total", string(refundBody("O1", "R1", 1001, 1000, "")), 400, "INVALID_REQUEST"},
		{"no order number", `{"out_refund_no":"R1","amount":{"refund":1,"total":1000,"currency":"CNY"}}`, 400, "PARAM_ERROR"},
		{"bad currency", `{"out_trade_no":"O1","out_refund_no":"R1","amount":{"refund":1,"total":1000,"currency":"USD"}}`, 400, "PARAM_ERROR"},
		{"no amount", `{"out_trade_no":"O1","out_refund_no":"R1"}`, 400, "PARAM_ERROR"},
		{"zero refund", `{"out_trade_no":"O1","out_refund_no":"R1","amount":{"refund":0,"total":1000,"currency":"CNY"}}`, 400, "PARAM_ERROR"},
		{"fractional fen", `{"out_trade_no":"O1","out_refund_no":"R1","amount":{"refund":1.5,"total":1000,"currency":"CNY"}}`, 400, "PARAM_ERROR"},
		{"null field", `{"out_trade_no":"O1","out_refund_no":"R1","reason":null,"amount":{"refund":1,"total":1000,"currency":"CNY"}}`, 400, "PARAM_ERROR"},
		{"bad refund number", `{"out_trade_no":"O1","out_refund_no":"R 1","amount":{"refund":1,"total":1000,"currency":"CNY"}}`, 400, "PARAM_ERROR"},
		{"notify url with query", string(refundBody("O1", "R1", 1, 1000, "https://m.example/n?x=1")), 400, "PARAM_ERROR"},
		{"from does not add up", `{"out_trade_no":"O1","out_refund_no":"R1","amount":{"refund":10,"total":1000,"currency":"CNY","from":[{"account":"AVAILABLE","amount":9}]}}`, 400, "PARAM_ERROR"},
		{"not json", `{"out_trade_no":`, 400, "PARAM_ERROR"},
		{"trailing data", string(refundBody("O1", "R1", 1, 1000, "")) + "{}", 400, "PARAM_ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.m.must("POST", refundsPath, []byte(tt.body))
			if r.status != tt.status || r.code() != tt.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tt.status, tt.code)
			}
		})
	}
	if _, ok := f.sb.Refund("R1"); ok || f.sb.Refunded("O1") != 0 {
		t.Fatalf("a rejected request was applied (refunded %d)", f.sb.Refunded("O1"))
	}
}

func TestCreate_NotEnoughWithPartialRefunds(t *testing.T) {
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	steps := []struct {
		no     string
		refund int64
		code   string // "" = accepted
	}{
		{"P1", 600, ""},
		{"P2", 500, "INVALID_REQUEST"},
		{"P3", 400, ""},
		{"P4", 1, "INVALID_REQUEST"},
	}
	for _, s := range steps {
		r := f.m.create("O1", s.no, s.refund, 1000, "")
		if s.code == "" && r.status != 200 || s.code != "" && (r.status != 400 || r.code() != s.code) {
			t.Fatalf("%s refund %d: %d %s", s.no, s.refund, r.status, r.body)
		}
	}
	if got := f.sb.Refunded("O1"); got != 1000 {
		t.Fatalf("refunded %d, want 1000", got)
	}
	// A rejected number can be used again once it fits (it was never accepted).
	if _, ok := f.sb.Refund("P2"); ok {
		t.Fatal("rejected refund recorded as accepted")
	}
}

func TestCreate_ByTransactionID(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.sb.CreateOrder("O1", "4200000001", 500); err != nil {
		t.Fatal(err)
	}
	r := f.m.must("POST", refundsPath, []byte(`{"transaction_id":"4200000001","out_refund_no":"R1","amount":{"refund":500,"total":500,"currency":"CNY"}}`))
	if got := decodeRefund(t, r); got.OutTradeNo != "O1" || got.TransactionID != "4200000001" {
		t.Fatalf("%+v", got)
	}
	r = f.m.must("POST", refundsPath, []byte(`{"transaction_id":"4200000001","out_trade_no":"O2","out_refund_no":"R2","amount":{"refund":1,"total":500,"currency":"CNY"}}`))
	if r.status != 400 || r.code() != "INVALID_REQUEST" {
		t.Fatalf("mismatched transaction_id/out_trade_no: %d %s", r.status, r.body)
	}
}

func TestQuery_Unknown(t *testing.T) {
	f := newFixture(t, nil)
	r := f.m.query("NOPE")
	if r.status != 404 || r.code() != "RESOURCE_NOT_EXISTS" {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestQuery_EscapedRefundNumber(t *testing.T) {
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	const no = "R_1-a|b*c@d"
	decodeRefund(t, f.m.create("O1", no, 10, 1000, ""))
	// The merchant signs the escaped target it sends (url.PathEscape).
	got := decodeRefund(t, f.m.query("R_1-a%7Cb%2Ac@d"))
	if got.OutRefundNo != no {
		t.Fatalf("out_refund_no %q", got.OutRefundNo)
	}
}

func TestServeHTTP_UnknownRouteSigned(t *testing.T) {
	f := newFixture(t, nil)
	r := f.m.must("GET", "/v3/pay/transactions/id/1", nil)
	if r.status != 404 {
		t.Fatalf("status %d", r.status)
	}
	r = f.m.must("DELETE", refundsPath+"/R1", nil)
	if r.status != 405 {
		t.Fatalf("status %d", r.status)
	}
}

// TestCreate_ConcurrentNeverExceedsPaid refunds one order from 50
// goroutines; the accepted total must fit the order exactly.
func TestCreate_ConcurrentNeverExceedsPaid(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ProcessingDelay = 20 * time.Millisecond })
	const paid, each, n = 1000, 30, 50
	f.order(t, "O1", paid)
	var wg sync.WaitGroup
	results := make([]response, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			no := "C" + string(rune('A'+i/26)) + string(rune('a'+i%26))
			r, err := f.m.send("POST", refundsPath, refundBody("O1", no, each, paid, ""), reqOpts{})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = r
		}()
	}
	wg.Wait()
	accepted, over := 0, 0
	for _, r := range results {
		switch {
		case r.status == 200 && r.verifyErr == nil:
			accepted++
		case r.status == 400 && r.code() == "INVALID_REQUEST":
			over++
		default:
			t.Errorf("unexpected answer %d %s (%v)", r.status, r.body, r.verifyErr)
		}
	}
	if accepted != paid/each || over != n-paid/each {
		t.Fatalf("accepted %d, over-refunds %d; want %d and %d", accepted, over, paid/each, n-paid/each)
	}
	if got := f.sb.Refunded("O1"); got != int64(accepted*each) || got > paid {
		t.Fatalf("refunded %d with %d accepted", got, accepted)
	}
}

func TestRefundResponse_NoNulls(t *testing.T) {
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	r := f.m.create("O1", "R1", 10, 1000, "")
	var raw any
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	if p, ok := findNull(raw, ""); ok {
		t.Fatalf("null at %s in %s", p, r.body)
	}
	for _, field := range []string{`"channel":"ORIGINAL"`, `"funds_account":"UNSETTLED"`, `"currency":"CNY"`, `"promotion_detail":[]`, `"from":[]`} {
		if !strings.Contains(string(r.body), field) {
			t.Errorf("response lacks %s: %s", field, r.body)
		}
	}
	if r.header.Get(wechatpay.HeaderSerial) != f.keys.PublicKeyID || r.header.Get(wechatpay.HeaderRequestID) == "" {
		t.Fatalf("headers %v", r.header)
	}
}
