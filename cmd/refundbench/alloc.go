package main

import (
	"bytes"
	"context"
	"net/http"

	"github.com/prometheus/common/expfmt"
)

// allocatedMetric is the Prometheus Go collector's count of the bytes a Go
// process has allocated since it started. Unlike the CPU time, the bytes a
// service allocates per operation hardly move with the neighbours' load,
// so they tell a change's cost on a machine where the rates vary by a
// third from one run to the next (docs/BENCHMARKS.md).
const allocatedMetric = "go_memstats_alloc_bytes_total"

// serviceAllocated reads allocatedMetric from the target's /metrics; false
// when the target serves none (pgrefund) or the answer does not parse.
func (b *bench) serviceAllocated(ctx context.Context) (float64, bool) {
	var raw []byte
	if r := b.client.do(ctx, "", http.MethodGet, "/metrics", nil, nil, &raw); !r.ok() || r.err != nil {
		return 0, false
	}
	return allocatedTotal(raw)
}

// allocatedTotal finds allocatedMetric in a Prometheus text exposition.
func allocatedTotal(raw []byte) (float64, bool) {
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return 0, false
	}
	f := fams[allocatedMetric]
	if f == nil || len(f.GetMetric()) != 1 {
		return 0, false
	}
	m := f.GetMetric()[0]
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}
