package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/feed/feedtest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

var bg = context.Background()

var testSecret = []byte("test-secret-0123456789")

// delivery is one request the consumer received.
type delivery struct {
	id       string
	res      string
	global   uint64
	body     []byte
	status   int // what the consumer answered; 0 = it hung until the sender gave up
	accepted bool
}

// consumer is a webhook receiver that records every request and answers as
// decide says: a status, or 0 to hang until the sender times out.
type consumer struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	all      []delivery
	badSig   []string
	decide   func(n int, ev feed.Event) int
	accepted chan struct{} // poked after each accepted delivery
}

func newConsumer(t *testing.T, decide func(n int, ev feed.Event) int) *consumer {
	c := &consumer{t: t, decide: decide, accepted: make(chan struct{}, 1)}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *consumer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var ev feed.Event
	verr := webhook.Verify(testSecret, r.Header.Get(webhook.HeaderTimestamp), body,
		r.Header.Get(webhook.HeaderSignature), time.Minute, time.Now())
	if verr == nil {
		verr = json.Unmarshal(body, &ev)
	}
	if verr == nil && (ev.ID != r.Header.Get(webhook.HeaderEventID) || ev.Type != r.Header.Get(webhook.HeaderEventType)) {
		verr = errors.New("headers disagree with the body")
	}
	c.mu.Lock()
	if verr != nil {
		c.badSig = append(c.badSig, verr.Error())
		c.mu.Unlock()
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	status := c.decide(len(c.all)+1, ev)
	d := delivery{id: ev.ID, res: ev.ReservationID, global: ev.Global, body: body, status: status,
		accepted: status >= 200 && status < 300}
	c.all = append(c.all, d)
	c.mu.Unlock()
	if status == 0 {
		<-r.Context().Done() // the sender's timeout
		return
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	if d.accepted {
		select {
		case c.accepted <- struct{}{}:
		default:
		}
	}
}

func (c *consumer) deliveries() []delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]delivery(nil), c.all...)
}

// acceptedIDs returns how often each event id was accepted.
func (c *consumer) acceptedIDs() map[string]int {
	m := map[string]int{}
	for _, d := range c.deliveries() {
		if d.accepted {
			m[d.id]++
		}
	}
	return m
}

