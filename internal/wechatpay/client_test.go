package wechatpay

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

const (
	testMchID          = "1900000001"
	testMerchantSerial = "3775B6A45ACD588826D15E583A95F5DD********"
	testPlatformSerial = "PUB_KEY_ID_0114232134912410000000000000"
	testNotifyURL      = "https://merchant.example/v1/notify/wechatpay/refund"
	testRefundNo       = "RF-res1-1"
)

// signMode is how the fake WeChat Pay signs a response.
type signMode int

const (
	signOK            signMode = iota
	signNone                   // no Wechatpay-* headers
	signProbe                  // WECHATPAY/SIGNTEST/ signature
	signStale                  // signed 10 minutes ago
	signUnknownSerial          // a serial the client does not hold
	signWrongKey               // signed with another key under the right serial
	signTampered               // signature over SignedBody, Body sent
)

// fakeReply is one scripted answer.
type fakeReply struct {
	Status     int
	Body       string
	Sign       signMode
	SignedBody string // for signTampered
	Block      bool   // wait until the client goes away
	Location   string // for redirects
}

// recorded is one request as the fake server saw it.
type recorded struct {
	Method  string
	URI     string
	Header  http.Header
	Body    []byte
	Auth    Authorization
	AuthErr error // nil when the merchant signature verified
}

// fakeWeChat is an httptest server standing in for api.mch.weixin.qq.com:
// it verifies the merchant's request signature, records every request and
// answers as scripted, signing with the platform key.
type fakeWeChat struct {
	t           *testing.T
	srv         *httptest.Server
	platformKey *rsa.PrivateKey
	merchantKey *rsa.PrivateKey

	mu    sync.Mutex
	reqs  []recorded
	reply func(r recorded, n int) fakeReply
}

func newFakeWeChat(t *testing.T, reply func(r recorded, n int) fakeReply) *fakeWeChat {
	t.Helper()
	f := &fakeWeChat{t: t, platformKey: v5Key(t), merchantKey: v6Key(t), reply: reply}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeWeChat) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := recorded{Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: body}
	rec.Auth, rec.AuthErr = ParseAuthorization(r.Header.Get("Authorization"))
	if rec.AuthErr == nil {
		switch {
		case rec.Auth.MchID != testMchID || rec.Auth.SerialNo != testMerchantSerial:
			rec.AuthErr = errors.New("wrong mchid or serial_no")
		default:
			rec.AuthErr = VerifyAuthorization(&f.merchantKey.PublicKey, rec.Auth, r.Method, r.RequestURI, body)
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, rec)
	n := len(f.reqs)
	f.mu.Unlock()

	rep := f.reply(rec, n)
	if rep.Block {
		<-r.Context().Done()
		return
	}
	f.sign(rep).Set(w.Header())
	w.Header().Set(HeaderRequestID, "req-"+strconv.Itoa(n))
	if rep.Body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	if rep.Location != "" {
		w.Header().Set("Location", rep.Location)
	}
	w.WriteHeader(rep.Status)
	io.WriteString(w, rep.Body)
}

func (f *fakeWeChat) sign(rep fakeReply) Headers {
	now := time.Now()
	key, serial, signed := f.platformKey, testPlatformSerial, rep.Body
	switch rep.Sign {
	case signNone:
		return Headers{}
	case signStale:
		now = now.Add(-10 * time.Minute)
	case signUnknownSerial:
		serial = "PUB_KEY_ID_0000000000000000000000000001"
	case signWrongKey:
		key = f.merchantKey
	case signTampered:
		signed = rep.SignedBody
	}
	h, err := SignHeaders(key, serial, now.Unix(), NewNonce(), []byte(signed))
	if err != nil {
		f.t.Error(err)
	}
	if rep.Sign == signProbe {
		h.Signature = probePrefix + h.Signature[:len(h.Signature)-4]
	}
	return h
}

func (f *fakeWeChat) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// testVerifier holds the platform public key (V5's) under its id.
func testVerifier(t *testing.T) *Verifier {
	t.Helper()
	v := &Verifier{}
	if err := v.AddPublicKey(testPlatformSerial, &v5Key(t).PublicKey); err != nil {
		t.Fatal(err)
	}
	return v
}

func testConfig(t *testing.T, baseURL string) ClientConfig {
	return ClientConfig{
		BaseURL:   baseURL,
		MchID:     testMchID,
		Signer:    Signer{SerialNo: testMerchantSerial, Key: v6Key(t)},
		Verifier:  testVerifier(t),
		NotifyURL: testNotifyURL,
	}
}

