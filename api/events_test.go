package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/feed/feedtest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

// evServer serves the event routes over db; engine may be nil when no
// reservation route is used.
func evServer(t *testing.T, db *journal.DB, engine api.Engine, wh api.Webhooks) *httptest.Server {
	t.Helper()
	s := api.New(engine, api.Options{Logger: quietLogger(), Events: &api.EventsConfig{
		Feed: feed.New(db), Webhooks: wh, MaxWait: 5 * time.Second}})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

type evPage struct {
	Events []feed.Event `json:"events"`
	Next   string       `json:"next"`
}

func evGet(t *testing.T, srv *httptest.Server, path string) (int, []byte) {
	t.Helper()
	status, b, err := evGetErr(srv, path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return status, b
}

// evGetErr is evGet for goroutines other than the test's.
func evGetErr(srv *httptest.Server, path string) (int, []byte, error) {
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func evPageAt(t *testing.T, srv *httptest.Server, path string) evPage {
	t.Helper()
	status, b := evGet(t, srv, path)
	if status != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, status, b)
	}
	var p evPage
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, b)
	}
	if p.Events == nil {
		t.Fatalf("GET %s: events is null, want a list: %s", path, b)
	}
	return p
}

// evReadAll follows "next" from after until it stops moving.
func evReadAll(t *testing.T, srv *httptest.Server, after string, query string) []feed.Event {
	t.Helper()
	var all []feed.Event
	for {
		p := evPageAt(t, srv, "/v1/events?after="+after+query)
		all = append(all, p.Events...)
		if p.Next == after {
			return all
		}
		after = p.Next
	}
}

func TestEvents_PagesFromAnyCursor(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 21)
	h.Steps(150)
	srv := evServer(t, db, nil, nil)

	want, _, err := feed.Read(context.Background(), db, 0, feed.MaxLimit, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != len(h.Want) {
		t.Fatalf("feed has %d events, history %d", len(want), len(h.Want))
	}
	wantJSON, _ := json.Marshal(want)
	gotJSON, _ := json.Marshal(evReadAll(t, srv, "0", "&limit=7"))
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("pages of 7 from 0:\n got %s\nwant %s", gotJSON, wantJSON)
	}
	// No after at all means from the beginning; the default page is 100.
	if p := evPageAt(t, srv, "/v1/events"); len(p.Events) != min(len(want), feed.DefaultLimit) || p.Events[0].ID != want[0].ID {
		t.Fatalf("default page: %d events", len(p.Events))
	}
	// A cursor may be an event id: "after that event".
	mid := want[len(want)/2]
	byID := evReadAll(t, srv, mid.ID, "&limit=5")
	byNum := evReadAll(t, srv, fmt.Sprint(mid.Global), "&limit=5")
	a, _ := json.Marshal(byID)
	b, _ := json.Marshal(byNum)
	c, _ := json.Marshal(want[len(want)/2+1:])
	if string(a) != string(c) || string(b) != string(c) {
		t.Fatalf("from %s: by id %d events, by number %d, want %d", mid.ID, len(byID), len(byNum), len(want)/2)
	}
	// Types filter.
	got := evReadAll(t, srv, "0", "&types=refund.failed,reservation.canceled")
	var n int
	for _, w := range h.Want {
		if w.Type == "refund.failed" || w.Type == "reservation.canceled" {
			n++
		}
	}
	if len(got) != n {
		t.Fatalf("filtered: %d events, want %d", len(got), n)
	}
	for _, e := range got {
		if e.Type != "refund.failed" && e.Type != "reservation.canceled" {
			t.Fatalf("filter let through %s", e.Type)
		}
	}
}