// waitAll polls until every id in want has been accepted at least once.
func (c *consumer) waitAll(t *testing.T, want []feedtest.Want) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := c.acceptedIDs()
		missing := 0
		for _, w := range want {
			if got[feed.ID(w.Global)] == 0 {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events never delivered", missing, len(want))
		}
		select {
		case <-c.accepted:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// check asserts the delivery guarantees against the events the journal
// holds: every event accepted at least once, nothing else accepted, every
// request for one id carries the same body, accepted deliveries of each
// reservation in order, every signature valid.
func (c *consumer) check(t *testing.T, want []feedtest.Want) {
	t.Helper()
	c.mu.Lock()
	bad := c.badSig
	c.mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("%d requests failed verification, first: %s", len(bad), bad[0])
	}
	wanted := map[string]feedtest.Want{}
	for _, w := range want {
		wanted[feed.ID(w.Global)] = w
	}
	bodies := map[string][]byte{}
	last := map[string]uint64{}
	accepted := map[string]bool{}
	for _, d := range c.deliveries() {
		w, ok := wanted[d.id]
		if !ok {
			t.Errorf("delivered %s, which the journal does not produce", d.id)
			continue
		}
		if d.res != w.ReservationID || d.global != w.Global {
			t.Errorf("%s: reservation %s global %d, want %s %d", d.id, d.res, d.global, w.ReservationID, w.Global)
		}
		if b, ok := bodies[d.id]; ok && !bytes.Equal(b, d.body) {
			t.Errorf("%s sent with two different bodies:\n%s\n%s", d.id, b, d.body)
		}
		bodies[d.id] = d.body
		if !d.accepted {
			continue
		}
		if d.global < last[d.res] {
			t.Errorf("reservation %s: %s accepted after global %d: order broken", d.res, d.id, last[d.res])
		}
		last[d.res] = d.global
		accepted[d.id] = true
	}
	for id := range wanted {
		if !accepted[id] {
			t.Errorf("%s never accepted", id)
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fastConfig retries quickly so tests run in well under a second per
// failure.
func fastConfig(db *journal.DB, eps ...webhook.Endpoint) webhook.Config {
	return webhook.Config{DB: db, Endpoints: eps, MaxAttempts: 50, BackoffBase: time.Millisecond,
		BackoffMax: 4 * time.Millisecond, Timeout: 100 * time.Millisecond, BatchSize: 16, Logger: quiet()}
}

func endpointFor(c *consumer, name string) webhook.Endpoint {
	return webhook.Endpoint{Name: name, URL: c.srv.URL + "/hook", Secret: testSecret}
}

// running runs d until the test ends or stop is called; stop waits for Run
// to return and reports its error.
func running(t *testing.T, d *webhook.Dispatcher) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				err = errors.New("Run did not return 10s after cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestDispatcher_FlakyEndpoint: the endpoint is down (500), then times out,
// then answers with a mix of failures (500, 503, 429 with Retry-After) and
// successes; events keep arriving while it runs. Every event is delivered
// at least once, retries repeat the same id and body, and each
// reservation's events arrive in order.
func TestDispatcher_FlakyEndpoint(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 11)
	h.Steps(100)
	c := newConsumer(t, func(n int, ev feed.Event) int {
		switch {
		case n <= 12:
			return http.StatusInternalServerError // down
		case n <= 16:
			return 0 // hangs: the sender's timeout
		case n%7 == 0:
			return http.StatusInternalServerError
		case n%11 == 0:
			return http.StatusServiceUnavailable
		case n%13 == 0:
			return http.StatusTooManyRequests
		case n%17 == 0:
			return 0
		}
		return http.StatusOK
	})
	d, err := webhook.New(fastConfig(db, endpointFor(c, "flaky")))
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, d)
	h.Steps(60) // while delivering: the dispatcher must wake on new commits
	c.waitAll(t, h.Want)
	waitCaughtUp(t, d)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	c.check(t, h.Want)

	var failed, hung int
	for _, dl := range c.deliveries() {
		if !dl.accepted {
			failed++
		}
		if dl.status == 0 {
			hung++
		}
	}
	if failed < 16 || hung < 4 {
		t.Fatalf("only %d failed and %d hung requests: the scenario did not exercise retries", failed, hung)
	}
	lags, err := d.Lag(bg)
	if err != nil {
		t.Fatal(err)
	}
	l := lags[0]
	if l.Name != "flaky" || l.EventsBehind != 0 || l.Parked != 0 || l.OldestUndeliveredAge != 0 ||
		l.Cursor != uint64(h.Records) || l.Delivered < uint64(len(h.Want)) || l.FailedAttempts < uint64(failed) {
		t.Fatalf("lag after catching up = %+v (records %d, events %d, failed %d)", l, h.Records, len(h.Want), failed)
	}
}

// TestDispatcher_RestartResumes stops the dispatcher part way, closes and
// reopens the journal, and starts a new Dispatcher: it resumes from the
// persisted cursor, repeating at most the one delivery in flight. In the
// "crash" mode the journal is closed under the running dispatcher, so it
// can record nothing more (no final flush), as after a kill.
func TestDispatcher_RestartResumes(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "graceful", true: "crash"}[crash], func(t *testing.T) {
			testRestart(t, crash)
		})
	}
}

