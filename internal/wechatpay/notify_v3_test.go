package wechatpay

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// V4 as published: the signature verifies, but its APIv3 key is 16 bytes
// (AES-128) and the event is a payscore one, so a refund parser refuses it.
func TestParseRefundNotification_V4(t *testing.T) {
	vec := loadVectors(t)
	body := readTestdata(t, "v4_body.json")
	h := v4Headers(t)

	_, _, err := ParseRefundNotification(newV4Verifier(t), []byte(vec.V4.APIv3Key), h, body)
	if !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("16-byte key: err = %v, want ErrInvalidKey", err)
	}
	// With a 32-byte key the signature check passes and the event type is
	// what stops it; the envelope comes back for logging.
	n, _, err := ParseRefundNotification(newV4Verifier(t), []byte(apiV3Key32), h, body)
	if !errors.Is(err, ErrUnexpectedEvent) {
		t.Fatalf("err = %v, want ErrUnexpectedEvent", err)
	}
	if n.ID != "3119dfba-e649-5eec-ab1e-3412bc4d2e17" || n.EventType != "PAYSCORE.USER_OPEN_SERVICE" ||
		n.Summary != "签约成功" || n.Resource.Nonce != "Kj7QIyUiYx1q" || n.Resource.AssociatedData != "payscore" {
		t.Fatalf("envelope %+v", n)
	}
}

// V4's resource decrypts with its (AES-128) key through the shared GCM code.
func TestAEADOpen_V4Resource(t *testing.T) {
	vec := loadVectors(t)
	var n Notification
	if err := json.Unmarshal(readTestdata(t, "v4_body.json"), &n); err != nil {
		t.Fatal(err)
	}
	r := n.Resource
	pt, err := aeadOpen([]byte(vec.V4.APIv3Key), r.Nonce, r.AssociatedData, r.Ciphertext)
	if err != nil {
		t.Fatal(err)
	}
	if string(pt) != vec.V4.Plaintext {
		t.Fatalf("plaintext %s", pt)
	}
	if _, err := aeadOpen([]byte(vec.V4.WrongAPIv3Key), r.Nonce, r.AssociatedData, r.Ciphertext); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("wrong key: %v", err)
	}
}

func sampleRefund() RefundResource {
	return RefundResource{
		MchID: "1900000100", TransactionID: "1008450740201411110005820873", OutTradeNo: "20150806125346",
		RefundID: "50200207182018070300011301001", OutRefundNo: "7752501201407033233368018", RefundStatus: RefundSuccess,
		SuccessTime: "2018-06-08T10:34:56+08:00", UserReceivedAccount: "招商银行信用卡0403",
		Amount: RefundAmount{Total: 999, Refund: 999, PayerTotal: 999, PayerRefund: 999},
	}
}

// signedV4 signs body as V4's certificate holder at V4's time.
func signedV4(t testing.TB, body []byte) Headers {
	t.Helper()
	h, err := SignHeaders(v5Key(t), "D7CE59D1F522D701", v4Time.Unix(), "EcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBz", body)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestParseRefundNotification_RoundTrip(t *testing.T) {
	for _, ad := range []string{"refund", ""} {
		t.Run("associated_data="+ad, func(t *testing.T) {
			want := sampleRefund()
			body, err := BuildRefundNotification([]byte(apiV3Key32), Notification{
				ID: "EV-2018022511223320873", CreateTime: "2018-06-08T10:34:56+08:00",
				Resource: EncryptedResource{AssociatedData: ad},
			}, want)
			if err != nil {
				t.Fatal(err)
			}
			n, got, err := ParseRefundNotification(newV4Verifier(t), []byte(apiV3Key32), signedV4(t, body), body)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("resource\n got %+v\nwant %+v", got, want)
			}
			if n.EventType != EventRefundSuccess || n.Summary != "退款成功" || n.ResourceType != "encrypt-resource" ||
				n.Resource.Algorithm != AlgorithmAEADAES256GCM || n.Resource.OriginalType != "refund" ||
				len(n.Resource.Nonce) != AEADNonceSize || n.Resource.AssociatedData != ad {
				t.Fatalf("envelope %+v", n)
			}
		})
	}
}

