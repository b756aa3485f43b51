package audit_test

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// writeStore writes n reservations through the event store, each appended
// in several steps (so counters change by differences): refunds that
// succeed, fail, stay in flight, and every third reservation canceled by
// refunds of its whole amount.
func writeStore(t *testing.T, path string, n int) {
	t.Helper()
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := eventstore.New(db)
	t0 := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	for i := range n {
		id := "c-" + strconv.Itoa(i)
		st := &reservation.State{}
		step := 0
		run := func(cmd reservation.Command) {
			step++
			env := reservation.Env{Now: t0.Add(time.Duration(i*10+step) * time.Second), By: "test", Policy: reservation.Policy{RefundNoPrefix: "C"}}
			evs, err := reservation.Decide(st, cmd, env)
			if err != nil {
				t.Fatalf("%s step %d: %v", id, step, err)
			}
			if len(evs) == 0 {
				return
			}
			if err := store.Append(bg, id, st, evs); err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				reservation.Apply(st, e)
			}
		}
		run(reservation.Register{ReservationID: id, UserID: "u", OutTradeNo: "OT" + strconv.Itoa(i), Amount: 3000, Currency: "CNY"})
		for k := 1; k <= 3; k++ {
			amount := int64(1000)
			run(reservation.RequestRefund{UserID: "u", IdempotencyKey: "k" + strconv.Itoa(k), Amount: &amount})
			no := st.Refunds[len(st.Refunds)-1].No
			run(reservation.StartSubmission{RefundNo: no, Request: []byte(`{}`)})
			kind := reservation.OutcomeSucceeded
			switch {
			case k == 2 && i%2 == 1:
				kind = reservation.OutcomeFailed
			case k == 3 && i%3 == 1:
				continue // in flight
			}
			run(reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse, Attempt: 1,
				Outcome: reservation.Outcome{Kind: kind, ProviderID: "wx" + no}})
		}
	}
}

// patchCounter overwrites one counter in the file, as a forger or a bug
// would.
func patchCounter(t *testing.T, path, key string, v int64) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("counters")).Put([]byte(key), binary.BigEndian.AppendUint64(nil, uint64(v)))
	}); err != nil {
		t.Fatal(err)
	}
}

func TestCounters_StatsEqualTheFold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	writeStore(t, path, 30)
	db := openRO(t, path)
	counted, err := audit.ComputeStats(bg, db, audit.StatsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	folded, err := audit.ComputeStats(bg, db, audit.StatsOptions{Fold: true})
	if err != nil {
		t.Fatal(err)
	}
	if counted.Source != "counters" || folded.Source != "fold" || folded.OldestInFlight == nil || counted.OldestInFlight != nil {
		t.Fatalf("sources %q %q, oldest in flight %v %v", counted.Source, folded.Source, counted.OldestInFlight, folded.OldestInFlight)
	}
	if folded.Reservations != 30 || folded.Canceled == 0 || folded.Released == 0 || folded.InFlight == 0 || folded.RefundStates["FAILED"] == 0 {
		t.Fatalf("the history lacks a case: %+v", folded)
	}
	// Counters keep each merchant's totals too: here all are the default
	// merchant's.
	if m := counted.Merchants[reservation.DefaultMerchant]; m == nil || len(counted.Merchants) != 1 ||
		m.Reservations != counted.Reservations || m.Refunded != counted.Refunded || m.InFlight != counted.InFlight {
		t.Fatalf("merchants from counters %+v, want the default merchant's with the totals", counted.Merchants)
	}
	counted.Source, folded.Source, folded.OldestInFlight = "", "", nil
	sameHead(counted, folded)
	if !reflect.DeepEqual(counted, folded) {
		t.Fatalf("from counters %+v\nfrom the fold %+v", counted, folded)
	}
	rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Counters != "match the events" {
		t.Fatalf("verify: counters %q, problems %v", rep.Counters, rep.Problems)
	}
}

