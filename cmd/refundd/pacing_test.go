package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// TestMain_PacingKeepsUnderWeChatsCreateLimit is issue 21's "Rate" test:
// 2,000 refunds queued at once against the sandbox, which refuses (429
// FREQUENCY_LIMITED) every create beyond its limit in a second, as WeChat
// Pay does. refundd paces its creates below that limit, so none is
// refused, every refund settles SUCCEEDED, and the creates counted per
// second at the sandbox never exceed the pace.
//
// The pace is the sandbox's limit: no margin is needed, as an account's
// pacer holds a slot until a second after each answer (merchant.Paced).
// It is low enough that refundd unpaced goes over it even on a loaded
// machine (71 creates in one second, load average 19), so with
// --wechatpay-pace-creates 0 the same test fails. The provider timeout
// covers the whole backlog, so no call is deferred, and so does
// --reconcile-after: a refund still waiting for its turn is not queried,
// found missing and sent a second time (docs/DESIGN.md, pacing).
func TestMain_PacingKeepsUnderWeChatsCreateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 2,000 refunds at 50/s")
	}
	const (
		refunds      = 2000
		sandboxLimit = 50
		pace         = sandboxLimit
		clients      = 32
	)
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--sandbox-delay", "0",
		"--sandbox-max-creates", fmt.Sprint(sandboxLimit), "--wechatpay-pace-creates", fmt.Sprint(pace),
		"--provider-timeout", "5m", "--reconcile-after", "5m", "--log-level", "error"}, testEnv); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	sb := m.provider.sandbox
	c := client{t: t, base: "http://" + m.Addr()}

	// fanOut runs do(i) for every refund from a few clients at once and
	// fails the test with the first error.
	fanOut := func(do func(i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for w := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < refunds; i += clients {
					if err := do(i); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// Paid orders first, so that the refunds then come all at once, far
	// faster than the pace.
	fanOut(func(i int) error {
		id := fmt.Sprintf("res-%d", i)
		if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
			"id": id, "user_id": "u", "out_trade_no": "ORD-" + id, "amount": 1000, "currency": "CNY",
		}); code != 201 {
			return fmt.Errorf("register %s: %d %v", id, code, body)
		}
		return nil
	})
	nos := make([]string, refunds)
	fanOut(func(i int) error {
		id := fmt.Sprintf("res-%d", i)
		code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", "k-"+id, map[string]any{"user_id": "u", "amount": 400})
		no, _ := body["refund_no"].(string)
		if (code != 202 && code != 200) || no == "" {
			return fmt.Errorf("refund %s: %d %v", id, code, body)
		}
		nos[i] = no
		return nil
	})

	// Every refund settles: wait on each with the API's own wait.
	for i, no := range nos {
		path := fmt.Sprintf("/v1/reservations/res-%d/refunds/%s?wait=10s", i, no)
		var state any
		for range 30 {
			code, body := c.do("GET", path, "", nil)
			if code != 200 {
				t.Fatalf("%s: %d %v", no, code, body)
			}
			if state = body["state"]; state != "PROCESSING" {
				break
			}
		}
		if state != "SUCCEEDED" {
			t.Fatalf("%s ended %v, want SUCCEEDED", no, state)
		}
	}

	got := sb.CreateRate()
	total, secs := 0, make([]int64, 0, len(got.PerSecond))
	for s, n := range got.PerSecond {
		total += n
		secs = append(secs, s)
	}
	sort.Slice(secs, func(i, j int) bool { return secs[i] < secs[j] })
	var hist strings.Builder
	for _, s := range secs {
		fmt.Fprintf(&hist, " %d", got.PerSecond[s])
	}
	t.Logf("creates at the sandbox: %d in %d seconds, at most %d in one; per second:%s", total, len(secs), got.Max, hist.String())
	if got.Refused != 0 {
		t.Errorf("the sandbox refused %d creates with FREQUENCY_LIMITED", got.Refused)
	}
	if got.Max > pace {
		t.Errorf("the sandbox saw %d creates in one second, over the pace %d", got.Max, pace)
	}
	if total != refunds {
		t.Errorf("the sandbox saw %d creates for %d refunds (each sent once)", total, refunds)
	}
	// The pace was what held the creates back: they waited for turns,
	// and none was deferred past its deadline.
	waited, deferred, calls := pacingMetrics(t, c)
	t.Logf("provider calls: %s", calls)
	t.Logf("pacing: %.1f s waited in all, %v deferred", waited, deferred)
	if waited <= 0 {
		t.Errorf("no create waited for its turn (%v s): the test did not queue faster than the pace", waited)
	}
	if deferred != 0 {
		t.Errorf("%v creates deferred past their deadline", deferred)
	}
}

var pacingSeries = regexp.MustCompile(`(?m)^refundd_provider_pacing_(wait_seconds_sum|deferred_total)\{account="default",op="create"\} (\S+)$`)