func newTestClient(t *testing.T, f *fakeWeChat, mods ...func(*ClientConfig)) *Client {
	t.Helper()
	cfg := testConfig(t, f.srv.URL)
	for _, m := range mods {
		m(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testRequest() reservation.RefundRequest {
	return reservation.RefundRequest{RefundNo: testRefundNo, OutTradeNo: "ORD-res1", TransactionID: "4200000000202501010000000001",
		Amount: 100, Total: 500, Currency: "CNY", Reason: "商品已售完"}
}

// refundJSON is a refund object as the API returns it, with fields refundd
// ignores (channel, promotion_detail, ...) to prove they are tolerated.
func refundJSON(no, status string) string {
	success := ""
	if status == RefundSuccess {
		success = `"success_time":"2020-12-01T16:18:12+08:00",`
	}
	return `{"refund_id":"50000000382019052709732678859","out_refund_no":"` + no +
		`","transaction_id":"4200000000202501010000000001","out_trade_no":"ORD-res1","channel":"ORIGINAL",` +
		`"user_received_account":"支付用户零钱",` + success + `"create_time":"2020-12-01T16:18:09+08:00","status":"` + status +
		`","funds_account":"AVAILABLE","amount":{"total":500,"refund":100,"from":[],"payer_total":500,"payer_refund":100,` +
		`"settlement_refund":100,"settlement_total":500,"discount_refund":0,"currency":"CNY","refund_fee":0},"promotion_detail":[]}`
}

func errJSON(code, msg string) string {
	return `{"code":"` + code + `","message":"` + msg + `"}`
}

func mustBody(t *testing.T, c *Client) []byte {
	t.Helper()
	b, err := c.RequestBody(testRequest())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mappingCase is one row of the wire -> outcome mapping.
type mappingCase struct {
	name    string
	attempt int
	reply   fakeReply
	kind    reservation.OutcomeKind
	code    string
}

func TestClientSubmit_Mapping(t *testing.T) {
	cases := []mappingCase{
		{"success", 1, fakeReply{Status: 200, Body: refundJSON(testRefundNo, "SUCCESS")}, reservation.OutcomeSucceeded, ""},
		{"processing", 1, fakeReply{Status: 200, Body: refundJSON(testRefundNo, "PROCESSING")}, reservation.OutcomeProcessing, ""},
		{"closed", 1, fakeReply{Status: 200, Body: refundJSON(testRefundNo, "CLOSED")}, reservation.OutcomeFailed, ""},
		{"abnormal", 1, fakeReply{Status: 200, Body: refundJSON(testRefundNo, "ABNORMAL")}, reservation.OutcomeAbnormal, ""},
		{"success on resubmission", 4, fakeReply{Status: 200, Body: refundJSON(testRefundNo, "SUCCESS")}, reservation.OutcomeSucceeded, ""},
		{"unknown status", 1, fakeReply{Status: 200, Body: refundJSON(testRefundNo, "REVERSED")}, reservation.OutcomeUnknown, "UNKNOWN_STATUS"},
		{"empty status", 1, fakeReply{Status: 200, Body: refundJSON(testRefundNo, "")}, reservation.OutcomeUnknown, "UNKNOWN_STATUS"},
		{"other refund number", 1, fakeReply{Status: 200, Body: refundJSON("RF-other-1", "SUCCESS")}, reservation.OutcomeUnknown, "MISMATCHED_RESPONSE"},
		{"no refund number", 1, fakeReply{Status: 200, Body: `{"status":"SUCCESS","amount":{"refund":100,"total":500}}`}, reservation.OutcomeUnknown, "MISMATCHED_RESPONSE"},
		{"unparseable 200", 1, fakeReply{Status: 200, Body: `{"status":"SUCC`}, reservation.OutcomeUnknown, "MALFORMED_RESPONSE"},
		{"float amount", 1, fakeReply{Status: 200, Body: `{"out_refund_no":"` + testRefundNo + `","status":"SUCCESS","amount":{"refund":1.5,"total":500}}`}, reservation.OutcomeUnknown, "MALFORMED_RESPONSE"},
		{"negative amount", 1, fakeReply{Status: 200, Body: `{"out_refund_no":"` + testRefundNo + `","status":"SUCCESS","amount":{"refund":-1,"total":500}}`}, reservation.OutcomeUnknown, "MALFORMED_RESPONSE"},
		{"202 accepted", 1, fakeReply{Status: 202}, reservation.OutcomeUnknown, "HTTP_202"},
		{"204 no content", 1, fakeReply{Status: 204}, reservation.OutcomeUnknown, "HTTP_204"},
		{"500 SYSTEM_ERROR", 1, fakeReply{Status: 500, Body: errJSON("SYSTEM_ERROR", "系统超时")}, reservation.OutcomeUnknown, "SYSTEM_ERROR"},
		{"500 unsigned SYSTEM_ERROR", 1, fakeReply{Status: 500, Body: errJSON("SYSTEM_ERROR", "系统超时"), Sign: signNone}, reservation.OutcomeUnknown, "SYSTEM_ERROR"},
		{"503 proxy page", 1, fakeReply{Status: 503, Body: "<html>busy</html>", Sign: signNone}, reservation.OutcomeUnknown, "HTTP_503"},
		{"502 business code ignored", 1, fakeReply{Status: 502, Body: errJSON("NOT_ENOUGH", "余额不足")}, reservation.OutcomeUnknown, "NOT_ENOUGH"},
		{"429 FREQUENCY_LIMITED", 1, fakeReply{Status: 429, Body: errJSON("FREQUENCY_LIMITED", "频率限制")}, reservation.OutcomeUnknown, "FREQUENCY_LIMITED"},
		{"429 business code ignored", 1, fakeReply{Status: 429, Body: errJSON("INVALID_REQUEST", "x")}, reservation.OutcomeUnknown, "INVALID_REQUEST"},
		{"403 FREQUENCY_LIMITED by code", 1, fakeReply{Status: 403, Body: errJSON("FREQUENCY_LIMITED", "频率限制")}, reservation.OutcomeUnknown, "FREQUENCY_LIMITED"},
		{"400 SYSTEM_ERROR by code", 1, fakeReply{Status: 400, Body: errJSON("SYSTEM_ERROR", "系统错误")}, reservation.OutcomeUnknown, "SYSTEM_ERROR"},
		{"401 SIGN_ERROR", 1, fakeReply{Status: 401, Body: errJSON("SIGN_ERROR", "签名错误")}, reservation.OutcomeUnknown, "SIGN_ERROR"},
		{"403 NOT_ENOUGH first", 1, fakeReply{Status: 403, Body: errJSON("NOT_ENOUGH", "基本账户余额不足")}, reservation.OutcomeRejected, "NOT_ENOUGH"},
		{"400 PARAM_ERROR first", 1, fakeReply{Status: 400, Body: `{"code":"PARAM_ERROR","message":"参数错误","detail":{"field":"/amount/currency","value":"XYZ","issue":"Currency code is invalid","location":"body"}}`}, reservation.OutcomeRejected, "PARAM_ERROR"},
		{"400 INVALID_REQUEST first", 1, fakeReply{Status: 400, Body: errJSON("INVALID_REQUEST", "订单已全额退款")}, reservation.OutcomeRejected, "INVALID_REQUEST"},
		{"403 USER_ACCOUNT_ABNORMAL first", 1, fakeReply{Status: 403, Body: errJSON("USER_ACCOUNT_ABNORMAL", "用户帐号注销")}, reservation.OutcomeRejected, "USER_ACCOUNT_ABNORMAL"},
		{"403 NO_AUTH first", 1, fakeReply{Status: 403, Body: errJSON("NO_AUTH", "没有退款权限")}, reservation.OutcomeRejected, "NO_AUTH"},
		{"400 MCH_NOT_EXISTS first", 1, fakeReply{Status: 400, Body: errJSON("MCH_NOT_EXISTS", "MCHID不存在")}, reservation.OutcomeRejected, "MCH_NOT_EXISTS"},
		{"404 RESOURCE_NOT_EXISTS first", 1, fakeReply{Status: 404, Body: errJSON("RESOURCE_NOT_EXISTS", "订单不存在")}, reservation.OutcomeRejected, "RESOURCE_NOT_EXISTS"},
		{"400 new business code first", 1, fakeReply{Status: 400, Body: errJSON("SOME_NEW_CODE", "新规则")}, reservation.OutcomeRejected, "SOME_NEW_CODE"},
		{"400 INVALID_REQUEST resubmission", 2, fakeReply{Status: 400, Body: errJSON("INVALID_REQUEST", "请求内容和上次请求不一致")}, reservation.OutcomeUnknown, "INVALID_REQUEST"},
		{"403 NOT_ENOUGH resubmission", 3, fakeReply{Status: 403, Body: errJSON("NOT_ENOUGH", "余额不足")}, reservation.OutcomeUnknown, "NOT_ENOUGH"},
		{"400 PARAM_ERROR resubmission", 2, fakeReply{Status: 400, Body: errJSON("PARAM_ERROR", "参数错误")}, reservation.OutcomeUnknown, "PARAM_ERROR"},
		{"404 RESOURCE_NOT_EXISTS resubmission", 2, fakeReply{Status: 404, Body: errJSON("RESOURCE_NOT_EXISTS", "订单不存在")}, reservation.OutcomeUnknown, "RESOURCE_NOT_EXISTS"},
		{"400 no code", 1, fakeReply{Status: 400, Body: `{"message":"bad"}`}, reservation.OutcomeUnknown, "HTTP_400"},
		{"400 not JSON", 1, fakeReply{Status: 400, Body: `bad request`}, reservation.OutcomeUnknown, "HTTP_400"},
		{"400 junk code", 1, fakeReply{Status: 400, Body: errJSON("not a code!", "x")}, reservation.OutcomeUnknown, "HTTP_400"},
		{"403 NOT_ENOUGH unsigned (WeChat may not sign errors)", 1, fakeReply{Status: 403, Body: errJSON("NOT_ENOUGH", "余额不足"), Sign: signNone}, reservation.OutcomeRejected, "NOT_ENOUGH"},
		{"403 NOT_ENOUGH tampered", 1, fakeReply{Status: 403, Body: errJSON("NOT_ENOUGH", "余额不足"), Sign: signTampered, SignedBody: errJSON("SYSTEM_ERROR", "x")}, reservation.OutcomeUnknown, codeUnverified},
		{"403 NOT_ENOUGH probe", 1, fakeReply{Status: 403, Body: errJSON("NOT_ENOUGH", "余额不足"), Sign: signProbe}, reservation.OutcomeUnknown, codeUnverified},
		{"302 redirect", 1, fakeReply{Status: 302, Location: "/elsewhere"}, reservation.OutcomeUnknown, "HTTP_302"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWeChat(t, func(recorded, int) fakeReply { return tc.reply })
			c := newTestClient(t, f)
			o := c.Submit(context.Background(), testRefundNo, mustBody(t, c), tc.attempt)
			if o.Kind != tc.kind || o.Code != tc.code {
				t.Fatalf("outcome %s/%s (%q), want %s/%s", o.Kind, o.Code, o.Message, tc.kind, tc.code)
			}
			if n := len(f.requests()); n != 1 {
				t.Fatalf("server saw %d requests, want exactly 1 (no retries, no redirects)", n)
			}
		})
	}
}

func TestClientSubmit_SuccessFields(t *testing.T) {
	f := newFakeWeChat(t, func(recorded, int) fakeReply {
		return fakeReply{Status: 200, Body: refundJSON(testRefundNo, "SUCCESS")}
	})
	c := newTestClient(t, f)
	o := c.Submit(context.Background(), testRefundNo, mustBody(t, c), 1)
	want := reservation.Outcome{
		Kind: reservation.OutcomeSucceeded, ProviderID: "50000000382019052709732678859", OutTradeNo: "ORD-res1",
		RefundAmount: 100, TotalAmount: 500, SuccessTime: time.Date(2020, 12, 1, 8, 18, 12, 0, time.UTC),
	}
	if o != want {
		t.Fatalf("outcome\n got %+v\nwant %+v", o, want)
	}
}

func TestClientSubmit_RejectionKeepsMessage(t *testing.T) {
	f := newFakeWeChat(t, func(recorded, int) fakeReply {
		return fakeReply{Status: 403, Body: errJSON("NOT_ENOUGH", "基本账户余额不足，请充值后重新发起")}
	})
	c := newTestClient(t, f)
	o := c.Submit(context.Background(), testRefundNo, mustBody(t, c), 1)
	if o.Kind != reservation.OutcomeRejected || o.Message != "基本账户余额不足，请充值后重新发起" {
		t.Fatalf("outcome %+v", o)
	}
	o = c.Submit(context.Background(), testRefundNo, mustBody(t, c), 2)
	if o.Kind != reservation.OutcomeUnknown || !strings.Contains(o.Message, "query to resolve") {
		t.Fatalf("resubmission outcome %+v, want unknown explaining the query", o)
	}
}

func TestClientSubmit_UnverifiedSuccess(t *testing.T) {
	success := refundJSON(testRefundNo, "SUCCESS")
	cases := []struct {
		name  string
		reply fakeReply
		probe bool
	}{
		{"unsigned", fakeReply{Status: 200, Body: success, Sign: signNone}, false},
		{"tampered", fakeReply{Status: 200, Body: success, Sign: signTampered, SignedBody: refundJSON(testRefundNo, "PROCESSING")}, false},
		{"probe", fakeReply{Status: 200, Body: success, Sign: signProbe}, true},
		{"stale", fakeReply{Status: 200, Body: success, Sign: signStale}, false},
		{"unknown serial", fakeReply{Status: 200, Body: success, Sign: signUnknownSerial}, false},
		{"wrong key", fakeReply{Status: 200, Body: success, Sign: signWrongKey}, false},
		{"unsigned 202", fakeReply{Status: 202, Sign: signNone}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWeChat(t, func(recorded, int) fakeReply { return tc.reply })
			c := newTestClient(t, f)
			for _, call := range []func() reservation.Outcome{
				func() reservation.Outcome { return c.Submit(context.Background(), testRefundNo, mustBody(t, c), 1) },
				func() reservation.Outcome { return c.Query(context.Background(), testRefundNo) },
			} {
				o := call()
				if o.Kind != reservation.OutcomeUnknown || o.Code != codeUnverified {
					t.Fatalf("outcome %s/%s (%q), want UNKNOWN/%s", o.Kind, o.Code, o.Message, codeUnverified)
				}
				if o.ProviderID != "" || o.RefundAmount != 0 {
					t.Fatalf("unverified fields leaked into the outcome: %+v", o)
				}
			}
			st := c.Stats()
			if tc.probe && (st.Probes != 2 || st.Unverified != 0) || !tc.probe && (st.Probes != 0 || st.Unverified != 2) {
				t.Fatalf("stats %+v, probe=%v", st, tc.probe)
			}
		})
	}
}

func TestClientQuery_Mapping(t *testing.T) {
	cases := []mappingCase{
		{"success", 0, fakeReply{Status: 200, Body: refundJSON(testRefundNo, "SUCCESS")}, reservation.OutcomeSucceeded, ""},
		{"processing", 0, fakeReply{Status: 200, Body: refundJSON(testRefundNo, "PROCESSING")}, reservation.OutcomeProcessing, ""},
		{"closed", 0, fakeReply{Status: 200, Body: refundJSON(testRefundNo, "CLOSED")}, reservation.OutcomeFailed, ""},
		{"abnormal", 0, fakeReply{Status: 200, Body: refundJSON(testRefundNo, "ABNORMAL")}, reservation.OutcomeAbnormal, ""},
		{"other refund number", 0, fakeReply{Status: 200, Body: refundJSON("RF-other-1", "SUCCESS")}, reservation.OutcomeUnknown, "MISMATCHED_RESPONSE"},
		{"404 RESOURCE_NOT_EXISTS", 0, fakeReply{Status: 404, Body: errJSON("RESOURCE_NOT_EXISTS", "退款单不存在")}, reservation.OutcomeNotFound, "RESOURCE_NOT_EXISTS"},
		{"400 RESOURCE_NOT_EXISTS by code", 0, fakeReply{Status: 400, Body: errJSON("RESOURCE_NOT_EXISTS", "退款单不存在")}, reservation.OutcomeNotFound, "RESOURCE_NOT_EXISTS"},
		{"404 unsigned (WeChat may not sign errors)", 0, fakeReply{Status: 404, Body: errJSON("RESOURCE_NOT_EXISTS", "退款单不存在"), Sign: signNone}, reservation.OutcomeNotFound, "RESOURCE_NOT_EXISTS"},
		{"404 stale", 0, fakeReply{Status: 404, Body: errJSON("RESOURCE_NOT_EXISTS", "退款单不存在"), Sign: signStale}, reservation.OutcomeUnknown, codeUnverified},
		{"404 without code", 0, fakeReply{Status: 404, Body: `404 page not found`}, reservation.OutcomeUnknown, "HTTP_404"},
		{"404 other code", 0, fakeReply{Status: 404, Body: errJSON("NOT_FOUND", "x")}, reservation.OutcomeUnknown, "NOT_FOUND"},
		{"400 PARAM_ERROR", 0, fakeReply{Status: 400, Body: errJSON("PARAM_ERROR", "参数错误")}, reservation.OutcomeUnknown, "PARAM_ERROR"},
		{"400 INVALID_REQUEST", 0, fakeReply{Status: 400, Body: errJSON("INVALID_REQUEST", "x")}, reservation.OutcomeUnknown, "INVALID_REQUEST"},
		{"401 SIGN_ERROR", 0, fakeReply{Status: 401, Body: errJSON("SIGN_ERROR", "签名错误")}, reservation.OutcomeUnknown, "SIGN_ERROR"},
		{"500 SYSTEM_ERROR", 0, fakeReply{Status: 500, Body: errJSON("SYSTEM_ERROR", "系统错误")}, reservation.OutcomeUnknown, "SYSTEM_ERROR"},
		{"503 RESOURCE_NOT_EXISTS is not not-found", 0, fakeReply{Status: 503, Body: errJSON("RESOURCE_NOT_EXISTS", "x")}, reservation.OutcomeUnknown, "RESOURCE_NOT_EXISTS"},
		{"429", 0, fakeReply{Status: 429, Body: errJSON("FREQUENCY_LIMITED", "频率限制")}, reservation.OutcomeUnknown, "FREQUENCY_LIMITED"},
		{"202", 0, fakeReply{Status: 202}, reservation.OutcomeUnknown, "HTTP_202"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWeChat(t, func(recorded, int) fakeReply { return tc.reply })
			c := newTestClient(t, f)
			o := c.Query(context.Background(), testRefundNo)
			if o.Kind != tc.kind || o.Code != tc.code {
				t.Fatalf("outcome %s/%s (%q), want %s/%s", o.Kind, o.Code, o.Message, tc.kind, tc.code)
			}
		})
	}
}

func TestClientQuery_RequestShape(t *testing.T) {
	cases := []struct {
		name, refundNo, prefix, wantURI string
	}{
		{"plain", "RF-res1-1", "", "/v3/refund/domestic/refunds/RF-res1-1"},
		{"escaped", "R_1-a|b*c@d", "", "/v3/refund/domestic/refunds/R_1-a%7Cb%2Ac@d"},
		{"slash cannot change the path", "a/b", "", "/v3/refund/domestic/refunds/a%2Fb"},
		{"base path prefix", "RF-res1-1", "/wx/", "/wx/v3/refund/domestic/refunds/RF-res1-1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWeChat(t, func(r recorded, _ int) fakeReply {
				return fakeReply{Status: 404, Body: errJSON("RESOURCE_NOT_EXISTS", "退款单不存在")}
			})
			c := newTestClient(t, f, func(cfg *ClientConfig) { cfg.BaseURL += tc.prefix })
			if o := c.Query(context.Background(), tc.refundNo); o.Kind != reservation.OutcomeNotFound {
				t.Fatalf("outcome %+v", o)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			r := reqs[0]
			if r.Method != http.MethodGet || r.URI != tc.wantURI {
				t.Fatalf("request %s %s, want GET %s", r.Method, r.URI, tc.wantURI)
			}
			if r.AuthErr != nil {
				t.Fatalf("server could not verify the request signature: %v", r.AuthErr)
			}
			if len(r.Body) != 0 || r.Header.Get("Content-Type") != "" {
				t.Fatalf("GET carried body %q / content type %q", r.Body, r.Header.Get("Content-Type"))
			}
			checkCommonHeaders(t, r)
		})
	}
}

