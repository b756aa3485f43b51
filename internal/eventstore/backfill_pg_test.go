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

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal"
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

// racedJournal is a node's journal whose Load lets another node append to
// the stream just loaded, the first time any back-fill loads it: the
// moment between a back-fill reading a state and writing its rows.
type racedJournal struct {
	*pgjournal.DB
	race func(stream string)
}

func (j racedJournal) Load(ctx context.Context, stream string, afterSeq uint64) ([]journal.Record, error) {
	recs, err := j.DB.Load(ctx, stream, afterSeq)
	if err == nil {
		j.race(stream)
	}
	return recs, err
}

// listKeys is every key of db's list index.
func listKeys(t *testing.T, db eventstore.Journal) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	after := ""
	for {
		page, err := db.Marks(context.Background(), eventstore.ListPrefix, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page {
			keys[k] = true
		}
		if len(page) < 1000 {
			return keys
		}
		after = page[len(page)-1]
	}
}

// checkListRows fails t unless db's list index holds exactly the rows the
// reservations' states imply (reservation.ListRows), both ways.
func checkListRows(t *testing.T, db eventstore.Journal, ids []string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		evs, _, err := (eventstore.Reader{DB: db}).Load(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range reservation.ListRows(nil, reservation.Replay(evs)) {
			want[eventstore.ListMarkKey(row)] = true
		}
	}
	got := listKeys(t, db)
	for k := range want {
		if !got[k] {
			t.Errorf("list row missing: %s", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("list row no state implies (stale): %s", k)
		}
	}
}

// TestBackfillLists_RacingNodes: a cluster journal written before the list
// index is back-filled by two nodes at once while a third appends to every
// reservation right after a back-fill read it (before it wrote the rows).
// The list index then holds exactly the rows the states imply: no stale
// row of a state an append changed, none missing.
func TestBackfillLists_RacingNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	h := newHistory(seed)
	st := pgtest.New(t)
	a, b, c := st.Open(t, nil), st.Open(t, nil), st.Open(t, nil)
	h.appendTo(t, newActivated(c), 120)
	// A journal from before the list index: no rows, no index/list.
	var clear []journal.Mark
	for k := range listKeys(t, a) {
		clear = append(clear, journal.Mark{Key: k, Clear: true})
	}
	if err := a.WriteMarks(ctx, clear); err != nil {
		t.Fatal(err)
	}

	writer := eventstore.New(c)
	var mu sync.Mutex
	raced := map[string]bool{}
	race := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		if raced[id] {
			return
		}
		raced[id] = true
		evs, _, err := writer.Load(ctx, id) // takes the reservation over
		if err != nil {
			t.Error(err)
			return
		}
		s := reservation.Replay(evs)
		at := h.start.Add(100 * time.Hour)
		var e reservation.Event
		if len(s.Refunds) > 0 {
			rf := s.Refunds[0]
			to := reservation.Succeeded
			if rf.State == to {
				to = reservation.Unknown
			}
			e = reservation.Event{At: at, By: "race", Data: reservation.ProviderResult{RefundNo: rf.No,
				Source: reservation.SourceQuery, Outcome: reservation.OutcomeUnknown, From: rf.State, To: to}}
		} else {
			no := "T-" + id + "-race"
			e = reservation.Event{At: at, By: "race", Data: reservation.RefundRequested{RefundNo: no, Number: 1,
				IdempotencyKey: no, Fingerprint: "f", Amount: 1}}
		}
		if err := writer.Append(ctx, id, s, []reservation.Event{e}); err != nil {
			t.Error(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, db := range []*pgjournal.DB{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = eventstore.BackfillLists(ctx, racedJournal{DB: db, race: race}, log)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(raced) != len(h.states) {
		t.Fatalf("the appender raced %d of %d reservations", len(raced), len(h.states))
	}
	if _, err := a.Get(ctx, eventstore.ListIndexKey); err != nil {
		t.Fatalf("%s after the back-fills: %v", eventstore.ListIndexKey, err)
	}
	ids := make([]string, 0, len(h.states))
	for id := range h.states {
		ids = append(ids, id)
	}
	checkListRows(t, a, ids)
	// journal verify sees the same: the rows match the states both ways.
	// (The random history breaks the state machine's rules on purpose, so
	// only the index and counter checks are read.)
	rep, err := audit.ReplayCheck(ctx, a, 10_000, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		if p.Kind == "index" || p.Kind == "counter" {
			t.Errorf("journal verify after the back-fills: %s", p)
		}
	}
	if rep.Lists != "match the reservations' states" || rep.Counters != "match the events" {
		t.Fatalf("journal verify after the back-fills: lists %q, counters %q", rep.Lists, rep.Counters)
	}
}
