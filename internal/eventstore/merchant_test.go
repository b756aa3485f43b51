package eventstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
)

// TestStore_OutTradeNoPerMerchant: an order number is unique per merchant.
// Two merchants may each have order O1; the same merchant may not twice;
// and the default merchant, named or not, is one merchant whose orders
// take the key journals before merchants hold (the bare order number).
func TestStore_OutTradeNoPerMerchant(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	reg := func(id, merchant string) []reservation.Event {
		return []reservation.Event{{At: at, By: "test", Data: reservation.Registered{
			ReservationID: id, UserID: "u", OutTradeNo: "O1", Amount: 100, Currency: "CNY", Merchant: merchant}}}
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := be.open(t)
			s := eventstore.New(db)
			steps := []struct {
				id, merchant string
				taken        bool
			}{
				{"r-old", "", false},           // as written before merchants
				{"r-default", "default", true}, // the same merchant by name
				{"r-sh", "hotel-sh", false},
				{"r-bj", "hotel-bj", false},
				{"r-sh-2", "hotel-sh", true},
			}
			for _, st := range steps {
				if _, _, err := s.Load(ctx, st.id); err != nil {
					t.Fatal(err)
				}
				err := s.Append(ctx, st.id, nil, reg(st.id, st.merchant))
				if st.taken != errors.Is(err, reservation.ErrOutTradeNoTaken) || !st.taken && err != nil {
					t.Fatalf("registering %s for merchant %q: %v (want taken %v)", st.id, st.merchant, err, st.taken)
				}
			}
			for key, owner := range map[string]string{"O1": "r-old", "O1/hotel-sh": "r-sh", "O1/hotel-bj": "r-bj"} {
				if got, err := db.Lookup(ctx, eventstore.NamespaceOutTradeNo, key); err != nil || got != owner {
					t.Fatalf("claim %q owned by %q, %v; want %q", key, got, err, owner)
				}
			}
		})
	}
}
