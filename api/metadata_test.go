package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

// TestRequestRefund_ReasonCodeAndMetadataRefused: every way a reason code
// or metadata can be wrong is a 400 naming the member.
func TestRequestRefund_ReasonCodeAndMetadataRefused(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	var many []string
	for i := range 21 {
		many = append(many, `"k`+strings.Repeat("x", i)+`":"v"`)
	}
	for _, tt := range []struct {
		name, body, field string
	}{
		{"unknown reason code", `{"user_id":"u-r1","reason_code":"customer"}`, "reason_code"},
		{"reason code in capitals", `{"user_id":"u-r1","reason_code":"DUPLICATE"}`, "reason_code"},
		{"reason code null", `{"user_id":"u-r1","reason_code":null}`, "reason_code"},
		{"reason code a number", `{"user_id":"u-r1","reason_code":1}`, "reason_code"},
		{"reason code invalid UTF-8", "{\"user_id\":\"u-r1\",\"reason_code\":\"\xff\"}", "reason_code"},
		{"metadata null", `{"user_id":"u-r1","metadata":null}`, "metadata"},
		{"metadata a string", `{"user_id":"u-r1","metadata":"order=1"}`, "metadata"},
		{"metadata an array", `{"user_id":"u-r1","metadata":[]}`, "metadata"},
		{"metadata in capitals", `{"user_id":"u-r1","METADATA":{"a":"b"}}`, "METADATA"},
		{"too many keys", `{"user_id":"u-r1","metadata":{` + strings.Join(many, ",") + `}}`, "metadata"},
		{"value null", `{"user_id":"u-r1","metadata":{"order":null}}`, `metadata["order"]`},
		{"value a number", `{"user_id":"u-r1","metadata":{"order":12}}`, `metadata["order"]`},
		{"value an object", `{"user_id":"u-r1","metadata":{"order":{"a":"b"}}}`, `metadata["order"]`},
		{"value empty", `{"user_id":"u-r1","metadata":{"order":""}}`, `metadata["order"]`},
		{"value of 501 bytes", `{"user_id":"u-r1","metadata":{"order":"` + strings.Repeat("v", 501) + `"}}`, `metadata["order"]`},
		{"value with a newline", `{"user_id":"u-r1","metadata":{"order":"a\nb"}}`, `metadata["order"]`},
		{"value lone surrogate", `{"user_id":"u-r1","metadata":{"order":"\ud800"}}`, `metadata["order"]`},
		{"value invalid UTF-8", "{\"user_id\":\"u-r1\",\"metadata\":{\"order\":\"\xff\"}}", `metadata["order"]`},
		{"key given twice", `{"user_id":"u-r1","metadata":{"order":"1","order":"2"}}`, `metadata["order"]`},
		{"key empty", `{"user_id":"u-r1","metadata":{"":"v"}}`, `metadata[""]`},
		{"key of 41 bytes", `{"user_id":"u-r1","metadata":{"` + strings.Repeat("k", 41) + `":"v"}}`, `metadata["` + strings.Repeat("k", 41) + `"]`},
		{"key with a tab", `{"user_id":"u-r1","metadata":{"a\tb":"v"}}`, `metadata["a\tb"]`},
		{"key lone surrogate", `{"user_id":"u-r1","metadata":{"\udc00":"v"}}`, "metadata"},
		{"key invalid UTF-8", "{\"user_id\":\"u-r1\",\"metadata\":{\"\xff\":\"v\"}}", "metadata"},
		{"metadata given twice", `{"user_id":"u-r1","metadata":{"a":"1"},"metadata":{"a":"1"}}`, "metadata"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := wantError(t, e.refund(t, "r1", "k-"+strings.ReplaceAll(tt.name, " ", "-"), tt.body), http.StatusBadRequest, "invalid_argument", tt.field)
			if d.Message == "" {
				t.Fatalf("no message for %s", tt.body)
			}
		})
	}
	if v := e.get(t, "r1"); len(v.Refunds) != 0 {
		t.Fatalf("a refused request created a refund: %+v", v.Refunds)
	}
}

