package merchant

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// fakeClock is a pacer's clock that moves only when a pacer sleeps.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) clock() PacingClock {
	return PacingClock{
		Now: func() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now },
		Sleep: func(ctx context.Context, d time.Duration) bool {
			if ctx.Err() != nil {
				return false
			}
			c.mu.Lock()
			c.now = c.now.Add(d)
			c.mu.Unlock()
			return true
		},
	}
}

func (c *fakeClock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// paceLog records what the pacer observed and which calls reached the
// provider.
type paceLog struct {
	mu     sync.Mutex
	waits  []time.Duration
	defer_ []bool
	calls  []string
}

func (l *paceLog) ObservePacing(account, op string, waited time.Duration, deferred bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waits, l.defer_ = append(l.waits, waited), append(l.defer_, deferred)
}

// last returns the last observation.
func (l *paceLog) last() (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waits[len(l.waits)-1], l.defer_[len(l.defer_)-1]
}

type countingProvider struct {
	recorder
	log *paceLog
}

func (p countingProvider) Submit(ctx context.Context, no string, b []byte, a int) reservation.Outcome {
	p.log.mu.Lock()
	p.log.calls = append(p.log.calls, "create "+no)
	p.log.mu.Unlock()
	return p.recorder.Submit(ctx, no, b, a)
}

func (p countingProvider) Query(ctx context.Context, no string) reservation.Outcome {
	p.log.mu.Lock()
	p.log.calls = append(p.log.calls, "query "+no)
	p.log.mu.Unlock()
	return p.recorder.Query(ctx, no)
}

// pacedFixture paces the merchants of the base file (shop on its own
// account; inn-1 and inn-2 sub-merchants of the account sp).
func pacedFixture(t *testing.T, p Pacing) (map[string]Provider, *fakeClock, *paceLog) {
	t.Helper()
	r := mustParse(t, base)
	log := &paceLog{}
	ps := map[string]Provider{}
	for _, m := range r.Merchants() {
		ps[m.Name] = countingProvider{recorder{m.Name}, log}
	}
	clk := &fakeClock{now: time.Now()}
	paced, err := r.Paced(ps, p, log, clk.clock())
	if err != nil {
		t.Fatal(err)
	}
	return paced, clk, log
}

func TestPaced_WaitsForTurns(t *testing.T) {
	ps, clk, log := pacedFixture(t, Pacing{Creates: 10, Queries: 20})
	ctx := context.Background()
	shop := ps["shop"]
	for i, want := range []time.Duration{0, 100 * time.Millisecond, 100 * time.Millisecond} {
		if o := shop.Submit(ctx, "SH-a-1", nil, 1); o.Kind != reservation.OutcomeProcessing {
			t.Fatalf("call %d: %+v", i, o)
		}
		if got, deferred := log.last(); got != want || deferred {
			t.Fatalf("call %d waited %v (deferred %v), want %v", i, got, deferred, want)
		}
	}
	// Queries have their own limiter: the creates did not use its turns.
	shop.Query(ctx, "SH-a-1")
	if got, _ := log.last(); got != 0 {
		t.Fatalf("first query waited %v", got)
	}
	shop.Query(ctx, "SH-a-1")
	if got, _ := log.last(); got != 50*time.Millisecond {
		t.Fatalf("second query waited %v, want 50ms", got)
	}
	// A burst of one: idle time does not bank turns, so a second call
	// right after a long pause still waits its spacing.
	clk.advance(10 * time.Second)
	shop.Submit(ctx, "SH-a-1", nil, 1)
	shop.Submit(ctx, "SH-a-1", nil, 1)
	if got, _ := log.last(); got != 100*time.Millisecond {
		t.Fatalf("after a pause the second call waited %v, want 100ms", got)
	}
	if len(log.calls) != 7 {
		t.Fatalf("calls made: %v", log.calls)
	}
}

func TestPaced_DeadlineDefersWithUnknown(t *testing.T) {
	ps, clk, log := pacedFixture(t, Pacing{Creates: 1, Queries: 1})
	shop := ps["shop"]
	shop.Submit(context.Background(), "SH-a-1", nil, 1) // takes the turn of this second
	for _, op := range []string{OpCreate, OpQuery} {
		if op == OpQuery {
			shop.Query(context.Background(), "SH-a-1")
		}
		ctx, cancel := context.WithDeadline(context.Background(), clk.clock().Now().Add(500*time.Millisecond))
		var o reservation.Outcome
		if op == OpCreate {
			o = shop.Submit(ctx, "SH-b-1", nil, 1)
		} else {
			o = shop.Query(ctx, "SH-b-1")
		}
		cancel()
		if o.Kind != reservation.OutcomeUnknown || o.Code != CodePacingDeferred {
			t.Fatalf("%s past its deadline: %+v, want UNKNOWN %s (never a definite answer)", op, o, CodePacingDeferred)
		}
		if got, deferred := log.last(); got != 0 || !deferred {
			t.Fatalf("%s: observed wait %v deferred %v", op, got, deferred)
		}
	}
	for _, c := range log.calls {
		if c == "create SH-b-1" || c == "query SH-b-1" {
			t.Fatalf("a deferred call was made: %v", log.calls)
		}
	}
	// The deferred call gave its turn back: the next one waits one
	// spacing, not two.
	ctx, cancel := context.WithDeadline(context.Background(), clk.clock().Now().Add(2*time.Second))
	defer cancel()
	if o := shop.Submit(ctx, "SH-c-1", nil, 1); o.Kind != reservation.OutcomeProcessing {
		t.Fatalf("call within its deadline: %+v", o)
	}
	if got, deferred := log.last(); got != time.Second || deferred {
		t.Fatalf("waited %v deferred %v, want 1s", got, deferred)
	}
	// A caller that leaves while waiting is deferred too.
	gone, stop := context.WithCancel(context.Background())
	stop()
	if o := shop.Submit(gone, "SH-d-1", nil, 1); o.Code != CodePacingDeferred {
		t.Fatalf("cancelled caller: %+v", o)
	}
}

func TestPaced_PerAccount(t *testing.T) {
	ps, _, log := pacedFixture(t, Pacing{Creates: 2, Queries: 2})
	ctx := context.Background()
	ps["shop"].Submit(ctx, "SH-a-1", nil, 1)
	// Another account is not held up by shop's calls.
	ps["inn-1"].Submit(ctx, "IA-a-1", nil, 1)
	if got, _ := log.last(); got != 0 {
		t.Fatalf("account sp waited %v for account shop", got)
	}
	// Sub-merchants of one service provider share its limit.
	ps["inn-2"].Submit(ctx, "IB-a-1", nil, 1)
	if got, _ := log.last(); got != 500*time.Millisecond {
		t.Fatalf("inn-2 after inn-1 (both of sp) waited %v, want 500ms", got)
	}
}

func TestPaced_ZeroIsUnpacedAndNegativeRefused(t *testing.T) {
	ps, _, log := pacedFixture(t, Pacing{})
	for range 3 {
		ps["shop"].Submit(context.Background(), "SH-a-1", nil, 1)
	}
	if len(log.calls) != 3 || len(log.waits) != 0 {
		t.Fatalf("unpaced: calls %v observations %v", log.calls, log.waits)
	}
	if _, err := mustParse(t, base).Paced(nil, Pacing{Creates: -1}, nil, PacingClock{}); err == nil {
		t.Fatal("negative pacing accepted")
	}
}

// rejecting refuses creates of refund numbers starting "BAD", and those
// starting "LIM" for the rate; "ERR" answers an unknown outcome of its
// own (a 500).
type rejecting struct{ recorder }

func (p rejecting) Submit(ctx context.Context, no string, b []byte, a int) reservation.Outcome {
	switch {
	case strings.HasPrefix(no, "BAD"):
		return reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "INVALID_REQUEST"}
	case strings.HasPrefix(no, "LIM"):
		return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "FREQUENCY_LIMITED"}
	case strings.HasPrefix(no, "ERR"):
		return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "SYSTEM_ERROR"}
	}
	return p.recorder.Submit(ctx, no, b, a)
}