func TestCounters_VerifyFindsAWrongCounter(t *testing.T) {
	for _, tt := range []struct {
		key  string
		want string
	}{
		{eventstore.CountRefunded, "counter refunded is 1, the events make it "},
		{eventstore.CountRefundState + "SUCCEEDED", "counter refund_state/SUCCEEDED is 1, the events make it "},
		{eventstore.CountEvents + reservation.TypeRegistered, "counter events/reservation.registered is 1, the events make it 10"},
		// A counter no event makes.
		{"refund_state/BOGUS", "counter refund_state/BOGUS is 1, the events make it 0"},
		// The per-hour totals GET /v1/totals reads.
		{eventstore.CountTotals + "2026030102/default/SUCCEEDED/" + eventstore.TotalFen,
			"counter totals/2026030102/default/SUCCEEDED/fen is 1, the events make it "},
	} {
		t.Run(tt.key, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			writeStore(t, path, 10)
			patchCounter(t, path, tt.key, 1)
			rep, err := audit.Verify(bg, openRO(t, path), audit.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || len(rep.Problems) != 1 || rep.Problems[0].Kind != "counter" || !strings.Contains(rep.Problems[0].Message, tt.want) {
				t.Fatalf("problems %v, want one counter problem %q", rep.Problems, tt.want)
			}
			if rep.Counters != "1 differ from the events" {
				t.Fatalf("counters %q", rep.Counters)
			}
		})
	}
}

// A journal whose counters are of generation 1 (written before the
// per-hour totals, kept since the upgrade only) is not failed for its
// totals: verify says they were not compared, GET /v1/totals refuses them,
// and BuildCounters makes them whole.
func TestCounters_TotalsOfAnOlderGeneration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	writeStore(t, path, 10)
	patchCounter(t, path, eventstore.CountTotals+"2026030102/default/SUCCEEDED/"+eventstore.TotalFen, 1)
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		return meta.Put([]byte("counted"), meta.Get([]byte("counted"))[:8]) // as generation 1 wrote it
	}); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	ro := openRO(t, path)
	rep, err := audit.Verify(bg, ro, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || !strings.HasPrefix(rep.Counters, "match the events; the per-hour totals predate") {
		t.Fatalf("verify: counters %q, problems %v", rep.Counters, rep.Problems)
	}
	if _, err := (eventstore.Totals{DB: ro}).Between(bg, time.Time{}, time.Time{}); !errors.Is(err, eventstore.ErrTotalsNotKept) {
		t.Fatalf("totals of generation 1: %v, want ErrTotalsNotKept", err)
	}
	ro.Close()
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := audit.BuildCounters(bg, db, nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	ro = openRO(t, path)
	rep, err = audit.Verify(bg, ro, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Counters != "match the events" {
		t.Fatalf("after the build: counters %q, problems %v", rep.Counters, rep.Problems)
	}
	tot, err := eventstore.Totals{DB: ro}.Between(bg, time.Time{}, time.Time{})
	if err != nil || tot[reservation.DefaultMerchant][reservation.Succeeded].Refunds == 0 {
		t.Fatalf("totals after the build: %v, %v", tot, err)
	}
}

// A journal written before the counters has none: stats folds and says
// so, verify says they are not kept, and BuildCounters stores the fold's.
func TestCounters_BuiltForAnOldJournal(t *testing.T) {
	path := copyFile(t, filepath.Join("testdata", "format2.db"))
	ro := openRO(t, path)
	st, err := audit.ComputeStats(bg, ro, audit.StatsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(bg, ro, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Source != "fold" || !strings.HasPrefix(rep.Counters, "not kept") {
		t.Fatalf("stats source %q, verify counters %q", st.Source, rep.Counters)
	}
	ro.Close()

	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	values, at, err := audit.BuildCounters(bg, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if at != st.Records || values[eventstore.CountReservations] != int64(st.Reservations) {
		t.Fatalf("built at %d with %v, stats %+v", at, values, st)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro = openRO(t, path)
	counted, err := audit.ComputeStats(bg, ro, audit.StatsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err = audit.Verify(bg, ro, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if counted.Source != "counters" || !rep.OK() || rep.Counters != "match the events" {
		t.Fatalf("after the build: stats source %q, verify counters %q, problems %v", counted.Source, rep.Counters, rep.Problems)
	}
	st.Source, counted.Source, st.OldestInFlight = "", "", nil
	counted.FileSize, st.FileSize = 0, 0 // the build wrote pages
	sameHead(counted, st)
	if !reflect.DeepEqual(counted, st) {
		t.Fatalf("from counters %+v\nfrom the fold %+v", counted, st)
	}
}

// sameHead copies a's chain head and checkpoint into b after checking the
// globals agree: ChainHead stamps the time of the call.
func sameHead(a, b *audit.Stats) {
	if a.Head.Global == b.Head.Global && a.Head.Hash == b.Head.Hash && (a.LastCheckpoint == nil) == (b.LastCheckpoint == nil) &&
		(a.LastCheckpoint == nil || a.LastCheckpoint.Global == b.LastCheckpoint.Global) {
		b.Head, b.LastCheckpoint = a.Head, a.LastCheckpoint
	}
}
