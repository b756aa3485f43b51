package eventstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// listJournal appends n reservations of two merchants, with refunds moved
// through the states by provider results, at spread times; it returns
// their final states.
func listJournal(t *testing.T, s *eventstore.Store, rng *rand.Rand, n int) []*reservation.State {
	t.Helper()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	var out []*reservation.State
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		at := t0.Add(time.Duration(rng.IntN(3600)) * time.Second) // ties on time happen
		st := &reservation.State{}
		if _, _, err := s.Load(ctx, id); err != nil {
			t.Fatal(err)
		}
		apply := func(events ...reservation.Event) {
			t.Helper()
			before := st
			if !before.Registered() {
				before = nil
			}
			if err := s.Append(ctx, id, before, events); err != nil {
				t.Fatal(err)
			}
			next := st.Clone()
			for _, e := range events {
				reservation.Apply(next, e)
			}
			st = next
		}
		apply(reservation.Event{At: at, By: "t", Data: reservation.Registered{ReservationID: id, UserID: "u", OutTradeNo: "O" + id,
			Amount: 1000, Currency: "CNY", Merchant: []string{"hotel-sh", "hotel-bj"}[i%2]}})
		for j := range rng.IntN(3) {
			no := fmt.Sprintf("T-%s-%d", id, j+1)
			at = at.Add(time.Duration(rng.IntN(60)) * time.Second)
			apply(reservation.Event{At: at, By: "t", Data: reservation.RefundRequested{RefundNo: no, Number: j + 1, IdempotencyKey: no,
				Fingerprint: "f", Amount: int64(10 * (1 + rng.IntN(5))), ReasonCode: reservation.ReasonCodes()[rng.IntN(3)]}},
				reservation.Event{At: at, By: "t", Data: reservation.SubmissionStarted{RefundNo: no, Attempt: 1, Request: []byte(`{}`), DueAt: at.Add(time.Minute)}})
			to := []reservation.RefundState{reservation.Processing, reservation.Succeeded, reservation.Unknown, reservation.Rejected}[rng.IntN(4)]
			if to != reservation.Processing {
				at = at.Add(time.Second)
				apply(reservation.Event{At: at, By: "t", Data: reservation.ProviderResult{RefundNo: no, Source: reservation.SourceResponse,
					Outcome: reservation.Outcome{Kind: reservation.OutcomeKind(to)}.Kind, From: reservation.Processing, To: to}})
			}
		}
		out = append(out, st)
	}
	return out
}

// bruteList is the list f describes, from the states themselves.
func bruteList(states []*reservation.State, f reservation.ListFilter, oldest bool) []string {
	type row struct {
		at  time.Time
		key string
	}
	var rows []row
	for _, s := range states {
		for _, r := range reservation.ListRows(nil, s) {
			if f.Matches(r) && f.MatchesIDs(s, r.RefundNo) {
				rows = append(rows, row{r.At, r.ReservationID + "/" + r.RefundNo})
			}
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return strings.Compare(a.key+"/", b.key+"/")
	})
	if oldest {
		slices.Reverse(rows)
	}
	out := []string{}
	for _, r := range rows {
		out = append(out, r.key)
	}
	return out
}

func readAll(t *testing.T, rd eventstore.Reader, f reservation.ListFilter, o reservation.ListOptions) ([]string, int) {
	t.Helper()
	out := []string{}
	for pages := 1; ; pages++ {
		page, err := rd.List(context.Background(), f, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Rows) > o.Limit {
			t.Fatalf("%d rows, limit %d", len(page.Rows), o.Limit)
		}
		for _, r := range page.Rows {
			out = append(out, r.ReservationID+"/"+r.RefundNo)
		}
		if page.Next == "" {
			return out, pages
		}
		if pages > 10000 {
			t.Fatal("no end")
		}
		o.After = page.Next
	}
}

