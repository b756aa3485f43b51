package eventstore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"refundd/actors"
	"refundd/internal/eventstore"
	"refundd/internal/reservation"
	"refundd/journal/journaltest"
)

func TestStore_AppendLoadClaimsAndDueTimes(t *testing.T) {
	ctx := context.Background()
	s := eventstore.New(journaltest.Open(t))
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	due := at.Add(time.Minute)
	events := []reservation.Event{
		{At: at, By: "test", Data: reservation.Registered{ReservationID: "r1", UserID: "u", OutTradeNo: "O1", Amount: 100, Currency: "CNY"}},
		{At: at, By: "test", Data: reservation.RefundRequested{RefundNo: "T-r1-1", Number: 1, IdempotencyKey: "k", Fingerprint: "f", Amount: 100}},
		{At: at, By: "test", Data: reservation.SubmissionStarted{RefundNo: "T-r1-1", Attempt: 1, Request: []byte(`{}`), DueAt: due}},
	}
	if err := s.Append(ctx, "r1", 0, events); err != nil {
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
	if err != nil || len(timers) != 1 || timers[0] != (actors.Timer{ReservationID: "r1", RefundNo: "T-r1-1", DueAt: due}) {
		t.Fatalf("DueBefore = %+v, %v", timers, err)
	}
	if timers, _ := s.DueBefore(ctx, due.Add(-time.Nanosecond), 10); len(timers) != 0 {
		t.Fatalf("a timer fired early: %+v", timers)
	}
	if err := s.DeleteDue(ctx, timers); err != nil {
		t.Fatal(err)
	}

	// A second reservation on the same order is refused and writes nothing.
	err = s.Append(ctx, "r2", 0, []reservation.Event{{At: at, By: "test",
		Data: reservation.Registered{ReservationID: "r2", UserID: "u", OutTradeNo: "O1", Amount: 5, Currency: "CNY"}}})
	if !errors.Is(err, reservation.ErrOutTradeNoTaken) {
		t.Fatalf("second registration on O1: %v", err)
	}
	if _, v, _ := s.Load(ctx, "r2"); v != 0 {
		t.Fatalf("refused registration left %d events", v)
	}
	// A stale expected version is a conflict, not a silent overwrite.
	if err := s.Append(ctx, "r1", 1, events[2:]); !errors.Is(err, actors.ErrVersionConflict) {
		t.Fatalf("stale append: %v", err)
	}
}
