package eventstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal/journaltest"
	"github.com/refundd/refundd/journal/pgjournal"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// backends opens a fresh journal of each kind; the PostgreSQL one skips
// without REFUNDD_TEST_POSTGRES (fails under CI).
var backends = []struct {
	name string
	open func(t *testing.T) eventstore.Journal
}{
	{"bolt", func(t *testing.T) eventstore.Journal { return journaltest.Open(t) }},
	{"postgres", func(t *testing.T) eventstore.Journal { return pgtest.Open(t) }},
}

func TestStore_AppendLoadClaimsAndDueTimes(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			testAppendLoad(t, eventstore.New(be.open(t)))
		})
	}
}

func testAppendLoad(t *testing.T, s *eventstore.Store) {
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	due := at.Add(time.Minute)
	events := []reservation.Event{
		{At: at, By: "test", Data: reservation.Registered{ReservationID: "r1", UserID: "u", OutTradeNo: "O1", Amount: 100, Currency: "CNY"}},
		{At: at, By: "test", Data: reservation.RefundRequested{RefundNo: "T-r1-1", Number: 1, IdempotencyKey: "k", Fingerprint: "f", Amount: 100}},
		{At: at, By: "test", Data: reservation.SubmissionStarted{RefundNo: "T-r1-1", Attempt: 1, Request: []byte(`{}`), DueAt: due}},
	}
	// Load first: an actor always loads before it appends (and on a fenced
	// journal that activates the stream).
	for _, id := range []string{"r1", "r2"} {
		if _, v, err := s.Load(ctx, id); err != nil || v != 0 {
			t.Fatalf("Load(%s) of a new reservation: version %d, %v", id, v, err)
		}
	}
	if err := s.Append(ctx, "r1", nil, events); err != nil {
		t.Fatal(err)
	}
	got, version, err := s.Load(ctx, "r1")
	if err != nil || version != 3 {
		t.Fatalf("Load: version %d err %v", version, err)
	}
	if !reflect.DeepEqual(got, events) {
		t.Fatalf("Load = %+v, want %+v", got, events)
	}
	if id, err := s.LookupRefund(ctx, "T-r1-1"); err != nil || id != "r1" {
		t.Fatalf("LookupRefund = %q, %v", id, err)
	}
	if _, err := s.LookupRefund(ctx, "nope"); !errors.Is(err, reservation.ErrNotFound) {
		t.Fatalf("LookupRefund(unknown) err = %v", err)
	}
	timers, err := s.DueBefore(ctx, due, 10)
	if err != nil || len(timers) != 1 || timers[0] != (reservation.Timer{ReservationID: "r1", RefundNo: "T-r1-1", DueAt: due}) {
		t.Fatalf("DueBefore = %+v, %v", timers, err)
	}
	if timers, _ := s.DueBefore(ctx, due.Add(-time.Nanosecond), 10); len(timers) != 0 {
		t.Fatalf("a timer fired early: %+v", timers)
	}
	if err := s.DeleteDue(ctx, timers); err != nil {
		t.Fatal(err)
	}
	if timers, _ := s.DueBefore(ctx, due, 10); len(timers) != 0 {
		t.Fatalf("DeleteDue left %+v", timers)
	}

	// A second reservation on the same order is refused and writes nothing.
	err = s.Append(ctx, "r2", nil, []reservation.Event{{At: at, By: "test",
		Data: reservation.Registered{ReservationID: "r2", UserID: "u", OutTradeNo: "O1", Amount: 5, Currency: "CNY"}}})
	if !errors.Is(err, reservation.ErrOutTradeNoTaken) {
		t.Fatalf("second registration on O1: %v", err)
	}
	if _, v, _ := s.Load(ctx, "r2"); v != 0 {
		t.Fatalf("refused registration left %d events", v)
	}
	// A stale expected version is a conflict, not a silent overwrite.
	if err := s.Append(ctx, "r1", reservation.Replay(events[:1]), events[2:]); !errors.Is(err, actors.ErrVersionConflict) {
		t.Fatalf("stale append: %v", err)
	}
}

