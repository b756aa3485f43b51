package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

// hour keeps every refund PROCESSING for the whole test: the sandbox does not
// finish it and no scheduler runs.
var hour = envOptions{delay: time.Hour}

func TestHealthz_OK(t *testing.T) {
	e := newEnv(t, hour)
	r := e.do(t, http.MethodGet, "/healthz", "")
	checkJSON(t, r)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"ok"`) {
		t.Fatalf("healthz: %s", r)
	}
}

func TestRegisterReservation_Created(t *testing.T) {
	e := newEnv(t, hour)
	body := `{"id":"r1","user_id":"u-1","out_trade_no":"ORD-1","transaction_id":"4200000001",` +
		`"amount":12345,"currency":"CNY","paid_at":"2026-11-30T16:00:00+08:00"}`
	before := time.Now().Add(-time.Second)
	v := decodeReservation(t, e.do(t, http.MethodPost, "/v1/reservations", body), http.StatusCreated)
	paid := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	if v.ID != "r1" || v.UserID != "u-1" || v.OutTradeNo != "ORD-1" || v.TransactionID != "4200000001" ||
		v.Amount != 12345 || v.Currency != "CNY" || v.Status != "ACCEPTED" || v.PaidAt == nil || !v.PaidAt.Equal(paid) {
		t.Fatalf("registered view does not echo the request: %+v", v)
	}
	if v.Refunded != 0 || v.InFlight != 0 || v.Refundable != 12345 || len(v.Refunds) != 0 {
		t.Fatalf("fresh reservation totals: %+v", v)
	}
	if v.RegisteredAt.Before(before) {
		t.Fatalf("registered_at %v not set", v.RegisteredAt)
	}
	if got := e.get(t, "r1"); got.Amount != 12345 || !got.RegisteredAt.Equal(v.RegisteredAt) {
		t.Fatalf("GET after register: %+v", got)
	}
}

func TestRegisterReservation_IdenticalRepeat(t *testing.T) {
	e := newEnv(t, hour)
	body := `{"id":"r1","user_id":"u-1","out_trade_no":"ORD-1","amount":100,"currency":"CNY","paid_at":"2026-11-30T08:00:00Z"}`
	first := e.do(t, http.MethodPost, "/v1/reservations", body)
	decodeReservation(t, first, http.StatusCreated)
	for _, repeat := range []string{
		body,
		// The same instant in another zone and another field order is the
		// same registration.
		`{"currency":"CNY","amount":100,"out_trade_no":"ORD-1","user_id":"u-1","id":"r1","paid_at":"2026-11-30T16:00:00+08:00"}`,
	} {
		r := e.do(t, http.MethodPost, "/v1/reservations", repeat)
		decodeReservation(t, r, http.StatusOK)
		if !bytes.Equal(r.body, first.body) {
			t.Fatalf("repeat answered\n%s\nfirst answer\n%s", r.body, first.body)
		}
	}
}

func TestRegisterReservation_ConflictingRepeat(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 100)
	for name, body := range map[string]string{
		"amount":    `{"id":"r1","user_id":"u-r1","out_trade_no":"ORD-r1","amount":101,"currency":"CNY"}`,
		"user":      `{"id":"r1","user_id":"u-x","out_trade_no":"ORD-r1","amount":100,"currency":"CNY"}`,
		"order":     `{"id":"r1","user_id":"u-r1","out_trade_no":"ORD-x","amount":100,"currency":"CNY"}`,
		"paid_at":   `{"id":"r1","user_id":"u-r1","out_trade_no":"ORD-r1","amount":100,"currency":"CNY","paid_at":"2026-01-01T00:00:00Z"}`,
		"txn added": `{"id":"r1","user_id":"u-r1","out_trade_no":"ORD-r1","amount":100,"currency":"CNY","transaction_id":"42"}`,
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.do(t, http.MethodPost, "/v1/reservations", body), http.StatusConflict, "conflict", "*")
		})
	}
	if v := e.get(t, "r1"); v.Amount != 100 || v.UserID != "u-r1" || v.OutTradeNo != "ORD-r1" || v.PaidAt != nil {
		t.Fatalf("a conflicting repeat changed the reservation: %+v", v)
	}
}

func TestRegisterReservation_OutTradeNoTaken(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 100)
	body := `{"id":"r2","user_id":"u-r2","out_trade_no":"ORD-r1","amount":100,"currency":"CNY"}`
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations", body), http.StatusConflict, "out_trade_no_taken", "*")
	// The refused claim left nothing behind: r2 does not exist and may still
	// register with its own order.
	wantError(t, e.do(t, http.MethodGet, "/v1/reservations/r2", ""), http.StatusNotFound, "not_found", "")
	e.register(t, "r2", 100)
}

func TestRegisterReservation_ConcurrentSameOrder(t *testing.T) {
	e := newEnv(t, hour)
	const n = 20
	statuses := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"id":"c%d","user_id":"u","out_trade_no":"ORD-shared","amount":100,"currency":"CNY"}`, i)
			statuses[i] = e.do(t, http.MethodPost, "/v1/reservations", body)
		}()
	}
	wg.Wait()
	created := 0
	for _, r := range statuses {
		if r.status == http.StatusCreated {
			created++
			continue
		}
		wantError(t, r, http.StatusConflict, "out_trade_no_taken", "*")
	}
	if created != 1 {
		t.Fatalf("%d reservations claimed one out_trade_no, want exactly 1", created)
	}
}

