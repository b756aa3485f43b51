package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/tally"
	"github.com/refundd/refundd/journal"
)

// durableView is what the console reads of the counters that must survive
// a restart: the summary's durable counters and the totals of every time.
type durableView struct {
	Notifications map[string]any `json:"notifications"`
	ByMerchant    map[string]any `json:"notifications_by_merchant"`
	ProviderCalls map[string]any `json:"provider_calls"`
	CodeClasses   map[string]any `json:"provider_code_classes"`
	Totals        map[string]any `json:"-"`
}

func readDurable(t *testing.T, c client) durableView {
	t.Helper()
	code, sum := c.do("GET", "/v1/summary", "", nil)
	if code != http.StatusOK || sum["counters_durable"] != true {
		t.Fatalf("summary: %d %v", code, sum)
	}
	raw, _ := json.Marshal(sum)
	var v durableView
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	code, tot := c.do("GET", "/v1/totals", "", nil)
	if code != http.StatusOK {
		t.Fatalf("totals: %d %v", code, tot)
	}
	v.Totals = tot
	return v
}

// journalCounts reads the counters straight from a stopped refundd's
// journal: what a restart must show.
func journalCounts(t *testing.T, data string) (map[string]int64, map[string]int64) {
	t.Helper()
	db, err := journal.Open(filepath.Join(data, "refundd.db"), &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	s, err := tally.Open(ctx, db, "single", nil)
	if err != nil {
		t.Fatal(err)
	}
	values := s.Own()
	tot, err := eventstore.Totals{DB: db}.Between(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	flat := map[string]int64{}
	for m, states := range tot {
		for st, n := range states {
			flat[m+"/"+string(st)+"/refunds"] = n.Refunds
			flat[m+"/"+string(st)+"/amount"] = n.Amount
		}
	}
	return values, flat
}

// TestCounters_SurviveRestart runs the real refundd against wxpaysim:
// refunds settle by notification, a forged notification is refused, then
// refundd is SIGKILLed and restarted, and later stopped and restarted. The
// notification, provider call and totals figures the console reads are
// the same before and after each restart, and equal to what the journal
// holds; every notification WeChat saw acknowledged was counted durably
// before its acknowledgement (the count survives the SIGKILL).
func TestCounters_SurviveRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	refunddBin, simBin := buildCrashBinaries(t)
	addr := freeAddr(t)
	notify := "http://" + addr + "/v1/notify/wechatpay/refund"
	sim := startSim(t, simBin, t.TempDir(), simOptions{processingDelay: "5s", timeFactor: "0.01", notifyURL: notify})
	data := t.TempDir()
	rd := newRefundd(refunddBin, data, addr, sim, false)
	d := rd.start(t)
	c := client{t: t, base: "http://" + addr}

	const refunds, amount = 3, 2500
	nos := make([]string, refunds)
	for i := range refunds {
		id, order := fmt.Sprintf("cnt-%d", i), fmt.Sprintf("ORD-CNT-%d", i)
		sim.createOrder(t, order, 10000)
		if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
			"id": id, "user_id": "u", "out_trade_no": order, "amount": 10000, "currency": "CNY",
		}); code != http.StatusCreated {
			t.Fatalf("register: %d %v", code, body)
		}
		code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", "k", map[string]any{"user_id": "u", "amount": amount})
		if code != http.StatusAccepted {
			t.Fatalf("refund: %d %v", code, body)
		}
		nos[i], _ = body["refund_no"].(string)
	}
	// A forged notification: refused, counted, quarantined.
	req, _ := http.NewRequest(http.MethodPost, notify, strings.NewReader(`{"id":"forged"}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode < 400 {
		t.Fatalf("forged notification: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// Every refund settled by an acknowledged notification.
	acked := 0
	waitFor(t, 60*time.Second, "every refund SUCCEEDED with its notification acknowledged", func() (bool, string) {
		acked = 0
		for i, no := range nos {
			rec, found, err := sim.refund(no)
			if err != nil || !found {
				return false, fmtAny("refund", no, "err", err)
			}
			for _, dl := range rec.Deliveries {
				if dl.Acked {
					acked++
				}
			}
			if _, r := c.do("GET", fmt.Sprintf("/v1/reservations/cnt-%d/refunds/%s", i, no), "", nil); r["state"] != "SUCCEEDED" {
				return false, fmtAny("refund", r)
			}
		}
		return acked >= refunds, fmtAny("acked", acked)
	})
	before := readDurable(t, c)
	if tot, _ := before.Totals["refunded"].(map[string]any); tot["amount"] != float64(refunds*amount) {
		t.Fatalf("totals before the restarts: %v, want %d fen refunded", before.Totals, refunds*amount)
	}

	// SIGKILL: nothing is flushed on the way out.
	d.kill()
	values, totals := journalCounts(t, data)
	if n := values[tally.KeyNotify+"applied"] + values[tally.KeyNotify+"duplicate"]; n < int64(acked) {
		t.Fatalf("WeChat saw %d acknowledgements, the journal counts %d applied or duplicate notifications: %v", acked, n, values)
	}
	if values[tally.KeyNotify+"rejected"] < 1 || values[tally.KeyQuarantined] < 1 {
		t.Fatalf("the forged notification is not counted durably: %v", values)
	}
	if totals["default/SUCCEEDED/amount"] != refunds*amount || totals["default/SUCCEEDED/refunds"] != refunds {
		t.Fatalf("journal totals %v, want %d refunds of %d SUCCEEDED", totals, refunds, amount)
	}
	d = rd.start(t)
	afterKill := readDurable(t, c)
	checkShows(t, "after SIGKILL", afterKill, values)
	if !reflect.DeepEqual(afterKill.Totals, before.Totals) {
		t.Fatalf("totals before SIGKILL %v, after %v", before.Totals, afterKill.Totals)
	}
	if !reflect.DeepEqual(afterKill.Notifications, before.Notifications) {
		t.Fatalf("notifications before SIGKILL %v, after %v", before.Notifications, afterKill.Notifications)
	}

	// A graceful stop writes whatever is queued; the restart shows it all.
	d.stop(t)
	values, _ = journalCounts(t, data)
	checkShows(t, "before the graceful restart", afterKill, values)
	d = rd.start(t)
	afterStop := readDurable(t, c)
	if !reflect.DeepEqual(afterStop, afterKill) {
		t.Fatalf("before a graceful restart %+v\nafter %+v", afterKill, afterStop)
	}
	if calls, _ := afterStop.ProviderCalls["submit"].(map[string]any); calls["PROCESSING"] != float64(refunds) {
		t.Fatalf("provider calls %v, want %d submissions answered PROCESSING", afterStop.ProviderCalls, refunds)
	}
	d.stop(t)
}

// checkShows fails unless the summary's durable figures are the journal's
// counters.
func checkShows(t *testing.T, when string, v durableView, values map[string]int64) {
	t.Helper()
	for k, n := range values {
		var got any
		switch {
		case strings.HasPrefix(k, tally.KeyNotify):
			got = v.Notifications[k[len(tally.KeyNotify):]]
		case strings.HasPrefix(k, tally.KeyProvider):
			op, kind, _ := strings.Cut(k[len(tally.KeyProvider):], "/")
			m, _ := v.ProviderCalls[op].(map[string]any)
			got = m[kind]
		case strings.HasPrefix(k, tally.KeyProviderCode):
			op, class, _ := strings.Cut(k[len(tally.KeyProviderCode):], "/")
			m, _ := v.CodeClasses[op].(map[string]any)
			got = m[class]
		default:
			continue
		}
		if got != float64(n) {
			t.Errorf("%s: %s shows %v, the journal holds %d", when, k, got, n)
		}
	}
}