func TestEvents_LongPoll(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 22)
	h.Register("r1", 1000)
	h.Request("r1", 100)
	srv := evServer(t, db, nil, nil)
	head := fmt.Sprint(h.Records)

	// Nothing new and a short wait: an empty page that keeps the cursor.
	start := time.Now()
	p := evPageAt(t, srv, "/v1/events?after="+head+"&wait=50ms")
	if len(p.Events) != 0 || p.Next != head || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("short wait at the head: %+v after %s", p, time.Since(start))
	}

	// A long wait ends as soon as an event is committed.
	type result struct {
		p    evPage
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		status, b, _ := evGetErr(srv, "/v1/events?after="+head+"&wait=5s")
		var p evPage
		if status == http.StatusOK {
			_ = json.Unmarshal(b, &p)
		}
		done <- result{p, time.Since(start)}
	}()
	select {
	case r := <-done:
		t.Fatalf("long poll answered before anything happened: %+v", r.p)
	case <-time.After(100 * time.Millisecond):
	}
	no := h.Request("r1", 200)
	r := <-done
	if len(r.p.Events) != 1 || r.p.Events[0].RefundNo != no || r.took >= 5*time.Second {
		t.Fatalf("long poll got %+v after %s; want the new refund at once", r.p, r.took)
	}
	// Records that make no event (a provider query) do not end the wait
	// early with an empty page; the cursor still moves past them.
	go func() {
		status, b, _ := evGetErr(srv, "/v1/events?after="+r.p.Next+"&wait=5s&types=refund.failed")
		var p evPage
		if status == http.StatusOK {
			_ = json.Unmarshal(b, &p)
		}
		done <- result{p, 0}
	}()
	h.Noise("r1", no)
	h.Result("r1", no, reservation.Failed)
	r = <-done
	if len(r.p.Events) != 1 || r.p.Events[0].Type != "refund.failed" || r.p.Next != fmt.Sprint(h.Records) {
		t.Fatalf("filtered long poll: %+v (records %d)", r.p, h.Records)
	}
}