// pacingMetrics reads the creates' total pacing wait and deferrals from
// /metrics, and the provider calls by outcome for the log.
func pacingMetrics(t *testing.T, c client) (waited, deferred float64, calls string) {
	t.Helper()
	req, _ := http.NewRequest("GET", c.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testServiceToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("/metrics: %d %v", res.StatusCode, err)
	}
	for _, m := range pacingSeries.FindAllStringSubmatch(string(b), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		if m[1] == "deferred_total" {
			deferred = v
		} else {
			waited = v
		}
	}
	calls = strings.Join(regexp.MustCompile(`(?m)^refundd_provider_calls_total\{.*$`).FindAllString(string(b), -1), "; ")
	return waited, deferred, calls
}

// TestMain_PacingBacklogSurvivesKill9: refundd is killed (kill -9) while
// refunds wait for their turns to be sent to WeChat Pay (a standalone
// wxpaysim that refuses creates beyond its limit). Pacing keeps its queue
// in memory only: the journal holds each refund's submission and due time,
// so the restarted refundd queries the refunds it has no answer for, sends
// again (same number, same bytes) those WeChat Pay never got, still paced.
// Every refund ends SUCCEEDED, each order refunded exactly once, and no
// create was refused for frequency across both incarnations.
func TestMain_PacingBacklogSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	const (
		refunds = 150
		pace    = 25
		paid    = 1000
		amount  = 400
	)
	refunddBin, simBin := buildCrashBinaries(t)
	addr := freeAddr(t)
	sim := startSim(t, simBin, t.TempDir(), simOptions{processingDelay: "0s", timeFactor: "1",
		notifyURL: "http://" + addr + "/v1/notify/wechatpay/refund", extra: []string{"--max-creates", fmt.Sprint(pace)}})
	// The backlog (150 / 25 s) fits in --provider-timeout, which is below
	// --reconcile-after: nothing is deferred or queried while it waits.
	rd := newRefundd(refunddBin, t.TempDir(), addr, sim, false, "--wechatpay-pace-creates", fmt.Sprint(pace),
		"--provider-timeout", "8s", "--reconcile-after", "10s", "--reconcile-schedule", "1s")
	d := rd.start(t)
	c := client{t: t, base: "http://" + addr}
	nos := make([]string, refunds)
	for i := range refunds {
		id := fmt.Sprintf("kill-%d", i)
		sim.createOrder(t, "ORD-"+id, paid)
		if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
			"id": id, "user_id": "u", "out_trade_no": "ORD-" + id, "amount": paid, "currency": "CNY",
		}); code != 201 {
			t.Fatalf("register %s: %d %v", id, code, body)
		}
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < refunds; i += 16 {
				id := fmt.Sprintf("kill-%d", i)
				_, body := c.do("POST", "/v1/reservations/"+id+"/refunds", "k-"+id, map[string]any{"user_id": "u", "amount": amount})
				nos[i], _ = body["refund_no"].(string)
			}
		}()
	}
	wg.Wait()
	for i, no := range nos {
		if no == "" {
			t.Fatalf("refund of kill-%d not accepted", i)
		}
	}
	// Kill once WeChat Pay has some of them and most still wait.
	var seen sandbox.CreateRate
	waitFor(t, 30*time.Second, "the first creates at WeChat Pay", func() (bool, string) {
		_, err := sim.admin("GET", "/sandbox/creates", nil, &seen)
		n := 0
		for _, v := range seen.PerSecond {
			n += v
		}
		return err == nil && n >= pace, fmtAny("creates", seen, "err", err)
	})
	d.kill()
	if !d.waitExit(30*time.Second) || !d.killedBySIGKILL() {
		t.Fatal("refundd did not die of SIGKILL")
	}
	_, _ = sim.admin("GET", "/sandbox/creates", nil, &seen)
	before := 0
	for _, v := range seen.PerSecond {
		before += v
	}
	if before >= refunds {
		t.Fatalf("all %d creates were sent before the kill: nothing was left waiting", before)
	}
	t.Logf("killed with %d of %d creates sent", before, refunds)

	d = rd.start(t)
	for i, no := range nos {
		id := fmt.Sprintf("kill-%d", i)
		waitFor(t, 60*time.Second, "refund "+no+" SUCCEEDED", func() (bool, string) {
			_, r := c.do("GET", "/v1/reservations/"+id+"/refunds/"+no+"?wait=2s", "", nil)
			return r["state"] == "SUCCEEDED", fmtAny("refundd", r, "logs", "\n"+grepLines(rd.logs.String(), no, 20))
		})
		if o, err := sim.order("ORD-" + id); err != nil || o.Refunded != amount || len(o.Refunds) != 1 {
			t.Fatalf("WeChat's order of %s: %+v %v, want %d refunded once", id, o, err, amount)
		}
	}
	d.stop(t)
	if _, err := sim.admin("GET", "/sandbox/creates", nil, &seen); err != nil {
		t.Fatal(err)
	}
	t.Logf("creates at WeChat Pay: at most %d in one second, %d refused; per second %v", seen.Max, seen.Refused, seen.PerSecond)
	if seen.Refused != 0 || seen.Max > pace {
		t.Fatalf("WeChat Pay saw %d creates in one second (pace %d) and refused %d", seen.Max, pace, seen.Refused)
	}
}