// TestStore_DroppedDuesLeaveWithTheEvents: the due times an append
// supersedes leave the index in its commit, on both journals, and a
// refused append drops nothing.
func TestStore_DroppedDuesLeaveWithTheEvents(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := eventstore.New(be.open(t))
			at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
			due1, due2 := at.Add(30*time.Second), at.Add(90*time.Second)
			if _, _, err := s.Load(ctx, "r1"); err != nil {
				t.Fatal(err)
			}
			first := []reservation.Event{
				{At: at, By: "test", Data: reservation.Registered{ReservationID: "r1", UserID: "u", OutTradeNo: "O1", Amount: 100, Currency: "CNY"}},
				{At: at, By: "test", Data: reservation.RefundRequested{RefundNo: "T-r1-1", Number: 1, IdempotencyKey: "k", Fingerprint: "f", Amount: 100}},
				{At: at, By: "test", Data: reservation.SubmissionStarted{RefundNo: "T-r1-1", Attempt: 1, Request: []byte(`{}`), DueAt: due1}},
			}
			if err := s.Append(ctx, "r1", &reservation.State{}, first); err != nil {
				t.Fatal(err)
			}
			state := reservation.Replay(first)
			dues := func() []reservation.Timer {
				t.Helper()
				timers, err := s.DueBefore(ctx, at.Add(time.Hour), 10)
				if err != nil {
					t.Fatal(err)
				}
				return timers
			}
			if got := dues(); len(got) != 1 || !got[0].DueAt.Equal(due1) {
				t.Fatalf("after the submission: %+v", got)
			}
			// A query moves the due time: the old entry goes, the new one stays.
			query := []reservation.Event{{At: due1, By: "test", Data: reservation.QueryStarted{RefundNo: "T-r1-1", Query: 1, DueAt: due2}}}
			dropped := reservation.DroppedDues(state, query)
			if len(dropped) != 1 || !dropped[0].At.Equal(due1) {
				t.Fatalf("DroppedDues for the query = %+v", dropped)
			}
			// Refused (stale version): nothing is dropped.
			stale := state.Clone()
			stale.Version = 1
			if err := s.Append(ctx, "r1", stale, query); !errors.Is(err, actors.ErrVersionConflict) {
				t.Fatalf("stale append: %v", err)
			}
			if got := dues(); len(got) != 1 || !got[0].DueAt.Equal(due1) {
				t.Fatalf("a refused append changed the due index: %+v", got)
			}
			if err := s.Append(ctx, "r1", state, query); err != nil {
				t.Fatal(err)
			}
			reservation.Apply(state, query[0])
			if got := dues(); len(got) != 1 || !got[0].DueAt.Equal(due2) || got[0].RefundNo != "T-r1-1" {
				t.Fatalf("after the query: %+v", got)
			}
			// Success clears the due time: the index is empty.
			done := []reservation.Event{{At: due1, By: "test", Data: reservation.ProviderResult{RefundNo: "T-r1-1",
				Source: reservation.SourceQuery, From: reservation.Processing, To: reservation.Succeeded, ProviderID: "wx1"}}}
			if err := s.Append(ctx, "r1", state, done); err != nil {
				t.Fatal(err)
			}
			if got := dues(); len(got) != 0 {
				t.Fatalf("after success the index holds %+v", got)
			}
		})
	}
}

// TestStore_FencedIsVersionConflict: when another node loads (activates)
// a reservation, the old owner's append fails with an error that is both a
// version conflict (the actors' contract) and ErrFenced, and writes
// nothing.
func TestStore_FencedIsVersionConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.New(t)
	a, b := eventstore.New(st.Open(t, nil)), eventstore.New(st.Open(t, nil))
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	reg := []reservation.Event{{At: at, By: "test", Data: reservation.Registered{ReservationID: "r1", UserID: "u", OutTradeNo: "O1", Amount: 100, Currency: "CNY"}}}
	req := []reservation.Event{{At: at, By: "test", Data: reservation.RefundRequested{RefundNo: "T-r1-1", Number: 1, IdempotencyKey: "k", Fingerprint: "f", Amount: 100}}}
	if _, _, err := a.Load(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, "r1", nil, reg); err != nil {
		t.Fatal(err)
	}
	if _, v, err := b.Load(ctx, "r1"); err != nil || v != 1 {
		t.Fatalf("B's load: version %d, %v", v, err)
	}
	err := a.Append(ctx, "r1", reservation.Replay(reg), req)
	if !errors.Is(err, actors.ErrVersionConflict) || !errors.Is(err, pgjournal.ErrFenced) {
		t.Fatalf("A's append after B took over: %v", err)
	}
	if _, err := b.LookupRefund(ctx, "T-r1-1"); !errors.Is(err, reservation.ErrNotFound) {
		t.Fatalf("the fenced append's claim is visible: %v", err)
	}
	if err := b.Append(ctx, "r1", reservation.Replay(reg), req); err != nil {
		t.Fatal(err)
	}
}

// TestEngine_TakenOverActorNeverRepliesSuccess runs two actor engines, as
// two nodes, on one PostgreSQL journal. Node B loading a reservation takes
// it over; node A's still active actor must answer its next command with
// an error (its append is fenced), not apply it, and recover by reloading.
func TestEngine_TakenOverActorNeverRepliesSuccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.New(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	policy := reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute}
	engine := func() *actors.Engine {
		e, err := actors.New(actors.Config{Store: eventstore.New(st.Open(t, nil)), Provider: simprovider.New(simprovider.Options{}), Encode: simprovider.Encode,
			Policy: policy, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close(context.Background()) })
		return e
	}
	a, b := engine(), engine()
	if _, _, err := a.Execute(ctx, "r1", "test", reservation.Register{ReservationID: "r1", UserID: "u1", OutTradeNo: "O1", Amount: 100, Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Get(ctx, "r1"); err != nil || st.Version != 1 {
		t.Fatalf("B's get: %+v, %v", st, err)
	}
	amount := int64(30)
	refund := reservation.RequestRefund{UserID: "u1", IdempotencyKey: "k1", Amount: &amount}
	if _, _, err := a.Execute(ctx, "r1", "test", refund); err == nil {
		t.Fatal("A's taken-over actor replied success")
	} else if !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("A's taken-over actor: %v, want ErrUnavailable", err)
	}
	if st, err := b.Get(ctx, "r1"); err != nil || st.Version != 1 {
		t.Fatalf("after the fenced command, B sees version %d (%v); want 1", st.Version, err)
	}
	// A's actor passivates; a retry that reaches it before it stops gets
	// its error again, a later one loads (and activates) anew.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err := a.Execute(ctx, "r1", "test", refund)
		if err == nil {
			break
		}
		if !errors.Is(err, actors.ErrUnavailable) && !errors.Is(err, pgjournal.ErrFenced) || time.Now().After(deadline) {
			t.Fatalf("A's retry: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // polling interval while the old actor stops
	}
	if st, err := a.Get(ctx, "r1"); err != nil || st.Version < 2 {
		t.Fatalf("A after the retry: %+v, %v", st, err)
	}
}
