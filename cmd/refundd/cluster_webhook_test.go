package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// hookSink is a webhook consumer for the cluster tests: it verifies
// signatures, records every accepted delivery in arrival order, and holds
// the attempts numbered in hold (1-based) until the sender gives up, so a
// test can stop the leader in the middle of a delivery.
type hookSink struct {
	mu       sync.Mutex
	attempts int
	hold     map[int]chan struct{} // closed once that attempt is being held
	got      []delivered
}

func (s *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := webhook.Verify([]byte("whsec-test-0123456789abcdef"), r.Header.Get("Refundd-Timestamp"), body,
		r.Header.Get("Refundd-Signature"), 5*time.Minute, time.Now()); err != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var e struct {
		ID            string  `json:"id"`
		ReservationID string  `json:"reservation_id"`
		Global        float64 `json:"global"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.ID == "" {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.attempts++
	held := s.hold[s.attempts]
	s.mu.Unlock()
	if held != nil {
		close(held)
		select {
		case <-r.Context().Done(): // the sender stopped: not delivered
		case <-time.After(20 * time.Second):
		}
		http.Error(w, "held", http.StatusServiceUnavailable)
		return
	}
	s.mu.Lock()
	s.got = append(s.got, delivered{e.ID, e.ReservationID, e.Global})
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *hookSink) deliveries() []delivered {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// getText GETs a route with the service token and returns the body.
func getText(ctx context.Context, base, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+testServiceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestCluster_WebhookFailover runs three refundd nodes (processes) with
// the same --webhooks-file on one PostgreSQL journal and an embedded
// etcd. Exactly one node dispatches (refundd_webhook_leader 1). The
// leader is SIGKILLed in the middle of a delivery: another node takes
// over once its election lease expires, from the cursor stored in the
// journal. The restarted node rejoins as a candidate; the second leader
// is stopped gracefully in the middle of a delivery and hands over at
// once. In the end every event of the feed was delivered, in order per
// reservation, with few duplicates (from zero, there would be dozens).
func TestCluster_WebhookFailover(t *testing.T) {
	store := pgtest.New(t) // skips without REFUNDD_TEST_POSTGRES (fails under CI=true)
	sink := &hookSink{hold: map[int]chan struct{}{30: make(chan struct{}), 65: make(chan struct{})}}
	recv := httptest.NewServer(sink)
	defer recv.Close()
	bin, wxBin, etcdBin := buildClusterBinaries(t)
	dir := t.TempDir()
	hooks := filepath.Join(dir, "webhooks")
	if err := os.WriteFile(hooks, []byte("ledger "+recv.URL+" env:TEST_WEBHOOK_SECRET start=beginning\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, wxBin, dir, simOptions{processingDelay: "100ms", timeFactor: "0.01"})
	etcd := startDaemon(t, etcdBin, "devetcd listening on ", nil, nil, "--dir", filepath.Join(dir, "etcd"), "--no-fsync", "--listen", "127.0.0.1:0")
	etcdAddr := strings.TrimSpace(strings.TrimPrefix(etcd.out.String(), "devetcd listening on "))

	const n = 3
	procs := make([]*refunddProc, n)
	daemons := make([]*daemon, n)
	env := "TEST_WEBHOOK_SECRET=whsec-test-0123456789abcdef"
	for i := range procs {
		procs[i] = newRefundd(bin, filepath.Join(dir, fmt.Sprintf("node%d", i)), freeAddr(t), sim, false,
			"--journal", store.DSN, "--journal-schema", store.Schema, "--cluster", "etcd://"+etcdAddr+"?ttl=2s",
			"--cluster-listen", freeAddr(t), "--node-id", fmt.Sprintf("node%d", i), "--webhooks-file", hooks)
	}
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() { daemons[i] = procs[i].start(t, env) })
	}
	wg.Wait()
	base := func(i int) string { return "http://" + procs[i].addr }
	alive := map[int]bool{0: true, 1: true, 2: true}
	// scrape reads the metrics of every live node, by node.
	scrape := func() (map[int]string, error) {
		texts := map[int]string{}
		for i := range procs {
			if !alive[i] {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, text, err := getText(ctx, base(i), "/metrics")
			cancel()
			if err != nil {
				return nil, fmt.Errorf("node%d: %w", i, err)
			}
			texts[i] = text
		}
		return texts, nil
	}
	// leader returns the one live node whose gauge says it leads, failing
	// if two do at once.
	leader := func(not int) int {
		t.Helper()
		who := -1
		waitFor(t, 20*time.Second, "one webhook leader", func() (bool, string) {
			texts, err := scrape()
			if err != nil {
				return false, err.Error()
			}
			var leading []int
			for i, text := range texts {
				if strings.Contains(text, "\nrefundd_webhook_leader 1\n") {
					leading = append(leading, i)
				}
			}
			slices.Sort(leading)
			if len(leading) > 1 {
				t.Fatalf("nodes %v all lead webhook dispatch", leading)
			}
			if len(leading) == 1 && leading[0] != not {
				who = leading[0]
				return true, ""
			}
			return false, fmt.Sprintf("leading: %v", leading)
		})
		return who
	}

	// Events: 20 reservations, each paid 10,000 fen, refunded 3,000 then
	// the rest: requested, succeeded (twice each) and canceled.
	const paid = 10000
	var res []string
	var failedRes idSet
	for i := range 20 {
		id := fmt.Sprintf("w%02d", i)
		res = append(res, id)
		sim.createOrder(t, "ORD-"+id, paid)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		code, body, err := apiCall(ctx, base(i%n), "POST", "/v1/reservations", "",
			map[string]any{"id": id, "user_id": "u-" + id, "out_trade_no": "ORD-" + id, "amount": paid, "currency": "CNY"})
		cancel()
		if err != nil || code != http.StatusCreated {
			t.Fatalf("register %s: %d %v %v", id, code, body, err)
		}
	}
	refund := func(i int, id, key string, amount any) error {
		body := map[string]any{"user_id": "u-" + id}
		if amount != nil {
			body["amount"] = amount
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sent := time.Now()
		code, out, err := apiCall(ctx, base(i), "POST", "/v1/reservations/"+id+"/refunds?wait=5s", key, body)
		if err != nil || code != http.StatusOK {
			took := time.Since(sent)
			// Say when (if ever) the refund finished after all, so that a
			// failure tells a wait that ended early from a slow recovery.
			after, state := "", ""
			if no, _ := out["refund_no"].(string); no != "" {
				state, after = followRefund(base(i), id, no, sent)
				after = "; " + after
			}
			// A 202 is what ?wait= promises when the wait ends first: a node
			// starved of CPU may lose its membership lease and stop watching
			// ("retry through another node"). The refund must still finish,
			// and exactly once; the deliveries below check the latter.
			if err == nil && code == http.StatusAccepted && state == "SUCCEEDED" {
				t.Logf("refund %s %s via node%d answered 202 after %s%s", id, key, i, took.Round(time.Millisecond), after)
				return nil
			}
			failedRes.Add(id)
			return fmt.Errorf("refund %s %s via node%d (sent %s, answered after %s): %d %v %v%s", id, key, i,
				sent.Format("15:04:05.000"), took.Round(time.Millisecond), code, out, err, after)
		}
		return nil
	}
	// On failure, the nodes' logs about the reservations whose refunds did
	// not finish, and about the membership.
	defer func() {
		if !t.Failed() {
			return
		}
		for i := range procs {
			for _, id := range failedRes.list() {
				t.Logf("node%d logs about %s:\n%s", i, id, grepLines(procs[i].logs.String(), id, 40))
			}
			t.Logf("node%d cluster logs:\n%s", i, grepLines(procs[i].logs.String(), "cluster", 40))
		}
	}()
	for i, id := range res {
		if err := refund((i+1)%n, id, "k1", 3000); err != nil {
			t.Fatal(err)
		}
	}

	// The first leader is SIGKILLed while its 30th POST is in flight.
	<-sink.hold[30]
	first := leader(-1)
	daemons[first].kill()
	alive[first] = false
	killedAt := time.Now()
	before := len(sink.deliveries())
	second := leader(first)
	t.Logf("node%d SIGKILLed after %d deliveries; node%d leads %s later", first, before, second, time.Since(killedAt).Round(time.Millisecond))
	// The election and the membership have leases of their own: the next
	// leader may be elected before the others drop the killed member, and
	// until then a call for a reservation it owned answers 503 (by design:
	// the outcome of a call in flight to a node that died is unknown).
	// The refunds below are meant for a cluster that has seen the death.
	waitFor(t, 20*time.Second, fmt.Sprintf("the live nodes to drop node%d", first), func() (bool, string) {
		texts, err := scrape()
		if err != nil {
			return false, err.Error()
		}
		var views []string
		for i, text := range texts {
			if !strings.Contains(text, "\nrefundd_cluster_members 2\n") {
				views = append(views, fmt.Sprintf("node%d", i))
			}
		}
		slices.Sort(views)
		return len(views) == 0, fmt.Sprintf("%v still count it", views)
	})

	// More events while the killed node restarts; it must not take over.
	var more sync.WaitGroup
	more.Go(func() {
		for i, id := range res {
			node := (i + 2) % n
			if node == first {
				node = second
			}
			if err := refund(node, id, "k2", nil); err != nil {
				t.Error(err)
			}
		}
	})
	daemons[first] = procs[first].start(t, env)
	alive[first] = true

	// The second leader stops gracefully in the middle of a delivery: the
	// next candidate leads without waiting for a lease to expire.
	<-sink.hold[65]
	more.Wait()
	if l := leader(-1); l != second {
		t.Fatalf("node%d leads; want node%d (the restarted node%d must queue behind it)", l, second, first)
	}
	stoppedAt := time.Now()
	daemons[second].stop(t)
	alive[second] = false
	third := leader(second)
	t.Logf("node%d stopped gracefully; node%d leads %s later", second, third, time.Since(stoppedAt).Round(time.Millisecond))

	// Every event of the feed arrives.
	var want []string
	waitFor(t, 30*time.Second, "every event delivered", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		code, page, err := apiCall(ctx, base(third), "GET", "/v1/events?after=0&limit=1000", "", nil)
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprint(code, err)
		}
		want = want[:0]
		for _, e := range page["events"].([]any) {
			want = append(want, e.(map[string]any)["id"].(string))
		}
		seen := map[string]bool{}
		for _, d := range sink.deliveries() {
			seen[d.id] = true
		}
		missing := 0
		for _, id := range want {
			if !seen[id] {
				missing++
			}
		}
		return len(want) == 5*len(res) && missing == 0, fmt.Sprintf("feed %d events, %d not delivered", len(want), missing)
	})

	got := sink.deliveries()
	seen := map[string]bool{}
	last := map[string]float64{}
	dups := 0
	for _, d := range got {
		if seen[d.id] {
			dups++
		} else if prev, ok := last[d.reservation]; ok && d.global < prev {
			t.Errorf("reservation %s: event %s (global %v) first delivered after global %v", d.reservation, d.id, d.global, prev)
		}
		seen[d.id] = true
		last[d.reservation] = max(last[d.reservation], d.global)
	}
	t.Logf("%d deliveries of %d events: %d duplicates", len(got), len(want), dups)
	if dups > 4 {
		t.Errorf("%d duplicate deliveries after two handovers; want at most 4 (the new leaders resume from the stored cursor; %d were delivered before the first)", dups, before)
	}

	// The lag metrics come from the leader only; every node answers the
	// webhook routes from the stored cursor.
	for i := range procs {
		if !alive[i] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, text, err := getText(ctx, base(i), "/metrics")
		code, hooksView, herr := apiCall(ctx, base(i), "GET", "/v1/webhooks", "", nil)
		cancel()
		if err != nil || herr != nil || code != http.StatusOK {
			t.Fatalf("node%d: metrics %v, webhooks %d %v %v", i, err, code, hooksView, herr)
		}
		lag := strings.Contains(text, `refundd_webhook_events_behind{endpoint="ledger"}`)
		if lag != (i == third) {
			t.Errorf("node%d (leader: %v) exports the webhook lag: %v", i, i == third, lag)
		}
		if eps, _ := hooksView["endpoints"].([]any); len(eps) != 1 {
			t.Errorf("node%d: GET /v1/webhooks %v", i, hooksView)
		}
	}
	if !strings.Contains(procs[second].logs.String(), "webhook dispatch: this node no longer leads") {
		t.Errorf("node%d logged no loss of leadership:\n%s", second, grepLines(procs[second].logs.String(), "webhook", 20))
	}
	for i := range procs {
		if alive[i] {
			daemons[i].stop(t)
		}
	}
	if t.Failed() {
		for i := range procs {
			t.Logf("node%d webhook logs:\n%s", i, grepLines(procs[i].logs.String(), "webhook", 30))
		}
	}
}

// With automanaged membership the webhook leader holds a PostgreSQL
// advisory lock: two refundd processes, the leader SIGKILLed in the middle
// of a delivery, the other takes the lock (released with the dead
// process's socket) and delivers the rest from the stored cursor.
func TestCluster_WebhookFailoverAutomanaged(t *testing.T) {
	store := pgtest.New(t) // skips without REFUNDD_TEST_POSTGRES (fails under CI=true)
	sink := &hookSink{hold: map[int]chan struct{}{6: make(chan struct{})}}
	recv := httptest.NewServer(sink)
	defer recv.Close()
	bin, wxBin, _ := buildClusterBinaries(t)
	dir := t.TempDir()
	hooks := filepath.Join(dir, "webhooks")
	if err := os.WriteFile(hooks, []byte("ledger "+recv.URL+" env:TEST_WEBHOOK_SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sim := startSim(t, wxBin, dir, simOptions{processingDelay: "100ms", timeFactor: "0.01"})
	am := []string{freeAddr(t), freeAddr(t)}
	procs := make([]*refunddProc, 2)
	daemons := make([]*daemon, 2)
	env := "TEST_WEBHOOK_SECRET=whsec-test-0123456789abcdef"
	for i := range procs {
		_, port, _ := strings.Cut(am[i], ":")
		procs[i] = newRefundd(bin, filepath.Join(dir, fmt.Sprintf("node%d", i)), freeAddr(t), sim, false,
			"--journal", store.DSN, "--journal-schema", store.Schema,
			"--cluster", "automanaged://"+strings.Join(am, ",")+"?port="+port+"&refresh=200ms",
			"--cluster-listen", freeAddr(t), "--node-id", fmt.Sprintf("node%d", i), "--webhooks-file", hooks)
	}
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() { daemons[i] = procs[i].start(t, env) })
	}
	wg.Wait()
	base := func(i int) string { return "http://" + procs[i].addr }
	leading := func(i int) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, text, err := getText(ctx, base(i), "/metrics")
		return err == nil && strings.Contains(text, "\nrefundd_webhook_leader 1\n")
	}
	const n = 8
	for i := range n {
		id := fmt.Sprintf("a%02d", i)
		sim.createOrder(t, "ORD-"+id, 10000)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		code, body, err := apiCall(ctx, base(i%2), "POST", "/v1/reservations", "",
			map[string]any{"id": id, "user_id": "u-" + id, "out_trade_no": "ORD-" + id, "amount": 10000, "currency": "CNY"})
		if err == nil && code == http.StatusCreated {
			code, body, err = apiCall(ctx, base((i+1)%2), "POST", "/v1/reservations/"+id+"/refunds?wait=5s", "k1",
				map[string]any{"user_id": "u-" + id, "amount": 3000})
		}
		cancel()
		if err != nil || code/100 != 2 {
			t.Fatalf("%s: %d %v %v", id, code, body, err)
		}
	}
	<-sink.hold[6]
	first := 0
	if leading(1) {
		first = 1
	}
	if !leading(first) || leading(1-first) {
		t.Fatalf("leaders: node0 %v, node1 %v; want exactly one", leading(0), leading(1))
	}
	before := len(sink.deliveries())
	daemons[first].kill()
	waitFor(t, 15*time.Second, "the other node to lead", func() (bool, string) { return leading(1 - first), "" })
	waitFor(t, 20*time.Second, "every event delivered", func() (bool, string) {
		seen := map[string]bool{}
		for _, d := range sink.deliveries() {
			seen[d.id] = true
		}
		return len(seen) == 2*n, fmt.Sprintf("%d of %d events delivered", len(seen), 2*n)
	})
	got := sink.deliveries()
	t.Logf("node%d SIGKILLed after %d deliveries; %d deliveries of %d events in all", first, before, len(got), 2*n)
	if len(got)-2*n > 2 {
		t.Errorf("%d duplicates; want at most 2 (the new leader resumes from the stored cursor)", len(got)-2*n)
	}
	if !strings.Contains(procs[1-first].logs.String(), "webhook leader lock: taken") {
		t.Errorf("node%d did not log taking the lock:\n%s", 1-first, grepLines(procs[1-first].logs.String(), "webhook", 20))
	}
	daemons[1-first].stop(t)
}

// idSet is a set of reservation ids, safe for concurrent use.
type idSet struct {
	mu  sync.Mutex
	ids []string
}

func (s *idSet) Add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.ids, id) {
		s.ids = append(s.ids, id)
	}
}

func (s *idSet) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

// followRefund polls a refund for up to 15s and says when it reached a
// terminal state, counted from sent, or what it was when polling gave up.
func followRefund(base, id, no string, sent time.Time) (state, desc string) {
	deadline := time.Now().Add(15 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		code, out, err := apiCall(ctx, base, "GET", "/v1/reservations/"+id+"/refunds/"+no, "", nil)
		cancel()
		last = fmt.Sprint(code, " ", out, " ", err)
		if state, _ := out["state"].(string); code == http.StatusOK && (state == "SUCCEEDED" || state == "FAILED") {
			return state, fmt.Sprintf("it was %s %s after it was sent (%v)", state, time.Since(sent).Round(time.Millisecond), out)
		}
		time.Sleep(50 * time.Millisecond) // polling a separate process: nothing to wait on
	}
	return "", "it was still not final 15s after it was sent: " + last
}
