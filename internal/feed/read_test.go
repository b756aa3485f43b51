package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/feed/feedtest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

var bg = context.Background()

// tb is what readAll needs from testing.T and rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// readAll reads every page from after with the given limit and filter.
func readAll(t tb, db feed.Journal, after uint64, limit int, types []string) []feed.Event {
	t.Helper()
	var all []feed.Event
	for {
		page, next, err := feed.Read(bg, db, after, limit, types)
		if err != nil {
			t.Fatalf("Read(after %d, limit %d, %v): %v", after, limit, types, err)
		}
		if next < after {
			t.Fatalf("Read(after %d) moved the cursor back to %d", after, next)
		}
		if limit > 0 && len(page) > limit {
			t.Fatalf("Read(limit %d) returned %d events", limit, len(page))
		}
		all = append(all, page...)
		if next == after {
			return all
		}
		after = next
	}
}

// checkWant compares events with the history's own bookkeeping.
func checkWant(t testing.TB, got []feed.Event, want []feedtest.Want) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Global != w.Global || g.Type != w.Type || g.ReservationID != w.ReservationID || g.RefundNo != w.RefundNo ||
			g.Amount != w.Amount || g.Refunded != w.Refunded || g.State != w.State {
			t.Fatalf("event %d = {global %d %s %s %s amount %d refunded %d %s}, want %+v",
				i, g.Global, g.Type, g.ReservationID, g.RefundNo, g.Amount, g.Refunded, g.State, w)
		}
		if g.ID != feed.ID(g.Global) || g.SchemaVersion != feed.SchemaVersion {
			t.Fatalf("event %d: id %q schema %d", i, g.ID, g.SchemaVersion)
		}
	}
}

func TestRead_Fields(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 1)
	h.Register("r1", 1000)
	a := h.Request("r1", 300)
	h.Noise("r1", a)
	h.Result("r1", a, reservation.Processing) // changes nothing: no event
	h.Result("r1", a, reservation.Succeeded)
	b := h.Request("r1", 700)
	h.Result("r1", b, reservation.Rejected) // not a consumer event
	h.Abandon("r1", b)
	c := h.Request("r1", 700)
	h.Stuck("r1", c)
	h.Result("r1", c, reservation.Abnormal)
	h.Resolve("r1", c) // an operator settles it; completes the paid amount: canceled too

	got := readAll(t, db, 0, 0, nil)
	checkWant(t, got, h.Want)
	types := make([]string, len(got))
	for i, e := range got {
		types[i] = e.Type
	}
	wantTypes := []string{"refund.requested", "refund.succeeded", "refund.requested", "refund.failed",
		"refund.requested", "refund.stuck", "refund.abnormal", "refund.succeeded", "reservation.canceled"}
	if !slices.Equal(types, wantTypes) {
		t.Fatalf("types = %v, want %v", types, wantTypes)
	}

	for _, e := range got {
		if e.UserID != "u-r1" || e.OutTradeNo != "ORD-r1" || e.Paid != 1000 || e.Currency != "CNY" || e.At.IsZero() {
			t.Errorf("%s: reservation fields %+v", e.ID, e)
		}
	}
	if e := got[0]; e.Data.Reason != "reason "+a || e.ID != "evt_00000000000000000002" {
		t.Errorf("requested: %+v", e)
	}
	if e := got[1]; e.Data.ProviderRefundID != "wx-"+a || e.Data.SuccessTime.IsZero() || e.Data.Source != "notification" {
		t.Errorf("succeeded: %+v", e.Data)
	}
	if e := got[3]; e.Data.Code != "ABANDONED" || e.Data.Source != "operator" || e.Data.Reason != "operator gave up" {
		t.Errorf("abandoned: %+v", e.Data)
	}
	if e := got[7]; e.Data.Code != "RESOLVED_BY_OPERATOR" || e.Data.Source != "operator" ||
		e.Data.Reason != "settled by hand" || e.Data.SuccessTime.IsZero() {
		t.Errorf("resolved: %+v", e.Data)
	}
	if e := got[8]; e.RefundNo != "" || e.Amount != 0 || e.Refunded != 1000 || e.State != "" {
		t.Errorf("canceled: %+v", e)
	}
	if got[7].Global+1 != got[8].Global {
		t.Errorf("canceled at %d does not follow the success at %d", got[8].Global, got[7].Global)
	}

	// The JSON a consumer sees, field names included.
	raw, err := json.Marshal(got[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "type", "schema_version", "global", "reservation_id", "user_id", "out_trade_no",
		"refund_no", "amount", "refunded", "paid", "currency", "state", "at", "data"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, raw)
		}
	}
}

