package actors_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal/journaltest"
)

// Passivate stops one reservation's actor, PassivateAll every one, and the
// next message activates a fresh actor from the journal.
func TestEngine_PassivateHooks(t *testing.T) {
	e, err := actors.New(actors.Config{
		Store: eventstore.New(journaltest.Open(t)), Provider: simprovider.New(simprovider.Options{}), Encode: simprovider.Encode,
		Policy: reservation.Policy{RefundNoPrefix: "T"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range []string{"p1", "p2", "p3"} {
		if _, _, err := e.Execute(ctx, id, "test", reservation.Register{ReservationID: id, UserID: "u", OutTradeNo: "O-" + id, Amount: 100, Currency: "CNY"}); err != nil {
			t.Fatal(err)
		}
	}
	live := e.LiveIDs()
	slices.Sort(live)
	if !slices.Equal(live, []string{"p1", "p2", "p3"}) {
		t.Fatalf("live %v", live)
	}
	select {
	case <-e.Passivate("p2"):
	case <-ctx.Done():
		t.Fatal("p2 did not stop")
	}
	<-e.Passivate("nobody") // nothing live: closed at once
	if slices.Contains(e.LiveIDs(), "p2") || e.Active() != 2 {
		t.Fatalf("after passivating p2: live %v, active %d", e.LiveIDs(), e.Active())
	}
	if st, err := e.Get(ctx, "p2"); err != nil || st.Amount != 100 {
		t.Fatalf("p2 after passivation: %+v %v", st, err)
	}
	if err := e.PassivateAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.Active(); n != 0 {
		t.Fatalf("%d actors live after PassivateAll", n)
	}
}
