package journal_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

func TestMarks_SetClearAtomicWithEvents(t *testing.T) {
	ctx := context.Background()
	db := journaltest.Open(t)
	ev := []journal.Event{{Type: "t", Version: 1, Data: []byte("x")}}
	if _, err := db.Append(ctx, journal.AppendRequest{Stream: "s1", Events: ev,
		Marks: []journal.Mark{{Key: "attention/UNKNOWN/s1/a"}, {Key: "attention/stuck/s1/a"}, {Key: "other/x"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Marks(ctx, "attention/", "", 0)
	if err != nil || !reflect.DeepEqual(got, []string{"attention/UNKNOWN/s1/a", "attention/stuck/s1/a"}) {
		t.Fatalf("Marks = %v, %v", got, err)
	}
	// A failed append (stale sequence) changes no mark.
	_, err = db.Append(ctx, journal.AppendRequest{Stream: "s1", Expected: 0, Events: ev, Marks: []journal.Mark{{Key: "attention/UNKNOWN/s1/a", Clear: true}}})
	if !errors.Is(err, journal.ErrSequenceMismatch) {
		t.Fatalf("stale append: %v", err)
	}
	if got, _ := db.Marks(ctx, "attention/UNKNOWN/", "", 0); len(got) != 1 {
		t.Fatalf("a refused append cleared a mark: %v", got)
	}
	// Clear and set in one request, in order.
	if _, err := db.Append(ctx, journal.AppendRequest{Stream: "s1", Expected: 1, Events: ev, Marks: []journal.Mark{
		{Key: "attention/UNKNOWN/s1/a", Clear: true}, {Key: "attention/REJECTED/s1/a"}, {Key: "attention/stuck/s1/a", Clear: true}}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Marks(ctx, "attention/", "", 0); !reflect.DeepEqual(got, []string{"attention/REJECTED/s1/a"}) {
		t.Fatalf("after clear/set: %v", got)
	}
	// Paging with after and limit.
	for _, k := range []string{"p/1", "p/2", "p/3"} {
		head, _ := db.Head(ctx, "s2")
		if _, err := db.Append(ctx, journal.AppendRequest{Stream: "s2", Expected: head, Events: ev, Marks: []journal.Mark{{Key: k}}}); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := db.Marks(ctx, "p/", "p/1", 1); !reflect.DeepEqual(got, []string{"p/2"}) {
		t.Fatalf("page after p/1: %v", got)
	}
	if _, err := db.Append(ctx, journal.AppendRequest{Stream: "s3", Events: ev, Marks: []journal.Mark{{Key: ""}}}); !errors.Is(err, journal.ErrInvalid) {
		t.Fatalf("empty mark key: %v", err)
	}
}