func testRestart(t *testing.T, crash bool) {
	db := journaltest.Open(t)
	path := db.Path()
	h := feedtest.New(t, db, 12)
	h.Steps(150)
	if len(h.Want) < 40 {
		t.Fatalf("history too short: %d events", len(h.Want))
	}
	var mu sync.Mutex
	halt := make(chan struct{})
	accepted := 0
	c := newConsumer(t, func(n int, ev feed.Event) int {
		mu.Lock()
		defer mu.Unlock()
		accepted++
		if accepted == 20 {
			close(halt)
		}
		return http.StatusNoContent
	})
	cfg := fastConfig(db, endpointFor(c, "ledger"))
	// No timeouts on a loaded machine: any duplicate must come from the
	// restart alone.
	cfg.Timeout = 10 * time.Second
	d, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, d)
	<-halt
	if crash {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if err := stop(); err != nil && !errors.Is(err, journal.ErrClosed) {
			t.Fatalf("Run with the journal closed under it: %v", err)
		}
	} else {
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	before := c.deliveries()

	re, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { re.Close() })
	raw, err := re.Get(bg, "webhook/ledger/cursor")
	if err != nil {
		t.Fatalf("cursor not persisted: %v", err)
	}
	var cursor uint64
	fmt.Sscan(string(raw), &cursor)
	if cursor == 0 || cursor >= uint64(h.Records) {
		t.Fatalf("persisted cursor %d, want part way through %d records", cursor, h.Records)
	}
	// The cursor covers every accepted delivery but possibly the last, whose
	// bookkeeping the stop may have cut off.
	if n := len(before); n < 2 || cursor < before[n-2].global {
		t.Fatalf("cursor %d lags the deliveries before the stop (%d of them)", cursor, n)
	}
	h.Reopen(re)
	h.Steps(40)
	cfg.DB = re
	d2, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lags, err := d2.Lag(bg)
	if err != nil || lags[0].Cursor != cursor {
		t.Fatalf("new dispatcher starts at %+v, %v; want cursor %d", lags, err, cursor)
	}
	stop2 := running(t, d2)
	c.waitAll(t, h.Want)
	if err := stop2(); err != nil {
		t.Fatalf("Run after restart: %v", err)
	}
	c.check(t, h.Want)

	all := c.deliveries()
	after := all[len(before):]
	if len(after) == 0 || after[0].global <= cursor {
		t.Fatalf("first delivery after restart is %+v, want the first event after cursor %d", after[0].id, cursor)
	}
	dups := 0
	for id, n := range c.acceptedIDs() {
		if n > 1 {
			dups++
			t.Logf("%s delivered %d times", id, n)
		}
	}
	if dups > 1 {
		t.Fatalf("%d events delivered twice; a restart may repeat at most the one in flight", dups)
	}
}

