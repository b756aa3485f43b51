package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal/journaltest"
)

// Tokens of the tenancy tests: the scoped ones see hotel-sh only.
const (
	tokScopedService  = "scoped-service-token-00001"
	tokScopedOperator = "scoped-operator-token-0001"
	tokAllService     = "all-service-token-00000001"
	tokAllOperator    = "all-operator-token-0000001"
)

// Parked webhook events of the fake dispatcher: one of each merchant.
const (
	evtSH = "evt_00000000000000000001"
	evtBJ = "evt_00000000000000000002"
)

// scopeWebhooks is a dispatcher with one endpoint, "crm", holding one
// parked event of each merchant.
type scopeWebhooks struct{}

func (scopeWebhooks) Lag(context.Context) ([]webhook.EndpointLag, error) {
	return []webhook.EndpointLag{{Name: "crm", Parked: 2}}, nil
}

func (scopeWebhooks) Parked(_ context.Context, endpoint string) ([]webhook.ParkedEvent, error) {
	if endpoint != "crm" {
		return nil, webhook.ErrUnknownEndpoint
	}
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	return []webhook.ParkedEvent{
		{Event: feed.Event{ID: evtSH, Type: feed.TypeRefundRequested, ReservationID: "a1", Merchant: "hotel-sh"}, ParkedAt: at},
		{Event: feed.Event{ID: evtBJ, Type: feed.TypeRefundRequested, ReservationID: "b1", Merchant: "hotel-bj"}, ParkedAt: at},
	}, nil
}

func (w scopeWebhooks) Replay(ctx context.Context, endpoint, id string) error {
	parked, err := w.Parked(ctx, endpoint)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(parked, func(e webhook.ParkedEvent) bool { return e.Event.ID == id }) {
		return webhook.ErrNotParked
	}
	return nil
}

func (w scopeWebhooks) ReplayAll(ctx context.Context, endpoint string) (int, error) {
	parked, err := w.Parked(ctx, endpoint)
	return len(parked), err
}

// scopeEnv serves every route family over a real engine and journal with
// two merchants: a1 (hotel-sh) and b1 (hotel-bj), each with one refund
// that WeChat Pay answered ABNORMAL (in the attention lists). It returns the env and each reservation's refund number.
func scopeEnv(t *testing.T) (*testEnv, map[string]string) {
	t.Helper()
	db := journaltest.Open(t)
	store := eventstore.New(db)
	engine, err := actors.New(actors.Config{Store: store, Provider: simprovider.New(simprovider.Options{Delay: time.Hour,
		Fault: func(op, _ string, _ int) (simprovider.Injected, bool) {
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeAbnormal, Code: "USER_ACCOUNT_ABNORMAL"}}, op == "submit"
		}}),
		Encode: simprovider.Encode, Logger: quietLogger(), Policy: reservation.Policy{RefundNoPrefix: "T"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = engine.Close(ctx)
	})
	var ts auth.Tokens
	file := "service " + auth.HashHex(tokScopedService) + " svc-sh merchants=hotel-sh\n" +
		"operator " + auth.HashHex(tokScopedOperator) + " op-sh merchants=hotel-sh\n" +
		"service " + auth.HashHex(tokAllService) + " svc\n" +
		"operator " + auth.HashHex(tokAllOperator) + " op\n"
	if err := auth.ParseFile(strings.NewReader(file), &ts); err != nil {
		t.Fatal(err)
	}
	h := api.New(engine, api.Options{
		Logger: quietLogger(), Auth: &ts, Merchants: []string{"hotel-sh", "hotel-bj"},
		Notify:   &api.NotifyConfig{Accounts: []api.NotifyAccount{{Name: "default", MchID: "1900000109", APIv2Key: []byte("k")}}},
		Events:   &api.EventsConfig{Feed: feed.New(db), Webhooks: scopeWebhooks{}, MaxWait: time.Second},
		Metrics:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("refundd_up 1\n")) }),
		Timeline: store,
		Search:   eventstore.Reader{DB: db},
		List:     eventstore.Reader{DB: db},
		Audit:    &api.AuditConfig{Journal: db},
		Totals:   eventstore.Totals{DB: db},
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &testEnv{handler: h, srv: srv, engine: engine}
	refunds := map[string]string{}
	for _, r := range []struct{ id, merchant string }{{"a1", "hotel-sh"}, {"b1", "hotel-bj"}} {
		if resp := e.do(t, http.MethodPost, "/v1/reservations", registerFor(r.id, r.merchant, "O-"+r.id), bearer(tokAllService)...); resp.status != http.StatusCreated {
			t.Fatalf("register %s: %s", r.id, resp)
		}
		resp := e.do(t, http.MethodPost, "/v1/reservations/"+r.id+"/refunds", `{"user_id":"u-`+r.id+`","amount":100}`,
			append(bearer(tokAllService), "Idempotency-Key", "k1")...)
		if resp.status != http.StatusAccepted && resp.status != http.StatusOK {
			t.Fatalf("refund %s: %s", r.id, resp)
		}
		var rf struct {
			RefundNo string `json:"refund_no"`
		}
		if err := json.Unmarshal(resp.body, &rf); err != nil {
			t.Fatal(err)
		}
		refunds[r.id] = rf.RefundNo
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err := engine.Await(ctx, r.id, func(st *reservation.State) bool {
			return st.Refund(rf.RefundNo).State == reservation.Abnormal
		})
		cancel()
		if err != nil {
			t.Fatalf("refund %s never became ABNORMAL: %v", r.id, err)
		}
	}
	return e, refunds
}

