package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal/journaltest"
)

// TestMerchantsFile: the generated file reads back through refundd's own
// parser with exactly the merchants and prefixes refundbench --merchants
// registers for, each prefix naming its merchant.
func TestMerchantsFile(t *testing.T) {
	for _, n := range []int{1, 2, 9, 10, 100, 1000} {
		data, err := merchantsFile(n)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		reg, err := merchant.Parse(data, t.TempDir())
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		ms := reg.Merchants()
		if len(ms) != n || len(reg.Accounts()) != n {
			t.Fatalf("n=%d: %d merchants, %d accounts", n, len(ms), len(reg.Accounts()))
		}
		for i, m := range ms {
			name, prefix := benchMerchant(i+1, n)
			if m.Name != name || m.RefundNoPrefix != prefix || benchPrefix(name) != prefix {
				t.Fatalf("n=%d: merchant %d is %s/%s, want %s/%s", n, i, m.Name, m.RefundNoPrefix, name, prefix)
			}
			if got, ok := reg.ByRefundNo(reservation.RefundNo(prefix, "r1", 1)); !ok || got.Name != name {
				t.Fatalf("n=%d: refund number with prefix %s names %v", n, prefix, got)
			}
		}
	}
	for _, n := range []int{0, -1, maxBenchMerchants + 1} {
		if _, err := merchantsFile(n); err == nil {
			t.Errorf("n=%d: no error", n)
		}
	}
	out := filepath.Join(t.TempDir(), "m.toml")
	if err := merchantsFileCommand([]string{"--merchants", "5", "--out", out}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if reg, err := merchant.ReadFile(out, os.ReadFile); err != nil || len(reg.Merchants()) != 5 {
		t.Fatalf("merchants-file --out: %v", err)
	}
}

func TestVerifyMerchant(t *testing.T) {
	refunds := func(nos ...string) []refundView {
		var out []refundView
		for _, no := range nos {
			out = append(out, refundView{RefundNo: no})
		}
		return out
	}
	tests := []struct {
		name, merchant string
		v              reservationView
		want           []string // substrings of the problems, in order
	}{
		{"none named", "", reservationView{Merchant: "default", Refunds: refunds("T-r-1")}, nil},
		{"right", "bench-07", reservationView{Merchant: "bench-07", Refunds: refunds("B07-r-1", "B07-r-2")}, nil},
		{"other merchant", "bench-07", reservationView{Merchant: "bench-08", Refunds: refunds("B07-r-1")}, []string{"read back as \"bench-08\""}},
		{"other prefix", "bench-07", reservationView{Merchant: "bench-07", Refunds: refunds("B07-r-1", "B08-r-2")}, []string{"B08-r-2"}},
		{"prefix of a longer one", "bench-1", reservationView{Merchant: "bench-1", Refunds: refunds("B10-r-1")}, []string{"B10-r-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := verifyMerchant("r", tt.merchant, tt.v)
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %q lacks %q", got[i], w)
				}
			}
		})
	}
}

// TestRun_Merchants: with --merchants N every registration names one of
// the N merchants, in turn, and the target accepts them. With one merchant
// whose prefix the engine uses, the check (merchant and prefix of every
// reservation) passes; with three merchants sharing the engine's one
// prefix (per-merchant prefixes are refundd's wiring), it fails on the
// prefix, which shows the check looks.
func TestRun_Merchants(t *testing.T) {
	for _, tt := range []struct {
		n      int
		prefix string
		ok     bool
	}{{1, "B1", true}, {3, "T", false}} {
		names := make([]string, tt.n)
		for i := range names {
			names[i], _ = benchMerchant(i+1, tt.n)
		}
		discard := slog.New(slog.DiscardHandler)
		engine, err := actors.New(actors.Config{
			Store: eventstore.New(journaltest.Open(t)), Provider: simprovider.New(simprovider.Options{}), Encode: simprovider.Encode,
			Logger: discard, Policy: reservation.Policy{RefundNoPrefix: tt.prefix},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = engine.Close(context.Background()) })
		tokens := &auth.Tokens{}
		if err := tokens.Add(auth.RoleService, "bench", testToken); err != nil {
			t.Fatal(err)
		}
		h := api.New(engine, api.Options{Logger: discard, Auth: tokens, Merchants: names})
		var mu sync.Mutex
		registered := map[string]int{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/v1/reservations" {
				body, _ := io.ReadAll(r.Body)
				var reg struct {
					Merchant string `json:"merchant"`
				}
				_ = json.Unmarshal(body, &reg)
				mu.Lock()
				registered[reg.Merchant]++
				mu.Unlock()
				r.Body = io.NopCloser(strings.NewReader(string(body)))
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		rep, out := runBench(t, "--target", srv.URL, "--scenario", "lifecycle", "--clients", "6",
			"--duration", "800ms", "--warmup", "100ms", "--merchants", strconv.Itoa(tt.n), "--max-error-rate", "1")
		if lc := rep.Ops["lifecycle"]; lc.Count == 0 || lc.Failed != 0 {
			t.Fatalf("n=%d: lifecycle %+v errors %v\n%s", tt.n, lc, rep.Errors, out)
		}
		mu.Lock()
		total, least, most := 0, -1, 0
		for _, name := range names {
			c := registered[name]
			total += c
			most = max(most, c)
			if least < 0 || c < least {
				least = c
			}
		}
		if total == 0 || total != sumValues(registered) || most-least > 6 {
			t.Errorf("n=%d: registrations by merchant %v: want all %d named, in turn", tt.n, registered, tt.n)
		}
		mu.Unlock()
		if rep.Check.OK != tt.ok {
			t.Errorf("n=%d: check %+v, want ok=%v\n%s", tt.n, rep.Check, tt.ok, out)
		}
		if !tt.ok && (len(rep.Check.Examples) == 0 || !strings.Contains(rep.Check.Examples[0], "lacks its prefix")) {
			t.Errorf("n=%d: check examples %v, want missing prefixes", tt.n, rep.Check.Examples)
		}
	}
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