func TestGetReservation_Totals(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	first := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":3000,"reason":"first"}`), http.StatusAccepted)
	second := decodeRefund(t, e.refund(t, "r1", "k2", `{"user_id":"u-r1","amount":2000}`), http.StatusAccepted)

	v := e.get(t, "r1")
	if v.Refunded != 0 || v.InFlight != 5000 || v.Refundable != 5000 || len(v.Refunds) != 2 {
		t.Fatalf("two refunds in flight: %+v", v)
	}
	e.succeed(t, "r1", first.RefundNo)
	v = e.get(t, "r1")
	if v.Status != "ACCEPTED" || v.Refunded != 3000 || v.InFlight != 2000 || v.Refundable != 5000 {
		t.Fatalf("after the first succeeded: %+v", v)
	}
	a, b := v.Refunds[0], v.Refunds[1]
	if a.RefundNo != first.RefundNo || a.Amount != 3000 || a.State != "SUCCEEDED" || a.Reason != "first" || a.SucceededAt == nil {
		t.Fatalf("first refund in view: %+v", a)
	}
	if b.RefundNo != second.RefundNo || b.Amount != 2000 || b.State != "PROCESSING" || b.SucceededAt != nil {
		t.Fatalf("second refund in view: %+v", b)
	}
	if !b.CreatedAt.Equal(second.CreatedAt) {
		t.Fatalf("created_at changed between views: %v vs %v", b.CreatedAt, second.CreatedAt)
	}
}

func TestGetReservation_Unknown(t *testing.T) {
	e := newEnv(t, hour)
	for _, path := range []string{
		"/v1/reservations/nope",
		"/v1/reservations/" + strings.Repeat("a", 41), // longer than any id
		"/v1/reservations/bad%20id",                   // outside the id charset
		"/v1/reservations/%C3%BC",
	} {
		wantError(t, e.do(t, http.MethodGet, path, ""), http.StatusNotFound, "not_found", "")
	}
}

func TestRequestRefund_Accepted(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	v := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":2500,"reason":"late"}`), http.StatusAccepted)
	if v.State != "PROCESSING" || v.Amount != 2500 || v.ReservationID != "r1" || v.Reason != "late" || v.Attempts != 1 {
		t.Fatalf("accepted refund: %+v", v)
	}
	// Omitted amount claims everything still refundable.
	all := decodeRefund(t, e.refund(t, "r1", "k2", `{"user_id":"u-r1"}`), http.StatusAccepted)
	if all.Amount != 7500 || all.RefundNo == v.RefundNo {
		t.Fatalf("default amount refund: %+v (first %s)", all, v.RefundNo)
	}
	if got := e.get(t, "r1"); got.Refundable != 0 || got.InFlight != 10000 {
		t.Fatalf("after two refunds: %+v", got)
	}
}

