package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/wechatpay"
)

// postV3Resource posts a correctly signed v3 REFUND.SUCCESS notification
// whose encrypted resource is exactly plaintext.
func (e *ntEnv) postV3Resource(plaintext string) (int, string) {
	e.t.Helper()
	nonce := wechatpay.RandomAEADNonce()
	ct, err := wechatpay.EncryptAEAD(e.v3Key, nonce, "refund", []byte(plaintext))
	if err != nil {
		e.t.Fatal(err)
	}
	body, err := json.Marshal(wechatpay.Notification{ID: "EV-raw", CreateTime: "2026-11-30T16:00:00+08:00",
		ResourceType: "encrypt-resource", EventType: wechatpay.EventRefundSuccess, Summary: "退款成功",
		Resource: wechatpay.EncryptedResource{OriginalType: "refund", Algorithm: wechatpay.AlgorithmAEADAES256GCM,
			Ciphertext: ct, AssociatedData: "refund", Nonce: nonce}})
	if err != nil {
		e.t.Fatal(err)
	}
	h, err := wechatpay.SignHeaders(e.platform, "PUB_KEY_ID_TEST", time.Now().Unix(), wechatpay.NewNonce(), body)
	if err != nil {
		e.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/notify/wechatpay/refund", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.Set(req.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// postV2ReqInfo posts a v2 notification whose req_info is exactly plaintext.
func (e *ntEnv) postV2ReqInfo(mchID, plaintext string) (int, string) {
	e.t.Helper()
	ri, err := wechatpay.EncryptReqInfo(e.v2Key, []byte(plaintext))
	if err != nil {
		e.t.Fatal(err)
	}
	body := `<xml><return_code>SUCCESS</return_code><appid>wx0</appid><mch_id>` + mchID +
		`</mch_id><nonce_str>n</nonce_str><req_info>` + ri + `</req_info></xml>`
	resp, err := http.Post(e.srv.URL+"/v1/notify/wechatpay/v2/refund", "text/xml", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestNotify_IncompleteNotificationIsRefusedLikeAMismatch: a verified
// notification lacking a field WeChat Pay always sends is not applied (and,
// for v2, does not even journal a query): it is kept raw, counted as a
// mismatch, and answered so that WeChat retries, while the refund stays
// PROCESSING as WeChat still has it.
func TestNotify_IncompleteNotificationIsRefusedLikeAMismatch(t *testing.T) {
	e := newNtEnv(t)
	no := e.refund("r1")
	id := simprovider.RefundID(no)
	v3Complete := `{"mchid":"` + ntMchID + `","out_trade_no":"ORD-r1","out_refund_no":"` + no + `","refund_id":"` + id +
		`","refund_status":"SUCCESS","amount":{"total":10000,"refund":4000,"payer_total":10000,"payer_refund":4000}}`
	v2Complete := `<root><out_refund_no>` + no + `</out_refund_no><out_trade_no>ORD-r1</out_trade_no><refund_id>` + id +
		`</refund_id><refund_status>SUCCESS</refund_status><total_fee>10000</total_fee><refund_fee>4000</refund_fee>` +
		`<settlement_refund_fee>4000</settlement_refund_fee></root>`
	cases := []struct {
		name string
		post func() (int, string)
	}{
		{"v3 only out_refund_no and mchid", func() (int, string) {
			return e.postV3Resource(`{"mchid":"` + ntMchID + `","out_refund_no":"` + no + `","refund_status":"SUCCESS"}`)
		}},
		{"v3 no amount", func() (int, string) {
			return e.postV3Resource(strings.Replace(v3Complete,
				`,"amount":{"total":10000,"refund":4000,"payer_total":10000,"payer_refund":4000}`, "", 1))
		}},
		{"v3 no refund_id", func() (int, string) {
			return e.postV3Resource(strings.Replace(v3Complete, `"refund_id":"`+id+`",`, "", 1))
		}},
		{"v2 no refund_id and status", func() (int, string) {
			return e.postV2ReqInfo(ntMchID, strings.Replace(strings.Replace(v2Complete,
				"<refund_id>"+id+"</refund_id>", "", 1), "<refund_status>SUCCESS</refund_status>", "", 1))
		}},
		{"v2 no settlement_refund_fee", func() (int, string) {
			return e.postV2ReqInfo(ntMchID, strings.Replace(v2Complete, "<settlement_refund_fee>4000</settlement_refund_fee>", "", 1))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.counts()["mismatch"]
			keptBefore, _, _ := e.q.Stats()
			queriesBefore := e.state("r1", no).Queries
			code, body := tc.post()
			if code != http.StatusBadRequest || !strings.Contains(body, "FAIL") {
				t.Fatalf("answer %d %s, want 400 with FAIL", code, body)
			}
			if got := e.counts()["mismatch"]; got != before+1 {
				t.Fatalf("mismatch count %d, want %d (counts %v)", got, before+1, e.counts())
			}
			if kept, _, _ := e.q.Stats(); kept != keptBefore+1 {
				t.Fatalf("quarantined %d, want %d", kept, keptBefore+1)
			}
			r := e.state("r1", no)
			if r.State != reservation.Processing || r.Queries != queriesBefore {
				t.Fatalf("an incomplete notification changed the refund: %s, queries %d -> %d", r.State, queriesBefore, r.Queries)
			}
		})
	}
	// The complete notification is applied: the fixtures above differ from
	// it only by what they lack.
	if code, body := e.postV3Resource(v3Complete); code != http.StatusNoContent {
		t.Fatalf("complete notification: %d %s", code, body)
	}
	if r := e.state("r1", no); r.State != reservation.Succeeded {
		t.Fatalf("complete notification not applied: %s", r.State)
	}
}