// A create WeChat Pay refuses costs the account a turn of its failing
// creates' limit: the next create waits for it; successful ones do not.
func TestPaced_RefusedCreatesSlowTheNext(t *testing.T) {
	r := mustParse(t, base)
	log := &paceLog{}
	ps := map[string]Provider{}
	for _, m := range r.Merchants() {
		ps[m.Name] = rejecting{recorder{m.Name}}
	}
	clk := &fakeClock{now: time.Now()}
	paced, err := r.Paced(ps, Pacing{Creates: 100, FailedCreates: 2}, log, clk.clock())
	if err != nil {
		t.Fatal(err)
	}
	shop, ctx := paced["shop"], context.Background()
	for i, s := range []struct {
		no   string
		want time.Duration
	}{
		{"OK-1", 0},
		{"OK-2", 10 * time.Millisecond}, // spacing only
		{"BAD-1", 10 * time.Millisecond},
		{"OK-3", 500 * time.Millisecond}, // the refusal's turn at 2/s
		{"BAD-2", 10 * time.Millisecond},
		{"BAD-3", 500 * time.Millisecond},
		{"LIM-1", 500 * time.Millisecond},
		{"ERR-1", 500 * time.Millisecond}, // the refusal for the rate's turn
		{"OK-4", 10 * time.Millisecond},   // a 500 is not a refusal
	} {
		shop.Submit(ctx, s.no, nil, 1)
		if got, deferred := log.last(); got != s.want || deferred {
			t.Fatalf("call %d (%s) waited %v deferred %v, want %v", i, s.no, got, deferred, s.want)
		}
	}
}

