package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/refundd/refundd/internal/jsontext"
	"github.com/refundd/refundd/internal/reservation"
)

// The fast paths of fastjson.go must never change what a client sees:
// these tests hold them to encoding/json on the same input.

var flatBodies = []string{
	`{"id":"r1","user_id":"u1","out_trade_no":"O1","amount":100,"currency":"CNY"}`,
	` {"id" : "r1" ,"amount":-0 , "paid_at":"2026-11-30T08:00:00Z"}` + "\n\t\r ",
	`{"user_id":"u-1","amount":2500,"reason":"late"}`,
	`{"user_id":"用户","reason":"迟到 ✓"}`,
	`{"reason":"x"}`, `{}`, ` { } `,
	`{"amount":1,"amount":2}`, `{"reason":"a","reason":"b"}`,
	`{"amount":9223372036854775807}`, `{"amount":-9223372036854775808}`,
	`{"amount":9223372036854775808}`, `{"amount":-9223372036854775809}`,
	`{"amount":01}`, `{"amount":1.0}`, `{"amount":1e3}`, `{"amount":1E3}`, `{"amount":-}`, `{"amount":--1}`,
	`{"amount":"1"}`, `{"amount":null}`, `{"amount":true}`, `{"amount":[1]}`, `{"amount":{}}`,
	`{"user_id":1}`, `{"user_id":null}`, `{"user_id":"a\"b"}`, `{"user_id":"a\\b"}`, `{"user_id":"\u0041"}`,
	"{\"user_id\":\"a\x01\"}", "{\"user_id\":\"a\x7f\"}", "{\"user_id\":\"\xff\"}", "{\"user_id\":\"\xed\xa0\x80\"}",
	`{"USER_ID":"u"}`, `{"User_Id":"u"}`, `{"amounT":1}`, `{"x":1}`, `{"":1}`, `{"a\"b":1}`,
	`{"reason":"x"} `, `{"reason":"x"}{}`, `{"reason":"x"} x`, `{"reason":"x"}]`, `{"reason":"x",}`,
	`{"reason" "x"}`, `{"reason":"x" "user_id":"u"}`, `{"reason":"x"`, `{"reason":`, `{"reason`, `{`,
	`[]`, `null`, `"s"`, `1`, ``, ` `, "\ufeff{}", `{"id":"r1","paid_at":"yesterday"}`,
	`{"transaction_id":"4200","currency":"CNY","out_trade_no":"O|3*"}`,
	`{"reason":null}`, `{"paid_at":null}`, `{"reason":"\ud800"}`, `{"reason":"\udc00"}`, `{"reason":"\ud800\u0041"}`,
	`{"reason":"\ud83d\ude00"}`, `{"reason":"\ufffd"}`, "{\"reason\":\"\ufffd\"}",
	`{"user_id":"u","reason_code":"duplicate","reason":"x"}`, `{"reason_code":null}`, `{"reason_code":1}`, `{"reason_code":"\ud800"}`,
	`{"reason_code":"a","reason_code":"b"}`, `{"metadata":{"a":"b"}}`, `{"metadata":{}}`, `{"metadata":"a"}`, `{"metadata":null}`,
}

// Whatever decodeFlat takes, encoding/json takes with the same result; what
// it refuses it leaves untouched.
func TestDecodeFlat_AgreesWithEncodingJSON(t *testing.T) {
	for _, body := range flatBodies {
		checkFlat(t, []byte(body))
	}
}

func FuzzDecodeFlat(f *testing.F) {
	for _, body := range flatBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkFlat(t, body) })
}

func checkFlat(t *testing.T, body []byte) {
	t.Helper()
	for _, mk := range []func() any{
		func() any { return &registerRequest{} },
		func() any { return &refundRequest{} },
		func() any { return &operatorRequest{} },
	} {
		fast, slow := mk(), mk()
		ok := decodeFlat(body, fast)
		err := decodeJSON(bytes.NewReader(body), slow)
		if !ok {
			if !reflect.DeepEqual(fast, mk()) {
				t.Fatalf("%T %q: a refused body changed the value: %+v", fast, body, fast)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%T %q: fast path accepted what encoding/json refuses: %v", fast, body, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%T %q: fast %+v, encoding/json %+v", fast, body, fast, slow)
		}
	}
}

// The fast path takes the common bodies: a regression here is a slowdown,
// not a wrong answer.
func TestDecodeFlat_TakesPlainBodies(t *testing.T) {
	for _, tc := range []struct {
		body string
		v    any
	}{
		{`{"id":"r1","user_id":"u1","out_trade_no":"O1","amount":100,"currency":"CNY","paid_at":"2026-11-30T08:00:00+08:00"}`, &registerRequest{}},
		{`{"user_id":"u-1","amount":2500,"reason":"迟到"}`, &refundRequest{}},
		{`{"user_id":"u-1","amount":2500,"reason":"迟到","reason_code":"requested_by_customer"}`, &refundRequest{}},
		{`{"reason":"resolved by phone"}`, &operatorRequest{}},
	} {
		if !decodeFlat([]byte(tc.body), tc.v) {
			t.Errorf("%T %s: not taken by the fast path", tc.v, tc.body)
		}
	}
}

