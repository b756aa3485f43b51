package api_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// A header that has one meaning given twice is refused: net/http keeps
// both lines and Header.Get reads the first, while a proxy or log in front
// of refundd may read the last (or join them).
func TestHeaders_GivenTwice(t *testing.T) {
	e := newEnv(t, hour)
	e.register(t, "r1", 10000)
	v := decodeRefund(t, e.refund(t, "r1", "k0", refundBody(`"amount":1`)), http.StatusAccepted)
	before := e.submitted(t, "r1")
	refunds := "/v1/reservations/r1/refunds"
	for _, c := range []struct {
		name, path, body string
		hdr              [][2]string // sent as separate lines, in order
		field            string
	}{
		{"two idempotency keys", refunds, refundBody(`"amount":1`), [][2]string{{"Idempotency-Key", "k-a"}, {"Idempotency-Key", "k-b"}}, "Idempotency-Key"},
		{"one idempotency key twice", refunds, refundBody(`"amount":1`), [][2]string{{"Idempotency-Key", "k-a"}, {"Idempotency-Key", "k-a"}}, "Idempotency-Key"},
		{"idempotency key twice in two spellings", refunds, refundBody(`"amount":1`), [][2]string{{"Idempotency-Key", "k-a"}, {"idempotency-key", "k-b"}}, "Idempotency-Key"},
		{"two keys on one line", refunds, refundBody(`"amount":1`), [][2]string{{"Idempotency-Key", "k-a, k-b"}}, "Idempotency-Key"},
		{"refund content type twice", refunds, refundBody(`"amount":1`), [][2]string{{"Idempotency-Key", "k-c"}, {"Content-Type", "text/plain"}}, "Content-Type"},
		{"registration content type twice", "/v1/reservations", registerBody("r2", 100), [][2]string{{"Content-Type", "application/json"}}, "Content-Type"},
		{"operator content type twice", refunds + "/" + v.RefundNo + "/abandon", `{"reason":"x"}`, [][2]string{{"Content-Type", "application/json"}}, "Content-Type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, e.srv.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			for _, h := range c.hdr {
				req.Header.Add(h[0], h[1])
			}
			wantError(t, e.send(t, req), http.StatusBadRequest, "invalid_argument", c.field)
		})
	}
	if after := e.do(t, http.MethodGet, "/v1/reservations/r1", ""); !bytes.Equal(after.body, before.body) {
		t.Fatalf("refused requests changed the reservation:\n%s\nwas\n%s", after.body, before.body)
	}
	wantError(t, e.do(t, http.MethodGet, "/v1/reservations/r2", ""), http.StatusNotFound, "not_found", "")

}

// Two bearer tokens: which one a gateway checked is unknowable.
func TestHeaders_TwoBearerTokens(t *testing.T) {
	a := authEnv(t)
	for _, toks := range [][]string{{tokService, tokReader}, {tokReader, tokService}, {tokService, tokService}} {
		req, err := http.NewRequest(http.MethodPost, a.srv.URL+"/v1/reservations", strings.NewReader(registerBody("a1", 100)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for _, tok := range toks {
			req.Header.Add("Authorization", "Bearer "+tok)
		}
		d := wantError(t, a.send(t, req), http.StatusBadRequest, "invalid_argument", "Authorization")
		if !strings.Contains(d.Message, "more than once") {
			t.Fatalf("message %q", d.Message)
		}
	}
	if r := a.do(t, http.MethodGet, "/v1/reservations/a1", "", bearer(tokReader)...); r.status != http.StatusNotFound {
		t.Fatalf("a request with two tokens registered: %s", r)
	}
}
