package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestChaos runs refundd as a real process against wxpaysim (WeChat Pay)
// while clients send concurrent refund requests (new ones, exact
// duplicates, reused keys, over-refunds), the sandbox injects every fault
// it knows at random, and refundd is SIGKILLed and restarted at random
// moments. At the end, after reconciliation, refundd and WeChat must agree
// on every order, to the fen.
//
// The run is driven by one seed, printed first; CHAOS_SEED=n replays the
// same plan (requests, faults, kills; goroutine interleaving still varies).
// CHAOS_DURATION (default 30s of chaos, with 24 reservations; longer runs
// get more) and CHAOS_RESERVATIONS change its size: see test/chaos.sh. On failure the logs and the timeline are
// written to a directory named in the failure message.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	cfg := chaosConfigFromEnv(t)
	refunddBin, simBin := buildCrashBinaries(t)
	addr := freeAddr(t)
	base := "http://" + addr
	sim := startSim(t, simBin, t.TempDir(), simOptions{processingDelay: "20s", timeFactor: "0.01",
		notifyURL: base + "/v1/notify/wechatpay/refund", notifyURLV2: base + "/v1/notify/wechatpay/v2/refund"})
	spacing := chaosSpacing(cfg)
	// Debug logs every provider call with its outcome: failures print the
	// lines of the refunds concerned.
	rd := newRefundd(refunddBin, t.TempDir(), addr, sim, true, "--refund-spacing", spacing, "--log-level", "debug")
	runChaos(t, cfg, &chaosRun{t: t, cfg: cfg, base: base, sim: sim, rd: rd, books: []chaosBook{{admin: "/sandbox"}}})
}

