package webhook_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal/journaltest"
)

// FuzzParseEndpoints: the webhooks file is outside input. Whatever it
// holds, ParseEndpoints either returns endpoints New accepts (given their
// merchants are configured) or an ErrConfig naming the line.
func FuzzParseEndpoints(f *testing.F) {
	db := journaltest.Open(f)
	f.Add("ledger https://ledger.internal/refundd env:S types=refund.succeeded,reservation.canceled\n")
	f.Add("crm http://crm.internal:8080/hooks?x=1 file:/s start=now\n# comment\n\n")
	f.Add("sh https://x/h env:S merchants=hotel-sh,default start=beginning\n")
	f.Add("a https://x/h env:S merchants=x,x\n")
	f.Add("a https://x/h env:S\na https://y/h env:S\n")
	f.Fuzz(func(t *testing.T, in string) {
		getenv := func(string) string { return "fuzz-secret-0123456789" }
		readFile := func(p string) ([]byte, error) {
			if p == "/s" {
				return []byte("fuzz-secret-0123456789\n"), nil
			}
			return nil, os.ErrNotExist
		}
		eps, err := webhook.ParseEndpoints(strings.NewReader(in), getenv, readFile)
		if err != nil {
			if !errors.Is(err, webhook.ErrConfig) && !strings.Contains(err.Error(), "read endpoints") {
				t.Fatalf("error %v is not ErrConfig", err)
			}
			if errors.Is(err, webhook.ErrConfig) && !strings.Contains(err.Error(), "line ") {
				t.Fatalf("error %v does not name the line", err)
			}
			return
		}
		var merchants []string
		for _, e := range eps {
			merchants = append(merchants, e.Merchants...)
		}
		if len(merchants) == 0 {
			merchants = nil // the default merchant
		}
		if _, err := webhook.New(webhook.Config{DB: db, Endpoints: eps, Merchants: merchants}); err != nil {
			t.Fatalf("parsed endpoints %+v refused by New: %v", eps, err)
		}
	})
}
