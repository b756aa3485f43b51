package wechatpay

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/reservation"
)

// completeResource is a v3 refund resource with every field WeChat Pay always
// sends (PROTOCOL.md §3.4).
const completeResource = `{"mchid":"1900000100","out_trade_no":"O1","transaction_id":"4200","out_refund_no":"R1",` +
	`"refund_id":"503","refund_status":"SUCCESS","success_time":"2018-06-08T10:34:56+08:00",` +
	`"amount":{"total":999,"refund":500,"payer_total":0,"payer_refund":0}}`

// TestParseRefundResource_Incomplete: a resource that lacks a field WeChat
// Pay always sends is refused with ErrIncomplete, even correctly encrypted
// and signed, instead of reaching the matching with empty values. A zero
// payer amount is genuine (a coupon can pay it all); an absent one is not.
func TestParseRefundResource_Incomplete(t *testing.T) {
	drop := func(field string) string {
		i := strings.Index(completeResource, `"`+field+`":`)
		if i < 0 {
			t.Fatalf("no %s in the fixture", field)
		}
		j := i + strings.IndexAny(completeResource[i:], ",}")
		if completeResource[j] == ',' {
			return completeResource[:i] + completeResource[j+1:]
		}
		return strings.TrimSuffix(completeResource[:i], ",") + completeResource[j:]
	}
	cases := []struct{ name, plaintext string }{
		{"only out_refund_no and mchid", `{"mchid":"1900000100","out_refund_no":"R1","refund_status":"SUCCESS"}`},
		{"no mchid", drop("mchid")},
		{"no out_trade_no", drop("out_trade_no")},
		{"no refund_id", drop("refund_id")},
		{"no refund_status", drop("refund_status")},
		{"no amount.total", drop("total")},
		{"no amount.refund", drop("refund")},
		{"no amount.payer_total", drop("payer_total")},
		{"no amount.payer_refund", drop("payer_refund")},
		{"no amount", `{"mchid":"1","out_trade_no":"O1","out_refund_no":"R1","refund_id":"503","refund_status":"SUCCESS"}`},
		{"empty out_trade_no", strings.Replace(completeResource, `"out_trade_no":"O1"`, `"out_trade_no":""`, 1)},
		{"empty refund_id", strings.Replace(completeResource, `"refund_id":"503"`, `"refund_id":""`, 1)},
		{"zero total", strings.Replace(completeResource, `"total":999`, `"total":0`, 1)},
		{"zero refund", strings.Replace(completeResource, `"refund":500`, `"refund":0`, 1)},
		{"null amount.refund", strings.Replace(completeResource, `"refund":500`, `"refund":null`, 1)},
		// The API response's "status" is not the notification's field.
		{"status instead of refund_status", strings.Replace(completeResource, `"refund_status":`, `"status":`, 1)},
		{"partner without sub_mchid", strings.Replace(completeResource, `"mchid":"1900000100"`, `"sp_mchid":"1900000100"`, 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := parseRefundResource([]byte(c.plaintext))
			if !errors.Is(err, ErrIncomplete) {
				t.Fatalf("parse %s: %+v, %v; want ErrIncomplete", c.plaintext, r, err)
			}
			if r != (RefundResource{}) {
				t.Fatalf("resource returned with an error: %+v", r)
			}
		})
	}
	for _, ok := range []string{
		completeResource,
		strings.Replace(completeResource, `"mchid":"1900000100"`, `"sp_mchid":"1900000100","sub_mchid":"1900000109"`, 1),
	} {
		if _, err := parseRefundResource([]byte(ok)); err != nil {
			t.Fatalf("complete resource %s: %v", ok, err)
		}
	}
}

// TestParseRefundNotification_IncompleteSigned: the hostile review's
// notification, correctly signed and encrypted, carrying only out_refund_no
// and mchid.
func TestParseRefundNotification_IncompleteSigned(t *testing.T) {
	const nonce = "eObYf1re2IZ0"
	body := envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, nonce, "refund",
		encrypt(t, nonce, "refund", `{"mchid":"1900000100","out_refund_no":"R1"}`))
	_, r, err := ParseRefundNotification(newV4Verifier(t), []byte(apiV3Key32), signedV4(t, body), body)
	if !errors.Is(err, ErrIncomplete) || r != (RefundResource{}) {
		t.Fatalf("got %+v, %v; want ErrIncomplete", r, err)
	}
}

