package journal_test

import (
	"errors"
	"maps"
	"path/filepath"
	"testing"

	"github.com/refundd/refundd/journal"
)

func TestCounters_KeptWithTheEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ev := []journal.Event{{Type: "t", Version: 1, Data: []byte("x")}}
	appends := []struct {
		req journal.AppendRequest
		err error
	}{
		{journal.AppendRequest{Stream: "a", Events: ev, Counters: []journal.Counter{{Key: "n", Add: 2}, {Key: "n", Add: 3}, {Key: "t", Add: 7, Max: true}}}, nil},
		{journal.AppendRequest{Stream: "b", Events: ev, Counters: []journal.Counter{{Key: "n", Add: -1}, {Key: "t", Add: 5, Max: true}, {Key: "z", Add: 0}}}, nil},
		// Refused appends count nothing.
		{journal.AppendRequest{Stream: "a", Expected: 0, Events: ev, Counters: []journal.Counter{{Key: "n", Add: 100}}}, journal.ErrSequenceMismatch},
		{journal.AppendRequest{Stream: "c", Events: ev, Counters: []journal.Counter{{Key: "", Add: 100}}}, journal.ErrInvalid},
		{journal.AppendRequest{Stream: "c", Events: ev, Counters: []journal.Counter{{Key: "a\x00b", Add: 100}}}, journal.ErrInvalid},
		{journal.AppendRequest{Stream: "a", Expected: 1, Events: ev, Counters: []journal.Counter{{Key: "t", Add: 9, Max: true}, {Key: "m", Add: -4}}}, nil},
	}
	for i, a := range appends {
		if _, err := db.Append(bg, a.req); !errors.Is(err, a.err) {
			t.Fatalf("append %d: %v, want %v", i, err, a.err)
		}
	}
	want := map[string]int64{"n": 4, "t": 9, "m": -4}
	check := func(db *journal.DB, complete bool) {
		t.Helper()
		cs, err := db.Counters(bg)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(cs.Values, want) || cs.Complete != complete || cs.LastGlobal != 3 {
			t.Fatalf("counters %+v, want %v complete=%v at 3", cs, want, complete)
		}
	}
	check(db, true)
	if err := db.SetCounters(bg, 2, map[string]int64{"n": 1}); !errors.Is(err, journal.ErrMoved) {
		t.Fatalf("SetCounters at 2 of 3: %v, want ErrMoved", err)
	}
	check(db, true)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	check(ro, true)
	if err := ro.SetCounters(bg, 3, want); !errors.Is(err, journal.ErrReadOnly) {
		t.Fatalf("SetCounters read-only: %v", err)
	}
}

// A file from before the counters counts from its upgrade on, which is not
// complete until SetCounters stores totals.
func TestCounters_UpgradedFileIsIncomplete(t *testing.T) {
	path := copyFixture(t, "format2.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	last, err := db.LastGlobal(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(bg, journal.AppendRequest{Stream: "new", Events: []journal.Event{{Type: "t", Version: 1}},
		Counters: []journal.Counter{{Key: "n", Add: 1}}}); err != nil {
		t.Fatal(err)
	}
	cs, err := db.Counters(bg)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Complete || cs.Values["n"] != 1 {
		t.Fatalf("counters of an upgraded file %+v, want incomplete", cs)
	}
	if err := db.SetCounters(bg, last+1, map[string]int64{"n": 9, "k": 2}); err != nil {
		t.Fatal(err)
	}
	cs, err = db.Counters(bg)
	if err != nil {
		t.Fatal(err)
	}
	if !cs.Complete || !maps.Equal(cs.Values, map[string]int64{"n": 9, "k": 2}) {
		t.Fatalf("after SetCounters %+v", cs)
	}
}