// decodeStrict, which reads part of the body before deciding, answers as
// encoding/json reading the body itself does, however the body arrives.
func TestDecodeStrict_AgreesWithEncodingJSON(t *testing.T) {
	s := New(nil, Options{})
	bodies := append([]string{
		strings.Repeat(" ", fastBodyMax-10) + `{"reason":"x"}`,
		`{"reason":"` + strings.Repeat("a", fastBodyMax) + `"}`,
		`{"reason":"` + strings.Repeat("a", maxBody) + `"}`,
		`{"reason":"x"}` + strings.Repeat(" ", maxBody),
		`{"reason":"x"}` + strings.Repeat(" ", fastBodyMax),
		`{"reason":"x"}` + strings.Repeat(" ", fastBodyMax) + "x",
	}, flatBodies...)
	readErr := errors.New("connection reset")
	for _, body := range bodies {
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"whole":     func(r io.Reader) io.Reader { return r },
			"bytewise":  iotest.OneByteReader,
			"data+EOF":  iotest.DataErrReader,
			"truncated": func(r io.Reader) io.Reader { return io.MultiReader(io.LimitReader(r, 9), iotest.ErrReader(readErr)) },
		} {
			if name == "bytewise" && len(body) > 2*fastBodyMax {
				continue // a byte at a time through encoding/json is slow
			}
			want := decodeJSON(wrap(http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(body)), maxBody)), &refundRequest{})
			var got refundRequest
			r := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(wrap(strings.NewReader(body))))
			err := s.decodeStrict(httptest.NewRecorder(), r, &got)
			if classify(err) != classify(want) || (err == nil) != (want == nil) {
				t.Errorf("%s %.40q: decodeStrict %v, encoding/json %v", name, body, err, want)
			}
		}
	}
}

func TestAppendViews_AgreeWithEncodingJSON(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 0, 0, 123456789, time.UTC)
	east := time.Date(2026, 11, 30, 16, 0, 0, 0, time.FixedZone("CST", 8*3600))
	full := &reservation.Refund{
		No: "R1", Amount: 2500, State: reservation.Abnormal, Reason: "<late> & \"sorry\"", Code: "SYSTEMERROR",
		Message: "系统错误\u2028x", ProviderID: "5030\x00", Attempts: 3, Stuck: true, DueAt: east, Conflicts: 2,
		PaidAfterFailed: true, Recovered: true, ReasonCode: "<dup>&", AbnormalType: "USER_<BANK>_CARD",
		Metadata:  reservation.NewMetadata(map[string]string{"z": "<&>", "a": "订单\u2028\"1\"", "m": "\xff"}),
		CreatedAt: at, UpdatedAt: east, SucceededAt: at,
	}
	plain := &reservation.Refund{No: "R2", Amount: 1, State: reservation.Processing, CreatedAt: at, UpdatedAt: at}
	bad := &reservation.Refund{No: "R3", CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	// next_step with every member: a rejected refund whose earlier
	// attempt may still land (abandon_from), a code with markup in its why.
	settling := &reservation.Refund{No: "R5", Amount: 3, State: reservation.Rejected, Code: "<b>&\u2028", Attempts: 2,
		Request: []byte("{}"), UnsettledAt: at, DueAt: east, CreatedAt: at, UpdatedAt: at}
	va := viewAt{now: at.Add(time.Hour), policy: reservation.Policy{MaxAttempts: 3}}
	states := []*reservation.State{
		{ID: "r1", Merchant: "default", UserID: "u1", OutTradeNo: "O1", Amount: 10000, Currency: "CNY", Status: reservation.Status("ACCEPTED"), RegisteredAt: at},
		{ID: "r2", Merchant: "hotel-<sh>&", UserID: "用户\xff", OutTradeNo: "O|3*", TransactionID: "4200", Amount: 10000, Currency: "CNY",
			PaidAt: east, Status: reservation.Status("ACCEPTED"), RegisteredAt: at, Refunds: []*reservation.Refund{full, plain}},
		{ID: "r3", RegisteredAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{ID: "r4", RegisteredAt: at, Refunds: []*reservation.Refund{plain, bad}},
		{ID: "r5", RegisteredAt: at, Refunds: []*reservation.Refund{settling}},
	}
	for _, st := range states {
		want, wantErr := json.Marshal(viewReservation(st, va))
		got, ok := appendReservation(nil, st, va)
		if ok != (wantErr == nil) || ok && !bytes.Equal(got, want) {
			t.Errorf("reservation %s:\n got %s (%v)\nwant %s (%v)", st.ID, got, ok, want, wantErr)
		}
		for _, r := range st.Refunds {
			want, wantErr := json.Marshal(viewRefund(st, r, va))
			got, ok := appendRefund(nil, st, r, va)
			if ok != (wantErr == nil) || ok && !bytes.Equal(got, want) {
				t.Errorf("refund %s:\n got %s (%v)\nwant %s (%v)", r.No, got, ok, want, wantErr)
			}
		}
	}
	for _, d := range []errorDetail{
		{Code: "invalid_argument", Message: "must be a JSON integer", Field: "amount"},
		{Code: "unavailable", Message: "paused: <restore> & reconcile"},
		{Code: "unavailable", Message: "paused: restore & reconcile"},
	} {
		want, _ := json.Marshal(errorBody{Error: d})
		if got := d.appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("error body:\n got %s\nwant %s", got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<>&", "a&b", "a>b", "\"\\", "\x00\x1f\x7f", "\b\f\n\r\t", "用户", "\xff", "\u2028\u2029", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := jsontext.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

func FuzzQueryWait(f *testing.F) {
	for _, q := range []string{"", "wait=5s", "wait", "wait=", "=5s", "wait=5s=1", "x=1&wait=2s", "wait=1s&wait=2s",
		"w%61it=1s", "wait=1%73", "wait=+1s", "wait=1s;x=1", "x;wait=1s", "wait=%zz", "WAIT=1s"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, _ := url.ParseQuery(raw)
		if got, want := queryWait(raw), v.Get("wait"); got != want {
			t.Fatalf("%q: got %q, want %q", raw, got, want)
		}
	})
}
