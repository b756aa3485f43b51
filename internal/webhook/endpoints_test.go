package webhook_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/webhook"
)

func TestParseEndpoints_Valid(t *testing.T) {
	env := map[string]string{"LEDGER_SECRET": "ledger-secret-0123456789"}
	files := map[string]string{"/etc/crm.secret": "crm-secret-0123456789\n"}
	readFile := func(p string) ([]byte, error) {
		if v, ok := files[p]; ok {
			return []byte(v), nil
		}
		return nil, os.ErrNotExist
	}
	in := `
# name url secret options
ledger https://ledger.internal/refundd env:LEDGER_SECRET types=refund.succeeded,reservation.canceled
  crm  http://crm.internal:8080/hooks?x=1  file:/etc/crm.secret start=now
sh-erp https://erp.sh.internal/refunds env:LEDGER_SECRET merchants=hotel-sh,default types=refund.failed
`
	eps, err := webhook.ParseEndpoints(strings.NewReader(in), func(k string) string { return env[k] }, readFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 3 {
		t.Fatalf("got %d endpoints", len(eps))
	}
	l, c, sh := eps[0], eps[1], eps[2]
	if l.Name != "ledger" || l.URL != "https://ledger.internal/refundd" || string(l.Secret) != "ledger-secret-0123456789" ||
		!slices.Equal(l.Types, []string{"refund.succeeded", "reservation.canceled"}) || l.FromNow {
		t.Errorf("ledger = %+v", l)
	}
	if c.Name != "crm" || c.URL != "http://crm.internal:8080/hooks?x=1" || string(c.Secret) != "crm-secret-0123456789" ||
		len(c.Types) != 0 || !c.FromNow || len(c.Merchants) != 0 || len(l.Merchants) != 0 {
		t.Errorf("crm = %+v", c)
	}
	if sh.Name != "sh-erp" || !slices.Equal(sh.Merchants, []string{"hotel-sh", "default"}) ||
		!slices.Equal(sh.Types, []string{"refund.failed"}) {
		t.Errorf("sh-erp = %+v", sh)
	}
}

func TestParseEndpoints_Invalid(t *testing.T) {
	getenv := func(k string) string {
		if k == "OK" {
			return "0123456789abcdef"
		}
		return ""
	}
	readFile := func(string) ([]byte, error) { return nil, os.ErrNotExist }
	tests := []struct{ name, in, want string }{
		{"too few fields", "a https://x/h", "line 1"},
		{"literal secret", "a https://x/h 0123456789abcdef", "env:NAME or file:PATH"},
		{"unset env secret", "a https://x/h env:MISSING", "secret"},
		{"missing file", "a https://x/h file:/nope", "secret of a"},
		{"empty env name", "a https://x/h env:", "env:NAME"},
		{"unknown option", "a https://x/h env:OK retries=3", "retries=3"},
		{"empty merchants", "a https://x/h env:OK merchants=", "merchants="},
		{"merchant twice", "a https://x/h env:OK merchants=x,x", "listed twice"},
		{"empty merchant", "a https://x/h env:OK merchants=x,", "empty"},
		{"bad start", "a https://x/h env:OK start=later", "start=later"},
		{"unknown type", "a https://x/h env:OK types=refund.nope", "refund.nope"},
		{"bad url", "a ftp://x/h env:OK", "URL"},
		{"bad name", "a/b https://x/h env:OK", "name"},
		{"duplicate", "a https://x/h env:OK\n\na https://y/h env:OK", "line 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := webhook.ParseEndpoints(strings.NewReader(tt.in), getenv, readFile)
			if !errors.Is(err, webhook.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrConfig mentioning %q", err, tt.want)
			}
		})
	}
}
