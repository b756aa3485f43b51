package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauge registers the gauge refundd_NAME, read from f at every scrape.
func (m *Metrics) Gauge(name, help string, f func() float64) error {
	err := m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, f))
	if err != nil {
		return fmt.Errorf("%s gauge: %w", name, err)
	}
	return nil
}
