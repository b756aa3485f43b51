package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/webhook"
)

// consumer records webhook deliveries; it fails the first failFirst and
// hangs on the next hangNext before it starts accepting.
type consumer struct {
	mu        sync.Mutex
	failFirst int
	hangNext  int
	calls     int
	got       []delivered
}

type delivered struct {
	id, reservation string
	global          float64
}

func (c *consumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := webhook.Verify([]byte("whsec-test-0123456789abcdef"), r.Header.Get("Refundd-Timestamp"), body,
		r.Header.Get("Refundd-Signature"), 5*time.Minute, time.Now()); err != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	c.mu.Lock()
	c.calls++
	n := c.calls
	c.mu.Unlock()
	switch {
	case n <= c.failFirst:
		http.Error(w, "down", http.StatusInternalServerError)
		return
	case n <= c.failFirst+c.hangNext:
		select {
		case <-r.Context().Done():
		case <-time.After(15 * time.Second):
		}
		return
	}
	var e struct {
		ID            string  `json:"id"`
		ReservationID string  `json:"reservation_id"`
		Global        float64 `json:"global"`
	}
	_ = json.Unmarshal(body, &e)
	if e.ID != r.Header.Get("Refundd-Event-Id") {
		http.Error(w, "id mismatch", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.got = append(c.got, delivered{e.ID, e.ReservationID, e.Global})
	c.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func TestWebhooks_AtLeastOnceInOrderAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real process")
	}
	cons := &consumer{failFirst: 3, hangNext: 1}
	srv := httptest.NewServer(cons)
	defer srv.Close()
	dir := t.TempDir()
	hooks := filepath.Join(t.TempDir(), "webhooks")
	if err := os.WriteFile(hooks, []byte("ledger "+srv.URL+" env:TEST_WEBHOOK_SECRET start=beginning\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	p := startProc(t, bin, dir, "--webhooks-file", hooks)
	c := client{t: t, base: "http://" + p.addr}
	for i := range 6 {
		if code, b := c.do("POST", "/v1/reservations", "", map[string]any{
			"id": fmt.Sprintf("wh-%d", i), "user_id": "u", "out_trade_no": fmt.Sprintf("WH-%d", i), "amount": 1000, "currency": "CNY",
		}); code != 201 {
			t.Fatalf("register: %d %v", code, b)
		}
		if code, b := c.do("POST", fmt.Sprintf("/v1/reservations/wh-%d/refunds", i), "k", map[string]any{"user_id": "u"}); code != 202 {
			t.Fatalf("refund: %d %v", code, b)
		}
	}
	time.Sleep(300 * time.Millisecond) // some deliveries fail, one hangs, some may land
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()

	p2 := startProc(t, bin, dir, "--webhooks-file", hooks)
	c2 := client{t: t, base: "http://" + p2.addr}
	// The feed from zero is the truth the webhook must have delivered.
	var want []string
	deadline := time.Now().Add(40 * time.Second)
	for {
		_, page := c2.do("GET", "/v1/events?after=0&limit=1000", "", nil)
		want = want[:0]
		done := 0
		for _, e := range page["events"].([]any) {
			ev := e.(map[string]any)
			want = append(want, ev["id"].(string))
			if ev["type"] == "refund.succeeded" {
				done++
			}
		}
		cons.mu.Lock()
		seen := map[string]bool{}
		for _, d := range cons.got {
			seen[d.id] = true
		}
		cons.mu.Unlock()
		all := done == 6
		for _, id := range want {
			all = all && seen[id]
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 40s the consumer has %d distinct events, the feed %d (%d refunds succeeded); logs:\n%s", len(seen), len(want), done, p2.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cons.mu.Lock()
	defer cons.mu.Unlock()
	last := map[string]float64{}
	for _, d := range cons.got {
		// Per reservation, a delivery never goes back before one already
		// made, except for an exact repeat (same id) after the crash.
		if prev, ok := last[d.reservation]; ok && d.global < prev {
			t.Fatalf("reservation %s: event %s (global %v) delivered after global %v", d.reservation, d.id, d.global, prev)
		}
		last[d.reservation] = d.global
	}
	t.Logf("%d deliveries for %d events", len(cons.got), len(want))
}
