package metrics

import (
	"context"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/reservation"
)

// Provider wraps a provider to count its calls by outcome and time them.
func (m *Metrics) Provider(next actors.Provider) actors.Provider { return &provider{next: next, m: m} }

type provider struct {
	next actors.Provider
	m    *Metrics
}

var _ actors.Provider = (*provider)(nil)

func (p *provider) RequestBody(r actors.RefundRequest) ([]byte, error) { return p.next.RequestBody(r) }

func (p *provider) Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome {
	start := time.Now()
	o := p.next.Submit(ctx, refundNo, body, attempt)
	p.m.observeProvider("submit", o, time.Since(start))
	return o
}

func (p *provider) Query(ctx context.Context, refundNo string) reservation.Outcome {
	start := time.Now()
	o := p.next.Query(ctx, refundNo)
	p.m.observeProvider("query", o, time.Since(start))
	return o
}

func (m *Metrics) observeProvider(op string, o reservation.Outcome, d time.Duration) {
	outcome := string(o.Kind)
	switch o.Kind {
	case reservation.OutcomeSucceeded, reservation.OutcomeProcessing, reservation.OutcomeFailed, reservation.OutcomeAbnormal,
		reservation.OutcomeRejected, reservation.OutcomeUnknown, reservation.OutcomeNotFound:
	default:
		outcome = "OTHER" // keeps the label set closed
	}
	m.providerCalls.WithLabelValues(op, outcome).Inc()
	m.providerDuration.WithLabelValues(op).Observe(d.Seconds())
}
