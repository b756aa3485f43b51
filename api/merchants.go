package api

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// merchantSet is the configured merchants (Options.Merchants, then those
// a reload added: Server.AddMerchants). Merchants are only added, never
// removed. Reads take no lock.
type merchantSet struct {
	mu sync.Mutex // serializes add
	m  atomic.Pointer[map[string]bool]
}

func newMerchantSet(names []string) *merchantSet {
	s := &merchantSet{}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	s.m.Store(&m)
	return s
}

// has reports whether name is configured.
func (s *merchantSet) has(name string) bool { return (*s.m.Load())[name] }

// sorted returns the configured names in order.
func (s *merchantSet) sorted() []string { return slices.Sorted(maps.Keys(*s.m.Load())) }

// add configures names; it reports the ones that were not configured.
func (s *merchantSet) add(names ...string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := maps.Clone(*s.m.Load())
	var added []string
	for _, n := range names {
		if !next[n] {
			next[n] = true
			added = append(added, n)
		}
	}
	s.m.Store(&next)
	return added
}

// AddMerchants makes merchants added to the merchants file while the
// server runs (a reload) known to the API: registrations may name them,
// notifications are counted under them, filters and the console offer
// them. The wiring calls it last, once their refunds can be routed, so a
// registration it lets in can be refunded. A registration naming no
// merchant keeps the one it got at start (when there was a single
// merchant) until the next restart.
func (s *Server) AddMerchants(names ...string) {
	added := s.merchants.add(names...)
	if s.notify != nil {
		s.notify.stats.addMerchants(added...)
	}
}

// AddNotifyAccounts serves the notification routes of WeChat Pay accounts
// added to the merchants file while the server runs (a reload): from now
// on a notification to /v1/notify/wechatpay/accounts/{name}/... is
// verified with that account's keys, as for the accounts the server
// started with. The wiring calls it before AddMerchants for the account's
// merchants. No-op when the server takes no notifications (Options.Notify
// nil: no account at start, which a reload does not change).
func (s *Server) AddNotifyAccounts(accounts ...NotifyAccount) {
	if s.notify != nil {
		s.notify.addAccounts(accounts...)
	}
}