// TestChaos_FourMerchants is the chaos run on a platform: wxpaysim serves
// two direct merchants and a service provider with two sub-merchants, and
// refundd serves all four from one merchants file. The reservations are
// dealt round-robin to the merchants with the same out_trade_no at each
// (it is unique per merchant only), faults are injected into each
// merchant's own books, and at the end every order of every merchant must
// agree with WeChat's books of that merchant, to the fen, and WeChat must
// have refused no request for a wrong key or sub_mchid.
func TestChaos_FourMerchants(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	cfg := chaosConfigFromEnv(t)
	refunddBin, simBin := buildCrashBinaries(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	sim, reg, file := startPlatformSim(t, simBin, dir, addr)
	rd := platformRefundd(refunddBin, dir, addr, file)
	rd.flags = append(rd.flags, "--refund-spacing", chaosSpacing(cfg), "--log-level", "debug")
	var books []chaosBook
	for _, m := range reg.Merchants() {
		books = append(books, chaosBook{merchant: m.Name, admin: "/sandbox/books/" + book(m)})
	}
	runChaos(t, cfg, &chaosRun{t: t, cfg: cfg, base: "http://" + addr, sim: sim, rd: rd, books: books})
	checkNoRefusals(t, sim, rd)
}

// chaosSpacing picks the run's refund spacing from its seed.
func chaosSpacing(cfg chaosConfig) string {
	return []string{"0", "0", "150ms"}[rand.New(rand.NewPCG(cfg.seed, 1)).IntN(3)]
}

// runChaos runs the chaos of c (its refundd not yet started) and checks
// the end.
func runChaos(t *testing.T, cfg chaosConfig, c *chaosRun) {
	t.Logf("chaos seed %d: %d reservations of %d merchants, %d clients, %s of chaos (replay: CHAOS_SEED=%d CHAOS_DURATION=%s)",
		cfg.seed, cfg.reservations, len(c.books), cfg.workers, cfg.duration, cfg.seed, cfg.duration)
	t.Logf("refundd flags: %s", strings.Join(c.rd.flags, " "))
	rd, sim := c.rd, c.sim
	data := rd.data
	d := rd.start(t)
	c.start, c.stats = time.Now(), map[string]int{}
	t.Cleanup(func() {
		// A failure outside the final checks (a restart that failed) still
		// leaves the logs and the timeline behind.
		c.mu.Lock()
		wrote := c.wrote
		c.mu.Unlock()
		if t.Failed() && !wrote {
			t.Logf("chaos seed %d: logs and timeline in %s", cfg.seed, c.writeArtifacts(nil))
		}
	})
	c.register()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() }) // before the processes are killed
	for w := range cfg.workers {
		wg.Add(1)
		go func() { defer wg.Done(); c.worker(ctx, w, rand.New(rand.NewPCG(cfg.seed, uint64(100+w)))) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); c.injector(ctx, rand.New(rand.NewPCG(cfg.seed, 3))) }()

	// The killer runs here: only the test goroutine may fail the test
	// when a restart fails.
	kills := 0
	krng := rand.New(rand.NewPCG(cfg.seed, 2))
	end := c.start.Add(cfg.duration)
	for {
		wait := time.Duration(700+krng.IntN(2800)) * time.Millisecond
		if time.Now().Add(wait).After(end) {
			break
		}
		time.Sleep(wait) // a random moment, not a wait for a condition
		if !d.running() {
			c.problem("refundd died by itself (%v) before SIGKILL #%d", d.cmd.ProcessState, kills+1)
		}
		d.kill()
		kills++
		c.event("SIGKILL #%d", kills)
		time.Sleep(time.Duration(krng.IntN(400)) * time.Millisecond) // downtime
		d = rd.start(t)
		c.event("restarted")
	}
	time.Sleep(time.Until(end))
	cancel()
	wg.Wait()
	c.event("chaos over after %d kills; clearing faults, last restart", kills)

	for _, b := range c.books {
		if _, err := sim.admin("DELETE", b.admin+"/faults", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	d.kill()
	d = rd.start(t)
	c.replayUnanswered()
	snap := c.settle()
	c.check(snap)
	d.stop(t)
	verifyJournal(t, data)
	for _, bad := range []string{"panicked", "DATA RACE", "fatal error:"} {
		if s := grepLines(rd.logs.String(), bad, 10); s != "" {
			c.problem("refundd logs contain %q:\n%s", bad, s)
		}
	}
	c.report(kills, snap)
}

// chaosConfig is one run's plan; everything random comes from seed.
type chaosConfig struct {
	seed         uint64
	duration     time.Duration
	reservations int
	workers      int
}

func chaosConfigFromEnv(t *testing.T) chaosConfig {
	t.Helper()
	cfg := chaosConfig{seed: rand.Uint64(), duration: 30 * time.Second, reservations: 24, workers: 6}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		cfg.seed = n
	}
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 5*time.Second {
			t.Fatalf("CHAOS_DURATION=%q: want a duration of at least 5s", v)
		}
		cfg.duration = d
		// Money must last: the clients move on to fresh reservations as
		// the run goes, about one every 1.25s.
		cfg.reservations = min(1000, max(24, int(d.Seconds()*0.8)))
	}
	if v := os.Getenv("CHAOS_RESERVATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			t.Fatalf("CHAOS_RESERVATIONS=%q: want 1..1000", v)
		}
		cfg.reservations = n
	}
	return cfg
}

// chaosRes is a paid reservation and its WeChat order, in the books of
// one merchant.
type chaosRes struct {
	id, order, txn string
	paid           int64
	book           chaosBook
}

// chaosBook is a merchant (empty: refundd's default merchant) and the
// prefix of the sandbox's admin routes of its books.
type chaosBook struct {
	merchant, admin string
}

// chaosReq is one refund request (one idempotency key and body), sent once
// or more, and what the API answered.
type chaosReq struct {
	res    int
	key    string
	body   map[string]any // never changed after creation
	amount int64          // -1: omitted (refund the rest)
	path   string

	accepted   bool   // some answer was 200/202
	refundNo   string // from the first acceptance
	accAmount  int64
	unanswered bool // the last send got no answer and no send ever got one
}

// chaosRun is the shared state of one run.
type chaosRun struct {
	t     *testing.T
	cfg   chaosConfig
	base  string
	sim   *wxsim
	rd    *refunddProc
	books []chaosBook // reservations are dealt to them round-robin
	start time.Time
	res   []chaosRes

	mu       sync.Mutex
	reqs     []*chaosReq
	problems []string
	timeline []string
	stats    map[string]int
	wrote    bool // artifacts written
}

