package merchant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/reservation"
)

// recorder is one merchant's provider: it answers with its own name, so a
// refund reaching the wrong merchant shows.
type recorder struct{ name string }

func (p recorder) RequestBody(r reservation.RefundRequest) ([]byte, error) {
	return []byte(p.name + ":" + r.RefundNo), nil
}
func (p recorder) Submit(_ context.Context, no string, _ []byte, _ int) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeProcessing, ProviderID: p.name}
}
func (p recorder) Query(_ context.Context, no string) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeNotFound, ProviderID: p.name}
}

func epochRouter(t *testing.T, r *Registry, epoch uint64) *Router {
	t.Helper()
	ps := map[string]Provider{}
	for _, m := range r.Merchants() {
		ps[m.Name] = recorder{m.Name}
	}
	rt, err := r.Router(ps, func(base string) ([]string, error) { return audit.EpochPrefixes(base, epoch) })
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestRouter_ByRefundNumberInEveryEpoch(t *testing.T) {
	rt := epochRouter(t, mustParse(t, base), 2)
	ctx := context.Background()
	for _, tc := range []struct {
		no, want string // want "" means unroutable
	}{
		{"SH-res-1-1", "shop"},
		{"SHE1-res-1-2", "shop"}, // numbered in epoch 1, before a restore
		{"IAE2-res-1-1", "inn-1"},
		{"IB-r_9-12", "inn-2"},
		{"IBE3-res-1-1", ""}, // an epoch not reached
		{"R-res-1-1", ""},    // the default merchant's, not configured here
		{"SHX-res-1-1", ""},
		{"SH-res", ""},
		{"", ""},
	} {
		t.Run(tc.no, func(t *testing.T) {
			name, ok := rt.Merchant(tc.no)
			body, err := rt.RequestBody(reservation.RefundRequest{RefundNo: tc.no})
			sub := rt.Submit(ctx, tc.no, body, 1)
			q := rt.Query(ctx, tc.no)
			if tc.want == "" {
				if ok || !errors.Is(err, ErrUnroutable) {
					t.Errorf("routed to %q (%v), body error %v; want unroutable", name, ok, err)
				}
				// Never a definite answer: nothing was asked.
				for _, o := range []reservation.Outcome{sub, q} {
					if o.Kind != reservation.OutcomeUnknown || o.Code != CodeUnroutable {
						t.Errorf("answer %+v, want UNKNOWN %s", o, CodeUnroutable)
					}
				}
				return
			}
			if !ok || name != tc.want || err != nil || string(body) != tc.want+":"+tc.no ||
				sub.ProviderID != tc.want || q.ProviderID != tc.want {
				t.Errorf("merchant %q %v, body %q %v, submit by %q, query by %q; want all %q",
					name, ok, body, err, sub.ProviderID, q.ProviderID, tc.want)
			}
		})
	}
}

func TestRouter_NeedsAProviderPerMerchant(t *testing.T) {
	r := mustParse(t, base)
	_, err := r.Router(map[string]Provider{"shop": recorder{"shop"}}, func(b string) ([]string, error) { return []string{b}, nil })
	if err == nil || !strings.Contains(err.Error(), "inn-1") {
		t.Fatalf("err %v, want one naming inn-1", err)
	}
}

func TestRegistry_Policies(t *testing.T) {
	r := mustParse(t, base)
	spacing := 90 * time.Second
	m, _ := r.ByName("inn-2")
	m.Overrides.RefundSpacing = &spacing
	ps, err := r.Policies(reservation.Policy{RefundNoPrefix: "R", RefundSpacing: time.Minute},
		func(b string) (string, error) { return audit.EpochPrefix(b, 1) })
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		prefix  string
		spacing time.Duration
	}{"shop": {"SHE1", time.Minute}, "inn-1": {"IAE1", time.Minute}, "inn-2": {"IBE1", spacing}} {
		if p := ps[name]; p.RefundNoPrefix != want.prefix || p.RefundSpacing != want.spacing {
			t.Errorf("%s: prefix %q spacing %v, want %q %v", name, p.RefundNoPrefix, p.RefundSpacing, want.prefix, want.spacing)
		}
	}
	if len(ps) != 3 {
		t.Errorf("%d policies, want 3", len(ps))
	}
}

// payer is a recorder that also pays abnormal refunds out and encrypts
// for its account's key, naming its merchant in both answers.
type payer struct{ recorder }

