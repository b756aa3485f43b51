package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// hostileCase is one request that must be refused without changing
// anything.
type hostileCase struct {
	name   string
	body   string
	hdr    []string // extra header name/value pairs
	status int
	code   string
	field  string
	msg    string // a word the message must contain, when not ""
}

// wantRefused is wantError for a hostile case, its message included.
func wantRefused(t *testing.T, r response, c hostileCase) {
	t.Helper()
	d := wantError(t, r, c.status, c.code, c.field)
	if !strings.Contains(d.Message, c.msg) {
		t.Fatalf("message %q does not say %q", d.Message, c.msg)
	}
}

const (
	validUser = `"user_id":"u-r1"`
	okOrder   = `"out_trade_no":"ORD-h"`
)

// reg builds a registration body for id "h" with the given extra members.
func reg(members string) string {
	return `{"id":"h","user_id":"u-h",` + okOrder + `,"currency":"CNY",` + members + `}`
}

func TestRegisterReservation_HostileInput(t *testing.T) {
	big := strings.Repeat("a", 70<<10)
	cases := []hostileCase{
		{name: "unknown field", body: reg(`"amount":1,"refundable":999`), status: 400, code: "invalid_argument", field: "refundable"},
		{name: "unknown empty field", body: reg(`"amount":1,"":1`), status: 400, code: "invalid_argument", field: "body"},
		{name: "unknown quoted field", body: reg(`"amount":1,"a\"b":1`), status: 400, code: "invalid_argument", field: `a"b`},
		{name: "unknown field case", body: reg(`"amount":1,"Amount2":1`), status: 400, code: "invalid_argument", field: "Amount2"},
		{name: "paid amount twice", body: reg(`"amount":100,"amount":10000`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "paid amount in another case", body: reg(`"Amount":10000`), status: 400, code: "invalid_argument", field: "Amount"},
		{name: "order twice", body: `{"id":"h","user_id":"u-h",` + okOrder + `,"out_trade_no":"OTHER","currency":"CNY","amount":1}`, status: 400, code: "invalid_argument", field: "out_trade_no"},
		{name: "amount as string", body: reg(`"amount":"100"`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount float", body: reg(`"amount":1.5`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount float integral", body: reg(`"amount":100.0`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount exponent", body: reg(`"amount":1e3`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount bool", body: reg(`"amount":true`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount object", body: reg(`"amount":{"total":1}`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount array", body: reg(`"amount":[1]`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount null", body: reg(`"amount":null`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount missing", body: `{"id":"h","user_id":"u-h",` + okOrder + `,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount zero", body: reg(`"amount":0`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount negative", body: reg(`"amount":-1`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount above 10^12", body: reg(`"amount":1000000000001`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount int64 overflow", body: reg(`"amount":9223372036854775808`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount int64 min", body: reg(`"amount":-9223372036854775808`), status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount huge literal", body: reg(`"amount":` + strings.Repeat("9", 400)), status: 400, code: "invalid_argument", field: "amount"},
		{name: "trailing object", body: reg(`"amount":1`) + `{}`, status: 400, code: "invalid_argument", field: "body"},
		{name: "trailing garbage", body: reg(`"amount":1`) + ` x`, status: 400, code: "invalid_argument", field: "body"},
		{name: "trailing bracket", body: reg(`"amount":1`) + `]`, status: 400, code: "invalid_argument", field: "body"},
		{name: "empty body", body: ``, status: 400, code: "invalid_argument", field: "body"},
		{name: "whitespace body", body: " \n\t ", status: 400, code: "invalid_argument", field: "body"},
		{name: "truncated", body: `{"id":"h","amount":1`, status: 400, code: "invalid_argument", field: "body"},
		{name: "not an object", body: `[1,2]`, status: 400, code: "invalid_argument", field: "body"},
		{name: "string body", body: `"hello"`, status: 400, code: "invalid_argument", field: "body"},
		{name: "null body", body: `null`, status: 400, code: "invalid_argument", field: "amount"},
		{name: "huge body", body: `{"id":"` + big + `"}`, status: 413, code: "body_too_large", field: "body"},
		{name: "huge trailing whitespace", body: reg(`"amount":1`) + strings.Repeat(" ", 70<<10), status: 413, code: "body_too_large", field: "body"},
		{name: "text/plain", body: reg(`"amount":1`), hdr: []string{"Content-Type", "text/plain"}, status: 400, code: "invalid_argument", field: "Content-Type"},
		{name: "form", body: `id=h&amount=1`, hdr: []string{"Content-Type", "application/x-www-form-urlencoded"}, status: 400, code: "invalid_argument", field: "Content-Type"},
		{name: "json lookalike type", body: reg(`"amount":1`), hdr: []string{"Content-Type", "application/jsonp"}, status: 400, code: "invalid_argument", field: "Content-Type"},
		{name: "id charset", body: `{"id":"a b","user_id":"u",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "id"},
		{name: "id slash", body: `{"id":"a/b","user_id":"u",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "id"},
		{name: "id unicode", body: `{"id":"ü","user_id":"u",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "id"},
		{name: "id too long", body: `{"id":"` + strings.Repeat("a", 41) + `","user_id":"u",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "id"},
		{name: "id empty", body: `{"id":"","user_id":"u",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "id"},
		{name: "user_id control char", body: `{"id":"h","user_id":"u\u0001",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id"},
		{name: "user_id newline", body: `{"id":"h","user_id":"u\n",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id"},
		{name: "user_id DEL", body: `{"id":"h","user_id":"u\u007f",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id"},
		{name: "user_id empty", body: `{"id":"h","user_id":"",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id"},
		{name: "user_id too long", body: `{"id":"h","user_id":"` + strings.Repeat("u", 65) + `",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id"},
		{name: "user_id number", body: `{"id":"h","user_id":7,` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id"},
		{name: "out_trade_no charset", body: `{"id":"h","user_id":"u","out_trade_no":"a b","amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "out_trade_no"},
		{name: "out_trade_no too long", body: `{"id":"h","user_id":"u","out_trade_no":"` + strings.Repeat("o", 33) + `","amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "out_trade_no"},
		{name: "transaction_id letters", body: reg(`"amount":1,"transaction_id":"42x"`), status: 400, code: "invalid_argument", field: "transaction_id"},
		{name: "currency USD", body: `{"id":"h","user_id":"u",` + okOrder + `,"amount":1,"currency":"USD"}`, status: 400, code: "invalid_argument", field: "currency"},
		{name: "currency missing", body: `{"id":"h","user_id":"u",` + okOrder + `,"amount":1}`, status: 400, code: "invalid_argument", field: "currency"},
		{name: "paid_at not a time", body: reg(`"amount":1,"paid_at":"yesterday"`), status: 400, code: "invalid_argument", field: "paid_at"},
		{name: "paid_at number", body: reg(`"amount":1,"paid_at":1700000000`), status: 400, code: "invalid_argument", field: "paid_at"},
		{name: "paid_at no zone", body: reg(`"amount":1,"paid_at":"2026-01-01T00:00:00"`), status: 400, code: "invalid_argument", field: "paid_at"},
		// Valid RFC 3339 whose UTC instant falls outside years 0..9999,
		// which no JSON time can encode: it must be refused, not journaled.
		// An explicit null is never a value: the member is left out instead.
		{name: "id null", body: `{"id":null,"user_id":"u",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "id", msg: "null"},
		{name: "user_id null", body: `{"id":"h","user_id":null,` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id", msg: "null"},
		{name: "out_trade_no null", body: `{"id":"h","user_id":"u","out_trade_no":null,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "out_trade_no", msg: "null"},
		{name: "transaction_id null", body: reg(`"amount":1,"transaction_id":null`), status: 400, code: "invalid_argument", field: "transaction_id", msg: "null"},
		{name: "currency null", body: `{"id":"h","user_id":"u",` + okOrder + `,"amount":1,"currency":null}`, status: 400, code: "invalid_argument", field: "currency", msg: "null"},
		{name: "paid_at null", body: reg(`"amount":1,"paid_at":null`), status: 400, code: "invalid_argument", field: "paid_at", msg: "null"},
		// encoding/json turns a lone surrogate escape and an invalid UTF-8
		// byte into U+FFFD: what is kept would not be what was sent.
		{name: "user_id lone high surrogate", body: `{"id":"h","user_id":"u\ud800",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id", msg: "surrogate"},
		{name: "user_id lone low surrogate", body: `{"id":"h","user_id":"\udc00u",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id", msg: "surrogate"},
		{name: "user_id high surrogate then letter", body: `{"id":"h","user_id":"\ud800\u0041",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id", msg: "surrogate"},
		{name: "user_id two high surrogates", body: `{"id":"h","user_id":"\ud800\udbff\udc00",` + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id", msg: "surrogate"},
		{name: "user_id invalid UTF-8", body: "{\"id\":\"h\",\"user_id\":\"u\xff\"," + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id", msg: "UTF-8"},
		{name: "user_id encoded surrogate", body: "{\"id\":\"h\",\"user_id\":\"u\xed\xa0\x80\"," + okOrder + `,"amount":1,"currency":"CNY"}`, status: 400, code: "invalid_argument", field: "user_id", msg: "UTF-8"},
		{name: "currency lone surrogate", body: `{"id":"h","user_id":"u",` + okOrder + `,"amount":1,"currency":"CNY\ud800"}`, status: 400, code: "invalid_argument", field: "currency", msg: "surrogate"},
		{name: "paid_at lone surrogate", body: reg(`"amount":1,"paid_at":"2026-01-01T00:00:00Z\udfff"`), status: 400, code: "invalid_argument", field: "paid_at", msg: "surrogate"},
		{name: "paid_at before year 1 in UTC", body: reg(`"amount":1,"paid_at":"0000-01-01T00:00:00+01:00"`), status: 400, code: "invalid_argument", field: "paid_at"},
		{name: "paid_at after 9999 in UTC", body: reg(`"amount":1,"paid_at":"9999-12-31T23:30:00-01:00"`), status: 400, code: "invalid_argument", field: "paid_at"},
	}
	e := newEnv(t, hour)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each case gets its own id and order, so one wrongly accepted
			// body cannot turn the next cases into conflicts.
			n := fmt.Sprint(i)
			body := strings.NewReplacer(`"id":"h"`, `"id":"h`+n+`"`, `"ORD-h"`, `"ORD-h`+n+`"`).Replace(c.body)
			r := e.do(t, http.MethodPost, "/v1/reservations", body, c.hdr...)
			wantRefused(t, r, c)
			wantError(t, e.do(t, http.MethodGet, "/v1/reservations/h"+n, ""), http.StatusNotFound, "not_found", "")
		})
	}
	// The boundary values are accepted.
	for _, ct := range []string{"application/json; charset=utf-8", "Application/JSON", ""} {
		r := e.do(t, http.MethodPost, "/v1/reservations", reg(`"amount":1000000000000,"paid_at":"9999-12-31T23:59:59Z"`), "Content-Type", ct)
		if r.status != http.StatusCreated && r.status != http.StatusOK {
			t.Fatalf("Content-Type %q with boundary values: %s", ct, r)
		}
		decodeReservation(t, r, r.status)
	}
}

// refundBody builds a refund body for reservation r1's user with extra
// members.
func refundBody(members string) string {
	if members == "" {
		return `{` + validUser + `}`
	}
	return `{` + validUser + `,` + members + `}`
}

func TestRequestRefund_HostileInput(t *testing.T) {
	key := []string{"Idempotency-Key", "k"}
	with := func(h ...string) []string { return append(append([]string(nil), key...), h...) }
	cases := []hostileCase{
		{name: "unknown field", body: refundBody(`"amount":1,"refund_no":"X"`), hdr: key, status: 400, code: "invalid_argument", field: "refund_no"},
		{name: "paid amount smuggled", body: refundBody(`"total":1`), hdr: key, status: 400, code: "invalid_argument", field: "total"},
		{name: "amount as string", body: refundBody(`"amount":"100"`), hdr: key, status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount float", body: refundBody(`"amount":1.5`), hdr: key, status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount bool", body: refundBody(`"amount":false`), hdr: key, status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount zero", body: refundBody(`"amount":0`), hdr: key, status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount negative", body: refundBody(`"amount":-100`), hdr: key, status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount above 10^12", body: refundBody(`"amount":1000000000001`), hdr: key, status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount int64 overflow", body: refundBody(`"amount":9223372036854775808`), hdr: key, status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount -int64 overflow", body: refundBody(`"amount":-9223372036854775809`), hdr: key, status: 400, code: "invalid_argument", field: "amount"},
		{name: "trailing data", body: refundBody(`"amount":1`) + `{"amount":2}`, hdr: key, status: 400, code: "invalid_argument", field: "body"},
		{name: "amount twice", body: `{"user_id":"u-r1","amount":1,"amount":9000}`, hdr: key, status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount twice, once escaped", body: `{"user_id":"u-r1","amount":1,"\u0061mount":9000}`, hdr: key, status: 400, code: "invalid_argument", field: "amount"},
		{name: "amount in capitals", body: `{"user_id":"u-r1","AMOUNT":9000}`, hdr: key, status: 400, code: "invalid_argument", field: "AMOUNT"},
		{name: "amount in another case beside it", body: `{"user_id":"u-r1","amount":1,"Amount":9000}`, hdr: key, status: 400, code: "invalid_argument", field: "Amount"},
		{name: "user_id twice", body: `{"user_id":"u-r1","user_id":"u-r2","amount":1}`, hdr: key, status: 400, code: "invalid_argument", field: "user_id"},
		{name: "empty body", body: ``, hdr: key, status: 400, code: "invalid_argument", field: "body"},
		{name: "array body", body: `[]`, hdr: key, status: 400, code: "invalid_argument", field: "body"},
		{name: "huge body", body: `{"reason":"` + strings.Repeat("r", 70<<10) + `"}`, hdr: key, status: 413, code: "body_too_large", field: "body"},
		{name: "non-JSON content type", body: refundBody(`"amount":1`), hdr: with("Content-Type", "text/plain"), status: 400, code: "invalid_argument", field: "Content-Type"},
		{name: "reason 81 bytes", body: refundBody(`"reason":"` + strings.Repeat("r", 81) + `"`), hdr: key, status: 400, code: "invalid_argument", field: "reason"},
		{name: "reason 27 CJK chars", body: refundBody(`"reason":"` + strings.Repeat("退", 27) + `"`), hdr: key, status: 400, code: "invalid_argument", field: "reason"},
		{name: "reason control char", body: refundBody(`"reason":"a\u0000b"`), hdr: key, status: 400, code: "invalid_argument", field: "reason"},
		{name: "user_id control char", body: `{"user_id":"u-r1\t","amount":1}`, hdr: key, status: 400, code: "invalid_argument", field: "user_id"},
		{name: "user_id missing", body: `{"amount":1}`, hdr: key, status: 400, code: "invalid_argument", field: "user_id"},
		{name: "user_id array", body: `{"user_id":["u-r1"]}`, hdr: key, status: 400, code: "invalid_argument", field: "user_id"},
		{name: "no key", body: refundBody(`"amount":1`), status: 400, code: "invalid_argument", field: "Idempotency-Key"},
		// Absent amount means everything refundable; null is not absent.
		{name: "amount null", body: refundBody(`"amount":null`), hdr: key, status: 400, code: "invalid_argument", field: "amount", msg: "null"},
		{name: "amount null before a reason", body: `{"amount":null,` + validUser + `,"reason":"r"}`, hdr: key, status: 400, code: "invalid_argument", field: "amount", msg: "null"},
		{name: "user_id null", body: `{"user_id":null,"amount":1}`, hdr: key, status: 400, code: "invalid_argument", field: "user_id", msg: "null"},
		{name: "reason null", body: refundBody(`"amount":1,"reason":null`), hdr: key, status: 400, code: "invalid_argument", field: "reason", msg: "null"},
		{name: "reason lone high surrogate", body: refundBody(`"amount":1,"reason":"\ud800"`), hdr: key, status: 400, code: "invalid_argument", field: "reason", msg: "surrogate"},
		{name: "reason lone low surrogate", body: refundBody(`"amount":1,"reason":"\udc00"`), hdr: key, status: 400, code: "invalid_argument", field: "reason", msg: "surrogate"},
		{name: "reason high surrogate then letter", body: refundBody(`"amount":1,"reason":"\ud800\u0041"`), hdr: key, status: 400, code: "invalid_argument", field: "reason", msg: "surrogate"},
		{name: "reason high surrogate at the end", body: refundBody(`"amount":1,"reason":"late \uDBFF"`), hdr: key, status: 400, code: "invalid_argument", field: "reason", msg: "surrogate"},
		{name: "reason reversed pair", body: refundBody(`"amount":1,"reason":"\udc00\ud800"`), hdr: key, status: 400, code: "invalid_argument", field: "reason", msg: "surrogate"},
		{name: "reason high surrogate, escaped backslash", body: refundBody(`"amount":1,"reason":"\ud800\\udc00"`), hdr: key, status: 400, code: "invalid_argument", field: "reason", msg: "surrogate"},
		{name: "reason invalid UTF-8", body: refundBody("\"amount\":1,\"reason\":\"late\xff\""), hdr: key, status: 400, code: "invalid_argument", field: "reason", msg: "UTF-8"},
		{name: "user_id lone surrogate", body: `{"user_id":"u-r1\ud800","amount":1}`, hdr: key, status: 400, code: "invalid_argument", field: "user_id", msg: "surrogate"},
	}
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(t, http.MethodPost, "/v1/reservations/r1/refunds", c.body, c.hdr...)
			wantRefused(t, r, c)
		})
	}
	if v := e.get(t, "r1"); len(v.Refunds) != 0 || v.Refundable != 10000 {
		t.Fatalf("hostile requests changed the reservation: %+v", v)
	}
	// Keys no HTTP client would send still reach the handler's check.
	for _, k := range []string{"k\x01", "k\nX-Evil: 1", "k\x00", "k\x7f"} {
		req := httptest.NewRequest(http.MethodPost, "/v1/reservations/r1/refunds", strings.NewReader(refundBody(`"amount":1`)))
		req.Header.Set("Idempotency-Key", k)
		wantError(t, e.serve(req), http.StatusBadRequest, "invalid_argument", "Idempotency-Key")
	}
	// Reservation ids outside the charset in the path are simply unknown.
	for _, id := range []string{"bad%20id", "%00", strings.Repeat("r", 41), "r1%3B"} {
		r := e.do(t, http.MethodPost, "/v1/reservations/"+id+"/refunds", refundBody(`"amount":1`), key...)
		wantError(t, r, http.StatusNotFound, "not_found", "")
	}
	// The limits themselves are accepted.
	r := e.refund(t, "r1", "k-80", refundBody(`"amount":1000000000000`))
	wantError(t, r, http.StatusConflict, "insufficient_refundable", "")
	v := decodeRefund(t, e.refund(t, "r1", "k-80", refundBody(`"amount":1,"reason":"`+strings.Repeat("r", 80)+`"`)), http.StatusAccepted)
	if len(v.Reason) != 80 {
		t.Fatalf("80-byte reason: %+v", v)
	}
	// Surrogate pairs and U+FFFD itself, escaped or not, are text.
	for _, c := range []struct{ key, reason, want string }{
		{"k-pair", `\ud83d\ude00 \uD83D\uDE00`, "😀 😀"},
		{"k-fffd", `\ufffd` + "\ufffd", "\ufffd\ufffd"},
		{"k-escapes", `\"\\\/\u00e9\u9000`, `"\/é退`},
	} {
		r := e.refund(t, "r1", c.key, refundBody(`"amount":1,"reason":"`+c.reason+`"`))
		if v := decodeRefund(t, r, http.StatusAccepted); v.Reason != c.want {
			t.Fatalf("reason %s kept as %q, want %q", c.reason, v.Reason, c.want)
		}
	}
}

func TestOperatorAction_HostileInput(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	v := decodeRefund(t, e.refund(t, "r1", "k1", refundBody(`"amount":1`)), http.StatusAccepted)
	before := e.submitted(t, "r1")
	cases := []hostileCase{
		{name: "unknown field", body: `{"why":"x"}`, status: 400, code: "invalid_argument", field: "why"},
		{name: "reason number", body: `{"reason":1}`, status: 400, code: "invalid_argument", field: "reason"},
		{name: "trailing", body: `{} {}`, status: 400, code: "invalid_argument", field: "body"},
		{name: "huge", body: `{"reason":"` + strings.Repeat("r", 70<<10) + `"}`, status: 413, code: "body_too_large", field: "body"},
		{name: "text/plain", body: `{}`, hdr: []string{"Content-Type", "text/plain"}, status: 400, code: "invalid_argument", field: "Content-Type"},
		{name: "reason null", body: `{"reason":null}`, status: 400, code: "invalid_argument", field: "reason", msg: "null"},
		{name: "reason lone high surrogate", body: `{"reason":"paid by phone \ud800"}`, status: 400, code: "invalid_argument", field: "reason", msg: "surrogate"},
		{name: "reason lone low surrogate", body: `{"reason":"\udfff"}`, status: 400, code: "invalid_argument", field: "reason", msg: "surrogate"},
		{name: "reason high surrogate then letter", body: `{"reason":"\ud800\u0041"}`, status: 400, code: "invalid_argument", field: "reason", msg: "surrogate"},
		{name: "reason invalid UTF-8", body: "{\"reason\":\"\xc3\"}", status: 400, code: "invalid_argument", field: "reason", msg: "UTF-8"},
	}
	for _, action := range []string{"abandon", "resolve", "resubmit", "reconcile"} {
		path := "/v1/reservations/r1/refunds/" + v.RefundNo + "/" + action
		for _, c := range cases {
			t.Run(action+"/"+c.name, func(t *testing.T) {
				wantRefused(t, e.do(t, http.MethodPost, path, c.body, c.hdr...), c)
			})
		}
	}
	// Nothing refused was journaled.
	if after := e.do(t, http.MethodGet, "/v1/reservations/r1", ""); !bytes.Equal(after.body, before.body) {
		t.Fatalf("refused operator actions changed the reservation:\n%s\nwas\n%s", after.body, before.body)
	}
}
