package audit_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// TestVerify_SinceChecksTheRulesAfterIt: with Since, the reservations
// touched after it are replayed from their start (on every core) and only
// their events after it are checked: an illegal event before the head is
// not reported, one after it is; the range says what was checked; a head
// that is not on the chain is refused.
func TestVerify_SinceChecksTheRulesAfterIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true})
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
			t.Fatalf("%s: %v", id, err)
		}
		if err := store.Append(bg, id, st, evs); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			reservation.Apply(st, e)
		}
	}
	refund := func(id, key string) {
		amount := int64(1000)
		run(id, reservation.RequestRefund{UserID: "u", IdempotencyKey: key, Amount: &amount})
		no := states[id].Refunds[len(states[id].Refunds)-1].No
		run(id, reservation.StartSubmission{RefundNo: no, Request: []byte(`{}`)})
		run(id, reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse, Attempt: 1,
			Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded, ProviderID: "wx" + no}})
	}
	// illegal appends a result the state machine could not have decided:
	// the first refund, SUCCEEDED, fails. It returns its global.
	illegal := func(id string) uint64 {
		ev := reservation.Event{At: at, By: "t", Data: reservation.ProviderResult{RefundNo: states[id].Refunds[0].No, Source: reservation.SourceQuery,
			Outcome: reservation.OutcomeFailed, From: reservation.Succeeded, To: reservation.Failed}}
		typ, ver, data, err := reservation.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Append(bg, journal.AppendRequest{Stream: id, Expected: states[id].Version,
			Events: []journal.Event{{Type: typ, Version: ver, Data: data}}}); err != nil {
			t.Fatal(err)
		}
		states[id].Version++
		g, err := db.LastGlobal(bg)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	const n = 24
	id := func(i int) string { return "r" + strconv.Itoa(i) }
	for i := range n {
		run(id(i), reservation.Register{ReservationID: id(i), UserID: "u", OutTradeNo: "O" + strconv.Itoa(i), Amount: 5000, Currency: "CNY"})
		refund(id(i), "k1")
	}
	before := illegal("r3")
	full, err := audit.Verify(bg, db, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	head := journal.Checkpoint{Global: full.Journal.Head.Global, Hash: full.Journal.Head.Hash}
	for i := range n { // every reservation touched after the head
		refund(id(i), "k2")
	}
	after := illegal("r7")
	last, err := db.LastGlobal(bg)
	if err != nil {
		t.Fatal(err)
	}
	forged := head
	forged.Hash[0] ^= 1
	tests := []struct {
		name    string
		since   *journal.Checkpoint
		globals []uint64 // the transition problems expected
		from    uint64
		streams int
		err     error
	}{
		{"everything", nil, []uint64{before, after}, 0, n, nil},
		{"since the head", &head, []uint64{after}, head.Global, n, nil},
		{"since the last record", &journal.Checkpoint{Global: last, Hash: mustHead(t, db).Hash}, nil, last, 0, nil},
		{"a head off the chain", &forged, nil, 0, 0, journal.ErrNotOnChain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := audit.VerifyOptions{}
			opts.Check.Since = tt.since
			rep, err := audit.Verify(bg, db, opts)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || rep != nil {
					t.Fatalf("got %v, %v; want %v and no report", rep, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var globals []uint64
			for _, p := range rep.Problems {
				if p.Kind == "transition" {
					globals = append(globals, p.Global)
				}
			}
			if len(globals) != len(tt.globals) || (len(globals) > 0 && (globals[0] != tt.globals[0] || globals[len(globals)-1] != tt.globals[len(tt.globals)-1])) {
				t.Fatalf("transition problems at %v, want %v: %v", globals, tt.globals, rep.Problems)
			}
			if !rep.Journal.OK() || rep.Range.From != tt.from || rep.Range.To != last || rep.Range.Records != last-tt.from || rep.Range.Streams != tt.streams {
				t.Fatalf("range %+v, file problems %v; want %d..%d over %d reservations", rep.Range, rep.Journal.Problems, tt.from, last, tt.streams)
			}
		})
	}
}

func mustHead(t *testing.T, db *journal.DB) journal.Checkpoint {
	t.Helper()
	rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Journal.Head
}