// sameAnswer fails unless two answers are the same bytes: status, body and
// every header but the request id and the date.
func sameAnswer(t *testing.T, what string, got, want response) {
	t.Helper()
	gh, wh := got.header.Clone(), want.header.Clone()
	for _, h := range []http.Header{gh, wh} {
		h.Del("X-Request-Id")
		h.Del("Date")
	}
	if got.status != want.status || string(got.body) != string(want.body) {
		t.Errorf("%s: another merchant's answer differs from an unknown one's:\n got %d %s\nwant %d %s", what, got.status, got.body, want.status, want.body)
		return
	}
	gj, _ := json.Marshal(gh)
	wj, _ := json.Marshal(wh)
	if string(gj) != string(wj) {
		t.Errorf("%s: headers differ: %s vs %s", what, gj, wj)
	}
}

// TestScope_OtherMerchantIsUnknown walks every route with tokens limited to
// hotel-sh. A route naming b1 (hotel-bj's) answers byte for byte what it
// answers for an id that does not exist; a registration for hotel-bj what
// one for an unconfigured merchant gets; lists and counts leave hotel-bj
// out; routes about every merchant at once are refused, and unscoped
// tokens keep today's answers. A route the walk does not know fails it,
// so a new route must state its rule here and in the permission table.
func TestScope_OtherMerchantIsUnknown(t *testing.T) {
	e, refunds := scopeEnv(t)
	bjRefund := refunds["b1"]
	const unknownID = "zz-unknown"
	// How each route treats hotel-sh's tokens.
	const (
		byID     = "reservation"
		filtered = "filtered"
		register = "register"
		refused  = "refused"
		public   = "public"
	)
	rules := map[string]string{
		"POST /v1/reservations":                                         register,
		"GET /v1/reservations/{id}":                                     byID,
		"POST /v1/reservations/{id}/refunds":                            byID,
		"GET /v1/reservations/{id}/refunds/{refund_no}":                 byID,
		"POST /v1/reservations/{id}/refunds/{refund_no}/resubmit":       byID,
		"POST /v1/reservations/{id}/refunds/{refund_no}/abandon":        byID,
		"POST /v1/reservations/{id}/refunds/{refund_no}/reconcile":      byID,
		"POST /v1/reservations/{id}/refunds/{refund_no}/resolve":        byID,
		"POST /v1/reservations/{id}/refunds/{refund_no}/apply-abnormal": byID,
		"POST /v1/reservations/{id}/refunds/{refund_no}/approve":        byID,
		"POST /v1/reservations/{id}/refunds/{refund_no}/reject":         byID,
		"GET /v1/reservations/{id}/events":                              byID,
		"POST /v1/webhooks/{endpoint}/parked/{event_id}/replay":         byID,
		"GET /v1/refunds":                                        filtered,
		"GET /v1/events":                                         filtered,
		"GET /v1/summary":                                        filtered,
		"GET /v1/totals":                                         filtered,
		"GET /v1/whoami":                                         filtered, // the caller itself, with its merchants
		"GET /v1/webhooks/{endpoint}/parked":                     filtered,
		"GET /v1/webhooks":                                       refused,
		"POST /v1/webhooks/{endpoint}/parked/replay":             refused,
		"GET /v1/notify/stats":                                   refused,
		"GET /v1/notify/quarantine":                              refused,
		"GET /v1/audit/head":                                     refused,
		"GET /v1/admin/backup":                                   refused,
		"GET /v1/admin/archive/{file}":                           refused,
		"GET /v1/admin/credentials":                              refused,
		"POST /v1/admin/credentials/reload":                      refused,
		"GET /metrics":                                           refused,
		"GET /healthz":                                           public,
		"GET /readyz":                                            public,
		"POST /v1/notify/wechatpay/refund":                       public,
		"POST /v1/notify/wechatpay/v2/refund":                    public,
		"POST /v1/notify/wechatpay/accounts/{account}/refund":    public,
		"POST /v1/notify/wechatpay/accounts/{account}/v2/refund": public,
		"GET /v1/search":                                         filtered,
		"GET /v1/reservations":                                   filtered,
		"GET /v1/openapi.json":                                   public,
		"GET /console":                                           public,
		"GET /console/":                                          public,
		"HEAD /console/":                                         public,
	}
	// Requests that reach past validation into the engine, and ones that
	// fail validation first: both must match an unknown id's.
	bodies := map[string][]struct{ body, key string }{
		"POST /v1/reservations/{id}/refunds": {
			{`{"user_id":"u-b1","amount":100}`, "k1"},
			{`{"user_id":"u-b1","amount":100}`, "k-new"},
			{`{"user_id":"u-b1","amount":0}`, "k-new"},
			{`{"user_id":"u-b1"}`, ""},
		},
		"POST /v1/reservations/{id}/refunds/{refund_no}/resolve": {{`{"reason":"settled by phone"}`, ""}, {"", ""}},
		"POST /v1/reservations/{id}/refunds/{refund_no}/abandon": {{`{"reason":"gone"}`, ""}, {`{"bogus":1}`, ""}},
		"POST /v1/reservations/{id}/refunds/{refund_no}/apply-abnormal": {
			{`{"type":"MERCHANT_BANK_CARD"}`, ""},
			{`{"type":"USER_BANK_CARD","bank_type":"ICBC_DEBIT","bank_account":"6222020200112233445","real_name":"x"}`, ""},
			{`{"type":"USER_BANK_CARD"}`, ""},
		},
	}
	scoped := []string{tokScopedService, tokScopedOperator}
	walked := map[string]bool{}
	err := e.handler.(*api.Server).Router().Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return nil
		}
		methods, _ := route.GetMethods()
		for _, m := range methods {
			key := m + " " + tpl
			walked[key] = true
			rule, ok := rules[key]
			if !ok {
				t.Errorf("%s: no tenancy rule; state one here and in the permission table", key)
				continue
			}
			switch rule {
			case byID:
				path := func(id, no, evt string) string {
					return strings.NewReplacer("{id}", id, "{refund_no}", no, "{endpoint}", "crm", "{event_id}", evt).Replace(tpl)
				}
				cases := bodies[key]
				if cases == nil {
					cases = []struct{ body, key string }{{"", ""}}
				}
				for _, tok := range scoped {
					for _, c := range cases {
						hdr := bearer(tok)
						if c.key != "" {
							hdr = append(hdr, "Idempotency-Key", c.key)
						}
						for _, q := range []string{"", "?wait=10ms"} {
							if m != http.MethodGet && q != "" {
								continue
							}
							got := e.do(t, m, path("b1", bjRefund, evtBJ)+q, c.body, hdr...)
							want := e.do(t, m, path(unknownID, bjRefund, "evt_00000000000000000099")+q, c.body, hdr...)
							sameAnswer(t, key+" "+c.body+q, got, want)
							if got.status < 400 {
								t.Errorf("%s: another merchant's answer is %d %s", key, got.status, got.body)
							}
						}
					}
				}
				// The token's own merchant's reservation is still served.
				if m == http.MethodGet {
					if r := e.do(t, m, path("a1", refunds["a1"], evtSH), "", bearer(tokScopedOperator)...); r.status != http.StatusOK {
						t.Errorf("%s for its own merchant: %s", key, r)
					}
				}
			case register:
				for _, tok := range scoped {
					got := e.do(t, m, tpl, registerFor("b2", "hotel-bj", "O-b2"), bearer(tok)...)
					want := e.do(t, m, tpl, registerFor("b2", "hotel-nowhere", "O-b2"), bearer(tok)...)
					sameAnswer(t, key, got, want)
				}
				// b1 is hotel-bj's: registering it for hotel-sh is the
				// conflict any other registration of the id gets.
				wantError(t, e.do(t, m, tpl, registerFor("b1", "hotel-sh", "O-b1"), bearer(tokScopedService)...), http.StatusConflict, "conflict", "*")
				if r := e.do(t, m, tpl, registerFor("a2", "hotel-sh", "O-a2"), bearer(tokScopedService)...); r.status != http.StatusCreated {
					t.Errorf("scoped registration for its own merchant: %s", r)
				}
			case refused:
				path := strings.NewReplacer("{endpoint}", "crm").Replace(tpl)
				if r := e.do(t, m, path, "", bearer(tokScopedOperator)...); r.status != http.StatusForbidden || errorOf(t, r).Code != "merchant_scope" {
					t.Errorf("%s with a scoped operator: %s, want 403 merchant_scope", key, r)
				}
				if r := e.do(t, m, path, "", bearer(tokAllOperator)...); r.status == http.StatusForbidden {
					t.Errorf("%s with an unscoped operator: %s", key, r)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range rules {
		if !walked[key] {
			t.Errorf("%s: in the rules but not a route", key)
		}
	}

	// Lists and counts: hotel-bj's reservation is absent for the scoped
	// token, as if never registered, and present for an unscoped one.
	lists := []struct {
		path        string
		scoped, all []string // what the answer must hold
		notScoped   []string // what the scoped answer must not hold
	}{
		{"/v1/refunds?state=ABNORMAL&limit=1", []string{`"a1"`, `"next":"a1/`}, []string{`"a1"`}, []string{`"b1"`}},
		{"/v1/refunds?state=ABNORMAL&limit=1&after=a1/" + refunds["a1"], []string{`{"refunds":[]}`}, []string{`"b1"`}, []string{`"b1"`}},
		{"/v1/refunds?state=ABNORMAL", []string{`"a1"`}, []string{`"a1"`, `"b1"`}, []string{`"b1"`, `"next"`}},
		// The lists: hotel-bj's rows are not there, by any filter; naming
		// hotel-bj is refused as a merchant that is not configured.
		{"/v1/refunds", []string{`"a1"`}, []string{`"a1"`, `"b1"`}, []string{`"b1"`, "hotel-bj"}},
		{"/v1/refunds?state=ABNORMAL,PROCESSING&order=asc", []string{`"a1"`}, []string{`"a1"`, `"b1"`}, []string{`"b1"`, "hotel-bj"}},
		{"/v1/refunds?limit=1", []string{`"a1"`}, []string{`"next_cursor"`}, []string{`"b1"`, `"next_cursor"`}},
		{"/v1/refunds?out_trade_no=O-b1", []string{`{"refunds":[]}`}, []string{`"b1"`}, []string{`"b1"`}},
		{"/v1/refunds?refund_no=" + refunds["b1"], []string{`{"refunds":[]}`}, []string{`"b1"`}, []string{`"b1"`}},
		{"/v1/refunds?user_id=u-b1", []string{`{"refunds":[]}`}, []string{`"b1"`}, []string{`"b1"`}},
		{"/v1/reservations", []string{`"a1"`}, []string{`"a1"`, `"b1"`}, []string{`"b1"`, "hotel-bj"}},
		{"/v1/reservations?order=asc&refund_state=ABNORMAL", []string{`"a1"`}, []string{`"a1"`, `"b1"`}, []string{`"b1"`, `"a2"`}},
		{"/v1/reservations?out_trade_no=O-b1", []string{`{"reservations":[]}`}, []string{`"b1"`}, []string{`"b1"`}},
		{"/v1/events?limit=1000", []string{`"a1"`}, []string{`"a1"`, `"b1"`}, []string{`"b1"`, "hotel-bj"}},
		{"/v1/webhooks/crm/parked", []string{evtSH}, []string{evtSH, evtBJ}, []string{evtBJ, "hotel-bj"}},
		{"/v1/totals", []string{`"merchant":"hotel-sh"`, `"in_flight":{"refunds":1,"amount":100}`},
			[]string{`"merchant":"hotel-bj"`, `"merchant":"hotel-sh"`, `"in_flight":{"refunds":2,"amount":200}`}, []string{"hotel-bj"}},
		{"/v1/totals?merchant=hotel-sh", []string{`"in_flight":{"refunds":1,"amount":100}`}, []string{`"in_flight":{"refunds":1,"amount":100}`}, []string{"hotel-bj"}},
		{"/v1/summary", []string{`"ABNORMAL":{"count":1,`}, []string{`"ABNORMAL":{"count":2,`, `"active_actors"`}, []string{`"active_actors"`, `"notifications"`, `"webhooks"`}},
	}
	for _, l := range lists {
		r := e.do(t, http.MethodGet, l.path, "", bearer(tokScopedOperator)...)
		all := e.do(t, http.MethodGet, l.path, "", bearer(tokAllOperator)...)
		if r.status != http.StatusOK || all.status != http.StatusOK {
			t.Errorf("%s: scoped %s, unscoped %s", l.path, r, all)
			continue
		}
		for _, want := range l.scoped {
			if !strings.Contains(string(r.body), want) {
				t.Errorf("%s scoped: %s; want %s", l.path, r.body, want)
			}
		}
		for _, not := range l.notScoped {
			if strings.Contains(string(r.body), not) {
				t.Errorf("%s scoped: %s; want no %s", l.path, r.body, not)
			}
		}
		for _, want := range l.all {
			if !strings.Contains(string(all.body), want) {
				t.Errorf("%s unscoped: %s; want %s", l.path, all.body, want)
			}
		}
	}
	// Another merchant's totals are refused to a scoped token exactly as a
	// merchant that is not configured.
	sameAnswer(t, "GET /v1/totals?merchant=",
		e.do(t, http.MethodGet, "/v1/totals?merchant=hotel-bj", "", bearer(tokScopedOperator)...),
		e.do(t, http.MethodGet, "/v1/totals?merchant=hotel-nowhere", "", bearer(tokScopedOperator)...))
	if r := e.do(t, http.MethodGet, "/v1/totals?merchant=hotel-bj", "", bearer(tokAllOperator)...); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), `"in_flight":{"refunds":1,"amount":100}`) || strings.Contains(string(r.body), "hotel-sh") {
		t.Errorf("totals of hotel-bj for an unscoped token: %s", r)
	}
}

// TestScope_ListsRefuseAnotherMerchantAsUnknown: a scoped token naming
// another merchant in a list's filter gets what a merchant that is not
// configured gets.
func TestScope_ListsRefuseAnotherMerchantAsUnknown(t *testing.T) {
	e, _ := scopeEnv(t)
	for _, path := range []string{"/v1/refunds", "/v1/reservations"} {
		got := e.do(t, http.MethodGet, path+"?merchant=hotel-bj", "", bearer(tokScopedOperator)...)
		want := e.do(t, http.MethodGet, path+"?merchant=hotel-nowhere", "", bearer(tokScopedOperator)...)
		sameAnswer(t, path, got, want)
		wantError(t, got, http.StatusBadRequest, "invalid_argument", "merchant")
		if r := e.do(t, http.MethodGet, path+"?merchant=hotel-bj", "", bearer(tokAllOperator)...); r.status != http.StatusOK || !strings.Contains(string(r.body), `"b1"`) {
			t.Errorf("%s?merchant=hotel-bj unscoped: %s", path, r)
		}
	}
}
