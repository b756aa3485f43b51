package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/feed/feedtest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal/pgjournal"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// delivered is one accepted delivery.
type delivered struct {
	id, reservation string
	global          float64
}

// once is an Elector that elects this node for one term, at once.
type once struct{}

func (once) Lead(ctx context.Context, run func(context.Context)) error { run(ctx); return nil }

// tcpCut forwards TCP to target until cut: then every connection is closed
// and new ones are closed at once, as if the network to target were down.
type tcpCut struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
}

func newTCPCut(t *testing.T, target string) *tcpCut {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpCut{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			up, err := net.Dial("tcp", p.target)
			if p.cut || err != nil {
				p.mu.Unlock()
				c.Close()
				if up != nil {
					up.Close()
				}
				continue
			}
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *tcpCut) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		p.conns = map[net.Conn]bool{}
	}
}

// Two nodes' webhook halves on one PostgreSQL journal, in process: the
// leader dispatches events other nodes write (its journal's commit signal
// does not see them); a parked event is listed and replayed through the
// node that does not lead, and the leader delivers it; when the leader
// can no longer reach PostgreSQL, it stops dispatching and gives the
// leadership up.
func TestLeader_ReplayOnAnyNodeAndJournalLoss(t *testing.T) {
	store := pgtest.New(t)
	other := store.Open(t, nil) // the node that does not lead; it also writes the events
	u, err := url.Parse(store.DSN)
	if err != nil {
		t.Fatal(err)
	}
	px := newTCPCut(t, u.Host)
	u.Host = px.ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mine, err := pgjournal.Open(ctx, u.String(), &pgjournal.Options{Schema: store.Schema, NodeID: "leader"})
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()

	h := feedtest.New(t, other, 1)
	for i := range 6 {
		id := fmt.Sprintf("r%d", i)
		h.Register(id, 10000)
		h.Result(id, h.Request(id, 4000), reservation.Succeeded)
	}
	poison := "r2"
	var fixed atomic.Bool
	var mu sync.Mutex
	var got []delivered
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e struct {
			ID            string  `json:"id"`
			ReservationID string  `json:"reservation_id"`
			Global        float64 `json:"global"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &e); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if e.ReservationID == poison && !fixed.Load() {
			http.Error(w, "not today", http.StatusInternalServerError)
			return
		}
		mu.Lock()
		got = append(got, delivered{e.ID, e.ReservationID, e.Global})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	cfg := webhook.Config{Logger: quiet(), MaxAttempts: 2, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		Endpoints: []webhook.Endpoint{{Name: "ledger", URL: recv.URL, Secret: []byte("whsec-test-0123456789abcdef")}}}
	leader, err := webhook.NewLeader(cfg, mine, once{}, webhook.LeaderTiming{Poll: 50 * time.Millisecond, FeedPoll: 50 * time.Millisecond, GiveUp: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	follower, err := webhook.NewLeader(cfg, other, nil, webhook.LeaderTiming{Poll: time.Second, FeedPoll: time.Second, GiveUp: time.Minute}) // never runs
	if err != nil {
		t.Fatal(err)
	}
	termDone := make(chan struct{})
	go func() { defer close(termDone); _ = leader.Run(ctx) }()

	delivered := func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]bool{}
		for _, d := range got {
			seen[d.id] = true
		}
		return seen
	}
	var parked []webhook.ParkedEvent
	waitFor(t, "the poison reservation's events parked, the others delivered", func() bool {
		if parked, err = follower.Parked(ctx, "ledger"); err != nil {
			t.Logf("parked: %v", err)
			return false
		}
		seen, missing := delivered(), 0
		for _, w := range h.Want {
			if w.ReservationID != poison && !seen[fmt.Sprintf("evt_%020d", w.Global)] {
				missing++
			}
		}
		return len(parked) == 2 && missing == 0
	})

	// Events written by the other node after the leader caught up, and a
	// replay asked of the node that does not lead.
	h.Register("r9", 10000)
	h.Request("r9", 2500)
	fixed.Store(true)
	if err := follower.Replay(ctx, "ledger", parked[0].Event.ID); err != nil {
		t.Fatalf("replay through the node that does not lead: %v", err)
	}
	waitFor(t, "every event delivered and nothing parked or behind", func() bool {
		seen, missing := delivered(), 0
		for _, w := range h.Want {
			if !seen[fmt.Sprintf("evt_%020d", w.Global)] {
				missing++
			}
		}
		lags, err := follower.Lag(ctx)
		if err != nil {
			t.Logf("lag: %v", err)
			return false
		}
		return missing == 0 && lags[0].Parked == 0 && lags[0].EventsBehind == 0
	})
	mu.Lock()
	last := map[string]float64{}
	for _, d := range got {
		if d.global < last[d.reservation] {
			t.Errorf("reservation %s: event %s (global %v) delivered after global %v", d.reservation, d.id, d.global, last[d.reservation])
		}
		last[d.reservation] = max(last[d.reservation], d.global)
	}
	mu.Unlock()
	if l, err := leader.LeaderLag(ctx); err != nil || len(l) != 1 {
		t.Errorf("lag on the leader: %v %v; want the endpoint", l, err)
	}
	if l, err := follower.LeaderLag(ctx); err != nil || len(l) != 0 {
		t.Errorf("lag on the node that does not lead: %v %v; want none", l, err)
	}

	// The leader is cut off from PostgreSQL: it stops and hands over.
	px.setCut(true)
	select {
	case <-termDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the leader kept its term 20s after losing PostgreSQL")
	}
	if leader.Leading() {
		t.Error("the leader still exposes a dispatcher after handing over")
	}
	px.setCut(false)
}
