package metrics_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/reservation"
)

// merchantLabel finds every merchant label value in a scrape.
var merchantLabel = regexp.MustCompile(`merchant="([^"]*)"`)

// checkBounded fails if the scrape has a merchant label value outside
// allowed.
func checkBounded(t *testing.T, text string, allowed ...string) {
	t.Helper()
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	for _, m := range merchantLabel.FindAllStringSubmatch(text, -1) {
		if !ok[m[1]] {
			t.Errorf("merchant label %q, want one of %v", m[1], allowed)
		}
	}
}

// TestTransitions_ByMerchant: refund transitions carry the reservation's
// merchant when it is configured, and _other otherwise (the default
// merchant too, when it is not configured).
func TestTransitions_ByMerchant(t *testing.T) {
	e := newEngineWith(t, nil, metrics.Options{Merchants: []string{"hotel-sh", "hotel-bj"}})
	for _, r := range []struct{ id, merchant string }{{"r-sh1", "hotel-sh"}, {"r-sh2", "hotel-sh"}, {"r-gz", "hotel-gz"}, {"r-old", ""}} {
		e.await(t, r.id, e.refundFor(t, r.id, r.merchant), reservation.Succeeded)
	}
	text := scrape(t, e.m)
	want(t, text, `refundd_refund_transitions_total{from="NEW",merchant="hotel-sh",to="PROCESSING"}`, 2)
	want(t, text, `refundd_refund_transitions_total{from="PROCESSING",merchant="hotel-sh",to="SUCCEEDED"}`, 2)
	want(t, text, `refundd_refund_transitions_total{from="NEW",merchant="_other",to="PROCESSING"}`, 2)
	want(t, text, `refundd_refund_transitions_total{from="NEW",merchant="hotel-gz",to="PROCESSING"}`, -1)
	want(t, text, `refundd_refund_transitions_total{from="NEW",merchant="hotel-bj",to="PROCESSING"}`, -1)
	checkBounded(t, text, "hotel-sh", "hotel-bj", metrics.OtherMerchant)
}

// TestTransitions_DefaultMerchant: with no merchants configured, the
// default merchant is the one label value.
func TestTransitions_DefaultMerchant(t *testing.T) {
	e := newEngine(t, nil)
	e.await(t, "r1", e.refundFor(t, "r1", ""), reservation.Succeeded)
	e.await(t, "r2", e.refundFor(t, "r2", reservation.DefaultMerchant), reservation.Succeeded)
	e.await(t, "r3", e.refundFor(t, "r3", "hotel-sh"), reservation.Succeeded)
	text := scrape(t, e.m)
	want(t, text, `refundd_refund_transitions_total{from="NEW",merchant="default",to="PROCESSING"}`, 2)
	want(t, text, `refundd_refund_transitions_total{from="NEW",merchant="_other",to="PROCESSING"}`, 1)
	checkBounded(t, text, reservation.DefaultMerchant, metrics.OtherMerchant)
}

// TestNotifications_ByMerchant: per-merchant notification counts keep
// configured names, sum the rest under _other and unattributed ones under
// _none.
func TestNotifications_ByMerchant(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true, Logger: quiet(), Merchants: []string{"hotel-sh", "default"}})
	counts := map[string]map[string]int64{
		"hotel-sh": {"applied": 2, "mismatch": 1},
		"default":  {"applied": 7},
		"hotel-gz": {"applied": 1},
		"evil-1":   {"applied": 4, "mismatch": 3},
		"":         {"rejected": 5},
	}
	if err := m.Watch(metrics.Sources{
		NotificationsByMerchant: func() map[string]map[string]int64 { return counts },
	}); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, m)
	want(t, text, `refundd_notifications_total{merchant="hotel-sh",outcome="applied"}`, 2)
	want(t, text, `refundd_notifications_total{merchant="hotel-sh",outcome="mismatch"}`, 1)
	want(t, text, `refundd_notifications_total{merchant="default",outcome="applied"}`, 7)
	want(t, text, `refundd_notifications_total{merchant="_other",outcome="applied"}`, 5)
	want(t, text, `refundd_notifications_total{merchant="_other",outcome="mismatch"}`, 3)
	want(t, text, `refundd_notifications_total{merchant="_none",outcome="rejected"}`, 5)
	want(t, text, `refundd_notifications_total{merchant="_none",outcome="applied"}`, -1)
	checkBounded(t, text, "hotel-sh", "default", metrics.OtherMerchant, metrics.NoMerchant)
}

