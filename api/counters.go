package api

import (
	"context"
	"strings"

	"github.com/refundd/refundd/internal/tally"
)

// durableCounters adds to a summary for an unscoped token the counters
// kept in the journal's key-value area (Options.Tally), summed over every
// node that writes them: notification outcomes (in total and by
// merchant), provider calls by operation and outcome kind and by code
// class, and webhook deliveries by endpoint. They survive restarts; the
// fields are absent without a tally.
func (s *Server) durableCounters(ctx context.Context, out map[string]any) error {
	t := s.opts.Tally
	if t == nil {
		return nil
	}
	v, err := t.Values(ctx)
	if err != nil {
		return err
	}
	notes := map[string]int64{}
	byMerchant := map[string]map[string]int64{}
	for _, o := range notifyOutcomes {
		notes[string(o)] = v[tally.KeyNotify+string(o)]
	}
	calls := map[string]map[string]int64{}
	codes := map[string]map[string]int64{}
	hooks := map[string]map[string]int64{}
	for k, n := range v {
		switch {
		case strings.HasPrefix(k, tally.KeyNotifyMerchant):
			put(byMerchant, k[len(tally.KeyNotifyMerchant):], n)
		case strings.HasPrefix(k, tally.KeyProvider):
			put(calls, k[len(tally.KeyProvider):], n)
		case strings.HasPrefix(k, tally.KeyProviderCode):
			put(codes, k[len(tally.KeyProviderCode):], n)
		case strings.HasPrefix(k, tally.KeyWebhook):
			put(hooks, k[len(tally.KeyWebhook):], n)
		}
	}
	out["counters_durable"] = true
	out["notifications"] = notes
	out["notifications_by_merchant"] = byMerchant
	out["notifications_quarantined"] = v[tally.KeyQuarantined]
	out["provider_calls"] = calls
	out["provider_code_classes"] = codes
	out["webhook_deliveries"] = hooks
	return nil
}

// put sets m[a][b] = n for key "a/b", splitting at the last "/" (a may
// hold none: merchant and endpoint names have none).
func put(m map[string]map[string]int64, key string, n int64) {
	i := strings.LastIndexByte(key, '/')
	if i <= 0 {
		return
	}
	inner := m[key[:i]]
	if inner == nil {
		inner = map[string]int64{}
		m[key[:i]] = inner
	}
	inner[key[i+1:]] = n
}