func TestRequestRefund_Replay(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	first := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":2500}`), http.StatusAccepted)
	for _, body := range []string{
		`{"user_id":"u-r1","amount":2500}`,
		`{ "amount" : 2500 , "user_id" : "u-r1" }`, // same request, other spelling
		`{"user_id":"u-r1","amount":2500,"reason":""}`,
	} {
		again := decodeRefund(t, e.refund(t, "r1", "k1", body), http.StatusOK)
		if again.RefundNo != first.RefundNo || again.Amount != 2500 || again.State != "PROCESSING" {
			t.Fatalf("replay %s answered %+v, first %+v", body, again, first)
		}
	}
	// The replay answers the current state.
	e.succeed(t, "r1", first.RefundNo)
	again := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":2500}`), http.StatusOK)
	if again.RefundNo != first.RefundNo || again.State != "SUCCEEDED" {
		t.Fatalf("replay after success: %+v", again)
	}
	if v := e.get(t, "r1"); len(v.Refunds) != 1 {
		t.Fatalf("replays created refunds: %+v", v.Refunds)
	}
	if n := e.sim.Submissions(); n != 1 {
		t.Fatalf("provider saw %d submissions, want 1", n)
	}
}

func TestRequestRefund_ConcurrentReplay(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	const n = 20
	rs := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs[i] = e.refund(t, "r1", "same", `{"user_id":"u-r1","amount":1000}`)
		}()
	}
	wg.Wait()
	accepted, no := 0, ""
	for _, r := range rs {
		want := http.StatusOK
		if r.status == http.StatusAccepted {
			want = http.StatusAccepted
			accepted++
		}
		v := decodeRefund(t, r, want)
		if no != "" && v.RefundNo != no {
			t.Fatalf("one key gave refunds %s and %s", no, v.RefundNo)
		}
		no = v.RefundNo
	}
	if accepted != 1 {
		t.Fatalf("%d requests answered 202, want exactly 1", accepted)
	}
	if v := e.get(t, "r1"); len(v.Refunds) != 1 || v.InFlight != 1000 {
		t.Fatalf("after concurrent replays: %+v", v)
	}
}

func TestRequestRefund_KeyReused(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":2500}`), http.StatusAccepted)
	decodeRefund(t, e.refund(t, "r1", "k2", `{"user_id":"u-r1"}`), http.StatusAccepted) // claims the other 7500
	for name, c := range map[string]struct{ key, body string }{
		"other amount":              {"k1", `{"user_id":"u-r1","amount":2000}`},
		"other reason":              {"k1", `{"user_id":"u-r1","amount":2500,"reason":"x"}`},
		"amount omitted then given": {"k2", `{"user_id":"u-r1","amount":7500}`},
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.refund(t, "r1", c.key, c.body), http.StatusUnprocessableEntity, "idempotency_key_reused", "*")
		})
	}
	if v := e.get(t, "r1"); len(v.Refunds) != 2 {
		t.Fatalf("a reused key created a refund: %+v", v.Refunds)
	}
}

func TestRequestRefund_InsufficientRefundable(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":6000}`), http.StatusAccepted)
	wantError(t, e.refund(t, "r1", "k2", `{"user_id":"u-r1","amount":4001}`), http.StatusConflict, "insufficient_refundable", "*")
	decodeRefund(t, e.refund(t, "r1", "k3", `{"user_id":"u-r1","amount":4000}`), http.StatusAccepted)
	// Nothing left: the default amount is refused too.
	wantError(t, e.refund(t, "r1", "k4", `{"user_id":"u-r1"}`), http.StatusConflict, "insufficient_refundable", "*")
	wantError(t, e.refund(t, "r1", "k5", `{"user_id":"u-r1","amount":1}`), http.StatusConflict, "insufficient_refundable", "*")
	if v := e.get(t, "r1"); v.InFlight != 10000 || len(v.Refunds) != 2 {
		t.Fatalf("after refusals: %+v", v)
	}
}

