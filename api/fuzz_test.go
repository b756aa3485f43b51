package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// The fuzz targets drive the real handler over the real engine (actors,
// eventstore, bbolt journal, sandbox provider). Two things keep that fast
// enough to fuzz, at several hundred executions per second per worker: the
// journal skips fsync (journal.Options.NoSync) and requests go straight to
// ServeHTTP instead of over a socket. Nothing else is faked, so a body that
// slips past the API's checks meets the real domain rules and journal.

// fuzzEnv is shared by every input a fuzz worker runs.
func fuzzEnv(f *testing.F, delay time.Duration) *testEnv {
	return newEnv(f, envOptions{noSync: true, noHTTP: true, delay: delay, idle: time.Second})
}

func (e *testEnv) post(path, key string, body []byte) response {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header["Idempotency-Key"] = []string{key} // unchecked, as a raw client could send it
	}
	return e.serve(req)
}

func (e *testEnv) getRaw(path string) response {
	return e.serve(httptest.NewRequest(http.MethodGet, path, nil))
}

// checkRefused asserts a well-formed client error; a 400 must name the field.
func checkRefused(t *testing.T, r response) errorJSON {
	t.Helper()
	if r.status < 400 || r.status >= 500 {
		t.Fatalf("expected a client error, got %d %s", r.status, r.body)
	}
	d := errorOf(t, r)
	if d.Code == "invalid_argument" && d.Field == "" {
		t.Fatalf("400 without a field: %s", r.body)
	}
	return d
}