// problem records a broken promise; the run goes on and fails at the end
// with every problem seen.
func (c *chaosRun) problem(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.problemLocked(format, args...)
}

func (c *chaosRun) problemLocked(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.problems = append(c.problems, msg)
	c.timeline = append(c.timeline, fmt.Sprintf("%8.3fs PROBLEM %s", time.Since(c.start).Seconds(), msg))
}

func (c *chaosRun) event(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timeline = append(c.timeline, fmt.Sprintf("%8.3fs %s", time.Since(c.start).Seconds(), fmt.Sprintf(format, args...)))
}

func (c *chaosRun) count(name string) {
	c.mu.Lock()
	c.stats[name]++
	c.mu.Unlock()
}

// register creates every order at WeChat (it knows what was paid) and
// registers its reservation in refundd, some with WeChat's transaction id.
func (c *chaosRun) register() {
	t := c.t
	rng := rand.New(rand.NewPCG(c.cfg.seed, 4))
	for i := range c.cfg.reservations {
		// With several merchants, consecutive reservations share their
		// out_trade_no, each at its own merchant.
		r := chaosRes{id: fmt.Sprintf("chaos-%03d", i), order: fmt.Sprintf("CHAOS-%03d", i/len(c.books)),
			paid: 2000 + rng.Int64N(28001), book: c.books[i%len(c.books)]}
		var o struct {
			TransactionID string `json:"transaction_id"`
		}
		if _, err := c.sim.admin("POST", r.book.admin+"/orders", map[string]any{"out_trade_no": r.order, "total": r.paid}, &o); err != nil {
			t.Fatal(err)
		}
		reg := map[string]any{"id": r.id, "user_id": "u", "out_trade_no": r.order, "amount": r.paid, "currency": "CNY"}
		if r.book.merchant != "" {
			reg["merchant"] = r.book.merchant
		}
		if rng.IntN(3) == 0 {
			r.txn = o.TransactionID
			reg["transaction_id"] = r.txn
		}
		if code, body, err := apiCall(context.Background(), c.base, "POST", "/v1/reservations", "", reg); code != 201 {
			t.Fatalf("register %s: %d %v %v", r.id, code, body, err)
		}
		c.res = append(c.res, r)
	}
}

// pause waits d, or less if the run is over.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// worker is one client. Its choices come from its own generator.
func (c *chaosRun) worker(ctx context.Context, w int, rng *rand.Rand) {
	for n := 0; ctx.Err() == nil; n++ {
		pause(ctx, time.Duration(20+rng.IntN(100))*time.Millisecond)
		switch p := rng.IntN(100); {
		case p < 35: // an exact duplicate: a gateway retry, or a client retrying an unanswered request
			if r := c.pickPrevious(rng); r != nil {
				c.send(ctx, r)
			}
		case p < 42: // the same key with another body
			if r := c.pickAccepted(rng); r != nil {
				c.reuseKey(ctx, r)
			}
		case p < 55: // read back an accepted refund
			if r := c.pickAccepted(rng); r != nil {
				c.readBack(ctx, r)
			}
		default:
			c.send(ctx, c.newRequest(w, n, rng))
		}
	}
}

// pickRes picks a reservation from the active window, which widens over
// the run so that money lasts; the newest ones are picked most.
func (c *chaosRun) pickRes(rng *rand.Rand) int {
	frac := float64(time.Since(c.start)) / float64(c.cfg.duration)
	window := min(len(c.res), 4+int(frac*float64(len(c.res))))
	if rng.IntN(10) < 7 {
		return max(0, window-6) + rng.IntN(min(window, 6))
	}
	return rng.IntN(window)
}

