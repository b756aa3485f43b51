package audit

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// TestVerify_SequentialSameAsPerStream: Verify reads the log in file order
// (gatherStreams); on a journal of interleaved reservations with several
// corruptions its report is the one reading stream by stream through the
// index (ForEachStream) gives, with room for every open reservation or for
// none (each let go and read again through the index).
func TestVerify_SequentialSameAsPerStream(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	store := eventstore.New(db)
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	states := map[string]*reservation.State{}
	step := 0
	run := func(id string, cmd reservation.Command) {
		t.Helper()
		st := states[id]
		if st == nil {
			st = &reservation.State{}
			states[id] = st
		}
		step++
		evs, err := reservation.Decide(st, cmd, reservation.Env{Now: at.Add(time.Duration(step) * time.Second), By: "t", Policy: reservation.Policy{RefundNoPrefix: "T"}})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if err := store.Append(ctx, id, st, evs); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			reservation.Apply(st, e)
		}
	}
	// Eight reservations whose events interleave: each is open across the
	// others' appends.
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = "r" + strconv.Itoa(i)
		run(ids[i], reservation.Register{ReservationID: ids[i], UserID: "u", OutTradeNo: "O" + strconv.Itoa(i), Amount: 3000, Currency: "CNY"})
	}
	for k := 1; k <= 2; k++ {
		for _, id := range ids {
			amount := int64(1000)
			run(id, reservation.RequestRefund{UserID: "u", IdempotencyKey: "k" + strconv.Itoa(k), Amount: &amount})
		}
		for _, id := range ids {
			no := states[id].Refunds[k-1].No
			run(id, reservation.StartSubmission{RefundNo: no, Request: []byte(`{}`)})
			run(id, reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse, Attempt: 1,
				Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded, ProviderID: "wx" + no}})
		}
	}
	// An event the state machine could not have decided: r1's first refund
	// succeeds twice (a legal append for the journal).
	no := states["r1"].Refunds[0].No
	ev := reservation.Event{At: at, By: "t", Data: reservation.ProviderResult{RefundNo: no, Source: reservation.SourceQuery,
		Outcome: reservation.OutcomeFailed, From: reservation.Succeeded, To: reservation.Failed}}
	typ, ver, data, err := reservation.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	r7Head, err := db.LastGlobal(ctx) // r7's last record: the refund outcome just above
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(ctx, journal.AppendRequest{Stream: "r1", Expected: states["r1"].Version,
		Events: []journal.Event{{Type: typ, Version: ver, Data: data}}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[2:4] { // more events after the illegal one
		amount := int64(500)
		run(id, reservation.RequestRefund{UserID: "u", IdempotencyKey: "k9", Amount: &amount})
	}
	// A reservation begun last: with room for one, r7 is let go for it.
	run("r8", reservation.Register{ReservationID: "r8", UserID: "u", OutTradeNo: "O8", Amount: 3000, Currency: "CNY"})
	amount := int64(700)
	run("r8", reservation.RequestRefund{UserID: "u", IdempotencyKey: "k1", Amount: &amount})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Damage in the file: a record's bytes (its checksum fails: r3 cannot
	// be replayed whole), the last record of r7 (a reader in file order
	// never sees r7 end), a claim, a counter.
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		logB := tx.Bucket([]byte("log"))
		k := binary.BigEndian.AppendUint64(nil, 4) // r3's registration
		v := append([]byte{}, logB.Get(k)...)
		v[len(v)/2] ^= 0x20
		if err := logB.Put(k, v); err != nil {
			return err
		}
		k = binary.BigEndian.AppendUint64(nil, r7Head)
		v = append([]byte{}, logB.Get(k)...)
		v[len(v)/2] ^= 0x20
		if err := logB.Put(k, v); err != nil {
			return err
		}
		if err := tx.Bucket([]byte("claims")).Delete([]byte(reservation.ClaimRefundNo + "\x00" + states["r5"].Refunds[1].No)); err != nil {
			return err
		}
		return tx.Bucket([]byte("counters")).Put([]byte(eventstore.CountPaid), binary.BigEndian.AppendUint64(nil, 7))
	}); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	perStream, err := verifyWith(ctx, ro, VerifyOptions{}, ro.ForEachStream)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, p := range perStream.Problems {
		kinds[p.Kind]++
	}
	if len(perStream.Journal.Problems) == 0 || kinds["transition"] == 0 || kinds["index"] == 0 {
		t.Fatalf("the corruptions are not all seen: file %v, events %v", perStream.Journal.Problems, perStream.Problems)
	}
	for _, budget := range []int{gatherBudget, 1} {
		got, err := verifyWith(ctx, ro, VerifyOptions{}, func(ctx context.Context, emit func(journal.StreamRecords) error) error {
			_, err := gatherStreams(ctx, ro, budget, emit)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, perStream) {
			t.Fatalf("budget %d: in file order\n%+v\nstream by stream\n%+v", budget, got, perStream)
		}
	}
}

// TestGatherStreams_MemoryDoesNotFollowTheJournal: with reservations that
// are all open at once (each begun before any ends, as over the days of a
// refund window), what gatherStreams holds stays within its budget and
// does not grow with their number, and every stream is still emitted once,
// whole.
func TestGatherStreams_MemoryDoesNotFollowTheJournal(t *testing.T) {
	ctx := context.Background()
	const budget = 4 << 10
	var peaks []gatherStats
	for _, n := range []int{200, 2000} {
		path := filepath.Join(t.TempDir(), "j.db")
		db, err := journal.Open(path, &journal.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		const perStream = 3
		for seq := range uint64(perStream) {
			for i := range n {
				if _, err := db.Append(ctx, journal.AppendRequest{Stream: "s" + strconv.Itoa(i), Expected: seq,
					Events: []journal.Event{{Type: "t", Version: 1, Data: []byte(`{"n":` + strconv.Itoa(i) + `}`)}}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		seen := map[string]int{}
		st, err := gatherStreams(ctx, db, budget, func(sr journal.StreamRecords) error {
			if len(sr.Records) != perStream || sr.Unreadable != 0 {
				t.Errorf("n=%d: %s emitted with %d records, %d unreadable", n, sr.Stream, len(sr.Records), sr.Unreadable)
			}
			seen[sr.Stream]++
			return nil
		})
		if err := errors.Join(err, db.Close()); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if c := seen["s"+strconv.Itoa(i)]; c != 1 {
				t.Fatalf("n=%d: s%d emitted %d times", n, i, c)
			}
		}
		if st.reread == 0 || st.peakHeld > budget+256 {
			t.Fatalf("n=%d: %+v: want streams let go and read again, at most %d bytes held", n, st, budget+256)
		}
		t.Logf("n=%d: %+v", n, st)
		peaks = append(peaks, st)
	}
	small, large := peaks[0], peaks[1]
	if large.peakOpen > small.peakOpen || large.peakHeld > small.peakHeld+256 || large.peakNames > 2*large.peakOpen+1025 {
		t.Fatalf("held grows with the journal: 10x the reservations held %+v, against %+v", large, small)
	}
}
