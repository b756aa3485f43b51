package actors

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/refundd/refundd/internal/reservation"
)

// PolicySet is the configured merchants' policies by merchant name
// (Config.Policies). A merchant added to the merchants file while refundd
// runs (SIGHUP) is added here; a merchant is never removed or changed,
// since its reservations' refund numbers and rules would change under
// them. Safe for concurrent use: reads take no lock.
type PolicySet struct {
	mu sync.Mutex // serializes Add
	m  atomic.Pointer[map[string]reservation.Policy]
}

// NewPolicySet returns the set of these policies; nil for a nil map (the
// engine then checks no merchant).
func NewPolicySet(policies map[string]reservation.Policy) *PolicySet {
	if policies == nil {
		return nil
	}
	s := &PolicySet{}
	m := maps.Clone(policies)
	s.m.Store(&m)
	return s
}

// PolicyOf is the policy merchant's reservations are decided under: its
// own from s, else base, with false when s (not nil) does not configure
// merchant. The engine and the API's next_step both decide by it.
func PolicyOf(s *PolicySet, base reservation.Policy, merchant string) (reservation.Policy, bool) {
	if s == nil {
		return base, true
	}
	if p, ok := s.Get(merchant); ok {
		return p, true
	}
	return base, false
}

// Get returns the policy of merchant, and whether it is configured.
func (s *PolicySet) Get(merchant string) (reservation.Policy, bool) {
	p, ok := (*s.m.Load())[merchant]
	return p, ok
}

// Add configures a new merchant. It fails, changing nothing, for an
// invalid policy or a merchant already configured.
func (s *PolicySet) Add(merchant string, p reservation.Policy) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("actors: policy of merchant %q: %w", merchant, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.m.Load()
	if _, ok := old[merchant]; ok {
		return fmt.Errorf("actors: merchant %q is configured already", merchant)
	}
	next := maps.Clone(old)
	next[merchant] = p
	s.m.Store(&next)
	return nil
}

// all returns the policies now configured; none for a nil set.
func (s *PolicySet) all() map[string]reservation.Policy {
	if s == nil {
		return nil
	}
	return *s.m.Load()
}
