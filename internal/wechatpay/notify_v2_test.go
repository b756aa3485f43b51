package wechatpay

import (
	"encoding/base64"
	"encoding/xml"
	"errors"
	"strings"
	"testing"
)

func v9Envelope(reqInfo string) []byte {
	// The documented envelope layout (PROTOCOL.md §4.1) around V9's req_info.
	return []byte(`<xml>
  <return_code>SUCCESS</return_code>
  <appid><![CDATA[wx8888888888888888]]></appid>
  <mch_id><![CDATA[1900000109]]></mch_id>
  <nonce_str><![CDATA[5K8264ILTKCH16CQ2502SI8ZNMTM67VS]]></nonce_str>
  <req_info><![CDATA[` + reqInfo + `]]></req_info>
  <return_msg><![CDATA[OK]]></return_msg>
</xml>`)
}

func TestDecryptReqInfo_V9(t *testing.T) {
	v := loadVectors(t).V9
	pt, err := DecryptReqInfo([]byte(v.APIv2Key), readTestdataString(t, "v9_req_info.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := readTestdataString(t, "v9_plaintext.xml"); string(pt) != want {
		t.Fatalf("plaintext\n%s\nwant\n%s", pt, want)
	}
}

func TestParseRefundNotificationV2_V9(t *testing.T) {
	v := loadVectors(t).V9
	env, info, err := ParseRefundNotificationV2([]byte(v.APIv2Key), v9Envelope(readTestdataString(t, "v9_req_info.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if env.ReturnCode != "SUCCESS" || env.AppID != "wx8888888888888888" || env.MchID != "1900000109" ||
		env.NonceStr != "5K8264ILTKCH16CQ2502SI8ZNMTM67VS" || env.ReturnMsg != "OK" {
		t.Fatalf("envelope %+v", env)
	}
	want := V2RefundInfo{
		XMLName:       xml.Name{Local: "root"},
		TransactionID: "4200000015201711256947025404", OutTradeNo: "4893e76d8c8b434cb64e9cd536338e33",
		RefundID: "50000404922017112502468056157", OutRefundNo: "50fd012ed1b311e7af7800163e32c503",
		TotalFee: 6, SettlementTotalFee: 6, RefundFee: 6, SettlementRefundFee: 6,
		RefundStatus: V2RefundSuccess, SuccessTime: "2017-11-25 15:36:17", RefundRecvAccount: "支付用户零钱",
		RefundAccount: "REFUND_SOURCE_RECHARGE_FUNDS", RefundRequestSource: "API",
	}
	if info != want {
		t.Fatalf("info\n got %+v\nwant %+v", info, want)
	}
}

func TestParseRefundNotificationV2_Rejects(t *testing.T) {
	v := loadVectors(t).V9
	key := []byte(v.APIv2Key)
	reqInfo := readTestdataString(t, "v9_req_info.txt")
	enc := func(plaintext string) string {
		s, err := EncryptReqInfo(key, []byte(plaintext))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct {
		name string
		key  string
		body []byte
		want []error // any of
	}{
		{"wrong APIv2 key", "wrongwrongwrongwrongwrongwrong00", v9Envelope(reqInfo), []error{ErrBadPadding, ErrMalformed}},
		{"empty key", "", v9Envelope(reqInfo), []error{ErrInvalidKey}},
		{"return_code FAIL", v.APIv2Key, []byte(`<xml><return_code>FAIL</return_code><return_msg>x</return_msg></xml>`), []error{ErrReturnFail}},
		{"no return_code", v.APIv2Key, []byte(`<xml><req_info>` + reqInfo + `</req_info></xml>`), []error{ErrReturnFail}},
		{"payment notification (no req_info)", v.APIv2Key, []byte(`<xml><return_code>SUCCESS</return_code><result_code>SUCCESS</result_code><sign>X</sign></xml>`), []error{ErrMalformed}},
		{"req_info not base64", v.APIv2Key, v9Envelope("%%%"), []error{ErrDecrypt}},
		{"req_info truncated base64", v.APIv2Key, v9Envelope(reqInfo[:len(reqInfo)-3]), []error{ErrDecrypt}},
		{"req_info one block short", v.APIv2Key, v9Envelope(base64.StdEncoding.EncodeToString(mustB64(t, reqInfo)[:816])), []error{ErrBadPadding, ErrMalformed}},
		{"req_info not whole blocks", v.APIv2Key, v9Envelope(base64.StdEncoding.EncodeToString(mustB64(t, reqInfo)[:830])), []error{ErrBadPadding}},
		{"req_info empty blocks", v.APIv2Key, v9Envelope(base64.StdEncoding.EncodeToString(make([]byte, 32))), []error{ErrBadPadding, ErrMalformed}},
		{"plaintext not XML", v.APIv2Key, v9Envelope(enc("hello")), []error{ErrMalformed}},
		{"plaintext wrong root", v.APIv2Key, v9Envelope(enc("<xml><out_refund_no>R</out_refund_no></xml>")), []error{ErrMalformed}},
		{"no out_refund_no", v.APIv2Key, v9Envelope(enc("<root><refund_status>SUCCESS</refund_status></root>")), []error{ErrMalformed}},
		{"negative fee", v.APIv2Key, v9Envelope(enc("<root><out_refund_no>R</out_refund_no><refund_fee>-6</refund_fee></root>")), []error{ErrMalformed}},
		{"fractional fee", v.APIv2Key, v9Envelope(enc("<root><out_refund_no>R</out_refund_no><refund_fee>0.06</refund_fee></root>")), []error{ErrMalformed}},
		{"body JSON", v.APIv2Key, []byte(`{"return_code":"SUCCESS"}`), []error{ErrMalformed}},
		{"body wrong root", v.APIv2Key, []byte(`<root><return_code>SUCCESS</return_code></root>`), []error{ErrMalformed}},
		{"body empty", v.APIv2Key, nil, []error{ErrMalformed}},
		{"body GBK declaration", v.APIv2Key, []byte(`<?xml version="1.0" encoding="GBK"?><xml><return_code>SUCCESS</return_code></xml>`), []error{ErrMalformed}},
		{"too large", v.APIv2Key, []byte(strings.Repeat(" ", MaxNotificationSize+1)), []error{ErrTooLarge}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, info, err := ParseRefundNotificationV2([]byte(c.key), c.body)
			matched := false
			for _, w := range c.want {
				matched = matched || errors.Is(err, w)
			}
			if !matched {
				t.Fatalf("err = %v, want one of %v", err, c.want)
			}
			if info != (V2RefundInfo{}) {
				t.Fatalf("info returned with an error: %+v", info)
			}
		})
	}
	// On return_code FAIL the envelope still comes back for logging.
	env, _, _ := ParseRefundNotificationV2(key, []byte(`<xml><return_code>FAIL</return_code><return_msg>boom</return_msg></xml>`))
	if env.ReturnMsg != "boom" {
		t.Fatalf("envelope %+v", env)
	}
}

func TestBuildRefundNotificationV2_RoundTrip(t *testing.T) {
	key := []byte("ziR0QKsTUfMOuochC9RfCdmfHECorQAP")
	want := V2RefundInfo{
		XMLName:       xml.Name{Local: "root"},
		TransactionID: "4200000015201711256947025404", OutTradeNo: "O<&>1", RefundID: "5000", OutRefundNo: "R-1",
		TotalFee: 100, RefundFee: 40, SettlementRefundFee: 40, CashRefundFee: 40,
		RefundStatus: V2RefundChange, RefundRecvAccount: "招商银行信用卡0403", RefundAccount: "REFUND_SOURCE_UNSETTLED_FUNDS",
		RefundRequestSource: "VENDOR_PLATFORM",
	}
	body, err := BuildRefundNotificationV2(key, V2Envelope{AppID: "wx1", MchID: "190", NonceStr: "n"}, want)
	if err != nil {
		t.Fatal(err)
	}
	env, got, err := ParseRefundNotificationV2(key, body)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || env.ReturnCode != "SUCCESS" || env.MchID != "190" || env.AppID != "wx1" {
		t.Fatalf("got %+v %+v", env, got)
	}
	if _, err := BuildRefundNotificationV2(key, V2Envelope{}, V2RefundInfo{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no out_refund_no: %v", err)
	}
	if _, err := DecryptReqInfo(nil, "AAAA"); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("DecryptReqInfo without key: %v", err)
	}
	if _, err := BuildRefundNotificationV2(nil, V2Envelope{}, want); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("no key: %v", err)
	}
}

func TestV2Ack_Cases(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
		msg  string
		want string // exact bytes, or "" to only check it parses back
		back string // expected return_msg after parsing
	}{
		{"success", true, "", `<xml><return_code><![CDATA[SUCCESS]]></return_code><return_msg><![CDATA[OK]]></return_msg></xml>`, "OK"},
		{"success OK", true, "OK", `<xml><return_code><![CDATA[SUCCESS]]></return_code><return_msg><![CDATA[OK]]></return_msg></xml>`, "OK"},
		{"fail", false, "", `<xml><return_code><![CDATA[FAIL]]></return_code><return_msg><![CDATA[FAIL]]></return_msg></xml>`, "FAIL"},
		{"fail with reason", false, "解密失败", `<xml><return_code><![CDATA[FAIL]]></return_code><return_msg><![CDATA[解密失败]]></return_msg></xml>`, "解密失败"},
		{"CDATA terminator in message", false, "a]]>b", "", "a]]>b"},
		{"control characters", false, "a\x00b\x1bc", "", "a?b?c"},
		{"invalid UTF-8", false, "a\xffb", "", "a?b"},
		{"long message", false, strings.Repeat("x", 500), "", strings.Repeat("x", 128)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := V2Ack(c.ok, c.msg)
			if c.want != "" && string(got) != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
			var env V2Envelope
			if err := xml.Unmarshal(got, &env); err != nil {
				t.Fatalf("ack does not parse: %v\n%s", err, got)
			}
			if env.ReturnMsg != c.back {
				t.Fatalf("return_msg %q, want %q", env.ReturnMsg, c.back)
			}
			if wantCode := map[bool]string{true: "SUCCESS", false: "FAIL"}[c.ok]; env.ReturnCode != wantCode {
				t.Fatalf("return_code %q", env.ReturnCode)
			}
		})
	}
}