// TestParseRefundNotificationV2_Incomplete: the same rule for v2 req_info,
// whose always-sent fields are out_refund_no, out_trade_no, refund_id,
// refund_status, total_fee, refund_fee and settlement_refund_fee
// (PROTOCOL.md §4.3), and for the envelope's mch_id.
func TestParseRefundNotificationV2_Incomplete(t *testing.T) {
	key := []byte(loadVectors(t).V9.APIv2Key)
	const complete = `<root><out_refund_no>R1</out_refund_no><out_trade_no>O1</out_trade_no><refund_id>503</refund_id>` +
		`<refund_status>SUCCESS</refund_status><total_fee>999</total_fee><refund_fee>500</refund_fee>` +
		`<settlement_refund_fee>0</settlement_refund_fee></root>`
	body := func(mchID, plaintext string) []byte {
		ri, err := EncryptReqInfo(key, []byte(plaintext))
		if err != nil {
			t.Fatal(err)
		}
		return []byte(`<xml><return_code>SUCCESS</return_code><appid>wx1</appid><mch_id>` + mchID +
			`</mch_id><nonce_str>n</nonce_str><req_info>` + ri + `</req_info></xml>`)
	}
	drop := func(tag string) string {
		i := strings.Index(complete, "<"+tag+">")
		j := strings.Index(complete, "</"+tag+">") + len("</"+tag+">")
		return complete[:i] + complete[j:]
	}
	cases := []struct {
		name string
		body []byte
	}{
		{"only out_refund_no", body("1900000109", `<root><out_refund_no>R1</out_refund_no></root>`)},
		{"no mch_id", body("", complete)},
		{"no out_trade_no", body("1900000109", drop("out_trade_no"))},
		{"no refund_id", body("1900000109", drop("refund_id"))},
		{"no refund_status", body("1900000109", drop("refund_status"))},
		{"no total_fee", body("1900000109", drop("total_fee"))},
		{"no refund_fee", body("1900000109", drop("refund_fee"))},
		{"no settlement_refund_fee", body("1900000109", drop("settlement_refund_fee"))},
		{"zero refund_fee", body("1900000109", strings.Replace(complete, "<refund_fee>500<", "<refund_fee>0<", 1))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, info, err := ParseRefundNotificationV2(key, c.body)
			if !errors.Is(err, ErrIncomplete) || info != (V2RefundInfo{}) {
				t.Fatalf("got %+v, %v; want ErrIncomplete", info, err)
			}
		})
	}
	if _, _, err := ParseRefundNotificationV2(key, body("1900000109", complete)); err != nil {
		t.Fatalf("complete req_info: %v", err)
	}
}

// TestClient_IncompleteRefundObjectIsNotApplied: a verified 200 whose
// refund object lacks an always-sent field is no answer: unknown, so a
// query applies nothing and the next one stays due, and a submission is
// resent with the same bytes.
func TestClient_IncompleteRefundObjectIsNotApplied(t *testing.T) {
	full := refundJSON(testRefundNo, RefundSuccess)
	cut := func(old string) string {
		if !strings.Contains(full, old) {
			t.Fatalf("fixture lacks %s", old)
		}
		return strings.Replace(full, old, "", 1)
	}
	cases := []struct{ name, body string }{
		{"only out_refund_no and status", `{"out_refund_no":"` + testRefundNo + `","status":"SUCCESS"}`},
		{"no amount", cut(`"amount":{"total":500,"refund":100,"from":[],"payer_total":500,"payer_refund":100,` +
			`"settlement_refund":100,"settlement_total":500,"discount_refund":0,"currency":"CNY","refund_fee":0},`)},
		{"no refund_id", cut(`"refund_id":"50000000382019052709732678859",`)},
		{"no out_trade_no", cut(`"out_trade_no":"ORD-res1",`)},
		{"no amount.total", cut(`"total":500,`)},
		{"no amount.refund", cut(`"refund":100,`)},
		{"no amount.payer_total", cut(`"payer_total":500,`)},
		{"no amount.payer_refund", cut(`"payer_refund":100,`)},
	}
	for _, tc := range cases {
		for _, op := range []string{"query", "submit"} {
			t.Run(tc.name+"/"+op, func(t *testing.T) {
				f := newFakeWeChat(t, func(recorded, int) fakeReply { return fakeReply{Status: 200, Body: tc.body} })
				c := newTestClient(t, f)
				var o reservation.Outcome
				if op == "query" {
					o = c.Query(context.Background(), testRefundNo)
				} else {
					o = c.Submit(context.Background(), testRefundNo, mustBody(t, c), 1)
				}
				if o.Kind != reservation.OutcomeUnknown || o.Code != "INCOMPLETE_RESPONSE" {
					t.Fatalf("outcome %+v, want UNKNOWN INCOMPLETE_RESPONSE", o)
				}
			})
		}
	}
}
