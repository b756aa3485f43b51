package metrics_test

import (
	"context"
	"testing"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

// payingProvider is a stand-in that also pays abnormal refunds out.
type payingProvider struct {
	*simprovider.Provider
	got []reservation.AbnormalApplication
}

func (p *payingProvider) ApplyAbnormal(_ context.Context, _ string, app reservation.AbnormalApplication) reservation.Outcome {
	p.got = append(p.got, app)
	return reservation.Outcome{Kind: reservation.OutcomeProcessing, ProviderID: app.RefundID}
}

// The decorator keeps the wrapped provider's abnormal payouts (the engine
// finds them by interface on what it is given); one without them sends
// nothing and never answers definitely.
func TestProvider_KeepsAbnormalPayouts(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true, Logger: quiet()})
	inner := &payingProvider{Provider: simprovider.New(simprovider.Options{})}
	app := reservation.AbnormalApplication{RefundID: "503", Type: reservation.AbnormalMerchantBankCard}
	p, ok := m.Provider(inner).(actors.AbnormalProvider)
	if !ok {
		t.Fatal("the metrics decorator hides ApplyAbnormal")
	}
	if o := p.ApplyAbnormal(context.Background(), "T-a-1", app); o.Kind != reservation.OutcomeProcessing || len(inner.got) != 1 || inner.got[0] != app {
		t.Fatalf("payout answered %+v, forwarded %v", o, inner.got)
	}
	plain := m.Provider(simprovider.New(simprovider.Options{})).(actors.AbnormalProvider)
	if o := plain.ApplyAbnormal(context.Background(), "T-a-1", app); o.Kind != reservation.OutcomeUnknown {
		t.Fatalf("a provider without payouts answered %+v, want UNKNOWN", o)
	}
}