// newRequest plans a new refund request.
func (c *chaosRun) newRequest(w, n int, rng *rand.Rand) *chaosReq {
	i := c.pickRes(rng)
	paid := c.res[i].paid
	r := &chaosReq{res: i, key: fmt.Sprintf("w%d-%d", w, n), amount: -1,
		body: map[string]any{"user_id": "u"}, path: "/v1/reservations/" + c.res[i].id + "/refunds"}
	switch p := rng.IntN(100); {
	case p < 82:
		r.amount = 1 + rng.Int64N(paid/15)
	case p < 85: // the rest, whatever it is
	case p < 94: // large: usually more than is left
		r.amount = paid/2 + rng.Int64N(paid/2+1)
	default: // more than was ever paid: always refused
		r.amount = paid + 1 + rng.Int64N(paid)
	}
	if r.amount >= 0 {
		r.body["amount"] = r.amount
	}
	if rng.IntN(2) == 0 {
		r.body["reason"] = "chaos " + r.key
	}
	if rng.IntN(10) == 0 {
		r.path += "?wait=300ms"
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
	return r
}

func (c *chaosRun) pickPrevious(rng *rand.Rand) *chaosReq {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reqs) == 0 {
		return nil
	}
	// Unanswered requests are retried more often, as a client would.
	if rng.IntN(2) == 0 {
		var open []*chaosReq
		for _, r := range c.reqs[max(0, len(c.reqs)-200):] {
			if r.unanswered {
				open = append(open, r)
			}
		}
		if len(open) > 0 {
			return open[rng.IntN(len(open))]
		}
	}
	return c.reqs[rng.IntN(len(c.reqs))]
}

func (c *chaosRun) pickAccepted(rng *rand.Rand) *chaosReq {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range 8 {
		if len(c.reqs) == 0 {
			return nil
		}
		if r := c.reqs[rng.IntN(len(c.reqs))]; r.accepted {
			return r
		}
	}
	return nil
}

// send sends r (again) and checks the answer against every earlier one.
func (c *chaosRun) send(ctx context.Context, r *chaosReq) {
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	status, body, err := apiCall(rctx, c.base, "POST", r.path, r.key, r.body)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	res := c.res[r.res]
	code := errCode(body)
	switch {
	case err != nil || status == 503 || status == 504:
		c.stats["no answer"]++
		if status != 0 {
			c.stats[fmt.Sprintf("%d %s", status, code)]++
		}
		if !r.accepted {
			r.unanswered = true
		}
	case status == 200 || status == 202:
		c.stats[strconv.Itoa(status)]++
		no, _ := body["refund_no"].(string)
		amt, _ := body["amount"].(float64)
		switch {
		case no == "":
			c.problemLocked("%s %s: %d without refund_no: %v", res.id, r.key, status, body)
		case r.accepted && (no != r.refundNo || int64(amt) != r.accAmount):
			c.problemLocked("%s key %s: answered %s/%v, earlier %s/%d", res.id, r.key, no, amt, r.refundNo, r.accAmount)
		case r.amount >= 0 && int64(amt) != r.amount:
			c.problemLocked("%s key %s: asked %d, refund %s is %v", res.id, r.key, r.amount, no, amt)
		case r.amount > res.paid || int64(amt) > res.paid:
			c.problemLocked("%s key %s: refund %s of %v accepted on %d paid", res.id, r.key, no, amt, res.paid)
		}
		if !r.accepted {
			r.accepted, r.refundNo, r.accAmount = true, no, int64(amt)
		}
		r.unanswered = false
	case status == 409:
		c.stats["409 "+code]++
		if r.accepted {
			c.problemLocked("%s key %s: replay of accepted refund %s answered 409 %s", res.id, r.key, r.refundNo, code)
		}
		if code != "insufficient_refundable" && code != "reservation_canceled" && code != "refund_limit_reached" {
			c.problemLocked("%s key %s: unexpected 409 %v", res.id, r.key, body)
		}
		r.unanswered = false
	default:
		c.stats[fmt.Sprintf("%d %s", status, code)]++
		c.problemLocked("%s key %s body %v: unexpected %d %v", res.id, r.key, r.body, status, body)
		r.unanswered = false
	}
}

// reuseKey sends an accepted request's key with another body: 422.
func (c *chaosRun) reuseKey(ctx context.Context, r *chaosReq) {
	body := maps.Clone(r.body)
	body["reason"] = "not the same request"
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	status, ans, err := apiCall(rctx, c.base, "POST", "/v1/reservations/"+c.res[r.res].id+"/refunds", r.key, body)
	cancel()
	switch {
	case err != nil || status == 503 || status == 504:
		c.count("no answer")
	case status == 422 && errCode(ans) == "idempotency_key_reused":
		c.count("422 idempotency_key_reused")
	default:
		c.problem("%s key %s reused with another body: %d %v, want 422", c.res[r.res].id, r.key, status, ans)
	}
}