func TestRequestRefund_Canceled(t *testing.T) {
	e := newEnv(t, envOptions{}) // the sandbox succeeds at once
	e.register(t, "r1", 500)
	v := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1"}`), http.StatusAccepted)
	waitFor(t, "refund to succeed", func() bool { return e.refundState(t, "r1", v.RefundNo) == "SUCCEEDED" })
	if got := e.get(t, "r1"); got.Status != "CANCELED" || got.Refunded != 500 || got.Refundable != 0 {
		t.Fatalf("fully refunded reservation: %+v", got)
	}
	wantError(t, e.refund(t, "r1", "k2", `{"user_id":"u-r1","amount":1}`), http.StatusConflict, "reservation_canceled", "*")
	wantError(t, e.refund(t, "r1", "k3", `{"user_id":"u-r1"}`), http.StatusConflict, "reservation_canceled", "*")
	// The original key still replays.
	if again := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1"}`), http.StatusOK); again.RefundNo != v.RefundNo {
		t.Fatalf("replay on a canceled reservation: %+v", again)
	}
}

func TestRequestRefund_NotFoundLooksTheSame(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	other := e.refund(t, "r1", "k1", `{"user_id":"u-someone-else","amount":100}`)
	unknown := e.do(t, http.MethodPost, "/v1/reservations/nope/refunds", `{"user_id":"u-someone-else","amount":100}`,
		"Idempotency-Key", "k1")
	wantError(t, other, http.StatusNotFound, "not_found", "")
	wantError(t, unknown, http.StatusNotFound, "not_found", "")
	if !bytes.Equal(other.body, unknown.body) {
		t.Fatalf("another user's reservation answers\n%s\nan unknown one answers\n%s", other.body, unknown.body)
	}
	// Also after the key was used by the owner: the key must not leak.
	decodeRefund(t, e.refund(t, "r1", "k2", `{"user_id":"u-r1","amount":100}`), http.StatusAccepted)
	if r := e.refund(t, "r1", "k2", `{"user_id":"u-someone-else","amount":100}`); !bytes.Equal(r.body, unknown.body) || r.status != 404 {
		t.Fatalf("another user with the owner's key: %s", r)
	}
	if v := e.get(t, "r1"); len(v.Refunds) != 1 {
		t.Fatalf("another user created refunds: %+v", v.Refunds)
	}
}

func TestRequestRefund_IdempotencyKeyHeader(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	for name, key := range map[string]string{
		"missing":    "",
		"too long":   strings.Repeat("k", 65),
		"space":      "a b",
		"slash":      "a/b",
		"dot":        "a.b",
		"non-ascii":  "ключ",
		"percent":    "a%20b",
		"whitespace": "   ",
	} {
		t.Run(name, func(t *testing.T) {
			hdr := []string{"Idempotency-Key", key}
			if key == "" {
				hdr = nil
			}
			r := e.do(t, http.MethodPost, "/v1/reservations/r1/refunds", `{"user_id":"u-r1","amount":1}`, hdr...)
			d := wantError(t, r, http.StatusBadRequest, "invalid_argument", "Idempotency-Key")
			if !strings.Contains(d.Message, "64") {
				t.Fatalf("message should say what a key looks like: %q", d.Message)
			}
		})
	}
	// The longest allowed key works, and nothing above created a refund.
	decodeRefund(t, e.refund(t, "r1", strings.Repeat("k", 64), `{"user_id":"u-r1","amount":1}`), http.StatusAccepted)
	if v := e.get(t, "r1"); len(v.Refunds) != 1 {
		t.Fatalf("refunds: %+v", v.Refunds)
	}
}