func TestClientQuery_InvalidNumberNotSent(t *testing.T) {
	f := newFakeWeChat(t, func(recorded, int) fakeReply { return fakeReply{Status: 500} })
	c := newTestClient(t, f)
	for _, no := range []string{"", strings.Repeat("a", 65)} {
		if o := c.Query(context.Background(), no); o.Kind != reservation.OutcomeUnknown || o.Code != "CLIENT_INVALID_REFUND_NO" {
			t.Fatalf("Query(%q) = %+v", no, o)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
}

func checkCommonHeaders(t *testing.T, r recorded) {
	t.Helper()
	if got := r.Header.Get("Accept"); got != "application/json" {
		t.Errorf("Accept %q", got)
	}
	if got := r.Header.Get("User-Agent"); !strings.HasPrefix(got, "github.com/refundd/refundd/") {
		t.Errorf("User-Agent %q", got)
	}
	if got := r.Header.Get(HeaderSerial); got != testPlatformSerial {
		t.Errorf("Wechatpay-Serial %q, want %q", got, testPlatformSerial)
	}
	if r.Auth.MchID != testMchID || r.Auth.SerialNo != testMerchantSerial || len(r.Auth.Nonce) != 32 {
		t.Errorf("authorization %+v", r.Auth)
	}
}

func TestClientSubmit_ExactBytesAcrossRetries(t *testing.T) {
	script := []fakeReply{
		{Status: 500, Body: errJSON("SYSTEM_ERROR", "系统超时")},
		{Status: 429, Body: errJSON("FREQUENCY_LIMITED", "频率限制")},
		{Status: 200, Body: refundJSON(testRefundNo, "PROCESSING")},
	}
	f := newFakeWeChat(t, func(_ recorded, n int) fakeReply { return script[n-1] })
	now := time.Unix(1_750_000_000, 0)
	c := newTestClient(t, f, func(cfg *ClientConfig) { cfg.Now = func() time.Time { return now } })
	body := mustBody(t, c)
	journaled := bytes.Clone(body)
	want := []reservation.OutcomeKind{reservation.OutcomeUnknown, reservation.OutcomeUnknown, reservation.OutcomeProcessing}
	for i, w := range want {
		if o := c.Submit(context.Background(), testRefundNo, body, i+1); o.Kind != w {
			t.Fatalf("attempt %d: %+v, want %s", i+1, o, w)
		}
	}
	if !bytes.Equal(body, journaled) {
		t.Fatal("Submit modified the caller's body")
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	nonces := map[string]bool{}
	for i, r := range reqs {
		if r.Method != http.MethodPost || r.URI != RefundsPath {
			t.Errorf("attempt %d: %s %s", i+1, r.Method, r.URI)
		}
		if !bytes.Equal(r.Body, journaled) {
			t.Errorf("attempt %d sent\n%s\nwant the journaled\n%s", i+1, r.Body, journaled)
		}
		if r.AuthErr != nil {
			t.Errorf("attempt %d: request signature does not verify: %v", i+1, r.AuthErr)
		}
		if r.Auth.Timestamp != now.Unix() {
			t.Errorf("attempt %d: timestamp %d, want %d from Now", i+1, r.Auth.Timestamp, now.Unix())
		}
		if got := r.Header.Get("Content-Type"); got != "application/json" {
			t.Errorf("attempt %d: Content-Type %q", i+1, got)
		}
		checkCommonHeaders(t, r)
		nonces[r.Auth.Nonce] = true
	}
	if len(nonces) != 3 {
		t.Errorf("nonces repeated across attempts: %v", nonces)
	}
}

func TestClientSubmit_BodyNotForNumber(t *testing.T) {
	f := newFakeWeChat(t, func(recorded, int) fakeReply {
		return fakeReply{Status: 200, Body: refundJSON(testRefundNo, "SUCCESS")}
	})
	c := newTestClient(t, f)
	body := mustBody(t, c)
	cases := []struct {
		name     string
		refundNo string
		body     []byte
		attempt  int
		kind     reservation.OutcomeKind
	}{
		{"other number first", "RF-other-1", body, 1, reservation.OutcomeRejected},
		{"other number resubmission", "RF-other-1", body, 2, reservation.OutcomeUnknown},
		{"not JSON", testRefundNo, []byte("out_refund_no=RF-res1-1"), 1, reservation.OutcomeRejected},
		{"empty", testRefundNo, nil, 3, reservation.OutcomeUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := c.Submit(context.Background(), tc.refundNo, tc.body, tc.attempt)
			if o.Kind != tc.kind || o.Code != "CLIENT_INVALID_BODY" {
				t.Fatalf("outcome %+v, want %s/CLIENT_INVALID_BODY", o, tc.kind)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests sent for bodies that do not match their number", n)
	}
}

func TestClientSubmit_Timeout(t *testing.T) {
	block := func(recorded, int) fakeReply { return fakeReply{Block: true} }
	cases := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		http *http.Client
		code string
	}{
		{"context deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, nil, "TIMEOUT"},
		{"http client timeout", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, &http.Client{Timeout: 100 * time.Millisecond}, "TIMEOUT"},
		{"canceled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, nil, "CANCELED"},
		{"canceled before the call", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, nil, "CANCELED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWeChat(t, block)
			c := newTestClient(t, f, func(cfg *ClientConfig) { cfg.HTTPClient = tc.http })
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			o := c.Submit(ctx, testRefundNo, mustBody(t, c), 1)
			if o.Kind != reservation.OutcomeUnknown || o.Code != tc.code {
				t.Fatalf("outcome %s/%s (%q), want UNKNOWN/%s", o.Kind, o.Code, o.Message, tc.code)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %s", d)
			}
			if q := c.Query(ctx, testRefundNo); q.Kind != reservation.OutcomeUnknown {
				t.Fatalf("query outcome %+v", q)
			}
		})
	}
}

func TestClientSubmit_NetworkError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	c, err := NewClient(testConfig(t, url))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Submit(context.Background(), testRefundNo, mustBody(t, c), 1)
	if o.Kind != reservation.OutcomeUnknown || o.Code != "NETWORK_ERROR" {
		t.Fatalf("outcome %+v", o)
	}
}

func TestClientSubmit_ResponseTooLarge(t *testing.T) {
	big := `{"out_refund_no":"` + testRefundNo + `","status":"SUCCESS","pad":"` + strings.Repeat("x", MaxResponseSize) + `"}`
	f := newFakeWeChat(t, func(recorded, int) fakeReply { return fakeReply{Status: 200, Body: big} })
	c := newTestClient(t, f)
	if o := c.Submit(context.Background(), testRefundNo, mustBody(t, c), 1); o.Kind != reservation.OutcomeUnknown || o.Code != "RESPONSE_TOO_LARGE" {
		t.Fatalf("outcome %s/%s", o.Kind, o.Code)
	}
}

func TestClientSubmit_Concurrent(t *testing.T) {
	f := newFakeWeChat(t, func(r recorded, _ int) fakeReply {
		var b CreateRefundBody
		json.Unmarshal(r.Body, &b)
		if r.Method == http.MethodGet {
			b.OutRefundNo = strings.TrimPrefix(r.URI, RefundsPath+"/")
		}
		return fakeReply{Status: 200, Body: refundJSON(b.OutRefundNo, "PROCESSING")}
	})
	c := newTestClient(t, f)
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for i := range 8 {
		wg.Go(func() {
			req := testRequest()
			req.RefundNo = "RF-res" + strconv.Itoa(i) + "-1"
			body, err := c.RequestBody(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			if o := c.Submit(context.Background(), req.RefundNo, body, 1); o.Kind != reservation.OutcomeProcessing {
				errs <- "submit " + req.RefundNo + ": " + string(o.Kind) + " " + o.Code
			}
			if o := c.Query(context.Background(), req.RefundNo); o.Kind != reservation.OutcomeProcessing {
				errs <- "query " + req.RefundNo + ": " + string(o.Kind) + " " + o.Code
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, r := range f.requests() {
		if r.AuthErr != nil {
			t.Errorf("%s %s: %v", r.Method, r.URI, r.AuthErr)
		}
	}
}

func TestClientRequestBody_Golden(t *testing.T) {
	f := newFakeWeChat(t, func(recorded, int) fakeReply { return fakeReply{Status: 500} })
	c := newTestClient(t, f)
	cases := []struct {
		name string
		mod  func(*reservation.RefundRequest)
		want string
	}{
		{"full", nil, `{"out_trade_no":"ORD-res1","out_refund_no":"RF-res1-1","reason":"商品已售完","notify_url":"https://merchant.example/v1/notify/wechatpay/refund","amount":{"refund":100,"total":500,"currency":"CNY"}}`},
		{"no reason is omitted", func(r *reservation.RefundRequest) { r.Reason = "" },
			`{"out_trade_no":"ORD-res1","out_refund_no":"RF-res1-1","notify_url":"https://merchant.example/v1/notify/wechatpay/refund","amount":{"refund":100,"total":500,"currency":"CNY"}}`},
		{"transaction id only when no order number", func(r *reservation.RefundRequest) { r.OutTradeNo = "" },
			`{"transaction_id":"4200000000202501010000000001","out_refund_no":"RF-res1-1","reason":"商品已售完","notify_url":"https://merchant.example/v1/notify/wechatpay/refund","amount":{"refund":100,"total":500,"currency":"CNY"}}`},
		{"empty currency is CNY", func(r *reservation.RefundRequest) { r.Currency = "" },
			`{"out_trade_no":"ORD-res1","out_refund_no":"RF-res1-1","reason":"商品已售完","notify_url":"https://merchant.example/v1/notify/wechatpay/refund","amount":{"refund":100,"total":500,"currency":"CNY"}}`},
		{"html characters kept", func(r *reservation.RefundRequest) { r.Reason = `a<b>&"c"` },
			`{"out_trade_no":"ORD-res1","out_refund_no":"RF-res1-1","reason":"a<b>&\"c\"","notify_url":"https://merchant.example/v1/notify/wechatpay/refund","amount":{"refund":100,"total":500,"currency":"CNY"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := testRequest()
			if tc.mod != nil {
				tc.mod(&req)
			}
			got, err := c.RequestBody(req)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("body\n got %s\nwant %s", got, tc.want)
			}
			again, _ := c.RequestBody(req)
			if !bytes.Equal(got, again) {
				t.Fatal("RequestBody is not deterministic")
			}
			if bytes.Contains(got, []byte("null")) || bytes.HasSuffix(got, []byte("\n")) {
				t.Fatalf("body has null or a trailing newline: %q", got)
			}
			// Field names are exactly PROTOCOL.md §1.2's.
			var m map[string]json.RawMessage
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatal(err)
			}
			for k := range m {
				switch k {
				case "out_trade_no", "transaction_id", "out_refund_no", "reason", "notify_url", "amount":
				default:
					t.Errorf("unexpected field %q", k)
				}
			}
		})
	}
}

func TestClientRequestBody_WithoutNotifyURL(t *testing.T) {
	f := newFakeWeChat(t, func(recorded, int) fakeReply { return fakeReply{Status: 500} })
	c := newTestClient(t, f, func(cfg *ClientConfig) { cfg.NotifyURL = "" })
	got, err := c.RequestBody(testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(got, []byte("notify_url")) {
		t.Fatalf("notify_url present without NotifyURL: %s", got)
	}
}

func TestClientRequestBody_Invalid(t *testing.T) {
	f := newFakeWeChat(t, func(recorded, int) fakeReply { return fakeReply{Status: 500} })
	c := newTestClient(t, f)
	cases := []struct {
		name string
		mod  func(*reservation.RefundRequest)
	}{
		{"empty refund number", func(r *reservation.RefundRequest) { r.RefundNo = "" }},
		{"refund number too long", func(r *reservation.RefundRequest) { r.RefundNo = strings.Repeat("a", 65) }},
		{"refund number with slash", func(r *reservation.RefundRequest) { r.RefundNo = "a/b" }},
		{"refund number with quote", func(r *reservation.RefundRequest) { r.RefundNo = `a"b` }},
		{"no order number", func(r *reservation.RefundRequest) { r.OutTradeNo, r.TransactionID = "", "" }},
		{"order number too long", func(r *reservation.RefundRequest) { r.OutTradeNo = strings.Repeat("1", 33) }},
		{"order number with space", func(r *reservation.RefundRequest) { r.OutTradeNo = "ORD 1" }},
		{"zero amount", func(r *reservation.RefundRequest) { r.Amount = 0 }},
		{"negative amount", func(r *reservation.RefundRequest) { r.Amount = -1 }},
		{"zero total", func(r *reservation.RefundRequest) { r.Total = 0 }},
		{"amount over total", func(r *reservation.RefundRequest) { r.Amount = 501 }},
		{"other currency", func(r *reservation.RefundRequest) { r.Currency = "USD" }},
		{"reason too long", func(r *reservation.RefundRequest) { r.Reason = strings.Repeat("退", 27) }}, // 81 bytes
		{"reason invalid utf-8", func(r *reservation.RefundRequest) { r.Reason = "a\xffb" }},
		{"reason control char", func(r *reservation.RefundRequest) { r.Reason = "a\nb" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := testRequest()
			tc.mod(&req)
			b, err := c.RequestBody(req)
			if !errors.Is(err, ErrInvalidArgument) || b != nil {
				t.Fatalf("RequestBody = %q, %v; want ErrInvalidArgument", b, err)
			}
		})
	}
}

func TestNewClient_Invalid(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*ClientConfig)
		want error
	}{
		{"notify url with query", func(c *ClientConfig) { c.NotifyURL = testNotifyURL + "?a=1" }, ErrInvalidArgument},
		{"notify url with empty query", func(c *ClientConfig) { c.NotifyURL = testNotifyURL + "?" }, ErrInvalidArgument},
		{"notify url with fragment", func(c *ClientConfig) { c.NotifyURL = testNotifyURL + "#x" }, ErrInvalidArgument},
		{"notify url relative", func(c *ClientConfig) { c.NotifyURL = "/notify" }, ErrInvalidArgument},
		{"notify url other scheme", func(c *ClientConfig) { c.NotifyURL = "ftp://merchant.example/n" }, ErrInvalidArgument},
		{"notify url with user info", func(c *ClientConfig) { c.NotifyURL = "https://u:p@merchant.example/n" }, ErrInvalidArgument},
		{"notify url too long", func(c *ClientConfig) { c.NotifyURL = "https://merchant.example/" + strings.Repeat("n", 240) }, ErrInvalidArgument},
		{"no base url", func(c *ClientConfig) { c.BaseURL = "" }, ErrInvalidArgument},
		{"base url without scheme", func(c *ClientConfig) { c.BaseURL = "api.mch.weixin.qq.com" }, ErrInvalidArgument},
		{"base url with query", func(c *ClientConfig) { c.BaseURL = "https://api.mch.weixin.qq.com?x=1" }, ErrInvalidArgument},
		{"base url with user info", func(c *ClientConfig) { c.BaseURL = "https://u:p@api.mch.weixin.qq.com" }, ErrInvalidArgument},
		{"no mchid", func(c *ClientConfig) { c.MchID = "" }, ErrInvalidArgument},
		{"mchid mismatch", func(c *ClientConfig) { c.Signer.MchID = "1900000002" }, ErrInvalidArgument},
		{"no merchant serial", func(c *ClientConfig) { c.Signer.SerialNo = "" }, ErrInvalidArgument},
		{"no private key", func(c *ClientConfig) { c.Signer.Key = nil }, ErrInvalidKey},
		{"no verifier", func(c *ClientConfig) { c.Verifier = nil }, ErrInvalidArgument},
		{"verifier without keys", func(c *ClientConfig) { c.Verifier = &Verifier{} }, ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "https://api.mch.weixin.qq.com")
			tc.mod(&cfg)
			c, err := NewClient(cfg)
			if !errors.Is(err, tc.want) || c != nil {
				t.Fatalf("NewClient = %v, %v; want %v", c, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "wechatpay: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestNewClient_Defaults(t *testing.T) {
	cfg := testConfig(t, "https://api.mch.weixin.qq.com/")
	cfg.MchID, cfg.Signer.MchID = "", testMchID // taken from the Signer
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.base != "https://api.mch.weixin.qq.com" || c.signer.Load().MchID != testMchID {
		t.Fatalf("base %q mchid %q", c.base, c.signer.Load().MchID)
	}
	if c.http.Timeout != DefaultClientTimeout || c.http.CheckRedirect == nil || c.now == nil || c.log == nil {
		t.Fatalf("defaults not filled: %+v", c.http)
	}
	mine := &http.Client{Timeout: time.Second}
	cfg.HTTPClient = mine
	if c, err = NewClient(cfg); err != nil {
		t.Fatal(err)
	}
	if mine.CheckRedirect != nil || c.http == mine || c.http.Timeout != time.Second {
		t.Fatal("the caller's http.Client was modified or not used")
	}
}

func TestClient_LogsNoSecrets(t *testing.T) {
	f := newFakeWeChat(t, func(_ recorded, n int) fakeReply {
		if n == 1 {
			return fakeReply{Status: 200, Body: refundJSON(testRefundNo, "SUCCESS"), Sign: signWrongKey}
		}
		return fakeReply{Status: 200, Body: refundJSON(testRefundNo, "SUCCESS")}
	})
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newTestClient(t, f, func(cfg *ClientConfig) { cfg.Logger = logger })
	if o := c.Submit(context.Background(), testRefundNo, mustBody(t, c), 1); o.Code != codeUnverified {
		t.Fatalf("outcome %+v", o)
	}
	if o := c.Query(context.Background(), testRefundNo); o.Kind != reservation.OutcomeSucceeded {
		t.Fatalf("outcome %+v", o)
	}
	out := buf.String()
	for _, want := range []string{"request_id=req-1", "request_id=req-2", "outcome=SUCCEEDED", "level=WARN"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	reqs := f.requests()
	secrets := []string{"PRIVATE KEY", "signature=", Scheme, reqs[0].Auth.Signature, reqs[1].Auth.Signature,
		reqs[0].Auth.Nonce, v6Key(t).D.String()[:20]}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("log contains secret-ish %q", s)
		}
	}
}

// TestErrorKind_Table pins the single mapping table for every documented
// code, both operations and both kinds of attempt.
func TestErrorKind_Table(t *testing.T) {
	const (
		U  = reservation.OutcomeUnknown
		R  = reservation.OutcomeRejected
		NF = reservation.OutcomeNotFound
	)
	cases := []struct {
		status       int
		code         string
		first, resub reservation.OutcomeKind // submit attempt 1, submit attempt 2
		query        reservation.OutcomeKind
	}{
		{500, "SYSTEM_ERROR", U, U, U},
		{503, "SERVICE_UNAVAILABLE", U, U, U},
		{502, "", U, U, U},
		{429, "FREQUENCY_LIMITED", U, U, U},
		{403, "FREQUENCY_LIMITED", U, U, U},
		{400, "SYSTEM_ERROR", U, U, U},
		{401, "SIGN_ERROR", U, U, U},
		{403, "NOT_ENOUGH", R, U, U},
		{403, "USER_ACCOUNT_ABNORMAL", R, U, U},
		{400, "PARAM_ERROR", R, U, U},
		{400, "INVALID_REQUEST", R, U, U},
		{400, "MCH_NOT_EXISTS", R, U, U},
		{403, "NO_AUTH", R, U, U},
		{404, "RESOURCE_NOT_EXISTS", R, U, NF},
		{400, "UNLISTED_CODE", R, U, U},
		{400, "", U, U, U},
		{404, "", U, U, U},
		{302, "NOT_ENOUGH", U, U, U},
		{500, "RESOURCE_NOT_EXISTS", U, U, U},
	}
	for _, tc := range cases {
		name := strconv.Itoa(tc.status) + "_" + tc.code
		t.Run(name, func(t *testing.T) {
			if got := errorKind(opSubmit, tc.status, tc.code, 1); got != tc.first {
				t.Errorf("submit attempt 1: %s, want %s", got, tc.first)
			}
			for _, attempt := range []int{2, 7, 0} {
				if got := errorKind(opSubmit, tc.status, tc.code, attempt); got != tc.resub {
					t.Errorf("submit attempt %d: %s, want %s", attempt, got, tc.resub)
				}
			}
			if got := errorKind(opQuery, tc.status, tc.code, 0); got != tc.query {
				t.Errorf("query: %s, want %s", got, tc.query)
			}
		})
	}
}