// TestRead_ReasonCodeAndMetadata: every event of a refund carries the
// reason code and metadata it was requested with, under data; a refund
// without them shows neither.
func TestRead_ReasonCodeAndMetadata(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 1)
	h.Register("r1", 1000)
	md := map[string]string{"order": "O-1", "agent": "a"}
	a := h.RequestWith("r1", 300, reservation.ReasonDuplicate, md)
	h.Result("r1", a, reservation.Succeeded)
	b := h.Request("r1", 700)
	got := readAll(t, db, 0, 0, nil)
	checkWant(t, got, h.Want)
	if len(got) != 3 {
		t.Fatalf("%d events, want 3", len(got))
	}
	for _, e := range got[:2] {
		if e.RefundNo != a || e.Data.ReasonCode != reservation.ReasonDuplicate || !maps.Equal(e.Data.Metadata.Map(), md) {
			t.Errorf("%s %s: reason code %q metadata %v", e.Type, e.RefundNo, e.Data.ReasonCode, e.Data.Metadata.Map())
		}
		raw, _ := json.Marshal(e)
		if !strings.Contains(string(raw), `"reason_code":"duplicate","metadata":{"agent":"a","order":"O-1"}`) {
			t.Errorf("JSON of %s: %s", e.Type, raw)
		}
	}
	if e := got[2]; e.RefundNo != b || e.Data.ReasonCode != "" || !e.Data.Metadata.IsZero() {
		t.Errorf("plain refund: %+v", e.Data)
	}
	if raw, _ := json.Marshal(got[2]); strings.Contains(string(raw), "reason_code") || strings.Contains(string(raw), "metadata") {
		t.Errorf("plain refund's JSON: %s", raw)
	}
}

// WeChat Pay paid a refund refundd had abandoned: consumers hear that it
// succeeded after all, with the money counted, and that the reservation is
// canceled when that completes the paid amount.
// TestRead_Merchant: every consumer event names its reservation's
// merchant; one registered without a merchant (a journal written before
// reservations had merchants) belongs to the default merchant.
func TestRead_Merchant(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 1)
	want := map[string]string{"r-old": reservation.DefaultMerchant, "r-default": reservation.DefaultMerchant, "r-sh": "hotel-sh"}
	h.Register("r-old", 1000)
	h.RegisterFor("r-default", reservation.DefaultMerchant, 1000)
	h.RegisterFor("r-sh", "hotel-sh", 1000)
	for _, id := range []string{"r-old", "r-default", "r-sh"} {
		no := h.Request(id, 1000)
		h.Result(id, no, reservation.Succeeded) // and canceled: the paid amount went back
	}
	got := readAll(t, db, 0, 0, nil)
	checkWant(t, got, h.Want)
	if len(got) != 9 {
		t.Fatalf("%d events, want 9", len(got))
	}
	for _, e := range got {
		if e.Merchant != want[e.ReservationID] {
			t.Errorf("%s %s of %s: merchant %q, want %q", e.ID, e.Type, e.ReservationID, e.Merchant, want[e.ReservationID])
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil || m["merchant"] != want[e.ReservationID] {
			t.Errorf("%s: JSON %s does not name merchant %q", e.ID, b, want[e.ReservationID])
		}
	}
}

