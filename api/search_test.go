package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

type searchJSON struct {
	Matches []struct {
		By          string          `json:"by"`
		RefundNo    string          `json:"refund_no"`
		Reservation reservationJSON `json:"reservation"`
	} `json:"matches"`
	Truncated bool `json:"truncated"`
}

func (e *testEnv) search(t *testing.T, q string) searchJSON {
	t.Helper()
	r := e.do(t, http.MethodGet, "/v1/search?q="+url.QueryEscape(q), "")
	if r.status != http.StatusOK {
		t.Fatalf("search %q: %s", q, r)
	}
	var out searchJSON
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSearch_EveryKindOfID: GET /v1/search finds a reservation by its
// order number, user id and transaction_id, and a refund by its number and
// by WeChat's refund_id, once an answer names it.
func TestSearch_EveryKindOfID(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, id := range []string{"s1", "s2"} {
		body := `{"id":"` + id + `","user_id":"guest/9","out_trade_no":"ORD-` + id + `","transaction_id":"420000` + id[1:] + `","amount":500,"currency":"CNY"}`
		if r := e.do(t, http.MethodPost, "/v1/reservations", body); r.status != http.StatusCreated {
			t.Fatalf("register %s: %s", id, r)
		}
	}
	rf := decodeRefund(t, e.refund(t, "s1", "k1", `{"user_id":"guest/9","amount":100}`), http.StatusAccepted)
	waitFor(t, "the refund to succeed", func() bool { return e.refundState(t, "s1", rf.RefundNo) == "SUCCEEDED" })
	st, err := e.engine.Get(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	wxID := st.Refund(rf.RefundNo).ProviderID
	if wxID == "" {
		t.Fatal("the sandbox named no refund_id")
	}
	type hit struct{ by, id, no string }
	tests := []struct {
		q    string
		want []hit
	}{
		{rf.RefundNo, []hit{{"refund_no", "s1", rf.RefundNo}}},
		{"ORD-s2", []hit{{"out_trade_no", "s2", ""}}},
		{"guest/9", []hit{{"user_id", "s1", ""}, {"user_id", "s2", ""}}},
		{"4200002", []hit{{"transaction_id", "s2", ""}}},
		{wxID, []hit{{"refund_id", "s1", rf.RefundNo}}},
		{"ORD-s", nil}, // a prefix is not an id
		{"s1", nil},    // nor is the reservation id itself: GET /v1/reservations/{id} has it
	}
	for _, tt := range tests {
		got := e.search(t, tt.q)
		var hits []hit
		for _, m := range got.Matches {
			hits = append(hits, hit{m.By, m.Reservation.ID, m.RefundNo})
		}
		if len(hits) != len(tt.want) || got.Truncated {
			t.Errorf("search %q: %+v (truncated %v), want %+v", tt.q, hits, got.Truncated, tt.want)
			continue
		}
		for i := range hits {
			if hits[i] != tt.want[i] {
				t.Errorf("search %q: %+v, want %+v", tt.q, hits, tt.want)
			}
		}
	}
	r := e.do(t, http.MethodGet, "/v1/search?q=guest%2F9&limit=1", "")
	if !strings.Contains(string(r.body), `"truncated":true`) || strings.Count(string(r.body), `"by":`) != 1 {
		t.Errorf("limit=1 of two matches: %s", r)
	}
}

func TestSearch_BadRequests(t *testing.T) {
	e := newEnv(t, envOptions{delay: 3600e9})
	for _, tt := range []struct{ query, field string }{
		{"", "q"},
		{"?q=", "q"},
		{"?q=" + strings.Repeat("x", 129), "q"},
		{"?q=x&limit=0", "limit"},
		{"?q=x&limit=101", "limit"},
		{"?q=x&limit=ten", "limit"},
	} {
		wantError(t, e.do(t, http.MethodGet, "/v1/search"+tt.query, ""), http.StatusBadRequest, "invalid_argument", tt.field)
	}
}

// TestSearch_ScopedTokenSeesOtherMerchantsAsAbsent: a token limited to
// hotel-sh searching any id of hotel-bj's reservation (its order number,
// user id, refund number) gets byte for byte what an unknown id gets,
// while its own merchant's ids and an unscoped token still find them.
func TestSearch_ScopedTokenSeesOtherMerchantsAsAbsent(t *testing.T) {
	e, refunds := scopeEnv(t)
	for _, tt := range []struct{ own, other string }{
		{"O-a1", "O-b1"},
		{"u-a1", "u-b1"},
		{refunds["a1"], refunds["b1"]},
	} {
		for _, tok := range []string{tokScopedService, tokScopedOperator} {
			got := e.do(t, http.MethodGet, "/v1/search?q="+url.QueryEscape(tt.other), "", bearer(tok)...)
			want := e.do(t, http.MethodGet, "/v1/search?q=zz-unknown", "", bearer(tok)...)
			sameAnswer(t, "search "+tt.other, got, want)
			if strings.TrimSpace(string(got.body)) != `{"matches":[]}` {
				t.Errorf("search %s: %s, want no matches", tt.other, got)
			}
			if r := e.do(t, http.MethodGet, "/v1/search?q="+url.QueryEscape(tt.own), "", bearer(tok)...); !strings.Contains(string(r.body), `"id":"a1"`) {
				t.Errorf("search %s with its own merchant's token: %s", tt.own, r)
			}
		}
		if r := e.do(t, http.MethodGet, "/v1/search?q="+url.QueryEscape(tt.other), "", bearer(tokAllOperator)...); !strings.Contains(string(r.body), `"id":"b1"`) {
			t.Errorf("search %s unscoped: %s", tt.other, r)
		}
	}
	// One user id at both merchants, hotel-bj's reservations first in id
	// order: with limit=1 the scoped token still gets its own, whole.
	for _, r := range []struct{ id, merchant string }{{"a0", "hotel-bj"}, {"a00", "hotel-bj"}, {"z9", "hotel-sh"}} {
		body := `{"id":"` + r.id + `","merchant":"` + r.merchant + `","user_id":"shared","out_trade_no":"O-` + r.id + `","amount":100,"currency":"CNY"}`
		if resp := e.do(t, http.MethodPost, "/v1/reservations", body, bearer(tokAllService)...); resp.status != http.StatusCreated {
			t.Fatalf("register %s: %s", r.id, resp)
		}
	}
	r := e.do(t, http.MethodGet, "/v1/search?q=shared&limit=1", "", bearer(tokScopedOperator)...)
	if got := string(r.body); !strings.Contains(got, `"id":"z9"`) || strings.Contains(got, `"truncated"`) || strings.Count(got, `"by":`) != 1 {
		t.Errorf("scoped search of a user id both merchants have, limit 1: %s", r)
	}
	r = e.do(t, http.MethodGet, "/v1/search?q=shared&limit=2", "", bearer(tokAllOperator)...)
	if got := string(r.body); !strings.Contains(got, `"truncated":true`) || strings.Count(got, `"by":`) != 2 {
		t.Errorf("unscoped search of a user id of three reservations, limit 2: %s", r)
	}
}