func TestRequestRefund_WaitSucceeded(t *testing.T) {
	for name, o := range map[string]envOptions{
		"sandbox succeeds during submit": {},
		"sandbox notifies after 30ms":    {delay: 30 * time.Millisecond, notify: true},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, o)
			e.register(t, "r1", 10000)
			r := e.do(t, http.MethodPost, "/v1/reservations/r1/refunds?wait=5s", `{"user_id":"u-r1","amount":100}`,
				"Idempotency-Key", "k1")
			v := decodeRefund(t, r, http.StatusOK)
			if v.State != "SUCCEEDED" || v.SucceededAt == nil || v.Amount != 100 {
				t.Fatalf("?wait answered %+v", v)
			}
			// GET with ?wait on a finished refund answers at once.
			g := decodeRefund(t, e.do(t, http.MethodGet, "/v1/reservations/r1/refunds/"+v.RefundNo+"?wait=5s", ""), http.StatusOK)
			if g.State != "SUCCEEDED" || g.RefundNo != v.RefundNo {
				t.Fatalf("GET ?wait: %+v", g)
			}
			if got := e.get(t, "r1"); got.Refunded != 100 || got.InFlight != 0 {
				t.Fatalf("after success: %+v", got)
			}
		})
	}
}

func TestGetRefund_WaitUntilSucceeded(t *testing.T) {
	e := newEnv(t, envOptions{delay: 50 * time.Millisecond, notify: true})
	e.register(t, "r1", 10000)
	v := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":100}`), http.StatusAccepted)
	g := decodeRefund(t, e.do(t, http.MethodGet, "/v1/reservations/r1/refunds/"+v.RefundNo+"?wait=5s", ""), http.StatusOK)
	if g.State != "SUCCEEDED" {
		t.Fatalf("GET ?wait=5s answered %+v", g)
	}
}

func TestRequestRefund_WaitBounded(t *testing.T) {
	e := newEnv(t, envOptions{delay: time.Hour, api: api.Options{MaxWait: 100 * time.Millisecond}})
	e.register(t, "r1", 10000)
	for i, wait := range []string{"50ms", "1h"} { // 1h is capped by MaxWait
		start := time.Now()
		r := e.do(t, http.MethodPost, "/v1/reservations/r1/refunds?wait="+wait, `{"user_id":"u-r1","amount":100}`,
			"Idempotency-Key", fmt.Sprintf("k%d", i))
		if v := decodeRefund(t, r, http.StatusAccepted); v.State != "PROCESSING" {
			t.Fatalf("?wait=%s on a slow refund: %+v", wait, v)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("?wait=%s took %v; MaxWait is 100ms", wait, d)
		}
	}
}

func TestRequestRefund_WaitInvalid(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	for _, wait := range []string{"abc", "-1s", "5", "1e9h0"} {
		r := e.do(t, http.MethodPost, "/v1/reservations/r1/refunds?wait="+wait, `{"user_id":"u-r1","amount":100}`,
			"Idempotency-Key", "k1")
		wantError(t, r, http.StatusBadRequest, "invalid_argument", "wait")
		wantError(t, e.do(t, http.MethodGet, "/v1/reservations/r1/refunds/x?wait="+wait, ""),
			http.StatusBadRequest, "invalid_argument", "wait")
	}
	if v := e.get(t, "r1"); len(v.Refunds) != 0 {
		t.Fatalf("a request with a bad ?wait created a refund: %+v", v.Refunds)
	}
}