func TestRead_PaidAfterFailed(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 1)
	h.Register("r1", 1000)
	a := h.Request("r1", 1000)
	h.Result("r1", a, reservation.Rejected)
	h.Abandon("r1", a)
	h.PaidLate("r1", a)
	got := readAll(t, db, 0, 0, nil)
	checkWant(t, got, h.Want)
	if n := len(got); n != 4 || got[2].Type != "refund.succeeded" || got[2].Refunded != 1000 || got[3].Type != "reservation.canceled" {
		t.Fatalf("events %+v", got)
	}
}

func TestRead_Filter(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 2)
	h.Steps(300)
	for _, types := range [][]string{{"refund.succeeded"}, {"reservation.canceled", "refund.failed"}, feed.Types()} {
		var want []feedtest.Want
		for _, w := range h.Want {
			if slices.Contains(types, w.Type) {
				want = append(want, w)
			}
		}
		checkWant(t, readAll(t, db, 0, 7, types), want)
	}
}

func TestRead_UnknownType(t *testing.T) {
	db := journaltest.Open(t)
	_, next, err := feed.Read(bg, db, 0, 10, []string{"refund.requested", "refund.registered"})
	if !errors.Is(err, feed.ErrUnknownType) || next != 0 {
		t.Fatalf("err = %v, next %d; want ErrUnknownType", err, next)
	}
}

