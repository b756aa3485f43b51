package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestMerchantFilter: ?merchant= narrows the attention lists and the
// summary to one merchant the token sees; a merchant it does not see is
// answered exactly as one that is not configured; whoami lists the
// merchants the console may offer.
func TestMerchantFilter(t *testing.T) {
	e, _ := scopeEnv(t)
	tests := []struct {
		name, token, path string
		status            int
		has, hasNot       []string
	}{
		{"all, bj", tokAllOperator, "/v1/refunds?state=ABNORMAL&merchant=hotel-bj", 200, []string{`"b1"`}, []string{`"a1"`}},
		{"all, sh", tokAllOperator, "/v1/refunds?state=ABNORMAL&merchant=hotel-sh", 200, []string{`"a1"`}, []string{`"b1"`}},
		{"all, no filter", tokAllOperator, "/v1/refunds?state=ABNORMAL", 200, []string{`"a1"`, `"b1"`}, nil},
		{"all, bj paged", tokAllOperator, "/v1/refunds?state=ABNORMAL&merchant=hotel-bj&limit=1", 200, []string{`"b1"`, `"next":"b1/`}, []string{`"a1"`}},
		{"scoped, sh", tokScopedOperator, "/v1/refunds?state=ABNORMAL&merchant=hotel-sh", 200, []string{`"a1"`}, []string{`"b1"`}},
		{"all, unconfigured", tokAllOperator, "/v1/refunds?state=ABNORMAL&merchant=hotel-gz", 400, []string{`"merchant`}, nil},
		{"summary, bj", tokAllOperator, "/v1/summary?merchant=hotel-bj", 200, []string{`"ABNORMAL":{"count":1,`}, []string{`"active_actors"`, `"notifications"`, `"webhooks"`}},
		{"summary, all", tokAllOperator, "/v1/summary", 200, []string{`"ABNORMAL":{"count":2,`, `"active_actors"`}, nil},
		{"summary, scoped, bj", tokScopedOperator, "/v1/summary?merchant=hotel-bj", 400, []string{`"merchant`}, []string{`"count"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(t, http.MethodGet, tt.path, "", bearer(tt.token)...)
			if r.status != tt.status {
				t.Fatalf("%s: %s, want %d", tt.path, r, tt.status)
			}
			for _, s := range tt.has {
				if !strings.Contains(string(r.body), s) {
					t.Errorf("%s lacks %s: %s", tt.path, s, r.body)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(string(r.body), s) {
					t.Errorf("%s has %s: %s", tt.path, s, r.body)
				}
			}
		})
	}
	// A scoped token filtering by another merchant learns nothing: the
	// answer is an unconfigured merchant's, byte for byte.
	for _, path := range []string{"/v1/refunds?state=ABNORMAL&merchant=", "/v1/summary?merchant="} {
		sameAnswer(t, path, e.do(t, http.MethodGet, path+"hotel-bj", "", bearer(tokScopedOperator)...),
			e.do(t, http.MethodGet, path+"hotel-gz", "", bearer(tokScopedOperator)...))
	}
	for tok, want := range map[string][]string{tokAllOperator: {"hotel-bj", "hotel-sh"}, tokScopedOperator: {"hotel-sh"}} {
		r := e.do(t, http.MethodGet, "/v1/whoami", "", bearer(tok)...)
		var who struct {
			Sees []string `json:"sees"`
		}
		if err := json.Unmarshal(r.body, &who); err != nil || !slices.Equal(who.Sees, want) {
			t.Errorf("whoami sees %v (%v), want %v: %s", who.Sees, err, want, r.body)
		}
	}
}
