package metrics

import (
	"context"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// Provider wraps a provider to count its calls by outcome and merchant and
// time them. The merchant comes from next when it can tell a refund
// number's merchant (merchant.Router does: the number's prefix names it);
// otherwise every call counts under OtherMerchant.
func (m *Metrics) Provider(next Provider) Provider {
	p := &provider{next: next, m: m}
	if mo, ok := next.(merchantOf); ok {
		p.merchantOf = mo.Merchant
	}
	return p
}

// merchantOf is what a provider that routes by refund number tells.
type merchantOf interface {
	Merchant(refundNo string) (string, bool)
}

// Provider is the engine's provider (actors.Provider), declared here so
// that the decorator need not import the driver.
type Provider interface {
	Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome
	Query(ctx context.Context, refundNo string) reservation.Outcome
}

type provider struct {
	next       Provider
	m          *Metrics
	merchantOf func(refundNo string) (string, bool) // nil: not known
}

func (p *provider) merchant(refundNo string) string {
	if p.merchantOf == nil {
		return OtherMerchant
	}
	name, _ := p.merchantOf(refundNo)
	return p.m.merchant(name)
}

func (p *provider) Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome {
	start := time.Now()
	o := p.next.Submit(ctx, refundNo, body, attempt)
	p.m.observeProvider("submit", p.merchant(refundNo), o, time.Since(start))
	return o
}

func (p *provider) Query(ctx context.Context, refundNo string) reservation.Outcome {
	start := time.Now()
	o := p.next.Query(ctx, refundNo)
	p.m.observeProvider("query", p.merchant(refundNo), o, time.Since(start))
	return o
}

// abnormalPayer is a Provider that pays ABNORMAL refunds out
// (actors.AbnormalProvider).
type abnormalPayer interface {
	ApplyAbnormal(ctx context.Context, refundNo string, app reservation.AbnormalApplication) reservation.Outcome
}

// ApplyAbnormal forwards to the wrapped provider, counted as op
// "apply_abnormal"; one without the call sends nothing and answers
// OutcomeUnknown, so the refund is queried.
func (p *provider) ApplyAbnormal(ctx context.Context, refundNo string, app reservation.AbnormalApplication) reservation.Outcome {
	next, ok := p.next.(abnormalPayer)
	if !ok {
		return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "PROVIDER_NO_ABNORMAL",
			Message: "the provider cannot pay abnormal refunds out; nothing was sent"}
	}
	start := time.Now()
	o := next.ApplyAbnormal(ctx, refundNo, app)
	p.m.observeProvider("apply_abnormal", p.merchant(refundNo), o, time.Since(start))
	return o
}

func (m *Metrics) observeProvider(op, merchant string, o reservation.Outcome, d time.Duration) {
	outcome := string(o.Kind)
	switch o.Kind {
	case reservation.OutcomeSucceeded, reservation.OutcomeProcessing, reservation.OutcomeFailed, reservation.OutcomeAbnormal,
		reservation.OutcomeRejected, reservation.OutcomeUnknown, reservation.OutcomeNotFound:
	default:
		outcome = "OTHER" // keeps the label set closed
	}
	m.providerCalls.WithLabelValues(op, outcome, merchant).Inc()
	m.providerDuration.WithLabelValues(op).Observe(d.Seconds())
}
