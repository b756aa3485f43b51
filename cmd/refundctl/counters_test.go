package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// writeUncounted writes n reservations through the event store, then takes
// the counters out of the file as a journal written before them would be.
func writeUncounted(t *testing.T, path string, n int) {
	t.Helper()
	ctx := context.Background()
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	store := eventstore.New(db)
	t0 := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	for i := range n {
		id := "k-" + strconv.Itoa(i)
		st := &reservation.State{}
		var batch []reservation.Event
		run := func(cmd reservation.Command) {
			evs, err := reservation.Decide(st, cmd, reservation.Env{Now: t0, By: "t", Policy: reservation.Policy{RefundNoPrefix: "K"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				reservation.Apply(st, e)
			}
			batch = append(batch, evs...)
		}
		run(reservation.Register{ReservationID: id, UserID: "u", OutTradeNo: "K" + strconv.Itoa(i), Amount: 2000, Currency: "CNY"})
		amount := int64(1000)
		run(reservation.RequestRefund{UserID: "u", IdempotencyKey: "a", Amount: &amount})
		run(reservation.StartSubmission{RefundNo: st.Refunds[0].No, Request: []byte(`{}`)})
		if err := store.Append(ctx, id, &reservation.State{}, batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte("counters")); err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Delete([]byte("counted"))
	}); err != nil {
		t.Fatal(err)
	}
}

// TestBuildCounters_KilledAnywhere kills "journal stats --build-counters"
// (SIGKILL) at increasing moments of its run: afterwards the journal has
// either no complete counters (stats folds, verify says "not kept") or
// counters that match the events, and verifies clean either way.
func TestBuildCounters_KilledAnywhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	writeUncounted(t, path, 3000)
	built := false
	for _, ms := range []time.Duration{0, 5, 20, 50, 100, 200, 400, 800, -1} {
		after := ms * time.Millisecond
		cmd := exec.Command(bin, "journal", "stats", "--build-counters", "--file", path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if after >= 0 {
			time.AfterFunc(after, func() { _ = cmd.Process.Kill() })
		}
		err := cmd.Wait()
		if after < 0 && err != nil {
			t.Fatalf("the build that was not killed: %v", err)
		}
		r := ctl(t, "journal", "stats", "--file", path, "--json")
		var st struct {
			Source       string `json:"source"`
			Reservations int    `json:"reservations"`
			InFlight     int64  `json:"in_flight"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != exitOK {
			t.Fatalf("killed after %s: stats: %v %s", after, err, r)
		}
		if st.Reservations != 3000 || st.InFlight != 3000*1000 {
			t.Fatalf("killed after %s: stats from %s: %+v", after, st.Source, st)
		}
		t.Logf("killed after %s: %v; stats from %s", after, err, st.Source)
		v := ctl(t, "journal", "verify", "--file", path)
		want := "counters     not kept"
		if st.Source == "counters" {
			built, want = true, "counters     match the events"
		} else if built {
			t.Fatalf("killed after %s: counters built before are gone", after)
		}
		if v.code != exitOK || !strings.Contains(v.stdout, want) {
			t.Fatalf("killed after %s (stats from %s): verify %s, want %q", after, st.Source, v, want)
		}
	}
	if !built {
		t.Fatal("no build stored the counters")
	}
}