func TestEvents_BadQuery(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 23)
	h.Register("r1", 1000)
	h.Request("r1", 100)
	srv := evServer(t, db, nil, nil)
	tests := []struct{ query, field string }{
		{"after=-1", "after"},
		{"after=abc", "after"},
		{"after=1.5", "after"},
		{"after=%2B1", "after"},
		{"after=", "after"},
		{"after=99999999999999999999999", "after"},
		{"after=evt_1", "after"},
		{"after=evt_00000000000000000000", "after"},
		{"after=4", "after"}, // beyond the end: 3 records
		{"after=1&after=2", "after"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=x", "limit"},
		{"limit=%2B5", "limit"},
		{"limit=", "limit"},
		{"types=refund.nope", "types"},
		{"types=", "types"},
		{"types=refund.requested,,refund.failed", "types"},
		{"types=refund.requested,", "types"},
		{"wait=x", "wait"},
		{"wait=-1s", "wait"},
		{"wait=5", "wait"},
		{"cursor=1", "cursor"},
		{"Limit=5", "Limit"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			status, b := evGet(t, srv, "/v1/events?"+tt.query)
			var e struct {
				Error struct{ Code, Field, Message string } `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("%d %s: %v", status, b, err)
			}
			if status != http.StatusBadRequest || e.Error.Code != "invalid_argument" || e.Error.Field != tt.field {
				t.Fatalf("= %d %s; want 400 naming %q", status, b, tt.field)
			}
		})
	}
	// The edges that are fine.
	for _, q := range []string{"after=3", "after=0&limit=1000", "limit=1&types=refund.requested", "wait=0s", "wait=1h&after=0"} {
		if status, b := evGet(t, srv, "/v1/events?"+q); status != http.StatusOK {
			t.Errorf("%s = %d %s", q, status, b)
		}
	}
}

// TestEvents_Engine runs the real engine behind the API: a reservation
// refunded in two parts shows up in the feed with its amounts.
func TestEvents_Engine(t *testing.T) {
	db := journaltest.Open(t)
	engine, err := actors.New(actors.Config{
		Store: eventstore.New(db), Provider: simprovider.New(simprovider.Options{}), Encode: simprovider.Encode, Logger: quietLogger(),
		Policy: reservation.Policy{RefundNoPrefix: "T"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close(context.Background()) })
	srv := evServer(t, db, engine, nil)
	post := func(path, body string, hdr ...string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if len(hdr) == 2 {
			req.Header.Set(hdr[0], hdr[1])
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("POST %s = %d %s", path, resp.StatusCode, b)
		}
	}
	post("/v1/reservations", `{"id":"res-1","user_id":"u1","out_trade_no":"ORD-1","amount":10000,"currency":"CNY"}`)
	post("/v1/reservations/res-1/refunds?wait=2s", `{"user_id":"u1","amount":3000}`, "Idempotency-Key", "k1")
	post("/v1/reservations/res-1/refunds?wait=2s", `{"user_id":"u1"}`, "Idempotency-Key", "k2")

	var got []feed.Event
	after := "0"
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 5 && time.Now().Before(deadline) {
		p := evPageAt(t, srv, "/v1/events?wait=1s&after="+after)
		got = append(got, p.Events...)
		after = p.Next
	}
	var lines []string
	for _, e := range got {
		lines = append(lines, fmt.Sprintf("%s %s %d %d/%d", e.Type, e.RefundNo, e.Amount, e.Refunded, e.Paid))
	}
	want := []string{
		"refund.requested T-res-1-1 3000 0/10000",
		"refund.succeeded T-res-1-1 3000 3000/10000",
		"refund.requested T-res-1-2 7000 3000/10000",
		"refund.succeeded T-res-1-2 7000 10000/10000",
		"reservation.canceled  0 10000/10000",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("feed:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestWebhooks_Routes(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 24)
	h.Register("r1", 1000)
	no := h.Request("r1", 100)
	h.Result("r1", no, reservation.Succeeded)
	var mu sync.Mutex
	down := true
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(receiver.Close)
	d, err := webhook.New(webhook.Config{DB: db, Logger: quietLogger(), MaxAttempts: 2,
		BackoffBase: time.Millisecond, BackoffMax: time.Millisecond,
		Endpoints: []webhook.Endpoint{{Name: "crm", URL: receiver.URL, Secret: []byte("0123456789abcdef")}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })
	srv := evServer(t, db, nil, d)

	type parkedBody struct {
		Endpoint string                `json:"endpoint"`
		Parked   []webhook.ParkedEvent `json:"parked"`
	}
	var parked parkedBody
	deadline := time.Now().Add(10 * time.Second)
	for len(parked.Parked) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("events never parked: %+v", parked)
		}
		status, b := evGet(t, srv, "/v1/webhooks/crm/parked")
		if status != http.StatusOK {
			t.Fatalf("parked = %d %s", status, b)
		}
		if err := json.Unmarshal(b, &parked); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	first := parked.Parked[0]
	if first.Event.Type != "refund.requested" || first.Attempts != 2 || parked.Parked[1].HeldBehind != first.Event.ID {
		t.Fatalf("parked = %+v", parked)
	}

	status, b := evGet(t, srv, "/v1/webhooks")
	var lag struct {
		Endpoints []map[string]any `json:"endpoints"`
	}
	if err := json.Unmarshal(b, &lag); err != nil || status != http.StatusOK || len(lag.Endpoints) != 1 {
		t.Fatalf("webhooks = %d %s", status, b)
	}
	if e := lag.Endpoints[0]; e["name"] != "crm" || e["parked"] != 2.0 || e["oldest_undelivered_age_seconds"].(float64) <= 0 {
		t.Fatalf("lag view = %v", e)
	}

	replay := func(path string) (int, string) {
		resp, err := srv.Client().Post(srv.URL+path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tt := range []struct {
		path   string
		status int
		field  string
	}{
		{"/v1/webhooks/nope/parked/" + first.Event.ID + "/replay", 404, `"field":"endpoint"`},
		{"/v1/webhooks/crm/parked/evt_00000000000000000099/replay", 404, `"field":"event_id"`},
		{"/v1/webhooks/crm/parked/evt_9/replay", 400, `"field":"event_id"`},
	} {
		if status, body := replay(tt.path); status != tt.status || !strings.Contains(body, tt.field) {
			t.Errorf("POST %s = %d %s; want %d naming %s", tt.path, status, body, tt.status, tt.field)
		}
	}
	if status, body := replay("/v1/webhooks/nope/parked/replay"); status != http.StatusNotFound {
		t.Errorf("replay all at an unknown endpoint = %d %s", status, body)
	}
	if status, b := evGet(t, srv, "/v1/webhooks/nope/parked"); status != http.StatusNotFound {
		t.Errorf("unknown endpoint's parked list = %d %s", status, b)
	}

	mu.Lock()
	down = false
	mu.Unlock()
	if status, body := replay("/v1/webhooks/crm/parked/" + first.Event.ID + "/replay"); status != http.StatusAccepted {
		t.Fatalf("replay = %d %s", status, body)
	}
	// Everything parked is now queued: replaying all counts them.
	if status, body := replay("/v1/webhooks/crm/parked/replay"); status != http.StatusAccepted ||
		!strings.Contains(body, `"replaying":`) {
		t.Fatalf("replay all = %d %s", status, body)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, b := evGet(t, srv, "/v1/webhooks/crm/parked")
		if err := json.Unmarshal(b, &parked); err != nil {
			t.Fatal(err)
		}
		if len(parked.Parked) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replayed events still parked: %+v", parked)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWebhooks_RoutesAbsentWithoutDispatcher(t *testing.T) {
	db := journaltest.Open(t)
	srv := evServer(t, db, nil, nil)
	if status, b := evGet(t, srv, "/v1/webhooks"); status != http.StatusNotFound || !strings.Contains(string(b), "route_not_found") {
		t.Fatalf("/v1/webhooks without a dispatcher = %d %s", status, b)
	}
	plain := httptest.NewServer(api.New(nil, api.Options{Logger: quietLogger()}))
	defer plain.Close()
	if status, b := evGet(t, plain, "/v1/events"); status != http.StatusNotFound {
		t.Fatalf("/v1/events without Options.Events = %d %s", status, b)
	}
}

// TestEvents_DoneEndsLongPolls: closing EventsConfig.Done (a server
// shutting down) answers waiting long-polls at once with an empty page.
func TestEvents_DoneEndsLongPolls(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 25)
	h.Register("r1", 1000)
	done := make(chan struct{})
	srv := httptest.NewServer(api.New(nil, api.Options{Logger: quietLogger(), Events: &api.EventsConfig{
		Feed: feed.New(db), MaxWait: time.Minute, Done: done}}))
	defer srv.Close()
	type result struct {
		status int
		body   []byte
		took   time.Duration
	}
	got := make(chan result, 1)
	go func() {
		start := time.Now()
		status, b, _ := evGetErr(srv, "/v1/events?after=1&wait=30s")
		got <- result{status, b, time.Since(start)}
	}()
	select {
	case r := <-got:
		t.Fatalf("long poll answered early: %d %s", r.status, r.body)
	case <-time.After(100 * time.Millisecond):
	}
	close(done)
	r := <-got
	if r.status != http.StatusOK || string(r.body) != `{"events":[],"next":"1"}`+"\n" || r.took > 10*time.Second {
		t.Fatalf("after Done: %d %q in %s", r.status, r.body, r.took)
	}
	// New long-polls answer at once too.
	start := time.Now()
	if p := evPageAt(t, srv, "/v1/events?after=1&wait=30s"); len(p.Events) != 0 || time.Since(start) > 10*time.Second {
		t.Fatalf("long poll after Done: %+v in %s", p, time.Since(start))
	}
}