// TestDispatcher_ParkAndReplay: events of one reservation fail every
// attempt. The first is parked after MaxAttempts, later ones of the same
// reservation are parked behind it untried, other reservations flow. The
// parked list survives a restart; a replay while still failing parks again;
// a replay after the endpoint is fixed delivers them all, in order, before
// that reservation's new events.
func TestDispatcher_ParkAndReplay(t *testing.T) {
	db := journaltest.Open(t)
	path := db.Path()
	h := feedtest.New(t, db, 13)
	h.Register("r1", 1000)
	h.Register("r2", 500)
	a1 := h.Request("r1", 400)
	b1 := h.Request("r2", 500)
	h.Result("r1", a1, reservation.Succeeded)
	h.Result("r2", b1, reservation.Succeeded) // and canceled

	var mu sync.Mutex
	down := true
	c := newConsumer(t, func(n int, ev feed.Event) int {
		mu.Lock()
		defer mu.Unlock()
		if down && ev.ReservationID == "r1" {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	cfg := fastConfig(db, endpointFor(c, "crm"))
	cfg.MaxAttempts = 3
	counted := &recordTally{values: map[string]int64{}}
	cfg.Tally = counted
	d, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, d)
	var r1, r2 []feedtest.Want
	for _, w := range h.Want {
		if w.ReservationID == "r1" {
			r1 = append(r1, w)
		} else {
			r2 = append(r2, w)
		}
	}
	c.waitAll(t, r2)
	parked := waitParked(t, d, "crm", len(r1))
	waitCaughtUp(t, d)
	first := feed.ID(r1[0].Global)
	if p := parked[0]; p.Event.ID != first || p.Attempts != 3 || !strings.Contains(p.LastError, "500") ||
		p.HeldBehind != "" || p.Replaying {
		t.Fatalf("first parked = %+v", p)
	}
	if p := parked[1]; p.Event.ID != feed.ID(r1[1].Global) || p.Attempts != 0 || p.HeldBehind != first {
		t.Fatalf("second parked = %+v; want held behind %s untried", p, first)
	}
	if got := countAttempts(c, "r1"); got[first] != 3 || len(got) != 1 {
		t.Fatalf("attempts for r1 = %v, want 3 for %s and none for later events", got, first)
	}
	lags, err := d.Lag(bg)
	if err != nil {
		t.Fatal(err)
	}
	if l := lags[0]; l.Parked != len(r1) || l.EventsBehind != 0 || l.OldestUndeliveredAge <= 0 {
		t.Fatalf("lag with parked events = %+v", l)
	}
	// The durable tally: every POST and the one parking after the last
	// attempt (the events held behind it were never tried).
	if got, want := counted.snapshot(), map[string]int64{"webhook/crm/delivered": int64(len(r2)), "webhook/crm/failed": 3,
		"webhook/crm/parked": 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("tally = %v, want %v", got, want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// Restart: the parked list and the hold on r1 come back from the kv area.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { re.Close() })
	h.Reopen(re)
	a2 := h.Request("r1", 100)
	cfg.DB = re
	d, err = webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop = running(t, d)
	r1 = append(r1, h.Want[len(h.Want)-1])
	parked = waitParked(t, d, "crm", len(r1))
	if p := parked[len(parked)-1]; p.Event.RefundNo != a2 || p.Attempts != 0 || p.HeldBehind != first {
		t.Fatalf("new r1 event after restart = %+v; want held behind %s", p, first)
	}

	if err := d.Replay(bg, "crm", "evt_00000000000000999999"); !errors.Is(err, webhook.ErrNotParked) {
		t.Fatalf("Replay of an unknown event: %v", err)
	}
	if err := d.Replay(bg, "nope", first); !errors.Is(err, webhook.ErrUnknownEndpoint) {
		t.Fatalf("Replay at an unknown endpoint: %v", err)
	}

	// Replay while the endpoint still fails: parked again after 3 more.
	if err := d.Replay(bg, "crm", first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failed replay to park again", func() bool {
		ps, err := d.Parked(bg, "crm")
		return err == nil && len(ps) == len(r1) && !ps[0].Replaying && countAttempts(c, "r1")[first] == 6
	})

	// Fixed: replaying any of r1's events delivers all of them, in order.
	mu.Lock()
	down = false
	mu.Unlock()
	if err := d.Replay(bg, "crm", feed.ID(r1[2].Global)); err != nil {
		t.Fatal(err)
	}
	c.waitAll(t, r1)
	waitParked(t, d, "crm", 0)
	h.Result("r1", a2, reservation.Succeeded) // flows directly again
	c.waitAll(t, h.Want)
	waitCaughtUp(t, d)
	if err := d.Replay(bg, "crm", first); !errors.Is(err, webhook.ErrNotParked) {
		t.Fatalf("Replay of a delivered event: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c.check(t, h.Want)
	lags, err = d.Lag(bg)
	if err != nil {
		t.Fatal(err)
	}
	if l := lags[0]; l.Parked != 0 || l.EventsBehind != 0 || l.OldestUndeliveredAge != 0 {
		t.Fatalf("lag after replay = %+v", l)
	}
}

func countAttempts(c *consumer, res string) map[string]int {
	m := map[string]int{}
	for _, d := range c.deliveries() {
		if d.res == res {
			m[d.id]++
		}
	}
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitCaughtUp polls until every endpoint's cursor is at the journal's end:
// a consumer may see a delivery before the dispatcher has recorded it.
func waitCaughtUp(t *testing.T, d *webhook.Dispatcher) {
	t.Helper()
	waitFor(t, "the dispatcher to catch up", func() bool {
		lags, err := d.Lag(bg)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lags {
			if l.EventsBehind != 0 {
				return false
			}
		}
		return true
	})
}

func waitParked(t *testing.T, d *webhook.Dispatcher, name string, n int) []webhook.ParkedEvent {
	t.Helper()
	var ps []webhook.ParkedEvent
	waitFor(t, fmt.Sprintf("%d parked events", n), func() bool {
		var err error
		ps, err = d.Parked(bg, name)
		if err != nil {
			t.Fatal(err)
		}
		return len(ps) == n
	})
	return ps
}

// TestDispatcher_SlowEndpointDoesNotBlockAppends: while the only endpoint
// hangs on a POST, the journal keeps taking appends at full speed, Lag
// shows the endpoint falling behind, and stopping does not wait for the
// hung POST.
func TestDispatcher_SlowEndpointDoesNotBlockAppends(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 14)
	h.Register("r1", 1000)
	h.Request("r1", 10)
	got := make(chan struct{}, 1)
	c := newConsumer(t, func(int, feed.Event) int {
		select {
		case got <- struct{}{}:
		default:
		}
		return 0
	})
	cfg := fastConfig(db, endpointFor(c, "slow"))
	cfg.Timeout = time.Hour
	d, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, d)
	<-got // the dispatcher is now stuck in a POST

	start := time.Now()
	h.Steps(100)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("%d appends took %s while the endpoint hung", h.Records, took)
	}
	lags, err := d.Lag(bg)
	if err != nil {
		t.Fatal(err)
	}
	if l := lags[0]; l.EventsBehind < 100 || l.OldestUndeliveredAge <= 0 || l.Delivered != 0 {
		t.Fatalf("lag of a hung endpoint = %+v", l)
	}
	start = time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("stopping took %s with a POST hung", took)
	}
}

// TestDispatcher_FromNowAndTypes: two endpoints run independently; one
// starts at the journal's end, the other takes only some types from the
// beginning.
func TestDispatcher_FromNowAndTypes(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 15)
	h.Steps(60)
	old := len(h.Want)
	cNew := newConsumer(t, func(int, feed.Event) int { return http.StatusOK })
	cTyped := newConsumer(t, func(int, feed.Event) int { return http.StatusOK })
	fresh := endpointFor(cNew, "fresh")
	fresh.FromNow = true
	typed := endpointFor(cTyped, "typed")
	typed.Types = []string{feed.TypeRefundSucceeded, feed.TypeReservationCanceled}
	d, err := webhook.New(fastConfig(db, fresh, typed))
	if err != nil {
		t.Fatal(err)
	}
	if names := d.Endpoints(); strings.Join(names, ",") != "fresh,typed" {
		t.Fatalf("Endpoints = %v", names)
	}
	running(t, d)
	// Lag loads (and for FromNow, pins) the start before new events come.
	if _, err := d.Lag(bg); err != nil {
		t.Fatal(err)
	}
	h.Steps(60)
	var typedWant []feedtest.Want
	for _, w := range h.Want {
		if w.Type == feed.TypeRefundSucceeded || w.Type == feed.TypeReservationCanceled {
			typedWant = append(typedWant, w)
		}
	}
	cNew.waitAll(t, h.Want[old:])
	cTyped.waitAll(t, typedWant)
	cNew.check(t, h.Want[old:])
	cTyped.check(t, typedWant)
}

func TestRun_Twice(t *testing.T) {
	db := journaltest.Open(t)
	d, err := webhook.New(webhook.Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	// The probe below may itself hold the dispatcher for a moment (a Run
	// with a canceled ctx returns at once) and so make the first Run fail
	// with ErrRunning: the first Run tries again until it holds it.
	ctx, cancel := context.WithCancel(bg)
	first := make(chan error, 1)
	go func() {
		for {
			if err := d.Run(ctx); !errors.Is(err, webhook.ErrRunning) {
				first <- err
				return
			}
		}
	}()
	canceled, cancelProbe := context.WithCancel(bg)
	cancelProbe()
	waitFor(t, "Run to start", func() bool {
		return errors.Is(d.Run(canceled), webhook.ErrRunning)
	})
	cancel()
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("first Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("first Run did not return 10s after cancel")
	}
}

// TestDispatcher_ReplayAll: after an outage that parked every reservation,
// one ReplayAll delivers everything, each reservation in order.
func TestDispatcher_ReplayAll(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 16)
	for _, id := range []string{"r1", "r2", "r3"} {
		h.Register(id, 300)
		no := h.Request(id, 300)
		h.Result(id, no, reservation.Succeeded)
	}
	var mu sync.Mutex
	down := true
	c := newConsumer(t, func(int, feed.Event) int {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusBadGateway
		}
		return http.StatusOK
	})
	cfg := fastConfig(db, endpointFor(c, "erp"))
	cfg.MaxAttempts = 1
	d, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	running(t, d)
	parked := waitParked(t, d, "erp", len(h.Want))
	tried := 0
	for _, p := range parked {
		if p.Attempts > 0 {
			tried++
		}
	}
	if tried != 3 {
		t.Fatalf("%d parked events were tried, want one per reservation", tried)
	}
	if _, err := d.ReplayAll(bg, "nope"); !errors.Is(err, webhook.ErrUnknownEndpoint) {
		t.Fatalf("ReplayAll at an unknown endpoint: %v", err)
	}
	mu.Lock()
	down = false
	mu.Unlock()
	n, err := d.ReplayAll(bg, "erp")
	if err != nil || n != len(h.Want) {
		t.Fatalf("ReplayAll = %d, %v; want %d", n, err, len(h.Want))
	}
	c.waitAll(t, h.Want)
	waitParked(t, d, "erp", 0)
	c.check(t, h.Want)
}

// recordTally is a webhook.Tally in memory.
type recordTally struct {
	mu     sync.Mutex
	values map[string]int64
}

func (r *recordTally) Note(changes map[string]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, n := range changes {
		r.values[k] += n
	}
}

func (r *recordTally) snapshot() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.values)
}