// envelope builds a signed notification body around an arbitrary resource,
// for cases BuildRefundNotification refuses to produce.
func envelope(t testing.TB, event, algorithm, nonce, ad, ciphertext string) []byte {
	t.Helper()
	b, err := json.Marshal(Notification{
		ID: "id-1", CreateTime: "2018-06-08T10:34:56+08:00", ResourceType: "encrypt-resource", EventType: event, Summary: "s",
		Resource: EncryptedResource{OriginalType: "refund", Algorithm: algorithm, Ciphertext: ciphertext, AssociatedData: ad, Nonce: nonce},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encrypt(t testing.TB, nonce, ad string, plaintext string) string {
	t.Helper()
	ct, err := EncryptAEAD([]byte(apiV3Key32), nonce, ad, []byte(plaintext))
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

func TestParseRefundNotification_Rejects(t *testing.T) {
	vec := loadVectors(t)
	const nonce = "eObYf1re2IZ0"
	good := `{"mchid":"1","out_trade_no":"O1","refund_id":"503","out_refund_no":"R1","refund_status":"SUCCESS","amount":{"total":1,"refund":1,"payer_total":1,"payer_refund":1}}`
	goodBody := envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, nonce, "refund", encrypt(t, nonce, "refund", good))
	tampered := bytes.Replace(goodBody, []byte(`"s"`), []byte(`"t"`), 1)
	ct := encrypt(t, nonce, "refund", good)

	type tc struct {
		name string
		key  string
		h    *Headers // nil: sign body correctly
		body []byte
		want error
	}
	cases := []tc{
		{"wrong APIv3 key", strings.Repeat("k", 32), nil, goodBody, ErrDecrypt},
		{"16-byte APIv3 key", "testMchAPIv3Key0", nil, goodBody, ErrInvalidKey},
		{"tampered body", apiV3Key32, &Headers{}, tampered, ErrBadSignature},
		{"probe", apiV3Key32, &Headers{Timestamp: "1624523846", Nonce: "n", Signature: vec.V12.Signature, Serial: "D7CE59D1F522D701"}, goodBody, ErrProbe},
		{"missing headers", apiV3Key32, &Headers{Timestamp: "1624523846"}, goodBody, ErrMissingHeader},
		{"unknown serial", apiV3Key32, &Headers{Timestamp: "1624523846", Nonce: "n", Signature: "c2ln", Serial: vec.V12.Serial}, goodBody, ErrUnknownSerial},
		{"stale", apiV3Key32, &Headers{Timestamp: vec.V12.Timestamp, Nonce: "n", Signature: "c2ln", Serial: "D7CE59D1F522D701"}, goodBody, ErrStaleTimestamp},
		{"wrong algorithm", apiV3Key32, nil, envelope(t, EventRefundSuccess, "AEAD_AES_128_GCM", nonce, "refund", ct), ErrUnsupportedAlgorithm},
		{"missing algorithm", apiV3Key32, nil, envelope(t, EventRefundSuccess, "", nonce, "refund", ct), ErrUnsupportedAlgorithm},
		{"payment event", apiV3Key32, nil, envelope(t, "TRANSACTION.SUCCESS", AlgorithmAEADAES256GCM, nonce, "refund", ct), ErrUnexpectedEvent},
		{"nonce 11 bytes", apiV3Key32, nil, envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, nonce[:11], "refund", ct), ErrInvalidNonce},
		{"nonce 32 bytes", apiV3Key32, nil, envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, strings.Repeat("n", 32), "refund", ct), ErrInvalidNonce},
		{"wrong associated data", apiV3Key32, nil, envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, nonce, "", ct), ErrDecrypt},
		{"truncated ciphertext", apiV3Key32, nil, envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, nonce, "refund", ct[:len(ct)-8]), ErrDecrypt},
		{"ciphertext not base64", apiV3Key32, nil, envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, nonce, "refund", "!!!"), ErrDecrypt},
		{"body not JSON", apiV3Key32, nil, []byte("<xml></xml>"), ErrMalformed},
		{"body JSON array", apiV3Key32, nil, []byte("[]"), ErrMalformed},
		{"resource not JSON", apiV3Key32, nil, envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, nonce, "refund", encrypt(t, nonce, "refund", "not json")), ErrMalformed},
		{"resource without out_refund_no", apiV3Key32, nil, envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, nonce, "refund", encrypt(t, nonce, "refund", `{"refund_status":"SUCCESS"}`)), ErrMalformed},
		{"negative amount", apiV3Key32, nil, envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, nonce, "refund", encrypt(t, nonce, "refund", `{"out_refund_no":"R","amount":{"refund":-1}}`)), ErrMalformed},
		{"fractional amount", apiV3Key32, nil, envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, nonce, "refund", encrypt(t, nonce, "refund", `{"out_refund_no":"R","amount":{"refund":9.99}}`)), ErrMalformed},
		{"amount as string", apiV3Key32, nil, envelope(t, EventRefundSuccess, AlgorithmAEADAES256GCM, nonce, "refund", encrypt(t, nonce, "refund", `{"out_refund_no":"R","amount":{"refund":"999"}}`)), ErrMalformed},
		{"too large", apiV3Key32, nil, append(bytes.Repeat([]byte(" "), MaxNotificationSize), goodBody...), ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h Headers
			switch {
			case c.h == nil:
				h = signedV4(t, c.body)
			case *c.h == Headers{}:
				h = signedV4(t, goodBody) // signed for the untampered body
			default:
				h = *c.h
			}
			_, r, err := ParseRefundNotification(newV4Verifier(t), []byte(c.key), h, c.body)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if r != (RefundResource{}) {
				t.Fatalf("resource returned with an error: %+v", r)
			}
		})
	}
	if _, _, err := ParseRefundNotification(nil, []byte(apiV3Key32), signedV4(t, goodBody), goodBody); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("nil verifier: %v", err)
	}
	if _, r, err := ParseRefundNotification(newV4Verifier(t), []byte(apiV3Key32), signedV4(t, goodBody), goodBody); err != nil || r.OutRefundNo != "R1" {
		t.Fatalf("baseline: %+v, %v", r, err)
	}
}