func TestGetRefund_Found(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	e.register(t, "r2", 10000)
	v := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":100}`), http.StatusAccepted)
	got := e.do(t, http.MethodGet, "/v1/reservations/r1/refunds/"+v.RefundNo, "")
	g := decodeRefund(t, got, http.StatusOK)
	// updated_at moves when the sandbox's PROCESSING answer is journaled.
	g.UpdatedAt = v.UpdatedAt
	if !reflect.DeepEqual(g, v) {
		t.Fatalf("GET refund %+v, created %+v", g, v)
	}
	if keys := jsonKeys(t, got.body); !strings.Contains(keys, "refund_no") || strings.Contains(keys, "idempotency") ||
		strings.Contains(keys, "fingerprint") || strings.Contains(keys, "request") {
		t.Fatalf("refund view exposes internals or lacks its number: %s", keys)
	}
	// Other reservation's number, unknown numbers, unknown reservations.
	for _, path := range []string{
		"/v1/reservations/r2/refunds/" + v.RefundNo,
		"/v1/reservations/r1/refunds/T-r1-2",
		"/v1/reservations/nope/refunds/" + v.RefundNo,
		"/v1/reservations/r1/refunds/" + strings.Repeat("x", 200),
	} {
		wantError(t, e.do(t, http.MethodGet, path, ""), http.StatusNotFound, "not_found", "")
	}
}

// rejectFirst makes the sandbox refuse every first submission with
// NOT_ENOUGH; later attempts are processed normally.
func rejectFirst(op, _ string, attempt int) (simprovider.Injected, bool) {
	if op == "submit" && attempt == 1 {
		return simprovider.Injected{Outcome: reservation.Outcome{
			Kind: reservation.OutcomeRejected, Code: "NOT_ENOUGH", Message: "insufficient balance",
		}}, true
	}
	return simprovider.Injected{}, false
}

func TestAbandonRefund_Rejected(t *testing.T) {
	e := newEnv(t, envOptions{fault: rejectFirst})
	e.register(t, "r1", 10000)
	v := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":4000}`), http.StatusAccepted)
	waitFor(t, "REJECTED", func() bool { return e.refundState(t, "r1", v.RefundNo) == "REJECTED" })
	if got := e.get(t, "r1"); got.InFlight != 4000 || got.Refunds[0].Code != "NOT_ENOUGH" {
		t.Fatalf("a rejected refund holds its amount: %+v", got)
	}
	path := "/v1/reservations/r1/refunds/" + v.RefundNo
	a := decodeRefund(t, e.do(t, http.MethodPost, path+"/abandon", `{"reason":"merchant balance"}`), http.StatusOK)
	if a.State != "FAILED" {
		t.Fatalf("abandon answered %+v", a)
	}
	if got := e.get(t, "r1"); got.InFlight != 0 || got.Refundable != 10000 {
		t.Fatalf("abandon must release the amount: %+v", got)
	}
	wantError(t, e.do(t, http.MethodPost, path+"/abandon", ""), http.StatusConflict, "invalid_state", "")
	wantError(t, e.do(t, http.MethodPost, path+"/resubmit", ""), http.StatusConflict, "invalid_state", "")
}

func TestResubmitRefund_Rejected(t *testing.T) {
	e := newEnv(t, envOptions{fault: rejectFirst})
	e.register(t, "r1", 10000)
	v := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":4000}`), http.StatusAccepted)
	waitFor(t, "REJECTED", func() bool { return e.refundState(t, "r1", v.RefundNo) == "REJECTED" })
	path := "/v1/reservations/r1/refunds/" + v.RefundNo
	s := decodeRefund(t, e.do(t, http.MethodPost, path+"/resubmit", ""), http.StatusOK)
	if s.State != "PROCESSING" || s.Attempts != 2 || s.RefundNo != v.RefundNo {
		t.Fatalf("resubmit answered %+v", s)
	}
	waitFor(t, "SUCCEEDED", func() bool { return e.refundState(t, "r1", v.RefundNo) == "SUCCEEDED" })
	wantError(t, e.do(t, http.MethodPost, path+"/resubmit", ""), http.StatusConflict, "invalid_state", "")
	wantError(t, e.do(t, http.MethodPost, path+"/abandon", ""), http.StatusConflict, "invalid_state", "")
}

