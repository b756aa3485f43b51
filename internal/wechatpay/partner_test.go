package wechatpay

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/reservation"
)

// In these tests the fake WeChat Pay's merchant (testMchID, V6's key and
// testMerchantSerial) is a service provider: sp_mchid testMchID.
const (
	testSubMchID  = "1900000109"
	testSubMchID2 = "1900000110"
)

// partnerResource is a decrypted partner refund resource (PARTNER.md §1.5).
const partnerResource = `{"sp_mchid":"1900000100","sub_mchid":"1900000109","transaction_id":"4200","out_trade_no":"O1",` +
	`"refund_id":"503","out_refund_no":"R1","refund_status":"SUCCESS","success_time":"2018-06-08T10:34:56+08:00",` +
	`"user_received_account":"支付用户零钱","amount":{"total":999,"refund":500,"payer_total":999,"payer_refund":500}}`

func samplePartnerRefund() RefundResource {
	r := sampleRefund()
	r.MchID, r.SpMchID, r.SubMchID = "", "1900000100", testSubMchID
	return r
}

func newPartnerClient(t *testing.T, f *fakeWeChat) *Client {
	t.Helper()
	return newTestClient(t, f, func(cfg *ClientConfig) { cfg.Partner = true })
}

func mustFor(t *testing.T, c *Client, tg Target) *MerchantClient {
	t.Helper()
	m, err := c.For(tg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPartnerRequestBody_Golden: a partner body is the direct body with
// sub_mchid first; notify_url is the merchant's when it has one. The
// provider's ids are not body fields (PARTNER.md §1.3).
func TestPartnerRequestBody_Golden(t *testing.T) {
	f := newFakeWeChat(t, func(recorded, int) fakeReply { return fakeReply{Status: 500} })
	c := newPartnerClient(t, f)
	const rest = `"out_trade_no":"ORD-res1","out_refund_no":"RF-res1-1","reason":"商品已售完","notify_url":`
	cases := []struct {
		name string
		tg   Target
		want string
	}{
		{"client notify_url", Target{SubMchID: testSubMchID},
			`{"sub_mchid":"1900000109",` + rest + `"https://merchant.example/v1/notify/wechatpay/refund","amount":{"refund":100,"total":500,"currency":"CNY"}}`},
		{"merchant notify_url", Target{SubMchID: testSubMchID2, NotifyURL: "https://b.example/n/sub2"},
			`{"sub_mchid":"1900000110",` + rest + `"https://b.example/n/sub2","amount":{"refund":100,"total":500,"currency":"CNY"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mustFor(t, c, tc.tg).RequestBody(testRequest())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("body\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	if _, err := c.RequestBody(testRequest()); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("partner Client.RequestBody without a sub-merchant: %v, want ErrInvalidArgument", err)
	}
}

// TestDirectFor_SameBytes: on a direct account, the merchant view with no
// target builds and sends exactly what the Client does.
func TestDirectFor_SameBytes(t *testing.T) {
	f := newFakeWeChat(t, func(r recorded, _ int) fakeReply {
		return fakeReply{Status: 404, Body: errJSON("RESOURCE_NOT_EXISTS", "退款单不存在")}
	})
	c := newTestClient(t, f)
	m := mustFor(t, c, Target{})
	a, _ := c.RequestBody(testRequest())
	b, err := m.RequestBody(testRequest())
	if err != nil || string(a) != string(b) {
		t.Fatalf("direct bodies differ: %s vs %s (%v)", a, b, err)
	}
	c.Query(context.Background(), testRefundNo)
	m.Query(context.Background(), testRefundNo)
	reqs := f.requests()
	if len(reqs) != 2 || reqs[0].URI != reqs[1].URI || strings.Contains(reqs[1].URI, "sub_mchid") {
		t.Fatalf("direct queries: %+v", reqs)
	}
	if got := m.Merchant(); got != (Merchant{MchID: testMchID}) {
		t.Fatalf("Merchant() = %+v", got)
	}
}

// TestPartnerRequests: create carries sub_mchid in the body, query carries
// ?sub_mchid= in the signed URL; both are signed by the provider (its
// mchid, serial and key) and the answers verified with its WeChat Pay key.
func TestPartnerRequests(t *testing.T) {
	cases := []struct {
		name    string
		sub     string
		call    func(m *MerchantClient, body []byte) reservation.Outcome
		method  string
		wantURI string
		inBody  string
	}{
		{"create", testSubMchID, func(m *MerchantClient, body []byte) reservation.Outcome {
			return m.Submit(context.Background(), testRefundNo, body, 1)
		}, "POST", "/v3/refund/domestic/refunds", `"sub_mchid":"1900000109"`},
		{"create other sub-merchant", testSubMchID2, func(m *MerchantClient, body []byte) reservation.Outcome {
			return m.Submit(context.Background(), testRefundNo, body, 1)
		}, "POST", "/v3/refund/domestic/refunds", `"sub_mchid":"1900000110"`},
		{"query", testSubMchID, func(m *MerchantClient, _ []byte) reservation.Outcome {
			return m.Query(context.Background(), testRefundNo)
		}, "GET", "/v3/refund/domestic/refunds/RF-res1-1?sub_mchid=1900000109", ""},
		{"query escapes", "19&x=1", func(m *MerchantClient, _ []byte) reservation.Outcome {
			return m.Query(context.Background(), testRefundNo)
		}, "GET", "/v3/refund/domestic/refunds/RF-res1-1?sub_mchid=19%26x%3D1", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWeChat(t, func(r recorded, _ int) fakeReply {
				return fakeReply{Status: 200, Body: refundJSON(testRefundNo, RefundProcessing)}
			})
			m := mustFor(t, newPartnerClient(t, f), Target{SubMchID: tc.sub})
			body, err := m.RequestBody(testRequest())
			if err != nil {
				t.Fatal(err)
			}
			if o := tc.call(m, body); o.Kind != reservation.OutcomeProcessing {
				t.Fatalf("outcome %+v, want PROCESSING (answer verified with the provider's key)", o)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			r := reqs[0]
			if r.Method != tc.method || r.URI != tc.wantURI {
				t.Fatalf("request %s %s, want %s %s", r.Method, r.URI, tc.method, tc.wantURI)
			}
			// checkCommonHeaders: Authorization mchid is the provider's, with
			// its serial; AuthErr: signed with its key over this URI.
			checkCommonHeaders(t, r)
			if r.AuthErr != nil {
				t.Fatalf("request not signed by the provider: %v", r.AuthErr)
			}
			if !strings.Contains(string(r.Body), tc.inBody) || tc.inBody == "" && len(r.Body) != 0 {
				t.Fatalf("body %s, want it to contain %q", r.Body, tc.inBody)
			}
		})
	}
}

// TestPartnerAnswerWrongKey: a partner answer not signed with the
// provider's WeChat Pay key is not trusted.
func TestPartnerAnswerWrongKey(t *testing.T) {
	f := newFakeWeChat(t, func(recorded, int) fakeReply {
		return fakeReply{Status: 200, Body: refundJSON(testRefundNo, RefundSuccess), Sign: signWrongKey}
	})
	m := mustFor(t, newPartnerClient(t, f), Target{SubMchID: testSubMchID})
	if o := m.Query(context.Background(), testRefundNo); o.Kind != reservation.OutcomeUnknown || o.Code != codeUnverified {
		t.Fatalf("outcome %+v, want unknown %s", o, codeUnverified)
	}
}

// TestPartner_NotSent: nothing goes out that names the wrong merchant or
// does not fit the account's mode.
func TestPartner_NotSent(t *testing.T) {
	f := newFakeWeChat(t, func(recorded, int) fakeReply { return fakeReply{Status: 500} })
	partner := newPartnerClient(t, f)
	direct := newTestClient(t, f)
	sub1 := mustFor(t, partner, Target{SubMchID: testSubMchID})
	sub2 := mustFor(t, partner, Target{SubMchID: testSubMchID2})
	body1, err := sub1.RequestBody(testRequest())
	if err != nil {
		t.Fatal(err)
	}
	directBody := mustBody(t, direct)
	ctx := context.Background()
	cases := []struct {
		name string
		call func() reservation.Outcome
		code string
	}{
		{"partner query without sub-merchant", func() reservation.Outcome { return partner.Query(ctx, testRefundNo) }, "CLIENT_NO_SUB_MCHID"},
		{"body of sub 1 through sub 2", func() reservation.Outcome { return sub2.Submit(ctx, testRefundNo, body1, 1) }, "CLIENT_INVALID_BODY"},
		{"direct body through a partner account", func() reservation.Outcome { return partner.Submit(ctx, testRefundNo, directBody, 1) }, "CLIENT_INVALID_BODY"},
		{"partner body through a direct account", func() reservation.Outcome { return direct.Submit(ctx, testRefundNo, body1, 1) }, "CLIENT_INVALID_BODY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if o := tc.call(); o.Code != tc.code {
				t.Fatalf("outcome %+v, want code %s", o, tc.code)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
	// The provider's own body still goes out through the Client.
	if o := partner.Submit(ctx, testRefundNo, body1, 1); o.Kind != reservation.OutcomeUnknown || o.Code != "HTTP_500" {
		t.Fatalf("partner Submit of its own body: %+v", o)
	}
}

func TestClientFor_Invalid(t *testing.T) {
	f := newFakeWeChat(t, func(recorded, int) fakeReply { return fakeReply{Status: 500} })
	partner, direct := newPartnerClient(t, f), newTestClient(t, f)
	cases := []struct {
		name string
		c    *Client
		tg   Target
	}{
		{"partner without sub_mchid", partner, Target{}},
		{"direct with sub_mchid", direct, Target{SubMchID: testSubMchID}},
		{"sub_mchid is the provider", partner, Target{SubMchID: testMchID}},
		{"sub_mchid too long", partner, Target{SubMchID: strings.Repeat("1", 33)}},
		{"sub_mchid with a space", partner, Target{SubMchID: "1 2"}},
		{"notify_url with query", partner, Target{SubMchID: testSubMchID, NotifyURL: "https://a.example/n?m=1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if m, err := tc.c.For(tc.tg); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("For(%+v) = %v, %v; want ErrInvalidArgument", tc.tg, m, err)
			}
		})
	}
}

// TestParseRefundNotification_Partner: a partner notification, verified and
// decrypted with the provider's keys, surfaces sp_mchid and sub_mchid in
// the resource and in the outcome.
func TestParseRefundNotification_Partner(t *testing.T) {
	want := samplePartnerRefund()
	body, err := BuildRefundNotification([]byte(apiV3Key32), Notification{ID: "EV-1", CreateTime: "2018-06-08T10:34:56+08:00",
		Resource: EncryptedResource{AssociatedData: "refund"}}, want)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := ParseRefundNotification(newV4Verifier(t), []byte(apiV3Key32), signedV4(t, body), body)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("resource\n got %+v\nwant %+v", got, want)
	}
	m := Merchant{MchID: "1900000100", SubMchID: testSubMchID}
	if got.Merchant() != m {
		t.Fatalf("Merchant() = %+v", got.Merchant())
	}
	if o := got.Notification().Outcome; o.MchID != m.MchID || o.SubMchID != m.SubMchID || o.Kind != reservation.OutcomeSucceeded {
		t.Fatalf("outcome %+v", o)
	}
	if err := CheckMerchant(m, got.Merchant()); err != nil {
		t.Fatal(err)
	}
}

// TestParseRefundResource_PartnerShapes: which merchant fields a resource
// may carry.
func TestParseRefundResource_PartnerShapes(t *testing.T) {
	cases := []struct {
		name      string
		plaintext string
		want      Merchant
		err       error
	}{
		{"partner", partnerResource, Merchant{"1900000100", "1900000109"}, nil},
		{"mchid for sp_mchid (skills sample)", strings.Replace(partnerResource, `"sp_mchid"`, `"mchid"`, 1), Merchant{"1900000100", "1900000109"}, nil},
		{"mchid equal to sp_mchid", strings.Replace(partnerResource, `{`, `{"mchid":"1900000100",`, 1), Merchant{"1900000100", "1900000109"}, nil},
		{"direct", completeResource, Merchant{"1900000100", ""}, nil},
		{"partner without sub_mchid", strings.Replace(partnerResource, `"sub_mchid":"1900000109",`, "", 1), Merchant{}, ErrIncomplete},
		{"partner with empty sub_mchid", strings.Replace(partnerResource, `"sub_mchid":"1900000109"`, `"sub_mchid":""`, 1), Merchant{}, ErrIncomplete},
		{"sub_mchid without provider", strings.Replace(partnerResource, `"sp_mchid":"1900000100",`, "", 1), Merchant{}, ErrIncomplete},
		{"two accounts", strings.Replace(partnerResource, `{`, `{"mchid":"1900000999",`, 1), Merchant{}, ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseRefundResource([]byte(tc.plaintext))
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if r.Merchant() != tc.want {
				t.Fatalf("Merchant() = %+v, want %+v", r.Merchant(), tc.want)
			}
		})
	}
}

// TestCheckMerchant: the strict match of a message's merchant with the
// refund's (docs/DESIGN.md, "Partner mode").
func TestCheckMerchant(t *testing.T) {
	direct := Merchant{MchID: "1900000001"}
	sub := Merchant{MchID: "1900000100", SubMchID: "1900000109"}
	cases := []struct {
		name      string
		want, got Merchant
		err       error
	}{
		{"direct", direct, direct, nil},
		{"sub-merchant", sub, sub, nil},
		{"other direct merchant", direct, Merchant{MchID: "1900000002"}, ErrMerchantMismatch},
		{"direct refund, message names a sub_mchid", direct, Merchant{MchID: "1900000001", SubMchID: "1900000109"}, ErrMerchantMismatch},
		{"partner refund, message without sub_mchid", sub, Merchant{MchID: "1900000100"}, ErrIncomplete},
		{"partner refund, other sub-merchant", sub, Merchant{MchID: "1900000100", SubMchID: "1900000110"}, ErrMerchantMismatch},
		{"partner refund, other provider", sub, Merchant{MchID: "1900000200", SubMchID: "1900000109"}, ErrMerchantMismatch},
		{"partner refund, direct message of the sub-merchant", sub, Merchant{MchID: "1900000109"}, ErrIncomplete},
		{"no expected merchant", Merchant{}, direct, ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckMerchant(tc.want, tc.got)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("CheckMerchant(%+v, %+v) = %v, want %v", tc.want, tc.got, err, tc.err)
			}
		})
	}
}

// TestNotificationV2_Partner: a v2 partner notification's envelope names
// the provider (mch_id) and the sub-merchant (sub_mch_id); both reach the
// hint's outcome.
func TestNotificationV2_Partner(t *testing.T) {
	key := []byte("ziR0QKsTUfMOuochC9RfCdmfHECorQAP")
	info := V2RefundInfo{OutRefundNo: "R1", OutTradeNo: "O1", RefundID: "503", TotalFee: 999, RefundFee: 500,
		SettlementRefundFee: 500, RefundStatus: V2RefundSuccess}
	body, err := BuildRefundNotificationV2(key, V2Envelope{AppID: "wxsp", MchID: "1900000100", SubAppID: "wxsub", SubMchID: testSubMchID}, info)
	if err != nil {
		t.Fatal(err)
	}
	env, got, err := ParseRefundNotificationV2(key, body)
	if err != nil {
		t.Fatal(err)
	}
	if env.Merchant() != (Merchant{"1900000100", testSubMchID}) {
		t.Fatalf("envelope merchant %+v", env.Merchant())
	}
	want := info.Notification()
	want.Outcome.MchID, want.Outcome.SubMchID = "1900000100", testSubMchID
	if n := NotificationV2(env, got); !reflect.DeepEqual(n, want) || !n.Hint {
		t.Fatalf("NotificationV2 = %+v, want %+v", n, want)
	}
}
