package merchant

import (
	"reflect"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

func mustParse(t *testing.T, doc string) *Registry {
	t.Helper()
	r, err := Parse([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistry_Lookups(t *testing.T) {
	r := mustParse(t, base)
	cases := []struct {
		name string
		got  func() (*Merchant, bool)
		want string // "" means no merchant
	}{
		{"by name", func() (*Merchant, bool) { return r.ByName("inn-1") }, "inn-1"},
		{"by unknown name", func() (*Merchant, bool) { return r.ByName("inn-3") }, ""},
		{"by prefix", func() (*Merchant, bool) { return r.ByPrefix("IB") }, "inn-2"},
		{"by prefix is case-sensitive", func() (*Merchant, bool) { return r.ByPrefix("ib") }, ""},
		{"by prefix is exact, not a prefix match", func() (*Merchant, bool) { return r.ByPrefix("I") }, ""},
		{"by refund number", func() (*Merchant, bool) { return r.ByRefundNo(reservation.RefundNo("SH", "res-1", 3)) }, "shop"},
		{"by refund number of a sub-merchant", func() (*Merchant, bool) { return r.ByRefundNo("IA-r_9-12") }, "inn-1"},
		{"by refund number with an unknown prefix", func() (*Merchant, bool) { return r.ByRefundNo("R-res-1-1") }, ""},
		{"by refund number whose prefix only starts a known one", func() (*Merchant, bool) { return r.ByRefundNo("SHX-res-1-1") }, ""},
		{"by malformed refund number", func() (*Merchant, bool) { return r.ByRefundNo("SH-res") }, ""},
		{"by direct mchid", func() (*Merchant, bool) { return r.ByMchID("1900000101", "") }, "shop"},
		{"by sp_mchid and sub_mchid", func() (*Merchant, bool) { return r.ByMchID("1900000200", "1900000202") }, "inn-2"},
		{"by sp_mchid alone", func() (*Merchant, bool) { return r.ByMchID("1900000200", "") }, ""},
		{"by a sub_mchid of another provider", func() (*Merchant, bool) { return r.ByMchID("1900000101", "1900000201") }, ""},
		{"by a sub_mchid as a direct mchid", func() (*Merchant, bool) { return r.ByMchID("1900000201", "") }, ""},
		{"single of several", r.Single, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := tc.got()
			switch {
			case tc.want == "" && (ok || m != nil):
				t.Errorf("got %q, want none", m.Name)
			case tc.want != "" && (!ok || m == nil || m.Name != tc.want):
				t.Errorf("got %v %v, want %q", m, ok, tc.want)
			}
		})
	}
}

func TestRegistry_SingleAndCopies(t *testing.T) {
	r := mustParse(t, base)
	ms := r.Merchants()
	ms[0] = nil
	if r.Merchants()[0] == nil {
		t.Error("Merchants returned the registry's own slice")
	}
	as := r.Accounts()
	as[0] = nil
	if r.Accounts()[0] == nil {
		t.Error("Accounts returned the registry's own slice")
	}
	one, err := NewDefault(DefaultSettings{})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := one.Single(); !ok || m.Name != DefaultName {
		t.Errorf("Single of one merchant: %v %v", m, ok)
	}
}

func TestMerchant_Policy(t *testing.T) {
	r := mustParse(t, base)
	engine := reservation.Policy{
		RefundNoPrefix: "R", MaxRefunds: 40, RefundSpacing: time.Minute, RefundWindow: 365 * 24 * time.Hour,
		MaxAttempts: 5, RetryBackoff: time.Second, RetryBackoffMax: time.Minute, StuckAfter: 24 * time.Hour,
	}
	inn1, _ := r.ByName("inn-1")
	got := inn1.Policy(engine)
	want := engine
	want.RefundNoPrefix = "IA"
	if !equalPolicy(got, want) {
		t.Errorf("no overrides: %+v, want the engine's policy with the merchant's prefix", got)
	}
	inn2, _ := r.ByName("inn-2")
	got = inn2.Policy(engine)
	want = engine
	want.RefundNoPrefix, want.RefundSpacing, want.RefundWindow = "IB", 0, 720*time.Hour
	want.MaxAttempts, want.RetryBackoff, want.RetryBackoffMax = 3, 2*time.Second, 2*time.Minute
	want.ApproveAbove, want.ApproveAbovePercent, want.ApproveNonService, want.ApprovalTimeout = 50000, 50, true, 4*time.Hour
	if !equalPolicy(got, want) {
		t.Errorf("overrides: %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the merchant's policy is not one the engine takes: %v", err)
	}
	if engine.RefundNoPrefix != "R" || engine.RefundSpacing != time.Minute {
		t.Error("Policy changed its argument")
	}
}

func equalPolicy(a, b reservation.Policy) bool { return reflect.DeepEqual(a, b) }