// The slots bound what WeChat Pay sees, not only when calls start: calls
// whose requests arrive late in their call (a busy connection, a starved
// CPU) cannot crowd one second. Real clock: the calls run concurrently.
func TestPaced_ArrivalsNeverExceedTheRate(t *testing.T) {
	const (
		pace    = 20
		calls   = 60
		latency = 200 * time.Millisecond
	)
	r := mustParse(t, base)
	arrivals := &arrivalLog{latency: latency}
	ps := map[string]Provider{}
	for _, m := range r.Merchants() {
		ps[m.Name] = arrivals
	}
	paced, err := r.Paced(ps, Pacing{Creates: pace}, nil, PacingClock{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paced["shop"].Submit(context.Background(), fmt.Sprintf("SH-%d", i), nil, 1)
		}()
	}
	wg.Wait()
	if n, at := arrivals.maxPerSecond(); n > pace {
		t.Fatalf("%d requests arrived within one second from %v, over the pace %d", n, at, pace)
	} else {
		t.Logf("at most %d requests arrived in one second", n)
	}
}

// arrivalLog is a provider whose calls take latency; every other request
// arrives at the end of its call, the rest at its start.
type arrivalLog struct {
	recorder
	latency time.Duration
	mu      sync.Mutex
	n       int
	at      []time.Time
}

func (a *arrivalLog) Submit(ctx context.Context, no string, b []byte, attempt int) reservation.Outcome {
	start := time.Now()
	a.mu.Lock()
	late := a.n%2 == 0
	a.n++
	a.mu.Unlock()
	timer := time.NewTimer(a.latency)
	<-timer.C
	arrived := start
	if late {
		arrived = time.Now()
	}
	a.mu.Lock()
	a.at = append(a.at, arrived)
	a.mu.Unlock()
	return reservation.Outcome{Kind: reservation.OutcomeProcessing}
}

// maxPerSecond returns the most arrivals within any window of one second,
// and its start.
func (a *arrivalLog) maxPerSecond() (int, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := slices.Clone(a.at)
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	best, from := 0, time.Time{}
	for i := range at {
		j, _ := slices.BinarySearchFunc(at, at[i].Add(time.Second), func(x, t time.Time) int { return x.Compare(t) })
		if j-i > best {
			best, from = j-i, at[i]
		}
	}
	return best, from
}

func TestParse_Pacing(t *testing.T) {
	doc := strings.Replace(base, "apiv2_key = \"env:SP_APIV2_KEY\"\n",
		"apiv2_key = \"env:SP_APIV2_KEY\"\npace_creates = 50\npace_failed_creates = 0.5\npace_queries = 0\n", 1)
	r := mustParse(t, doc)
	sp, _ := r.Account("sp")
	shop, _ := r.Account("shop")
	if got := PacingOf(sp, DefaultPacing); got != (Pacing{Creates: 50, FailedCreates: 0.5, Queries: 0}) {
		t.Fatalf("sp's pacing %+v", got)
	}
	if got := PacingOf(shop, DefaultPacing); got != DefaultPacing {
		t.Fatalf("shop's pacing %+v, want the defaults", got)
	}
	out, err := r.Encode()
	if err != nil || !strings.Contains(string(out), "pace_creates = 50.0") || !strings.Contains(string(out), "pace_queries = 0.0") {
		t.Fatalf("Encode lost the pacing: %v\n%s", err, out)
	}
	bad := strings.Replace(doc, "pace_creates = 50", "pace_creates = -1", 1)
	bad = strings.Replace(bad, "pace_queries = 0", "pace_queries = nan", 1)
	_, err = Parse([]byte(bad), "")
	for _, key := range []string{"accounts[1].pace_creates", "accounts[1].pace_queries"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("bad pacing: %v, want an error naming %s", err, key)
		}
	}
	// Sub-merchants are paced at their service provider's settings.
	log := &paceLog{}
	ps := map[string]Provider{}
	for _, m := range r.Merchants() {
		ps[m.Name] = countingProvider{recorder{m.Name}, log}
	}
	clk := &fakeClock{now: time.Now()}
	paced, err := r.Paced(ps, DefaultPacing, log, clk.clock())
	if err != nil {
		t.Fatal(err)
	}
	paced["inn-1"].Submit(context.Background(), "IA-1", nil, 1)
	paced["inn-2"].Submit(context.Background(), "IB-1", nil, 1)
	if got, _ := log.last(); got != 20*time.Millisecond {
		t.Fatalf("inn-2 after inn-1 waited %v, want 20ms (sp's 50/s)", got)
	}
}