// byPrefix is a provider that, like merchant.Router, knows a refund
// number's merchant from its prefix (the letters before the first '-').
type byPrefix struct {
	names map[string]string
}

func (byPrefix) Submit(context.Context, string, []byte, int) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeProcessing}
}

func (byPrefix) Query(context.Context, string) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeSucceeded}
}

func (p byPrefix) Merchant(refundNo string) (string, bool) {
	prefix, _, _ := strings.Cut(refundNo, "-")
	name, ok := p.names[prefix]
	return name, ok
}

// plain is a provider that cannot tell a refund's merchant.
type plain struct{ byPrefix }

func (plain) Merchant() {} // not merchantOf's method: hides byPrefix's

// TestProviderCalls_ByMerchant: provider calls carry the merchant the
// routing provider names, bounded to the configured ones; a provider that
// cannot name it counts every call under _other.
func TestProviderCalls_ByMerchant(t *testing.T) {
	routed := byPrefix{names: map[string]string{"SH": "hotel-sh", "BJ": "hotel-bj", "GZ": "hotel-gz"}}
	for _, tc := range []struct {
		name  string
		p     metrics.Provider
		calls []string // refund numbers: submit then query each
		want  map[string]float64
	}{
		{"routed", routed, []string{"SH-r1-1", "SH-r2-1", "BJ-r3-1", "GZ-r4-1", "XX-r5-1"}, map[string]float64{
			`{merchant="hotel-sh",op="submit",outcome="PROCESSING"}`: 2,
			`{merchant="hotel-sh",op="query",outcome="SUCCEEDED"}`:   2,
			`{merchant="hotel-bj",op="submit",outcome="PROCESSING"}`: 1,
			`{merchant="_other",op="submit",outcome="PROCESSING"}`:   2, // GZ is not configured, XX unknown
			`{merchant="_other",op="query",outcome="SUCCEEDED"}`:     2,
		}},
		{"plain", plain{routed}, []string{"SH-r1-1", "BJ-r3-1"}, map[string]float64{
			`{merchant="_other",op="submit",outcome="PROCESSING"}`:   2,
			`{merchant="hotel-sh",op="submit",outcome="PROCESSING"}`: -1,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New(metrics.Options{NoRuntime: true, Logger: quiet(), Merchants: []string{"hotel-sh", "hotel-bj"}})
			p := m.Provider(tc.p)
			for _, no := range tc.calls {
				p.Submit(t.Context(), no, nil, 1)
				p.Query(t.Context(), no)
			}
			text := scrape(t, m)
			for series, v := range tc.want {
				want(t, text, "refundd_provider_calls_total"+series, v)
			}
			checkBounded(t, text, "hotel-sh", "hotel-bj", metrics.OtherMerchant)
		})
	}
}

// TestMetrics_AddMerchants: a merchant added while refundd runs (a
// reload) becomes a label value of its own; before, it was _other.
func TestMetrics_AddMerchants(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true, Logger: quiet(), Merchants: []string{"hotel-sh"}})
	counts := map[string]map[string]int64{"hotel-sh": {"applied": 2}, "hotel-bj": {"applied": 3}}
	if err := m.Watch(metrics.Sources{
		NotificationsByMerchant: func() map[string]map[string]int64 { return counts },
	}); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, m)
	want(t, text, `refundd_notifications_total{merchant="_other",outcome="applied"}`, 3)
	want(t, text, `refundd_notifications_total{merchant="hotel-bj",outcome="applied"}`, -1)
	m.AddMerchants("hotel-bj")
	text = scrape(t, m)
	want(t, text, `refundd_notifications_total{merchant="hotel-bj",outcome="applied"}`, 3)
	want(t, text, `refundd_notifications_total{merchant="_other",outcome="applied"}`, -1)
	checkBounded(t, text, "hotel-sh", "hotel-bj", metrics.OtherMerchant, metrics.NoMerchant)
}