// TestRequestRefund_ReasonCodeAndMetadataShown: what was sent is returned
// on the create, on GET of the refund and of the reservation, and on a
// replay; a body that sends none shows none.
func TestRequestRefund_ReasonCodeAndMetadataShown(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	body := `{"user_id":"u-r1","amount":100,"reason":"late","reason_code":"service_not_provided","metadata":{"order":"O-7","agent":"张三 <ops>"}}`
	want := map[string]string{"order": "O-7", "agent": "张三 <ops>"}
	created := e.refund(t, "r1", "k1", body)
	v := decodeRefund(t, created, http.StatusAccepted)
	if v.ReasonCode != "service_not_provided" || !maps.Equal(v.Metadata, want) || v.Reason != "late" {
		t.Fatalf("created %s", created.body)
	}
	got := e.do(t, http.MethodGet, "/v1/reservations/r1/refunds/"+v.RefundNo, "")
	if g := decodeRefund(t, got, http.StatusOK); g.ReasonCode != v.ReasonCode || !maps.Equal(g.Metadata, want) {
		t.Fatalf("GET refund %s", got.body)
	}
	if r := e.get(t, "r1"); len(r.Refunds) != 1 || !maps.Equal(r.Refunds[0].Metadata, want) || r.Refunds[0].ReasonCode != v.ReasonCode {
		t.Fatalf("GET reservation %+v", r)
	}
	// A replay spelled otherwise (members and keys reordered) is the same
	// request.
	again := e.refund(t, "r1", "k1", `{"metadata":{"agent":"张三 <ops>","order":"O-7"},"reason_code":"service_not_provided","reason":"late","amount":100,"user_id":"u-r1"}`)
	if a := decodeRefund(t, again, http.StatusOK); a.RefundNo != v.RefundNo {
		t.Fatalf("replay %s", again.body)
	}
	plain := e.refund(t, "r1", "k2", `{"user_id":"u-r1","amount":100}`)
	if keys := jsonKeys(t, plain.body); strings.Contains(keys, "reason_code") || strings.Contains(keys, "metadata") {
		t.Fatalf("a refund without them shows %s", keys)
	}
	// An empty metadata object is no metadata, and the same request as none.
	empty := e.refund(t, "r1", "k2", `{"user_id":"u-r1","amount":100,"metadata":{}}`)
	if decodeRefund(t, empty, http.StatusOK).Metadata != nil {
		t.Fatalf("empty metadata replay: %s", empty.body)
	}
}

// TestRequestRefund_MetadataKeyReused: a key reused with another reason
// code or other metadata is the fingerprint conflict, 422.
func TestRequestRefund_MetadataKeyReused(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":100,"reason_code":"duplicate","metadata":{"order":"O-1"}}`), http.StatusAccepted)
	for name, body := range map[string]string{
		"other value":       `{"user_id":"u-r1","amount":100,"reason_code":"duplicate","metadata":{"order":"O-2"}}`,
		"other key":         `{"user_id":"u-r1","amount":100,"reason_code":"duplicate","metadata":{"Order":"O-1"}}`,
		"one more key":      `{"user_id":"u-r1","amount":100,"reason_code":"duplicate","metadata":{"order":"O-1","x":"y"}}`,
		"no metadata":       `{"user_id":"u-r1","amount":100,"reason_code":"duplicate"}`,
		"other reason code": `{"user_id":"u-r1","amount":100,"reason_code":"other","metadata":{"order":"O-1"}}`,
		"no reason code":    `{"user_id":"u-r1","amount":100,"metadata":{"order":"O-1"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.refund(t, "r1", "k1", body), http.StatusUnprocessableEntity, "idempotency_key_reused", "*")
		})
	}
	if v := e.get(t, "r1"); len(v.Refunds) != 1 {
		t.Fatalf("a reused key created a refund: %+v", v.Refunds)
	}
}

// TestRequestRefund_MetadataNotSentToProvider: the journaled provider bytes
// are what the encoder makes of the refund's provider fields alone.
func TestRequestRefund_MetadataNotSentToProvider(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	v := decodeRefund(t, e.refund(t, "r1", "k1",
		`{"user_id":"u-r1","amount":100,"reason":"late","reason_code":"fraudulent","metadata":{"secret":"never-to-wechat"}}`), http.StatusAccepted)
	st, err := e.engine.Get(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	r := st.Refund(v.RefundNo)
	want, _ := simprovider.Encode(reservation.RefundRequest{RefundNo: r.No, OutTradeNo: st.OutTradeNo, TransactionID: st.TransactionID,
		Amount: r.Amount, Total: st.Amount, Currency: st.Currency, Reason: r.Reason})
	if !bytes.Equal(r.Request, want) {
		t.Fatalf("provider bytes %s, want %s", r.Request, want)
	}
	if bytes.Contains(r.Request, []byte("never-to-wechat")) || bytes.Contains(r.Request, []byte("fraudulent")) {
		t.Fatalf("provider bytes carry the metadata: %s", r.Request)
	}
}

// TestRequestRefund_MetadataEscapes: metadata with characters JSON escapes
// reads back as sent, through the hand-written encoder of the views.
func TestRequestRefund_MetadataEscapes(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	md := map[string]string{"<a&b>": "\"quoted\" \\ \u2028 订单", "z": "é"}
	b, _ := json.Marshal(map[string]any{"user_id": "u-r1", "amount": 1, "metadata": md})
	v := decodeRefund(t, e.refund(t, "r1", "k1", string(b)), http.StatusAccepted)
	if !maps.Equal(v.Metadata, md) {
		t.Fatalf("metadata %q, sent %q", v.Metadata, md)
	}
}
