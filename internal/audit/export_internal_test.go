package audit

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// TestExport_BoundedCacheSameRows: Export keeps at most a bounded number
// of reservations' states; one evicted while it has events to come is
// replayed again. With room for one state, or for every one, the rows of
// interleaved reservations are the same.
func TestExport_BoundedCacheSameRows(t *testing.T) {
	ctx := context.Background()
	db, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := eventstore.New(db)
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	states := map[string]*reservation.State{}
	run := func(id string, cmd reservation.Command) {
		t.Helper()
		st := states[id]
		if st == nil {
			st = &reservation.State{}
			states[id] = st
		}
		at = at.Add(time.Second)
		evs, err := reservation.Decide(st, cmd, reservation.Env{Now: at, By: "t", Policy: reservation.Policy{RefundNoPrefix: "T"}})
		if err != nil {
			t.Fatal(err)
		}
		before := st.Clone()
		for _, e := range evs {
			reservation.Apply(st, e)
		}
		if err := store.Append(ctx, id, before, evs); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{"a", "b", "c"}
	for i, id := range ids {
		run(id, reservation.Register{ReservationID: id, UserID: "u", OutTradeNo: "O" + id, Amount: int64(1000 * (i + 1)), Currency: "CNY"})
	}
	// Interleaved: each reservation's events are spread over the log.
	for k := 1; k <= 2; k++ {
		for _, id := range ids {
			amount := int64(100 * k)
			run(id, reservation.RequestRefund{UserID: "u", IdempotencyKey: fmt.Sprint("k", k), Amount: &amount})
		}
		for _, id := range ids {
			no := states[id].Refunds[k-1].No
			run(id, reservation.StartSubmission{RefundNo: no, Request: []byte(`{}`)})
		}
	}
	rows := func(cached int) []Row {
		var out []Row
		if err := export(ctx, db, ExportOptions{}, func(r Row) error { out = append(out, r); return nil }, cached); err != nil {
			t.Fatal(err)
		}
		return out
	}
	all, one := rows(1<<16), rows(1)
	if len(all) < 12 {
		t.Fatalf("%d rows, want the whole history", len(all))
	}
	if !reflect.DeepEqual(all, one) {
		for i := range all {
			if i < len(one) && !reflect.DeepEqual(all[i], one[i]) {
				t.Fatalf("row %d: with one state cached %+v, with all %+v", i, one[i], all[i])
			}
		}
		t.Fatalf("%d rows with one state cached, %d with all", len(one), len(all))
	}
}
