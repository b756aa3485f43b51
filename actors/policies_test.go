package actors_test

import (
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/reservation"
)

// TestPolicyOf: a configured merchant's own policy; the base for one the
// set does not hold (reported, the engine refuses new work for it), and
// for every merchant when there is no set.
func TestPolicyOf(t *testing.T) {
	base := reservation.Policy{RefundNoPrefix: "R"}
	own := reservation.Policy{RefundNoPrefix: "A", RecheckAfter: 5 * time.Minute}
	set := actors.NewPolicySet(map[string]reservation.Policy{"brand-a": own})
	for _, tc := range []struct {
		name     string
		set      *actors.PolicySet
		merchant string
		want     reservation.Policy
		ok       bool
	}{
		{"configured", set, "brand-a", own, true},
		{"not configured", set, "brand-b", base, false},
		{"no set", nil, "brand-a", base, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := actors.PolicyOf(tc.set, base, tc.merchant)
			if got.RefundNoPrefix != tc.want.RefundNoPrefix || got.RecheckAfter != tc.want.RecheckAfter || ok != tc.ok {
				t.Fatalf("PolicyOf = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