func TestParseRefundResource_Tolerant(t *testing.T) {
	cases := []struct {
		name      string
		plaintext string
		want      RefundResource
	}{
		{
			// A real capture (PROTOCOL.md §3.4): key order differs from the doc.
			"real capture",
			`{"mchid":"1558950191","out_trade_no":"ORDER_20230408144355425","transaction_id":"4200001736202304084431828716","out_refund_no":"REFUND20230412121456353","refund_id":"50301405352023041233178680856","refund_status":"SUCCESS","success_time":"2023-04-12T12:15:06+08:00","amount":{"total":1,"refund":1,"payer_total":1,"payer_refund":1},"user_received_account":"支付用户零钱"}`,
			RefundResource{MchID: "1558950191", OutTradeNo: "ORDER_20230408144355425", TransactionID: "4200001736202304084431828716",
				OutRefundNo: "REFUND20230412121456353", RefundID: "50301405352023041233178680856", RefundStatus: "SUCCESS",
				SuccessTime: "2023-04-12T12:15:06+08:00", UserReceivedAccount: "支付用户零钱",
				Amount: RefundAmount{Total: 1, Refund: 1, PayerTotal: 1, PayerRefund: 1}},
		},
		{
			"unknown fields and empty enums",
			`{"mchid":"1","out_trade_no":"O","refund_id":"5","out_refund_no":"R","refund_status":"SUCCESS","channel":"","funds_account":"","promotion_detail":[{"x":1}],"amount":{"total":5,"refund":2,"payer_total":0,"payer_refund":0,"currency":"CNY","from":[]}}`,
			RefundResource{MchID: "1", OutTradeNo: "O", RefundID: "5", OutRefundNo: "R", RefundStatus: RefundSuccess, Amount: RefundAmount{Total: 5, Refund: 2}},
		},
		{
			"unknown status value",
			`{"mchid":"1","out_trade_no":"O","refund_id":"5","out_refund_no":"R","refund_status":"SOMETHING_NEW","amount":{"total":5,"refund":2,"payer_total":5,"payer_refund":2}}`,
			RefundResource{MchID: "1", OutTradeNo: "O", RefundID: "5", OutRefundNo: "R", RefundStatus: "SOMETHING_NEW", Amount: RefundAmount{Total: 5, Refund: 2, PayerTotal: 5, PayerRefund: 2}},
		},
		{
			"partner mode",
			`{"sp_mchid":"1","sub_mchid":"2","out_trade_no":"O","refund_id":"5","out_refund_no":"R","refund_status":"CLOSED","amount":{"total":5,"refund":2,"payer_total":5,"payer_refund":2}}`,
			RefundResource{SpMchID: "1", SubMchID: "2", OutTradeNo: "O", RefundID: "5", OutRefundNo: "R", RefundStatus: RefundClosed, Amount: RefundAmount{Total: 5, Refund: 2, PayerTotal: 5, PayerRefund: 2}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseRefundResource([]byte(c.plaintext))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestBuildRefundNotification_Events(t *testing.T) {
	for _, c := range []struct{ status, event, summary string }{
		{RefundSuccess, EventRefundSuccess, "退款成功"},
		{RefundClosed, EventRefundClosed, "退款关闭"},
		{RefundAbnormal, EventRefundAbnormal, "退款异常"},
	} {
		r := sampleRefund()
		r.RefundStatus = c.status
		body, err := BuildRefundNotification([]byte(apiV3Key32), Notification{ID: "1", CreateTime: "t", Resource: EncryptedResource{Nonce: "abcdefghijkl"}}, r)
		if err != nil {
			t.Fatal(err)
		}
		n, got, err := decodeRefundNotification([]byte(apiV3Key32), body)
		if err != nil || got != r || n.EventType != c.event || n.Summary != c.summary || n.Resource.Nonce != "abcdefghijkl" {
			t.Fatalf("%s: %+v %+v %v", c.status, n, got, err)
		}
	}
}

func TestBuildRefundNotification_Rejects(t *testing.T) {
	key := []byte(apiV3Key32)
	base := Notification{ID: "1", CreateTime: "t"}
	noRefundNo := sampleRefund()
	noRefundNo.OutRefundNo = ""
	processing := sampleRefund()
	processing.RefundStatus = RefundProcessing
	cases := []struct {
		name string
		key  []byte
		n    Notification
		r    RefundResource
		want error
	}{
		{"no id", key, Notification{CreateTime: "t"}, sampleRefund(), ErrInvalidArgument},
		{"no create_time", key, Notification{ID: "1"}, sampleRefund(), ErrInvalidArgument},
		{"no out_refund_no", key, base, noRefundNo, ErrInvalidArgument},
		{"no event for PROCESSING", key, base, processing, ErrInvalidArgument},
		{"other algorithm", key, Notification{ID: "1", CreateTime: "t", Resource: EncryptedResource{Algorithm: "SM4"}}, sampleRefund(), ErrUnsupportedAlgorithm},
		{"bad nonce", key, Notification{ID: "1", CreateTime: "t", Resource: EncryptedResource{Nonce: "short"}}, sampleRefund(), ErrInvalidNonce},
		{"16-byte key", key[:16], base, sampleRefund(), ErrInvalidKey},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := BuildRefundNotification(c.key, c.n, c.r); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	// An explicit event type lets any status through.
	n := base
	n.EventType = "REFUND.PROCESSING"
	if _, err := BuildRefundNotification(key, n, processing); err != nil {
		t.Fatal(err)
	}
}
