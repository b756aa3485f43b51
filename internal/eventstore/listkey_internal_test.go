package eventstore

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// TestParseListKey_RoundTrip: every row's key reads back as the row, and
// its position is the key's own; keys cut short or altered are refused.
func TestParseListKey_RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 2000 {
		kind := reservation.ListRefunds
		if i%2 == 1 {
			kind = reservation.ListReservations
		}
		r := reservation.ListRow{Kind: kind, Merchant: []string{"default", "hotel-sh"}[rng.IntN(2)], ReservationID: "r-" + string(rune('a'+rng.IntN(26))),
			At: time.Unix(0, rng.Int64N(1<<62)).UTC(), UpdatedAt: time.Unix(0, rng.Int64N(1<<62)).UTC(), Amount: rng.Int64N(1 << 40),
			State: string(reservation.ListStates[rng.IntN(len(reservation.ListStates))])}
		if kind == reservation.ListRefunds {
			r.RefundNo = "T-" + r.ReservationID + "-1"
			r.ReasonCode = []string{"", "other", "a/b %"}[rng.IntN(3)]
		} else {
			r.State = "ACCEPTED"
			r.RefundStates = uint16(rng.IntN(1 << 7))
		}
		key := ListMarkKey(r)
		got, pos, err := parseListKey(kind, key)
		if err != nil || got != r || pos != position(r) {
			t.Fatalf("%q: %+v %q %v, want %+v %q", key, got, pos, err, r, position(r))
		}
		for _, bad := range []string{key + "/x", key[:len(key)/2]} {
			if _, _, err := parseListKey(kind, bad); err == nil {
				t.Fatalf("%q read as a row", bad)
			}
		}
	}
	for _, bad := range []string{"", "list/refund/", "list/refund/m/S/zzzzzzzzzzzzzzzz/r/n/0000000000000001/0000000000000001/",
		"list/reservation/m/0000000000000001/r/ACCEPTED/0000000000000001/0000000000000001/00000000000fffff",
		"list/refund/m/S/0000000000000001/r/n/0000000000000001/0000000000000001/x/extra"} {
		if _, _, err := parseListKey(reservation.ListRefunds, bad); err == nil {
			t.Errorf("%q read as a refund row", bad)
		}
		if _, _, err := parseListKey(reservation.ListReservations, bad); err == nil {
			t.Errorf("%q read as a reservation row", bad)
		}
	}
}
