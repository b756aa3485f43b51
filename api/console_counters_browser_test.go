package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConsole_DurableCounters: the operations view shows the counters kept
// in the journal (provider calls, webhook deliveries, notifications) and the
// refund totals, with the numbers the API gives, and a reader is shown them
// too (they need only read).
func TestConsole_DurableCounters(t *testing.T) {
	chromium := chromiumPath(t)
	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(receiver.Close)
	e := newOpsEnv(t, opsOptions{tokens: "operator:" + tokOperator + ",service:" + tokService + ",reader:" + tokReader,
		webhookURL: receiver.URL, counters: true})
	svc, op := bearer(tokService), bearer(tokOperator)
	for _, r := range []struct {
		id     string
		amount int64
	}{{"hotel-42", 12345}, {"tour-7", 500}} {
		if resp := e.do(t, http.MethodPost, "/v1/reservations", registerBody(r.id, 88800), svc...); resp.status != http.StatusCreated {
			t.Fatalf("register: %s", resp)
		}
		decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/"+r.id+"/refunds?wait=5s", fmt.Sprintf(`{"user_id":"u-%s","amount":%d}`, r.id, r.amount),
			append(svc, "Idempotency-Key", "k")...), http.StatusOK)
	}
	type summary struct {
		ProviderCalls     map[string]map[string]int64 `json:"provider_calls"`
		WebhookDeliveries map[string]map[string]int64 `json:"webhook_deliveries"`
	}
	var sum summary
	// Both refunds' events (requested, succeeded) delivered: 4 POSTs.
	waitFor(t, "four deliveries counted", func() bool {
		r := e.do(t, http.MethodGet, "/v1/summary", "", op...)
		sum = summary{}
		return r.status == http.StatusOK && json.Unmarshal(r.body, &sum) == nil && sum.WebhookDeliveries["crm"]["delivered"] == 4
	})
	submits := sum.ProviderCalls["submit"]
	if submits["SUCCEEDED"]+submits["PROCESSING"] != 2 {
		t.Fatalf("provider calls %v, want 2 answered submissions", sum.ProviderCalls)
	}

	b := launch(t, chromium)
	for _, tok := range []string{tokOperator, tokReader} {
		page := b.newPage(t)
		page.navigate(t, e.srv.URL+"/console/")
		page.click(t, "#token")
		page.insertText(t, tok)
		page.click(t, "#token-use")
		page.waitTrue(t, "who is signed in", `document.getElementById('whoami').textContent.includes('signed in as ')`)
		page.click(t, "#nav-ops")
		page.waitTrue(t, "the counters", `!!document.querySelector('#ops-counters tr[data-counter="provider"][data-op="submit"]')`)
		page.waitTrue(t, "the totals", `!!document.querySelector('#ops-totals tr[data-merchant="default"]')`)
		cell := func(sel string) string {
			t.Helper()
			return page.eval(t, `(document.querySelector('`+sel+`') || {textContent: 'absent'}).textContent`).(string)
		}
		for kind, n := range submits {
			if got := cell(`#ops-counters tr[data-op="submit"] td[data-outcome="` + kind + `"]`); got != fmt.Sprint(n) {
				t.Errorf("submit %s shows %q, the API %d", kind, got, n)
			}
		}
		if got := cell(`#ops-counters tr[data-counter="webhook"][data-endpoint="crm"] td[data-outcome="delivered"]`); got != "4" {
			t.Errorf("webhook deliveries show %q, want 4", got)
		}
		if got := cell(`#ops-counters tr[data-counter="notifications"][data-merchant=""] td[data-outcome="applied"]`); got != "0" {
			t.Errorf("notifications applied show %q, want 0", got)
		}
		// ¥123.45 + ¥5.00 refunded, two refunds; nothing in flight.
		if got := cell(`#ops-totals tr[data-merchant="default"] td[data-total="refunded"]`); !strings.Contains(got, "\u00a5128.45") || !strings.Contains(got, "2 refunds") {
			t.Errorf("refunded shows %q, want \u00a5128.45 in 2 refunds", got)
		}
		if got := cell(`#ops-totals tr[data-merchant="default"] td[data-total="in_flight"]`); !strings.Contains(got, "\u00a50.00") {
			t.Errorf("in flight shows %q, want \u00a50.00", got)
		}
		// Today's range holds the same refunds: they were requested now.
		page.eval(t, `(() => { const s = document.getElementById('totals-range'); s.value = 'today'; s.dispatchEvent(new Event('change')); return true; })()`)
		page.waitTrue(t, "today's totals", `document.getElementById('totals-range') && document.getElementById('totals-range').value === 'today' && `+
			`!!document.querySelector('#ops-totals tr[data-merchant="default"] td[data-total="refunded"]')`)
		if got := cell(`#ops-totals tr[data-merchant="default"] td[data-total="refunded"]`); !strings.Contains(got, "\u00a5128.45") {
			t.Errorf("today's refunded shows %q, want \u00a5128.45", got)
		}
		if tok == tokOperator {
			shots := os.Getenv("REFUNDD_CONSOLE_SHOTS")
			if shots == "" {
				shots = t.TempDir()
			}
			t.Logf("screenshots of the counters and totals at 1440 and 760 px: %s", shots)
			for _, w := range []int{1440, 760} {
				page.resize(t, w)
				page.checkLayout(t, fmt.Sprintf("counters at %d px", w))
				page.eval(t, `(document.getElementById('ops-counters').scrollIntoView(), true)`)
				page.screenshot(t, filepath.Join(shots, fmt.Sprintf("ops-counters-%d.png", w)))
			}
		}
	}
	for _, ev := range b.eventsNamed("Log.entryAdded", "Runtime.exceptionThrown", "Page.javascriptDialogOpening") {
		s := string(ev.Params)
		if ev.Method != "Log.entryAdded" || strings.Contains(s, "Content Security Policy") || strings.Contains(s, "Trusted Type") {
			t.Errorf("%s: %s", ev.Method, s)
		}
	}
}
