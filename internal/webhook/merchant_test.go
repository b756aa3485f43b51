package webhook_test

import (
	"encoding/json"
	"errors"
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

// TestDispatcher_SubscribedMerchants: an endpoint subscribed to some
// merchants receives exactly their events; another merchant's events are
// skipped, not parked, even while the endpoint refuses everything, and do
// not count as undelivered in its lag.
func TestDispatcher_SubscribedMerchants(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 8)
	merchantOf := map[string]string{"r-old": reservation.DefaultMerchant, "r-sh": "hotel-sh", "r-bj": "hotel-bj", "r-sh2": "hotel-sh"}
	for _, id := range []string{"r-old", "r-sh", "r-bj", "r-sh2"} {
		if id == "r-old" {
			h.Register(id, 1000)
		} else {
			h.RegisterFor(id, merchantOf[id], 1000)
		}
		h.Result(id, h.Request(id, 300), reservation.Succeeded)
		h.Request(id, 200)
	}
	var shWant []feedtest.Want
	downWant := 0
	for _, w := range h.Want {
		switch merchantOf[w.ReservationID] {
		case "hotel-sh":
			shWant = append(shWant, w)
		case "hotel-bj", reservation.DefaultMerchant:
			downWant++
		}
	}
	all := newConsumer(t, func(int, feed.Event) int { return http.StatusOK })
	sh := newConsumer(t, func(int, feed.Event) int { return http.StatusOK })
	down := newConsumer(t, func(int, feed.Event) int { return http.StatusInternalServerError })
	epAll := endpointFor(all, "all")
	epSh := endpointFor(sh, "sh")
	epSh.Merchants = []string{"hotel-sh"}
	epDown := endpointFor(down, "down")
	epDown.Merchants = []string{"hotel-bj", reservation.DefaultMerchant}
	cfg := fastConfig(db, epAll, epSh, epDown)
	cfg.MaxAttempts = 2
	cfg.Merchants = []string{reservation.DefaultMerchant, "hotel-sh", "hotel-bj"}
	d, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, d)
	all.waitAll(t, h.Want)
	sh.waitAll(t, shWant)
	waitCaughtUp(t, d)
	all.check(t, h.Want)
	sh.check(t, shWant)

	parked := waitParked(t, d, "down", downWant) // the first of each reservation, the rest held behind it
	for _, p := range parked {
		if m := merchantOf[p.Event.ReservationID]; m != "hotel-bj" && m != reservation.DefaultMerchant {
			t.Errorf("down parked %s of %s (merchant %s), not one of its merchants", p.Event.ID, p.Event.ReservationID, m)
		}
	}
	for _, dl := range down.deliveries() {
		if m := merchantOf[dl.res]; m == "hotel-sh" {
			t.Errorf("down was sent %s of %s (merchant %s)", dl.id, dl.res, m)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// While stopped, only hotel-bj moves: sh has nothing undelivered,
	// down has (besides its parked events, already the oldest).
	h.Result("r-bj", h.Request("r-bj", 100), reservation.Succeeded)
	lags, err := d.Lag(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lags {
		if l.EventsBehind == 0 {
			t.Errorf("%s: EventsBehind 0 with records after its cursor", l.Name)
		}
		if undelivered := l.OldestUndeliveredAge > 0; undelivered != (l.Name != "sh") {
			t.Errorf("%s: OldestUndeliveredAge %s, want > 0 only for endpoints taking hotel-bj", l.Name, l.OldestUndeliveredAge)
		}
	}
}

// TestDispatcher_NarrowedKeepsOthersParked: events parked while an
// endpoint took every merchant stay stored when it narrows to one; they
// are not listed, counted, replayed or holding anything back, and come
// back when it widens again.
func TestDispatcher_NarrowedKeepsOthersParked(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 9)
	h.RegisterFor("r-sh", "hotel-sh", 1000)
	h.Request("r-sh", 100)
	h.RegisterFor("r-bj", "hotel-bj", 1000)
	h.Request("r-bj", 100)
	down := newConsumer(t, func(int, feed.Event) int { return http.StatusInternalServerError })
	cfg := fastConfig(db, endpointFor(down, "crm"))
	cfg.MaxAttempts = 1
	cfg.Merchants = []string{"hotel-sh", "hotel-bj"}
	d, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, d)
	all := waitParked(t, d, "crm", 2)
	waitCaughtUp(t, d)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{} // merchant -> parked event id
	for _, p := range all {
		ids[p.Event.Merchant] = p.Event.ID
	}

	narrow := cfg
	ep := endpointFor(down, "crm")
	ep.Merchants = []string{"hotel-sh"}
	narrow.Endpoints = []webhook.Endpoint{ep}
	d, err = webhook.New(narrow)
	if err != nil {
		t.Fatal(err)
	}
	parked, err := d.Parked(bg, "crm")
	if err != nil || len(parked) != 1 || parked[0].Event.ID != ids["hotel-sh"] {
		t.Fatalf("narrowed to hotel-sh, parked = %+v, %v; want only %s", parked, err, ids["hotel-sh"])
	}
	lags, err := d.Lag(bg)
	if err != nil || lags[0].Parked != 1 {
		t.Fatalf("narrowed lag = %+v, %v; want 1 parked", lags, err)
	}
	if err := d.Replay(bg, "crm", ids["hotel-bj"]); !errors.Is(err, webhook.ErrNotParked) {
		t.Fatalf("replay of hotel-bj's event at a hotel-sh endpoint: %v, want ErrNotParked", err)
	}
	if n, err := d.ReplayAll(bg, "crm"); err != nil || n != 1 {
		t.Fatalf("ReplayAll narrowed: %d, %v; want 1", n, err)
	}

	d, err = webhook.New(cfg) // widened again
	if err != nil {
		t.Fatal(err)
	}
	if parked, err := d.Parked(bg, "crm"); err != nil || len(parked) != 2 {
		t.Fatalf("widened again, parked = %+v, %v; want both", parked, err)
	}
}
