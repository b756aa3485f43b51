package webhook_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal/journaltest"
)

func TestNew_Invalid(t *testing.T) {
	db := journaltest.Open(t)
	secret := []byte("0123456789abcdef")
	ok := webhook.Endpoint{Name: "ledger", URL: "https://example.com/hook", Secret: secret}
	with := func(f func(*webhook.Endpoint)) webhook.Config {
		e := ok
		f(&e)
		return webhook.Config{DB: db, Endpoints: []webhook.Endpoint{e}}
	}
	tests := []struct {
		name string
		cfg  webhook.Config
	}{
		{"no db", webhook.Config{Endpoints: []webhook.Endpoint{ok}}},
		{"empty name", with(func(e *webhook.Endpoint) { e.Name = "" })},
		{"name with slash", with(func(e *webhook.Endpoint) { e.Name = "a/b" })},
		{"long name", with(func(e *webhook.Endpoint) { e.Name = string(make([]byte, 65)) })},
		{"relative URL", with(func(e *webhook.Endpoint) { e.URL = "/hook" })},
		{"ftp URL", with(func(e *webhook.Endpoint) { e.URL = "ftp://example.com/hook" })},
		{"no host", with(func(e *webhook.Endpoint) { e.URL = "https:///hook" })},
		{"short secret", with(func(e *webhook.Endpoint) { e.Secret = secret[:15] })},
		{"unknown type", with(func(e *webhook.Endpoint) { e.Types = []string{"refund.submitted"} })},
		{"duplicate name", webhook.Config{DB: db, Endpoints: []webhook.Endpoint{ok, ok}}},
		{"negative attempts", webhook.Config{DB: db, MaxAttempts: -1}},
		{"base above max", webhook.Config{DB: db, BackoffBase: 2e9, BackoffMax: 1e9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := webhook.New(tt.cfg); !errors.Is(err, webhook.ErrConfig) {
				t.Fatalf("New: %v, want ErrConfig", err)
			}
		})
	}
	if _, err := webhook.New(webhook.Config{DB: db, Endpoints: []webhook.Endpoint{ok}}); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
}

// TestNew_Merchants: an endpoint's merchants must be configured ones (the
// default merchant alone when none are given); the error names the
// endpoint and the merchant.
func TestNew_Merchants(t *testing.T) {
	db := journaltest.Open(t)
	ep := func(name string, merchants ...string) webhook.Endpoint {
		return webhook.Endpoint{Name: name, URL: "https://example.com/hook", Secret: []byte("0123456789abcdef"), Merchants: merchants}
	}
	tests := []struct {
		name       string
		configured []string
		eps        []webhook.Endpoint
		want       string // "" = valid; else the error mentions it
	}{
		{"default merchant, none configured", nil, []webhook.Endpoint{ep("a", "default")}, ""},
		{"no subscription", []string{"hotel-sh"}, []webhook.Endpoint{ep("a")}, ""},
		{"configured ones", []string{"default", "hotel-sh", "hotel-bj"}, []webhook.Endpoint{ep("a", "hotel-bj", "hotel-sh"), ep("b", "default")}, ""},
		{"unknown with none configured", nil, []webhook.Endpoint{ep("crm", "hotel-sh")}, `endpoint crm: unknown merchant "hotel-sh"`},
		{"unknown among configured", []string{"default", "hotel-sh"}, []webhook.Endpoint{ep("a", "hotel-sh"), ep("erp", "hotel-sh", "hotel-gz")}, `endpoint erp: unknown merchant "hotel-gz"`},
		{"listed twice", []string{"hotel-sh"}, []webhook.Endpoint{ep("erp", "hotel-sh", "hotel-sh")}, "listed twice"},
		{"empty name", []string{"hotel-sh"}, []webhook.Endpoint{ep("erp", "")}, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := webhook.New(webhook.Config{DB: db, Endpoints: tt.eps, Merchants: tt.configured})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: %v, want valid", err)
			case tt.want != "" && (!errors.Is(err, webhook.ErrConfig) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New: %v, want ErrConfig mentioning %q", err, tt.want)
			}
		})
	}
}