func (p payer) ApplyAbnormal(_ context.Context, no string, app reservation.AbnormalApplication) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeProcessing, ProviderID: p.name + ":" + app.RefundID}
}
func (p payer) EncryptSensitive(plain ...string) (string, []string, error) {
	return "KEY_" + p.name, []string{p.name}, nil
}

// Abnormal payouts and their encryption go to the refund's merchant; a
// merchant whose provider lacks them, or an unroutable number, sends
// nothing and never answers definitely.
// Payouts and encryption reach the refund's merchant's provider, paced
// or not: pacing must not hide them.
func TestRouter_AbnormalPayoutByRefundNumber(t *testing.T) {
	for _, paced := range []bool{false, true} {
		t.Run(fmt.Sprintf("paced=%v", paced), func(t *testing.T) { testAbnormalPayoutByRefundNumber(t, paced) })
	}
}

func testAbnormalPayoutByRefundNumber(t *testing.T, paced bool) {
	r := mustParse(t, base)
	ps := map[string]Provider{}
	for _, m := range r.Merchants() {
		if m.Name == "inn-2" {
			ps[m.Name] = recorder{m.Name}
		} else {
			ps[m.Name] = payer{recorder{m.Name}}
		}
	}
	if paced {
		var err error
		if ps, err = r.Paced(ps, Pacing{Creates: 100, Queries: 100}, nil, PacingClock{}); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := r.Router(ps, func(base string) ([]string, error) { return audit.EpochPrefixes(base, 0) })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	app := reservation.AbnormalApplication{RefundID: "503", Type: reservation.AbnormalMerchantBankCard}
	if o := rt.ApplyAbnormal(ctx, "IA-res-1-1", app); o.Kind != reservation.OutcomeProcessing || o.ProviderID != "inn-1:503" {
		t.Fatalf("inn-1's payout answered %+v", o)
	}
	if serial, enc, err := rt.EncryptSensitive("SH-res-1-1", "card"); err != nil || serial != "KEY_shop" || len(enc) != 1 || enc[0] != "shop" {
		t.Fatalf("shop's encryption: %q %v %v", serial, enc, err)
	}
	for _, no := range []string{"IB-res-1-1", "R-res-1-1"} {
		if o := rt.ApplyAbnormal(ctx, no, app); o.Kind != reservation.OutcomeUnknown {
			t.Errorf("%s: payout answered %+v, want UNKNOWN", no, o)
		}
	}
	if _, _, err := rt.EncryptSensitive("IB-res-1-1", "card"); !errors.Is(err, ErrNoEncryption) {
		t.Errorf("inn-2 without encryption: %v", err)
	}
	if _, _, err := rt.EncryptSensitive("R-res-1-1", "card"); !errors.Is(err, ErrUnroutable) {
		t.Errorf("unroutable: %v", err)
	}
}

// TestRouter_Extend: a merchant added while refundd runs is routed, in
// every epoch, only once the commit runs; one whose prefix in any epoch
// is a running merchant's is refused and nothing changes.
func TestRouter_Extend(t *testing.T) {
	rt := epochRouter(t, mustParse(t, base), 2)
	prefixes := func(base string) ([]string, error) { return audit.EpochPrefixes(base, 2) }
	late := &Merchant{Name: "late", RefundNoPrefix: "LA"}
	commit, err := rt.Extend([]*Merchant{late}, map[string]Provider{"late": recorder{"late"}}, prefixes)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.Merchant("LA-res-1-1"); ok {
		t.Fatal("routed before the commit")
	}
	commit()
	for _, no := range []string{"LA-res-1-1", "LAE2-res-1-1"} {
		if name, ok := rt.Merchant(no); !ok || name != "late" {
			t.Fatalf("%s routes to %q %v", no, name, ok)
		}
	}
	if name, _ := rt.Merchant("SH-res-1-1"); name != "shop" {
		t.Fatalf("a running merchant's route changed: %q", name)
	}
	clash := &Merchant{Name: "clash", RefundNoPrefix: "SHE1"} // shop's prefix in epoch 1
	if _, err := rt.Extend([]*Merchant{clash}, map[string]Provider{"clash": recorder{"clash"}}, prefixes); !errors.Is(err, ErrConflict) {
		t.Fatalf("clash: %v, want ErrConflict", err)
	}
	if name, _ := rt.Merchant("SHE1-res-1-1"); name != "shop" {
		t.Fatalf("a refused extension changed a route: %q", name)
	}
	if _, err := rt.Extend([]*Merchant{{Name: "none", RefundNoPrefix: "NO"}}, nil, prefixes); err == nil {
		t.Fatal("a merchant without a provider was accepted")
	}
}