// readBack reads an accepted refund by number: it must exist, always.
func (c *chaosRun) readBack(ctx context.Context, r *chaosReq) {
	c.mu.Lock()
	no, amount := r.refundNo, r.accAmount
	c.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	status, ans, err := apiCall(rctx, c.base, "GET", "/v1/reservations/"+c.res[r.res].id+"/refunds/"+no, "", nil)
	cancel()
	switch {
	case err != nil || status == 503 || status == 504:
		c.count("no answer")
	case status == 200 && ans["refund_no"] == no && ans["amount"] == float64(amount):
		c.count("read back")
	default:
		c.problem("accepted refund %s (%d) read back: %d %v", no, amount, status, ans)
	}
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// injector sets random faults at WeChat: every API fault on create and
// query calls, CLOSED and ABNORMAL outcomes, and duplicated, late
// (reordered), dropped, probe-signed and badly signed notifications.
func (c *chaosRun) injector(ctx context.Context, rng *rand.Rand) {
	api := []string{"http_500", "system_error", "frequency_limited", "accepted_202", "response_lost", "bad_signature", "probe_signature", "delay"}
	notify := []string{"notify_duplicate", "notify_late", "notify_drop", "notify_probe", "notify_bad_signature"}
	ms := func(lo, hi int) string { return strconv.Itoa(lo+rng.IntN(hi-lo+1)) + "ms" }
	for ctx.Err() == nil {
		pause(ctx, time.Duration(40+rng.IntN(160))*time.Millisecond)
		res := c.res[c.pickRes(rng)]
		order := res.order
		f := map[string]any{"count": 1 + rng.IntN(3)}
		if rng.IntN(4) != 0 {
			f["out_trade_no"] = order
		}
		switch p := rng.IntN(100); {
		case p < 60:
			f["kind"] = api[rng.IntN(len(api))]
			if op := []string{"", "create", "create", "query"}[rng.IntN(4)]; op != "" {
				f["op"] = op
			}
			switch f["kind"] {
			case "delay":
				f["delay"] = ms(50, 600)
			case "response_lost":
				if rng.IntN(2) == 0 {
					f["delay"] = ms(50, 400)
				}
			}
		case p < 68:
			f["kind"], f["out_trade_no"], f["count"] = "outcome", order, 1
			f["outcome"] = []string{"CLOSED", "ABNORMAL"}[rng.IntN(2)]
		default:
			f["kind"] = notify[rng.IntN(len(notify))]
			switch f["kind"] {
			case "notify_duplicate":
				f["repeat"] = 1 + rng.IntN(3)
				if rng.IntN(2) == 0 {
					f["delay"] = ms(10, 300)
				}
			case "notify_late":
				f["delay"] = ms(100, 1500)
			}
		}
		if _, err := c.sim.admin("POST", res.book.admin+"/faults", f, nil); err != nil {
			if ctx.Err() == nil {
				c.problem("set fault %v: %v", f, err)
			}
			return
		}
		c.count("fault " + f["kind"].(string))
		c.event("fault %v at %s", f, res.book.admin)
	}
}

// replayUnanswered retries, until answered, every request whose answers
// were all lost: afterwards every refund in refundd must belong to a
// request the API accepted.
func (c *chaosRun) replayUnanswered() {
	c.mu.Lock()
	var open []*chaosReq
	for _, r := range c.reqs {
		if r.unanswered {
			open = append(open, r)
		}
	}
	c.mu.Unlock()
	ctx := context.Background()
	for _, r := range open {
		deadline := time.Now().Add(30 * time.Second)
		for {
			c.send(ctx, r)
			c.mu.Lock()
			done := !r.unanswered
			c.mu.Unlock()
			if done {
				break
			}
			if time.Now().After(deadline) {
				c.problem("request %s/%s got no answer for 30s after the last restart", c.res[r.res].id, r.key)
				break
			}
			time.Sleep(50 * time.Millisecond) // poll interval
		}
	}
	c.event("replayed %d unanswered requests", len(open))
}

// Views of refundd and WeChat at the end.
type (
	refunddRefund struct {
		RefundNo  string `json:"refund_no"`
		Amount    int64  `json:"amount"`
		State     string `json:"state"`
		Code      string `json:"code"`
		Attempts  int    `json:"attempts"`
		Conflicts int    `json:"conflicts"`
		Stuck     bool   `json:"stuck"`
	}
	refunddReservation struct {
		Status   string          `json:"status"`
		Amount   int64           `json:"amount"`
		Refunded int64           `json:"refunded"`
		InFlight int64           `json:"in_flight"`
		Refunds  []refunddRefund `json:"refunds"`
	}
	chaosOrder struct {
		refundd refunddReservation
		sim     simOrder
		refunds map[string]simRefund // WeChat's refunds of the order by number
	}
)

// snapshot reads every reservation from refundd and every order and
// refund from WeChat, and says what may still change ("" when nothing).
func (c *chaosRun) snapshot() ([]chaosOrder, string, error) {
	out := make([]chaosOrder, len(c.res))
	var pending []string
	for i, r := range c.res {
		status, body, err := apiCall(context.Background(), c.base, "GET", "/v1/reservations/"+r.id, "", nil)
		if err != nil || status != 200 {
			return nil, "", fmt.Errorf("GET %s: %d %v %v", r.id, status, body, err)
		}
		raw, _ := json.Marshal(body)
		if err := json.Unmarshal(raw, &out[i].refundd); err != nil {
			return nil, "", err
		}
		if _, err = c.sim.admin("GET", r.book.admin+"/orders/"+r.order, nil, &out[i].sim); err != nil {
			return nil, "", err
		}
		out[i].refunds = map[string]simRefund{}
		for _, no := range out[i].sim.Refunds {
			var rec simRefund
			status, err := c.sim.admin("GET", r.book.admin+"/refunds/"+no, nil, &rec)
			if found := status != http.StatusNotFound; err != nil || !found {
				return nil, "", fmt.Errorf("WeChat refund %s: found %v, %v", no, found, err)
			}
			out[i].refunds[no] = rec
		}
		for _, f := range out[i].refundd.Refunds {
			w, ok := out[i].refunds[f.RefundNo]
			// SUCCEEDED and FAILED never change, and REJECTED waits for an
			// operator: a difference there is for check, not for waiting.
			final := f.State == "SUCCEEDED" || f.State == "FAILED" || f.State == "REJECTED"
			switch {
			case f.State == "PROCESSING" || f.State == "UNKNOWN":
				pending = append(pending, fmt.Sprintf("%s %s", f.RefundNo, f.State))
			case !ok && !final:
				pending = append(pending, fmt.Sprintf("%s %s, unknown to WeChat", f.RefundNo, f.State))
			case ok && sandboxState[w.Refund.Status] != f.State && (!final || w.Refund.Status == "PROCESSING"):
				pending = append(pending, fmt.Sprintf("%s %s, WeChat %s", f.RefundNo, f.State, w.Refund.Status))
			}
		}
		for no, w := range out[i].refunds {
			if w.Refund.Status == "PROCESSING" {
				pending = append(pending, no+" PROCESSING at WeChat")
			}
		}
	}
	slices.Sort(pending)
	return out, strings.Join(pending, "; "), nil
}

// settle waits until nothing is in flight and refundd agrees with WeChat
// on every refund that can still change.
func (c *chaosRun) settle() []chaosOrder {
	limit := 45*time.Second + c.cfg.duration/4
	deadline := time.Now().Add(limit)
	for {
		snap, pending, err := c.snapshot()
		if err == nil && pending == "" {
			c.event("settled")
			return snap
		}
		if time.Now().After(deadline) {
			c.problem("not settled %s after the last restart: %v %s", limit, err, pending)
			if err == nil {
				c.check(snap)
			}
			c.fail(snap)
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
}

// check compares the settled books of refundd and WeChat order by order,
// and the API's answers with refundd's books.
func (c *chaosRun) check(snap []chaosOrder) {
	owner := map[string]string{} // refund number -> reservation/key accepted under it
	accepted := map[string]bool{}
	c.mu.Lock()
	reqs := slices.Clone(c.reqs)
	c.mu.Unlock()
	for _, r := range reqs {
		if !r.accepted {
			continue
		}
		id := c.res[r.res].id
		if prev, ok := owner[r.refundNo]; ok && prev != id+"/"+r.key {
			c.problem("refund %s accepted for two requests: %s and %s/%s", r.refundNo, prev, id, r.key)
		}
		owner[r.refundNo] = id + "/" + r.key
		accepted[r.refundNo] = true
		found := false
		for _, f := range snap[r.res].refundd.Refunds {
			if f.RefundNo == r.refundNo {
				found = true
				if f.Amount != r.accAmount {
					c.problem("accepted refund %s: amount %d, the API said %d", r.refundNo, f.Amount, r.accAmount)
				}
			}
		}
		if !found {
			c.problem("accepted refund %s (%s/%s, %d) is missing from refundd", r.refundNo, id, r.key, r.accAmount)
		}
	}
	for i, o := range snap {
		res := c.res[i]
		var succeeded, holds, wechatSuccess int64
		seen := map[string]bool{}
		for _, f := range o.refundd.Refunds {
			if seen[f.RefundNo] {
				c.problem("%s: refund number %s twice in refundd", res.id, f.RefundNo)
			}
			seen[f.RefundNo] = true
			if !accepted[f.RefundNo] {
				c.problem("%s: refund %s (%s, %d) was never accepted by the API", res.id, f.RefundNo, f.State, f.Amount)
			}
			switch f.State {
			case "SUCCEEDED":
				succeeded += f.Amount
				holds += f.Amount
			case "ABNORMAL":
				holds += f.Amount
			case "FAILED":
			case "REJECTED":
				// A refund whose every attempt met a fault and that WeChat
				// still does not have stops REJECTED (not resent for ever),
				// holding its amount for an operator: a legal end only if
				// WeChat indeed has no such refund.
				if _, ok := o.refunds[f.RefundNo]; ok {
					c.problem("%s: refund %s ends REJECTED but WeChat has it", res.id, f.RefundNo)
				}
				continue
			default:
				c.problem("%s: refund %s ends %s (code %q)", res.id, f.RefundNo, f.State, f.Code)
			}
			w, ok := o.refunds[f.RefundNo]
			switch {
			case !ok:
				c.problem("%s: refund %s (%s) never reached WeChat", res.id, f.RefundNo, f.State)
			case sandboxState[w.Refund.Status] != f.State || w.Refund.Refund != f.Amount:
				c.problem("%s: refund %s is %s of %d in refundd, %s of %d at WeChat", res.id, f.RefundNo, f.State, f.Amount, w.Refund.Status, w.Refund.Refund)
			}
		}
		for no, w := range o.refunds {
			if len(w.Refund.BodyHashes) != 1 {
				c.problem("%s: refund number %s was submitted with %d different bodies", res.id, no, len(w.Refund.BodyHashes))
			}
			if !seen[no] {
				c.problem("%s: WeChat has refund %s (%s, %d) that refundd does not know", res.id, no, w.Refund.Status, w.Refund.Refund)
			}
			if w.Refund.Status == "SUCCESS" {
				wechatSuccess += w.Refund.Refund
			}
		}
		switch {
		case wechatSuccess != succeeded:
			c.problem("%s: WeChat refunded %d, refundd SUCCEEDED %d", res.id, wechatSuccess, succeeded)
		case wechatSuccess > res.paid:
			c.problem("%s: WeChat refunded %d of %d paid", res.id, wechatSuccess, res.paid)
		case o.refundd.Refunded != succeeded || o.refundd.Refunded+o.refundd.InFlight > res.paid:
			c.problem("%s: refundd refunded %d + in flight %d, paid %d (SUCCEEDED sum %d)", res.id, o.refundd.Refunded, o.refundd.InFlight, res.paid, succeeded)
		case o.sim.Refunded != holds:
			c.problem("%s: WeChat holds %d (SUCCESS and ABNORMAL), refundd %d", res.id, o.sim.Refunded, holds)
		}
	}
	if len(c.problems) > 0 {
		c.fail(snap)
	}
}

// report logs what the run did; it fails the test if problems were seen.
func (c *chaosRun) report(kills int, snap []chaosOrder) {
	if len(c.problems) > 0 {
		c.fail(snap)
	}
	states := map[string]int{}
	var refunded, paid int64
	for i, o := range snap {
		for _, f := range o.refundd.Refunds {
			states[f.State]++
		}
		refunded += o.refundd.Refunded
		paid += c.res[i].paid
	}
	if os.Getenv("CHAOS_ARTIFACTS") != "" {
		c.t.Logf("artifacts in %s", c.writeArtifacts(snap))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t.Logf("chaos seed %d passed: %d kills, %d requests planned, %s of %s paid refunded; refunds %v",
		c.cfg.seed, kills, len(c.reqs), fen(refunded), fen(paid), states)
	keys := slices.Sorted(maps.Keys(c.stats))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, c.stats[k])
	}
	c.t.Logf("answers and faults: %s", b.String())
}

func fen(n int64) string { return fmt.Sprintf("%d.%02d CNY", n/100, n%100) }

// fail writes the artifacts and fails the test with the seed and the
// problems.
func (c *chaosRun) fail(snap []chaosOrder) {
	c.t.Helper()
	dir := c.writeArtifacts(snap)
	c.mu.Lock()
	problems := slices.Clone(c.problems)
	c.mu.Unlock()
	var detail strings.Builder
	for _, p := range problems {
		for _, word := range strings.Fields(p) {
			if strings.Contains(word, "-chaos-") { // a refund number
				if lines := grepLines(c.rd.logs.String(), "="+word+" ", 20); lines != "" {
					fmt.Fprintf(&detail, "--- refundd log for %s:\n%s\n", word, lines)
				}
				break
			}
		}
		if detail.Len() > 20000 {
			break
		}
	}
	if len(problems) > 30 {
		problems = append(problems[:30], fmt.Sprintf("... and %d more", len(problems)-30))
	}
	c.t.Fatalf("chaos seed %d FAILED (replay: CHAOS_SEED=%d CHAOS_DURATION=%s); logs, timeline and books in %s\n%s\n%s",
		c.cfg.seed, c.cfg.seed, c.cfg.duration, dir, strings.Join(problems, "\n"), detail.String())
}

// writeArtifacts writes the logs, the timeline and the final books where a
// person can read them: $CHAOS_ARTIFACTS, or a new directory under the
// system's temporary directory. It returns the directory.
func (c *chaosRun) writeArtifacts(snap []chaosOrder) string {
	dir := os.Getenv("CHAOS_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("refundd-chaos-%d-%d", c.cfg.seed, time.Now().Unix()))
	}
	_ = os.MkdirAll(dir, 0o755)
	c.mu.Lock()
	c.wrote = true
	problems := slices.Clone(c.problems)
	timeline := strings.Join(c.timeline, "\n")
	c.mu.Unlock()
	var books strings.Builder
	for i, o := range snap {
		fmt.Fprintf(&books, "%s %s %s paid %d: refundd %+v\n  WeChat %+v\n", c.res[i].id, c.res[i].book.admin, c.res[i].order, c.res[i].paid, o.refundd, o.sim)
		for _, no := range slices.Sorted(maps.Keys(o.refunds)) {
			w := o.refunds[no]
			fmt.Fprintf(&books, "  WeChat %s %s %d bodies=%d submissions=%d deliveries=%d\n", no, w.Refund.Status, w.Refund.Refund,
				len(w.Refund.BodyHashes), w.Refund.Submissions, len(w.Deliveries))
		}
	}
	simLogs := ""
	if c.sim.d != nil {
		simLogs = c.sim.d.logs.String()
	}
	for name, s := range map[string]string{"refundd.log": c.rd.logs.String(), "wxpaysim.log": simLogs,
		"timeline.txt": timeline, "books.txt": books.String(), "problems.txt": strings.Join(problems, "\n")} {
		_ = os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644)
	}
	return dir
}