// TestReader_List_ShortPages: with a scan bound of a few keys, pages come
// short or empty with a Next, and reading on gives exactly the list a
// single read gives and the states say, both ways, on both journals.
func TestReader_List_ShortPages(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			rd := eventstore.Reader{DB: be.open(t)}
			states := listJournal(t, eventstore.New(rd.DB), rng, 40)
			t1 := time.Date(2026, 11, 30, 8, 20, 0, 0, time.UTC)
			filters := []reservation.ListFilter{
				{Kind: reservation.ListRefunds, Merchants: []string{"hotel-sh", "hotel-bj"}},
				{Kind: reservation.ListRefunds, Merchants: []string{"hotel-bj"}, States: []string{"UNKNOWN", "REJECTED"}},
				{Kind: reservation.ListRefunds, Merchants: []string{"hotel-sh", "hotel-bj"}, AtFrom: t1, AtTo: t1.Add(20 * time.Minute), AmountMin: 20},
				{Kind: reservation.ListRefunds, Merchants: []string{"hotel-sh"}, ReasonCode: reservation.ReasonCodes()[1], UpdatedTo: t1},
				{Kind: reservation.ListRefunds, Merchants: []string{"hotel-sh", "hotel-bj"}, States: []string{"ABNORMAL"}}, // none
				{Kind: reservation.ListReservations, Merchants: []string{"hotel-sh", "hotel-bj"}},
				{Kind: reservation.ListReservations, Merchants: []string{"hotel-sh", "hotel-bj"}, RefundStates: reservation.StateBit(reservation.Unknown), AtFrom: t1},
				{Kind: reservation.ListReservations, Merchants: []string{"hotel-bj"}, UserID: "u", AtTo: t1},
				{Kind: reservation.ListRefunds, Merchants: []string{"hotel-sh", "hotel-bj"}, OutTradeNo: "Or3"},
			}
			for i, f := range filters {
				for _, oldest := range []bool{false, true} {
					want := bruteList(states, f, oldest)
					whole, _ := readAll(t, rd, f, reservation.ListOptions{Oldest: oldest, Limit: 1000})
					short, pages := readAll(t, rd, f, reservation.ListOptions{Oldest: oldest, Limit: 2, MaxScan: 3})
					if !slices.Equal(whole, want) || !slices.Equal(short, want) {
						t.Errorf("filter %d oldest %v:\n whole %q\n short %q (%d pages)\n  want %q", i, oldest, whole, short, pages, want)
					}
				}
			}
			if _, err := rd.List(context.Background(), filters[0], reservation.ListOptions{Limit: 1, After: "nonsense"}); err == nil {
				t.Error("a malformed position was read")
			}
		})
	}
}

// TestBackfillLists_OldJournal: a journal written before the list index
// (testdata/premerchant.db, also used by the audit's tests) lists nothing
// until BackfillLists, then every reservation and refund it holds; a
// second run and a new journal's run write nothing.
func TestBackfillLists_OldJournal(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "audit", "testdata", "premerchant.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	rd := eventstore.Reader{DB: db}
	all := []string{reservation.DefaultMerchant}
	refunds := reservation.ListFilter{Kind: reservation.ListRefunds, Merchants: all}
	reservations := reservation.ListFilter{Kind: reservation.ListReservations, Merchants: all}
	if got, _ := readAll(t, rd, refunds, reservation.ListOptions{Limit: 100}); len(got) != 0 {
		t.Fatalf("before the back-fill: %q", got)
	}
	var logs bytes.Buffer
	n, err := eventstore.BackfillLists(ctx, db, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || n != 5 {
		t.Fatalf("BackfillLists = %d, %v; want 5 reservations", n, err)
	}
	if !strings.Contains(logs.String(), "back-filled") {
		t.Errorf("no progress logged: %s", logs.String())
	}
	var states []*reservation.State
	err = db.ForEachStream(ctx, func(sr journal.StreamRecords) error {
		events, err := eventstore.DecodeStream(sr.Stream, sr.Records)
		states = append(states, reservation.Replay(events))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []reservation.ListFilter{refunds, reservations} {
		got, _ := readAll(t, rd, f, reservation.ListOptions{Limit: 100})
		if want := bruteList(states, f, false); !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s after the back-fill: %q, want %q", f.Kind, got, want)
		}
	}
	if got, _ := readAll(t, rd, refunds, reservation.ListOptions{Limit: 100}); len(got) != 7 {
		t.Errorf("refunds: %q, want the fixture's 7", got)
	}
	if n, err := eventstore.BackfillLists(ctx, db, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil || n != 0 {
		t.Errorf("a second back-fill: %d, %v", n, err)
	}
	for _, be := range backends {
		t.Run("new "+be.name, func(t *testing.T) {
			j := be.open(t).(eventstore.BackfillJournal)
			if n, err := eventstore.BackfillLists(ctx, j, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil || n != 0 {
				t.Fatalf("BackfillLists on a new journal: %d, %v", n, err)
			}
			if _, err := j.Get(ctx, eventstore.ListIndexKey); err != nil {
				t.Fatalf("no %s after it: %v", eventstore.ListIndexKey, err)
			}
		})
	}
}
