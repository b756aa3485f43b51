package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// history makes random appends on reservations: new ones of three
// merchants, refunds requested, refunds moved to random states. It keeps
// every reservation's state and events.
type history struct {
	r      *rand.Rand
	start  time.Time
	states map[string]*reservation.State
	events map[string][]reservation.Event
	n      int
}

func newHistory(seed uint64) *history {
	return &history{r: rand.New(rand.NewPCG(seed, 11)), start: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		states: map[string]*reservation.State{}, events: map[string][]reservation.Event{}}
}

// next is the reservation and the events of a random append.
func (h *history) next() (string, []reservation.Event) {
	moves := []reservation.RefundState{reservation.Succeeded, reservation.Failed, reservation.Unknown,
		reservation.Rejected, reservation.Abnormal, reservation.Processing}
	merchants := []string{"default", "hotel-sh", "hotel-bj"}
	for {
		switch {
		case h.n == 0 || h.r.IntN(4) == 0:
			h.n++
			id := fmt.Sprintf("r%d", h.n)
			at := h.start.Add(time.Duration(h.r.IntN(72*60)) * time.Minute)
			return id, []reservation.Event{{At: at, By: "test", Data: reservation.Registered{ReservationID: id, UserID: "u",
				OutTradeNo: "O" + id, Amount: 10_000, Currency: "CNY", Merchant: merchants[h.r.IntN(len(merchants))]}}}
		case h.r.IntN(2) == 0:
			id := fmt.Sprintf("r%d", 1+h.r.IntN(h.n))
			s := h.states[id]
			no := fmt.Sprintf("T-%s-%d", id, len(s.Refunds)+1)
			at := h.start.Add(time.Duration(h.r.IntN(72*60)) * time.Minute)
			return id, []reservation.Event{{At: at, By: "test", Data: reservation.RefundRequested{RefundNo: no, Number: len(s.Refunds) + 1,
				IdempotencyKey: no, Fingerprint: "f", Amount: int64(1 + h.r.IntN(500))}}}
		default:
			id := fmt.Sprintf("r%d", 1+h.r.IntN(h.n))
			s := h.states[id]
			if len(s.Refunds) == 0 {
				continue
			}
			rf := s.Refunds[h.r.IntN(len(s.Refunds))]
			return id, []reservation.Event{{At: rf.CreatedAt.Add(time.Hour), By: "test", Data: reservation.ProviderResult{
				RefundNo: rf.No, Source: reservation.SourceQuery, Outcome: reservation.OutcomeUnknown, From: rf.State, To: moves[h.r.IntN(len(moves))]}}}
		}
	}
}

// appendTo makes n random appends through s.
func (h *history) appendTo(t *testing.T, s *activated, n int) {
	t.Helper()
	for range n {
		id, evs := h.next()
		before := h.states[id]
		if err := s.Append(context.Background(), id, before, evs); err != nil {
			t.Fatalf("append %s: %v", id, err)
		}
		after := &reservation.State{}
		if before != nil {
			after = before.Clone()
		}
		for _, e := range evs {
			reservation.Apply(after, e)
		}
		h.states[id], h.events[id] = after, append(h.events[id], evs...)
	}
}

// downgradeCounters makes st's schema what a build before the counters
// left: no counters tables, schema version 1. The next Open migrates it
// again, with records in the log.
func downgradeCounters(t *testing.T, st *pgtest.Store) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(st.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{st.Schema}.Sanitize()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP TABLE counters, counters_state; DELETE FROM schema_migrations WHERE version = 2"); err != nil {
		t.Fatal(err)
	}
}

// TestBackfillCounters_UpgradedCluster: a cluster journal written before
// the counters is migrated with records in its log: its counters are not
// complete and the totals are refused. Two nodes then back-fill at once
// while a third appends; afterwards the counters (the per-hour totals
// among them) equal a fold of every event, and the totals answer.
func TestBackfillCounters_UpgradedCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	h := newHistory(seed)
	st := pgtest.New(t)
	old := st.Open(t, nil)
	h.appendTo(t, newActivated(old), 150)
	downgradeCounters(t, st)
	old.Close()

	a, b, c := st.Open(t, nil), st.Open(t, nil), st.Open(t, nil)
	if cs, err := a.Counters(ctx); err != nil || cs.Complete {
		t.Fatalf("counters of a journal migrated with records: complete %v, %v; want incomplete", cs.Complete, err)
	}
	if _, err := (eventstore.Totals{DB: a}).Between(ctx, time.Time{}, time.Time{}); !errors.Is(err, eventstore.ErrTotalsNotKept) {
		t.Fatalf("totals before the back-fill: %v, want ErrTotalsNotKept", err)
	}
	// Appends since the upgrade are counted by themselves.
	writer := newActivated(c)
	h.appendTo(t, writer, 50)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var wg sync.WaitGroup
	done := make([]bool, 2)
	errs := make([]error, 2)
	for i, db := range []eventstore.CountersJournal{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done[i], errs[i] = eventstore.BackfillCounters(ctx, db, log)
		}()
	}
	h.appendTo(t, writer, 100) // while they fold
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if done[0] == done[1] {
		t.Fatalf("back-fills that completed the counters: %v, want exactly one", done)
	}
	h.appendTo(t, writer, 20)
	checkCountersFold(t, b, h.events)
	got, err := (eventstore.Totals{DB: b}).Between(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[reservation.RefundState]eventstore.Total{}
	for _, s := range h.states {
		for _, rf := range s.Refunds {
			m := reservation.MerchantOf(s.Merchant)
			if want[m] == nil {
				want[m] = map[reservation.RefundState]eventstore.Total{}
			}
			w := want[m][rf.State]
			w.Refunds++
			w.Amount += rf.Amount
			want[m][rf.State] = w
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("totals after the back-fill\n got %v\nwant %v", got, want)
	}
	// A back-fill of complete counters does nothing.
	if did, err := eventstore.BackfillCounters(ctx, c, log); did || err != nil {
		t.Fatalf("a second back-fill: %v, %v", did, err)
	}
}