// TestResubmitRefund_WithinSpacing: an operator's resubmission that would
// reach WeChat Pay within the spacing after the order's last create request
// is accepted and scheduled (issue 17 item 3): the answer shows the refund
// waiting, with the time it goes, and nothing is sent before then.
func TestResubmitRefund_WithinSpacing(t *testing.T) {
	e := newEnv(t, envOptions{fault: rejectFirst, spacing: time.Hour})
	e.register(t, "r1", 10000)
	before := time.Now()
	v := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":4000}`), http.StatusAccepted)
	waitFor(t, "REJECTED", func() bool { return e.refundState(t, "r1", v.RefundNo) == "REJECTED" })
	path := "/v1/reservations/r1/refunds/" + v.RefundNo
	s := decodeRefund(t, e.do(t, http.MethodPost, path+"/resubmit", ""), http.StatusOK)
	if s.State != "PROCESSING" || s.Attempts != 1 || s.NextCheckAt.IsZero() || s.NextCheckAt.Before(before.Add(time.Hour)) || s.NextCheckAt.After(time.Now().Add(time.Hour)) {
		t.Fatalf("resubmit answered %+v, want PROCESSING waiting an hour after the first submission", s)
	}
	if got := e.get(t, "r1").Refunds[0]; got.State != "PROCESSING" || got.Attempts != 1 {
		t.Fatalf("refund %+v", got)
	}
	wantError(t, e.do(t, http.MethodPost, path+"/resubmit", ""), http.StatusConflict, "invalid_state", "")
}

func TestOperatorAction_InvalidState(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	v := decodeRefund(t, e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":100}`), http.StatusAccepted)
	path := "/v1/reservations/r1/refunds/" + v.RefundNo
	for _, action := range []string{"resubmit", "abandon"} {
		t.Run(action, func(t *testing.T) {
			// PROCESSING may still move money: neither action applies.
			wantError(t, e.do(t, http.MethodPost, path+"/"+action, ""), http.StatusConflict, "invalid_state", "")
			wantError(t, e.do(t, http.MethodPost, path+"/"+action, `{"reason":"ops"}`), http.StatusConflict, "invalid_state", "")
			wantError(t, e.do(t, http.MethodPost, "/v1/reservations/r1/refunds/T-r1-9/"+action, ""), http.StatusNotFound, "not_found", "")
			wantError(t, e.do(t, http.MethodPost, "/v1/reservations/nope/refunds/T-nope-1/"+action, ""), http.StatusNotFound, "not_found", "")
			wantError(t, e.do(t, http.MethodPost, path+"/"+action, `{"bogus":1}`), http.StatusBadRequest, "invalid_argument", "bogus")
		})
	}
	if s := e.refundState(t, "r1", v.RefundNo); s != "PROCESSING" {
		t.Fatalf("refused actions changed the refund to %s", s)
	}
}

func TestServeHTTP_UnknownRoute(t *testing.T) {
	e := newEnv(t, hour)
	for _, path := range []string{"/", "/v1", "/v2/reservations", "/v1/reservations/r1/refunds/x/y/z", "/v1/reservations/"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			wantError(t, e.do(t, method, path, "{}"), http.StatusNotFound, "route_not_found", "")
		}
	}
}

func TestServeHTTP_MethodNotAllowed(t *testing.T) {
	e := newEnv(t, hour)
	for _, c := range []struct{ method, path string }{
		{http.MethodDelete, "/v1/reservations"},
		{http.MethodDelete, "/v1/reservations/r1"},
		{http.MethodPut, "/v1/reservations/r1"},
		{http.MethodGet, "/v1/reservations/r1/refunds"},
		{http.MethodPost, "/v1/reservations/r1/refunds/x"},
		{http.MethodGet, "/v1/reservations/r1/refunds/x/abandon"},
		{http.MethodPatch, "/healthz"},
	} {
		wantError(t, e.do(t, c.method, c.path, ""), http.StatusMethodNotAllowed, "method_not_allowed", "")
	}
}