func FuzzRegisterBody(f *testing.F) {
	for _, s := range []string{
		`{"id":"r1","user_id":"u1","out_trade_no":"O1","amount":100,"currency":"CNY"}`,
		`{"id":"r2","user_id":"u2","out_trade_no":"O2","transaction_id":"4200000001","amount":1000000000000,"currency":"CNY","paid_at":"2026-11-30T16:00:00+08:00"}`,
		`{"id":"r3","user_id":"用户","out_trade_no":"O|3*","amount":1,"currency":"CNY","paid_at":"0001-01-01T00:00:00Z"}`,
		`{"id":"r1","user_id":"u1","out_trade_no":"O1","amount":101,"currency":"CNY"}`, // conflicting repeat
		`{"id":"r4","user_id":"u4","out_trade_no":"O1","amount":100,"currency":"CNY"}`, // order taken
		`{"id":"r5","user_id":"u5","out_trade_no":"O5","amount":"100","currency":"CNY"}`,
		`{"id":"r5","user_id":"u5","out_trade_no":"O5","amount":1.5,"currency":"CNY"}`,
		`{"id":"r5","user_id":"u5","out_trade_no":"O5","amount":9223372036854775808,"currency":"CNY"}`,
		`{"id":"r5","user_id":"u5","out_trade_no":"O5","amount":-1,"currency":"CNY"}`,
		`{"id":"r5","user_id":"u\u0001","out_trade_no":"O5","amount":1,"currency":"CNY"}`,
		`{"id":"r 5","user_id":"u5","out_trade_no":"O5","amount":1,"currency":"CNY"}`,
		`{"id":"r5","user_id":"u5","out_trade_no":"O5","amount":1,"currency":"CNY","paid_at":"0000-01-01T00:00:00+01:00"}`,
		`{"id":"r5","user_id":"u5","out_trade_no":"O5","amount":1,"currency":"CNY","x":1}`,
		`{"id":"r5","ID":"r6","user_id":"u5","out_trade_no":"O5","amount":1,"currency":"CNY"}`,
		`{"id":"r5","user_id":"u5","out_trade_no":"O5","amount":1,"currency":"CNY","paid_at":null}`,
		`{"id":"r5","user_id":"u5\udc00","out_trade_no":"O5","amount":1,"currency":"CNY"}`,
		`{"id":"r5"} {}`, `{}`, `[]`, `null`, `"s"`, ``, `{`, `{"amount":1e400}`,
	} {
		f.Add([]byte(s))
	}
	e := fuzzEnv(f, time.Hour)
	f.Fuzz(func(t *testing.T, body []byte) {
		r := e.post("/v1/reservations", "", body)
		if r.status != http.StatusCreated && r.status != http.StatusOK {
			checkRefused(t, r)
			return
		}
		v := decodeReservation(t, r, r.status)
		// What was accepted is what the body said.
		var req struct {
			ID         string `json:"id"`
			UserID     string `json:"user_id"`
			OutTradeNo string `json:"out_trade_no"`
			Amount     int64  `json:"amount"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("accepted a body encoding/json refuses (%v): %q", err, body)
		}
		if v.ID != req.ID || v.UserID != req.UserID || v.OutTradeNo != req.OutTradeNo || v.Amount != req.Amount {
			t.Fatalf("registered %+v from %q", v, body)
		}
		if v.Status != "ACCEPTED" || len(v.Refunds) != 0 {
			t.Fatalf("fresh registration: %s", r.body)
		}
		// An identical repeat answers 200 with the same reservation, and GET
		// agrees.
		again := e.post("/v1/reservations", "", body)
		if again.status != http.StatusOK || !bytes.Equal(again.body, r.body) {
			t.Fatalf("repeat of %q answered %d %s, first %s", body, again.status, again.body, r.body)
		}
		if g := e.getRaw("/v1/reservations/" + v.ID); g.status != http.StatusOK || !bytes.Equal(g.body, r.body) {
			t.Fatalf("GET answered %d %s, register %s", g.status, g.body, r.body)
		}
	})
}

const fuzzUser = "u-fuzz"

func FuzzRefundBody(f *testing.F) {
	type seed struct{ key, body string }
	for _, s := range []seed{
		{"k1", `{"user_id":"u-fuzz"}`},
		{"k1", `{"user_id":"u-fuzz","amount":100,"reason":"late"}`},
		{"k1", `{"user_id":"u-fuzz","amount":10000}`},
		{"k1", `{"user_id":"u-fuzz","amount":10001}`},
		{"k1", `{"user_id":"u-fuzz","amount":5000}`},
		{"k1", `{"user_id":"u-fuzz","amount":1000000000000}`},
		{"k1", `{"user_id":"u-other","amount":100}`},
		{"k1", `{"user_id":"u-fuzz","amount":"100"}`},
		{"k1", `{"user_id":"u-fuzz","amount":1.5}`},
		{"k1", `{"user_id":"u-fuzz","amount":true}`},
		{"k1", `{"user_id":"u-fuzz","amount":9223372036854775807}`},
		{"k1", `{"user_id":"u-fuzz","amount":-9223372036854775808}`},
		{"k1", `{"user_id":"u-fuzz","reason":"` + strings.Repeat("r", 81) + `"}`},
		{"k1", `{"user_id":"u-fuzz\u0000"}`},
		{"k1", `{"user_id":"u-fuzz","refund_no":"x"}`},
		{"k1", `{"user_id":"u-fuzz","amount":null}`},
		{"k1", `{"user_id":"u-fuzz","amount":1,"reason":null}`},
		{"k1", `{"user_id":"u-fuzz","reason":"\ud800"}`},
		{"k1", `{"user_id":"u-fuzz","reason":"\ud800\u0041"}`},
		{"k1", `{"user_id":"u-fuzz","reason":"\ud83d\ude00\ufffd"}`},
		{"k1", "{\"user_id\":\"u-fuzz\",\"reason\":\"\xff\"}"},
		{"k1", `{"user_id":"u-fuzz"} {}`},
		{"k1", `{"user_id":"u-fuzz","reason_code":"duplicate","metadata":{"order":"O-1","agent":"张三"}}`},
		{"k1", `{"user_id":"u-fuzz","reason_code":"nope"}`},
		{"k1", `{"user_id":"u-fuzz","reason_code":null}`},
		{"k1", `{"user_id":"u-fuzz","metadata":{}}`},
		{"k1", `{"user_id":"u-fuzz","metadata":null}`},
		{"k1", `{"user_id":"u-fuzz","metadata":{"k":null}}`},
		{"k1", `{"user_id":"u-fuzz","metadata":{"k":1}}`},
		{"k1", `{"user_id":"u-fuzz","metadata":{"k":"a","k":"b"}}`},
		{"k1", `{"user_id":"u-fuzz","metadata":{"k":"\ud800"}}`},
		{"k1", `{"user_id":"u-fuzz","metadata":{"\udc00":"v"}}`},
		{"k1", "{\"user_id\":\"u-fuzz\",\"metadata\":{\"\xff\":\"v\"}}"},
		{"k1", `{"user_id":"u-fuzz","metadata":{"k":""}}`},
		{"k1", `{"user_id":"u-fuzz","metadata":{"` + strings.Repeat("k", 41) + `":"v"}}`},
		{"k1", `{"user_id":"u-fuzz","metadata":{"k":"` + strings.Repeat("v", 501) + `"}}`},
		{"k1", `{"user_id":"u-fuzz","metadata":[]}`},
		{"k1", `[]`}, {"k1", `null`}, {"k1", ``}, {"k1", `{`},
		{"", `{"user_id":"u-fuzz"}`},
		{"k 1", `{"user_id":"u-fuzz"}`},
		{strings.Repeat("k", 64), `{"user_id":"u-fuzz","amount":1}`},
		{strings.Repeat("k", 65), `{"user_id":"u-fuzz","amount":1}`},
	} {
		f.Add(s.key, []byte(s.body))
	}
	// The sandbox succeeds at once, so refunds move on while the checks run.
	e := fuzzEnv(f, 0)
	var seq atomic.Int64
	f.Fuzz(func(t *testing.T, key string, body []byte) {
		id := fmt.Sprintf("f%d", seq.Add(1))
		const paid = 10000
		if _, _, err := e.engine.Execute(context.Background(), id, "test", reservation.Register{
			ReservationID: id, UserID: fuzzUser, OutTradeNo: "O" + id, Amount: paid, Currency: "CNY",
		}); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
		path := "/v1/reservations/" + id + "/refunds"
		created := 0
		first := e.post(path, key, body)
		var firstRefund refundJSON
		if first.status == http.StatusAccepted {
			created++
			firstRefund = decodeRefund(t, first, http.StatusAccepted)
			if firstRefund.ReservationID != id || firstRefund.Amount > paid || firstRefund.State == "SUCCEEDED" || firstRefund.State == "FAILED" {
				t.Fatalf("202 with %s", first.body)
			}
			checkTaken(t, body, firstRefund)
		} else {
			firstErr := checkRefused(t, first)
			// The same request again gets the same refusal.
			again := e.post(path, key, body)
			if again.status != first.status || checkRefused(t, again).Code != firstErr.Code {
				t.Fatalf("repeat of a refused request: %d %s, first %d %s", again.status, again.body, first.status, first.body)
			}
		}
		if created == 1 {
			// Replay: 200, the same refund.
			again := e.post(path, key, body)
			v := decodeRefund(t, again, http.StatusOK)
			if v.RefundNo != firstRefund.RefundNo || v.Amount != firstRefund.Amount {
				t.Fatalf("replay gave %s, first %s", again.body, first.body)
			}
		}
		// A second refund under another key on the same reservation.
		second := e.post(path, key+"2", body)
		if second.status == http.StatusAccepted {
			created++
			v := decodeRefund(t, second, http.StatusAccepted)
			if v.RefundNo == firstRefund.RefundNo {
				t.Fatalf("two keys, one refund number %s", v.RefundNo)
			}
		} else {
			checkRefused(t, second)
		}
		g := e.getRaw("/v1/reservations/" + id)
		st := decodeReservation(t, g, http.StatusOK) // refunded + in_flight <= amount, totals match refunds
		if st.Amount != paid || len(st.Refunds) != created {
			t.Fatalf("%d refunds created, reservation shows %s", created, g.body)
		}
	})
}

// checkTaken asserts that an accepted refund body said what was taken: an
// amount member, when there is one, is the refund's amount (not a null
// read as "everything"), and a U+FFFD in the reason was sent as one (not
// made from a lone surrogate escape or an invalid byte).
func checkTaken(t *testing.T, body []byte, v refundJSON) {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		t.Fatalf("accepted a body encoding/json refuses (%v): %q", err, body)
	}
	if raw, ok := members["amount"]; ok {
		var amount int64
		if err := json.Unmarshal(raw, &amount); err != nil || string(raw) == "null" || amount != v.Amount {
			t.Fatalf("refund of %d from %q", v.Amount, body)
		}
	}
	sentFFFD := bytes.Contains(body, []byte("\ufffd")) || strings.Contains(strings.ToLower(string(body)), `\ufffd`)
	if strings.Contains(v.Reason, "\ufffd") && !sentFFFD {
		t.Fatalf("reason %q from %q", v.Reason, body)
	}
	// The reason code and metadata are what the body said, and metadata
	// text was sent as it is kept.
	var sent struct {
		ReasonCode string            `json:"reason_code"`
		Metadata   map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatalf("accepted a body encoding/json refuses (%v): %q", err, body)
	}
	if len(sent.Metadata) == 0 {
		sent.Metadata = nil
	}
	if v.ReasonCode != sent.ReasonCode || !maps.Equal(v.Metadata, sent.Metadata) {
		t.Fatalf("refund with reason code %q and metadata %v from %q", v.ReasonCode, v.Metadata, body)
	}
	for k, val := range v.Metadata {
		if strings.Contains(k+val, "\ufffd") && !sentFFFD {
			t.Fatalf("metadata %q: %q from %q", k, val, body)
		}
	}
}