func TestRead_NewerRecordRefused(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 3)
	h.Register("r1", 100)
	if _, err := db.Append(bg, journal.AppendRequest{Stream: "r1", Expected: 1, Events: []journal.Event{
		{Type: reservation.TypeRefundRequested, Version: reservation.EventVersion + 1, Data: []byte(`{}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := feed.Read(bg, db, 0, 10, nil); !errors.Is(err, reservation.ErrUnknownEvent) {
		t.Fatalf("err = %v, want ErrUnknownEvent", err)
	}
}

func TestRead_InconsistentRefused(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 4)
	h.Register("r1", 100)
	// A success for a refund the reservation never requested.
	typ, ver, data, err := reservation.Encode(reservation.Event{At: time.Now(), By: "x",
		Data: reservation.ProviderResult{RefundNo: "nope", From: reservation.Processing, To: reservation.Succeeded}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(bg, journal.AppendRequest{Stream: "r1", Expected: 1,
		Events: []journal.Event{{Type: typ, Version: ver, Data: data}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := feed.Read(bg, db, 0, 10, nil); !errors.Is(err, feed.ErrInconsistent) {
		t.Fatalf("err = %v, want ErrInconsistent", err)
	}
}

// TestRead_ScanBudget: a selective filter over a long stretch without
// matches answers empty pages that still advance the cursor, and continuing
// from next finds the match.
func TestRead_ScanBudget(t *testing.T) {
	db := journaltest.OpenWith(t, &journal.Options{NoSync: true})
	h := feedtest.New(t, db, 5)
	h.Register("r1", 1000)
	no := h.Request("r1", 10)
	for h.Records < 5000 {
		h.Noise("r1", no)
	}
	h.Result("r1", no, reservation.Failed)

	types := []string{"refund.failed"}
	page, next, err := feed.Read(bg, db, 0, 10, types)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 0 || next == 0 || next >= uint64(h.Records) {
		t.Fatalf("first page: %d events, next %d of %d records; want an empty page part way", len(page), next, h.Records)
	}
	got := readAll(t, db, 0, 10, types)
	if len(got) != 1 || got[0].Global != uint64(h.Records) {
		t.Fatalf("got %+v, want the one failure at %d", got, h.Records)
	}
}

// TestRead_AnyCursor is the property: from any cursor, with any page size
// and filter, the pages concatenated equal the matching tail of one full
// read, which equals the history's own bookkeeping; and so again after the
// journal is closed and reopened.
// TestRead_PostgresJournal: the feed of the same history reads the same from
// the PostgreSQL journal as from bbolt (skips without a server outside CI).
func TestRead_PostgresJournal(t *testing.T) {
	for _, name := range []string{"bbolt", "postgres"} {
		t.Run(name, func(t *testing.T) {
			var db feedtest.Journal = journaltest.Open(t)
			if name == "postgres" {
				db = pgtest.Open(t)
			}
			h := feedtest.New(t, db, 11)
			h.Steps(120)
			checkWant(t, readAll(t, db.(feed.Journal), 0, 7, nil), h.Want)
		})
	}
}

func TestRead_AnyCursor(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 6)
	h.Steps(250)
	full := readAll(t, db, 0, feed.MaxLimit, nil)
	checkWant(t, full, h.Want)
	records := uint64(h.Records)

	check := func(db *journal.DB) func(*rapid.T) {
		return func(rt *rapid.T) {
			after := rapid.Uint64Range(0, records+2).Draw(rt, "after")
			limit := rapid.IntRange(-1, 40).Draw(rt, "limit")
			all := feed.Types()
			var types []string
			for _, typ := range all {
				if rapid.Bool().Draw(rt, "keep "+typ) {
					types = append(types, typ)
				}
			}
			var want []feed.Event
			for _, e := range full {
				if e.Global > after && (len(types) == 0 || slices.Contains(types, e.Type)) {
					want = append(want, e)
				}
			}
			got := readAll(rt, db, after, limit, types)
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(want)
			if string(a) != string(b) {
				rt.Fatalf("from %d, limit %d, types %v:\n got %s\nwant %s", after, limit, types, a, b)
			}
		}
	}
	rapid.Check(t, check(db))

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := journal.Open(db.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	rapid.Check(t, check(re))
}

func TestParseID(t *testing.T) {
	tests := []struct {
		id   string
		want uint64
		ok   bool
	}{
		{feed.ID(1), 1, true},
		{feed.ID(18446744073709551615), 18446744073709551615, true},
		{"evt_00000000000000000042", 42, true},
		{"evt_42", 0, false},
		{"evt_00000000000000000000", 0, false},
		{"EVT_00000000000000000042", 0, false},
		{"evt_0000000000000000004x", 0, false},
		{"evt_+0000000000000000042", 0, false},
		{"", 0, false},
		{feed.RewrittenID(42, journal.Hash{0xab, 0x01}), 42, true},
		{"evt_00000000000000000042_ab01000000000000", 42, true},
		{"evt_00000000000000000042_AB01000000000000", 0, false},
		{"evt_00000000000000000042_ab0100000000000", 0, false},
		{"evt_00000000000000000042-ab01000000000000", 0, false},
		{"evt_00000000000000000042_", 0, false},
	}
	for _, tt := range tests {
		g, err := feed.ParseID(tt.id)
		if tt.ok != (err == nil) || g != tt.want {
			t.Errorf("ParseID(%q) = %d, %v; want %d ok=%v", tt.id, g, err, tt.want, tt.ok)
		}
		if !tt.ok && !errors.Is(err, feed.ErrBadID) {
			t.Errorf("ParseID(%q) error %v is not ErrBadID", tt.id, err)
		}
	}
}

func TestFeed_Wait(t *testing.T) {
	db := journaltest.Open(t)
	f := feed.New(db)
	h := feedtest.New(t, db, 7)
	h.Register("r1", 100)
	last, err := f.Last(bg)
	if err != nil || last != 1 {
		t.Fatalf("Last = %d, %v", last, err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	go func() { done <- f.Wait(ctx, last) }()
	no := h.Request("r1", 50)
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	page, _, err := f.Read(bg, last, 10, nil)
	if err != nil || len(page) != 1 || page[0].RefundNo != no {
		t.Fatalf("after Wait: %+v, %v", page, err)
	}
}