func TestPaceQueries(t *testing.T) {
	q := recorder{"shop"}
	if got, err := PaceQueries(q, "shop", 0, nil); err != nil || got != Querier(q) {
		t.Fatalf("unpaced: %v %v, want q itself", got, err)
	}
	if _, err := PaceQueries(q, "shop", -1, nil); err == nil {
		t.Fatal("negative pace accepted")
	}
	log := &paceLog{}
	paced, err := PaceQueries(q, "shop", 20, log)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		paced.Query(context.Background(), "SH-a-1")
	}
	if got, deferred := log.last(); got <= 0 || deferred {
		t.Fatalf("second query at 20/s waited %v (deferred %v), want a turn's wait", got, deferred)
	}
}

// TestPacers_Stage: merchants on an account added while the service runs
// share one pacer from their stage on, but the Pacers keep it only from
// the commit: a stage never committed (a refused reload) leaves nothing,
// and the next stage of that account makes a fresh pacer; once committed,
// later merchants of the account take their turns with it.
func TestPacers_Stage(t *testing.T) {
	log := &paceLog{}
	clk := &fakeClock{now: time.Now()}
	ps, err := NewPacers(Pacing{Creates: 2, Queries: 2}, log, clk.clock())
	if err != nil {
		t.Fatal(err)
	}
	bar := &Account{Name: "bar", Kind: AccountServiceProvider}
	m1 := &Merchant{Name: "bar-1", Account: bar, RefundNoPrefix: "B1"}
	m2 := &Merchant{Name: "bar-2", Account: bar, RefundNoPrefix: "B2"}
	m3 := &Merchant{Name: "bar-3", Account: bar, RefundNoPrefix: "B3"}
	provs := map[string]Provider{}
	for _, m := range []*Merchant{m1, m2, m3} {
		provs[m.Name] = countingProvider{recorder{m.Name}, log}
	}
	ctx := context.Background()
	submit := func(p Provider, no string) time.Duration {
		t.Helper()
		p.Submit(ctx, no, nil, 1)
		got, _ := log.last()
		return got
	}

	refused, _, err := ps.Stage([]*Merchant{m1, m2}, provs)
	if err != nil {
		t.Fatal(err)
	}
	if submit(refused["bar-1"], "B1-a-1") != 0 || submit(refused["bar-2"], "B2-a-1") != 500*time.Millisecond {
		t.Fatal("merchants of one staged account do not share its pacer")
	}
	// Not committed: the next stage paces bar afresh.
	staged, commit, err := ps.Stage([]*Merchant{m1, m2}, provs)
	if err != nil {
		t.Fatal(err)
	}
	if got := submit(staged["bar-1"], "B1-a-2"); got != 0 {
		t.Fatalf("a stage never committed left its pacer: the next waited %v", got)
	}
	commit()
	later, _, err := ps.Stage([]*Merchant{m3}, provs)
	if err != nil {
		t.Fatal(err)
	}
	if got := submit(later["bar-3"], "B3-a-1"); got != 500*time.Millisecond {
		t.Fatalf("a merchant staged after the commit waited %v, want 500ms (the committed pacer's turn)", got)
	}
	if _, _, err := ps.Stage([]*Merchant{{Name: "none", Account: bar}}, provs); err == nil {
		t.Fatal("a merchant without a provider was staged")
	}
}
