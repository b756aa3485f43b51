package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal"
)

func registerFor(id, merchant, outTradeNo string) string {
	m := map[string]any{"id": id, "user_id": "u-" + id, "out_trade_no": outTradeNo, "amount": 1000, "currency": "CNY"}
	if merchant != "" {
		m["merchant"] = merchant
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestRegister_Merchant: a registration names a configured merchant, or
// none while only one is configured (today's single-merchant service: the
// default one). An unknown merchant, or none among several, is refused
// naming the field; the merchant is part of the registration (another
// merchant's repeat is a conflict) and order numbers are unique per
// merchant.
func TestRegister_Merchant(t *testing.T) {
	type step struct {
		id, merchant, order string
		status              int
		code, field         string // the error's, when status >= 400
		want                string // the reservation's merchant, when registered
	}
	tests := []struct {
		name      string
		merchants []string
		steps     []step
	}{
		{"none configured: the default, named or not", nil, []step{
			{"r1", "", "O1", http.StatusCreated, "", "", "default"},
			{"r1", "default", "O1", http.StatusOK, "", "", "default"},
			{"r2", "default", "O2", http.StatusCreated, "", "", "default"},
			{"r2", "", "O2", http.StatusOK, "", "", "default"},
			{"r3", "default", "O1", http.StatusConflict, "out_trade_no_taken", "", ""},
			{"r4", "hotel-sh", "O4", http.StatusBadRequest, "invalid_argument", "merchant", ""},
			{"r1", "hotel-sh", "O1", http.StatusBadRequest, "invalid_argument", "merchant", ""},
		}},
		{"one configured: it is the default", []string{"hotel-sh"}, []step{
			{"r1", "", "O1", http.StatusCreated, "", "", "hotel-sh"},
			{"r1", "hotel-sh", "O1", http.StatusOK, "", "", "hotel-sh"},
			{"r2", "default", "O2", http.StatusBadRequest, "invalid_argument", "merchant", ""},
		}},
		{"several configured", []string{"hotel-sh", "hotel-bj"}, []step{
			{"r1", "", "O1", http.StatusBadRequest, "invalid_argument", "merchant", ""},
			{"r1", "hotel-sh", "O1", http.StatusCreated, "", "", "hotel-sh"},
			{"r2", "hotel-bj", "O1", http.StatusCreated, "", "", "hotel-bj"},
			{"r3", "hotel-sh", "O1", http.StatusConflict, "out_trade_no_taken", "", ""},
			{"r1", "hotel-bj", "O1", http.StatusConflict, "conflict", "", ""},
			{"r1", "hotel-sh", "O1", http.StatusOK, "", "", "hotel-sh"},
			{"r4", "hotel-gz", "O4", http.StatusBadRequest, "invalid_argument", "merchant", ""},
			{"r4", "hotel/sh", "O4", http.StatusBadRequest, "invalid_argument", "merchant", ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{api: api.Options{Merchants: tt.merchants}})
			for _, s := range tt.steps {
				r := e.do(t, http.MethodPost, "/v1/reservations", registerFor(s.id, s.merchant, s.order))
				if s.status >= 400 {
					wantError(t, r, s.status, s.code, s.field)
					continue
				}
				if v := decodeReservation(t, r, s.status); v.Merchant != s.want {
					t.Fatalf("%s for %q: merchant %q, want %q: %s", s.id, s.merchant, v.Merchant, s.want, r.body)
				}
			}
			// The merchant never changes: the refusals above left every
			// reservation as first registered.
			for _, s := range tt.steps {
				if s.status == http.StatusCreated {
					if v := e.get(t, s.id); v.Merchant != s.want {
						t.Fatalf("%s: merchant %q after the refusals, want %q", s.id, v.Merchant, s.want)
					}
				}
			}
		})
	}
}

// TestMerchant_InEveryView: the refund answers and the reservation's
// refunds name the reservation's merchant.
func TestMerchant_InEveryView(t *testing.T) {
	e := newEnv(t, envOptions{delay: time.Hour, api: api.Options{Merchants: []string{"hotel-sh", "hotel-bj"}}})
	decodeReservation(t, e.do(t, http.MethodPost, "/v1/reservations", registerFor("r1", "hotel-bj", "O1")), http.StatusCreated)
	created := e.refund(t, "r1", "k1", `{"user_id":"u-r1","amount":100}`)
	rf := decodeRefund(t, created, http.StatusAccepted)
	if rf.Merchant != "hotel-bj" {
		t.Fatalf("POST refund: %s", created.body)
	}
	got := e.do(t, http.MethodGet, "/v1/reservations/r1/refunds/"+rf.RefundNo, "")
	if v := decodeRefund(t, got, http.StatusOK); v.Merchant != "hotel-bj" {
		t.Fatalf("GET refund: %s", got.body)
	}
	if v := e.get(t, "r1"); v.Merchant != "hotel-bj" || len(v.Refunds) != 1 || v.Refunds[0].Merchant != "hotel-bj" {
		t.Fatalf("GET reservation: %+v", v)
	}
}

// TestPremerchantFixture_API: the journals written by the release before
// reservations had merchants, served by this build: every reservation,
// refund, timeline and attention list shows the default merchant, a
// registration repeated as that release's clients send it (no merchant) is
// the same registration, and its order number is still taken.
func TestPremerchantFixture_API(t *testing.T) {
	tests := []struct {
		name      string
		ids       []string
		refunds   int
		attention []string // the lists holding one refund each
	}{
		{"premerchant", []string{"r1", "r2", "r3", "r4", "r5"}, 7, nil},
		{"premerchant-open", []string{"o1", "o2", "o3"}, 4, []string{"REJECTED", "ABNORMAL", "UNKNOWN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := fixtureEnv(t, tt.name)
			refunds := 0
			for _, id := range tt.ids {
				v := e.get(t, id)
				if v.Merchant != reservation.DefaultMerchant {
					t.Fatalf("%s: merchant %q", id, v.Merchant)
				}
				for _, rf := range v.Refunds {
					refunds++
					got := e.do(t, http.MethodGet, "/v1/reservations/"+id+"/refunds/"+rf.RefundNo, "")
					if r := decodeRefund(t, got, http.StatusOK); r.Merchant != reservation.DefaultMerchant {
						t.Fatalf("refund %s: %s", rf.RefundNo, got.body)
					}
				}
				tl := e.do(t, http.MethodGet, "/v1/reservations/"+id+"/events", "")
				var body struct {
					Merchant string `json:"merchant"`
				}
				if tl.status != http.StatusOK || json.Unmarshal(tl.body, &body) != nil || body.Merchant != reservation.DefaultMerchant {
					t.Fatalf("timeline of %s: %d %s", id, tl.status, tl.body)
				}
			}
			if refunds != tt.refunds {
				t.Fatalf("%d refunds, the fixture holds %d", refunds, tt.refunds)
			}
			for _, state := range tt.attention {
				list := e.do(t, http.MethodGet, "/v1/refunds?state="+state, "")
				var att struct {
					Refunds []refundJSON `json:"refunds"`
				}
				if list.status != http.StatusOK || json.Unmarshal(list.body, &att) != nil || len(att.Refunds) != 1 ||
					att.Refunds[0].Merchant != reservation.DefaultMerchant {
					t.Fatalf("attention list %s: %d %s", state, list.status, list.body)
				}
			}
			// As that release's booking system sends it again: the same
			// registration.
			first := e.get(t, tt.ids[0])
			repeat, _ := json.Marshal(map[string]any{"id": first.ID, "user_id": first.UserID, "out_trade_no": first.OutTradeNo,
				"amount": first.Amount, "currency": "CNY", "paid_at": first.PaidAt})
			if v := decodeReservation(t, e.do(t, http.MethodPost, "/v1/reservations", string(repeat)), http.StatusOK); v.Merchant != reservation.DefaultMerchant {
				t.Fatalf("repeated registration: %+v", v)
			}
			// Its order number is still taken: the old claim holds.
			wantError(t, e.do(t, http.MethodPost, "/v1/reservations", registerFor("n9", "", first.OutTradeNo)),
				http.StatusConflict, "out_trade_no_taken", "")
		})
	}
}

// fixtureEnv serves a copy of the journal fixture internal/audit/testdata/
// NAME.db with this build's engine and API. The clock stands still just
// after the fixtures' last events and no scheduler runs, so their refunds
// stay as the old release left them.
func fixtureEnv(t *testing.T, name string) *testEnv {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "internal", "audit", "testdata", name+".db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".db")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store := eventstore.New(db)
	end := time.Date(2026, 3, 1, 2, 10, 0, 0, time.UTC)
	now := func() time.Time { return end }
	engine, err := actors.New(actors.Config{Store: store, Provider: simprovider.New(simprovider.Options{Delay: time.Hour, Now: now}),
		Encode: simprovider.Encode, Logger: quietLogger(), Now: now, Policy: reservation.Policy{RefundNoPrefix: "T"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = engine.Close(ctx)
	})
	return &testEnv{handler: api.New(engine, api.Options{Logger: quietLogger(), Timeline: store}), engine: engine}
}

// TestServer_AddMerchants: a merchant added while the server runs (a
// reload) may be named by registrations from then on; one not added
// stays refused, and a registration naming none keeps going to the
// merchant that was alone at start.
func TestServer_AddMerchants(t *testing.T) {
	e := newEnv(t, envOptions{api: api.Options{Merchants: []string{"hotel-sh"}}})
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations", registerFor("r1", "hotel-bj", "O1")), http.StatusBadRequest, "invalid_argument", "merchant")
	e.handler.(*api.Server).AddMerchants("hotel-bj")
	if v := decodeReservation(t, e.do(t, http.MethodPost, "/v1/reservations", registerFor("r1", "hotel-bj", "O1")), http.StatusCreated); v.Merchant != "hotel-bj" {
		t.Fatalf("r1: merchant %q", v.Merchant)
	}
	if v := decodeReservation(t, e.do(t, http.MethodPost, "/v1/reservations", registerFor("r2", "", "O2")), http.StatusCreated); v.Merchant != "hotel-sh" {
		t.Fatalf("r2 naming none: merchant %q, want the one at start", v.Merchant)
	}
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations", registerFor("r3", "hotel-gz", "O3")), http.StatusBadRequest, "invalid_argument", "merchant")
}
