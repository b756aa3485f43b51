package webhook_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/feed/feedtest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

// TestDispatcher_PayloadNamesMerchant: every delivered payload names the
// reservation's merchant, the default one for a reservation registered
// without one (a journal written before reservations had merchants).
func TestDispatcher_PayloadNamesMerchant(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 7)
	h.Register("r-old", 1000)
	h.RegisterFor("r-sh", "hotel-sh", 1000)
	for _, id := range []string{"r-old", "r-sh"} {
		h.Result(id, h.Request(id, 400), reservation.Succeeded)
	}
	c := newConsumer(t, func(int, feed.Event) int { return http.StatusOK })
	d, err := webhook.New(fastConfig(db, endpointFor(c, "crm")))
	if err != nil {
		t.Fatal(err)
	}
	running(t, d)
	c.waitAll(t, h.Want)
	want := map[string]string{"r-old": reservation.DefaultMerchant, "r-sh": "hotel-sh"}
	for _, dl := range c.deliveries() {
		var body map[string]any
		if err := json.Unmarshal(dl.body, &body); err != nil {
			t.Fatal(err)
		}
		if body["merchant"] != want[dl.res] {
			t.Errorf("delivery %s of %s: body %s, want merchant %q", dl.id, dl.res, dl.body, want[dl.res])
		}
	}
}

// TestDispatcher_ParkedBeforeMerchants: an event parked by a release
// before events named their merchant reads as the default merchant's.
func TestDispatcher_ParkedBeforeMerchants(t *testing.T) {
	db := journaltest.Open(t)
	id := feed.ID(2)
	old := `{"event":{"id":"` + id + `","type":"refund.requested","schema_version":1,"global":2,` +
		`"reservation_id":"r1","user_id":"u-r1","out_trade_no":"ORD-r1","refund_no":"R-r1-1","amount":100,` +
		`"refunded":0,"paid":1000,"currency":"CNY","state":"PROCESSING","at":"2026-03-01T09:00:02Z","data":{}},` +
		`"attempts":3,"last_error":"HTTP 500","parked_at":"2026-03-01T09:01:00Z","replaying":false}`
	if err := db.WriteKV(bg, []journal.KV{{Key: "webhook/crm/parked/" + id, Value: []byte(old)}}, nil); err != nil {
		t.Fatal(err)
	}
	c := newConsumer(t, func(int, feed.Event) int { return http.StatusOK })
	d, err := webhook.New(fastConfig(db, endpointFor(c, "crm")))
	if err != nil {
		t.Fatal(err)
	}
	parked, err := d.Parked(bg, "crm")
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != 1 || parked[0].Event.ID != id || parked[0].Event.Merchant != reservation.DefaultMerchant {
		t.Fatalf("parked = %+v, want %s of the default merchant", parked, id)
	}
}
