package audit_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// TestVerify_IndexesAsAppendIndexesImplies: Verify holds the journal's
// indexes to what reservation.AppendIndexes, the function the event store
// writes them with, implies. The history is written one event per append,
// with each append's entries from AppendIndexes; each case withholds some
// and Verify must name the hole.
func TestVerify_IndexesAsAppendIndexesImplies(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	history := []reservation.EventData{
		reservation.Registered{ReservationID: "x", UserID: "u", OutTradeNo: "ORD-x", Amount: 1000, Currency: "CNY"},
		reservation.RefundRequested{RefundNo: "T-x-1", Number: 1, IdempotencyKey: "k1", Fingerprint: "f", Amount: 500},
		reservation.SubmissionStarted{RefundNo: "T-x-1", Attempt: 1, Request: []byte("{}"), DueAt: at.Add(time.Minute)},
		reservation.FlaggedStuck{RefundNo: "T-x-1"},
		failed,   // clears the due time and the stuck flag
		paidLate, // a conflict for ever
		reservation.RefundRecovered{RefundNo: "T-x-2", Number: 2, Amount: 300, State: reservation.Abnormal, ProviderID: "wx2"},
		reservation.RefundRecovered{RefundNo: "T-x-3", Number: 3, Amount: 100, State: reservation.Processing, ProviderID: "wx3", DueAt: at.Add(2 * time.Minute)},
	}
	tests := []struct {
		name string
		edit func(req *journal.AppendRequest) // withholds entries; nil keeps all
		want string                           // an index problem's text; "" for none
	}{
		{"every entry", nil, ""},
		{"no order claim", func(r *journal.AppendRequest) {
			r.Claims = slices.DeleteFunc(r.Claims, func(c journal.Claim) bool { return c.Key == "ORD-x" })
		}, "out_trade_no ORD-x has no claim"},
		{"no claim of a recovered refund", func(r *journal.AppendRequest) {
			r.Claims = slices.DeleteFunc(r.Claims, func(c journal.Claim) bool { return c.Key == "T-x-2" })
		}, "refund_no T-x-2 has no claim"},
		{"no conflict mark", func(r *journal.AppendRequest) {
			r.Marks = slices.DeleteFunc(r.Marks, func(m journal.Mark) bool { return m.Key == "attention/conflict/x/T-x-1" })
		}, "attention mark attention/conflict/x/T-x-1 is missing"},
		{"no mark of a recovered ABNORMAL refund", func(r *journal.AppendRequest) {
			r.Marks = slices.DeleteFunc(r.Marks, func(m journal.Mark) bool { return m.Key == "attention/ABNORMAL/x/T-x-2" })
		}, "attention mark attention/ABNORMAL/x/T-x-2 is missing"},
		{"the stuck flag not cleared", func(r *journal.AppendRequest) {
			r.Marks = slices.DeleteFunc(r.Marks, func(m journal.Mark) bool { return m.Clear && m.Key == "attention/stuck/x/T-x-1" })
		}, "attention mark attention/stuck/x/T-x-1 does not match"},
		{"no due entry of a recovered refund", func(r *journal.AppendRequest) {
			r.Dues = slices.DeleteFunc(r.Dues, func(d journal.Due) bool { return d.Key == "T-x-3" })
		}, "refund T-x-3 (PROCESSING) is due at 2026-03-01T02:02:00.000Z but has no due entry"},
		// A superseded timer left behind only fires for nothing.
		{"a superseded due entry kept", func(r *journal.AppendRequest) { r.DropDues = nil }, ""},
	}
	events := make([]reservation.Event, len(history))
	for i, d := range history {
		events[i] = reservation.Event{At: at, By: "test", Data: d}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var edit func(int, *journal.AppendRequest)
			if tt.edit != nil {
				edit = func(_ int, r *journal.AppendRequest) { tt.edit(r) }
			}
			_, index := verifyHistory(t, events, false, edit)
			switch {
			case tt.want == "" && len(index) > 0:
				t.Fatalf("index problems %q, want none", index)
			case tt.want != "" && (len(index) != 1 || !strings.Contains(index[0], tt.want)):
				t.Fatalf("index problems %q, want one mentioning %q", index, tt.want)
			}
		})
	}
}

// verifyHistory appends events to stream x of a new journal, one per
// append with the index entries AppendIndexes implies (and its list rows,
// under the list index's key, when lists), each request passed through
// edit (nil: none) first, then verifies it: the report and its index
// problems' messages. Any other problem fails the test.
func verifyHistory(t *testing.T, events []reservation.Event, lists bool, edit func(i int, req *journal.AppendRequest)) (*audit.Report, []string) {
	t.Helper()
	db, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if lists {
		if err := db.Put(bg, eventstore.ListIndexKey, []byte("1")); err != nil {
			t.Fatal(err)
		}
	}
	st := &reservation.State{}
	for i, e := range events {
		req := indexedRequest(t, "x", st, e)
		if lists {
			ix := reservation.AppendIndexes(reservation.IndexChanges{}, st, []reservation.Event{e})
			req.Marks = eventstore.ListMarks(req.Marks, ix.Rows)
		}
		if edit != nil {
			edit(i, &req)
		}
		if _, err := db.Append(bg, req); err != nil {
			t.Fatal(err)
		}
		reservation.Apply(st, e)
	}
	rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var index []string
	for _, p := range rep.Problems {
		if p.Kind != "index" {
			t.Fatalf("the history is not legal: %v", rep.Problems)
		}
		index = append(index, p.Message)
	}
	return rep, index
}

// indexedRequest is the journal request of appending e to stream id at
// state st, with the index entries reservation.AppendIndexes implies.
func indexedRequest(t *testing.T, id string, st *reservation.State, e reservation.Event) journal.AppendRequest {
	t.Helper()
	typ, ver, data, err := reservation.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	req := journal.AppendRequest{Stream: id, Expected: st.Version, Events: []journal.Event{{Type: typ, Version: ver, Data: data}}}
	ix := reservation.AppendIndexes(reservation.IndexChanges{}, st, []reservation.Event{e})
	for _, c := range ix.Claims {
		req.Claims = append(req.Claims, journal.Claim{Namespace: c.Namespace, Key: c.Key})
	}
	for _, d := range ix.Dues {
		req.Dues = append(req.Dues, journal.Due{At: d.At, Stream: id, Key: d.RefundNo})
	}
	for _, d := range ix.Dropped {
		req.DropDues = append(req.DropDues, journal.Due{At: d.At, Stream: id, Key: d.RefundNo})
	}
	for _, m := range ix.Marks {
		req.Marks = append(req.Marks, journal.Mark{Key: eventstore.AttentionKey(m.Kind, id, m.RefundNo), Clear: m.Clear})
	}
	req.Counters = eventstore.CounterChanges(nil, st, []reservation.Event{e})
	return req
}

// TestVerify_ListRows: Verify holds the list index to the rows the
// reservations' states imply, both ways: a row missing (a list does not
// show a refund as it is) and a row no state implies (a list shows what is
// not so). A journal without the list index is said to lack it.
func TestVerify_ListRows(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	history := []reservation.EventData{
		reservation.Registered{ReservationID: "x", UserID: "u", OutTradeNo: "ORD-x", Amount: 1000, Currency: "CNY"},
		reservation.RefundRequested{RefundNo: "T-x-1", Number: 1, IdempotencyKey: "k1", Fingerprint: "f", Amount: 500},
		reservation.SubmissionStarted{RefundNo: "T-x-1", Attempt: 1, Request: []byte("{}"), DueAt: at.Add(time.Minute)},
		failed,
		reservation.RefundRecovered{RefundNo: "T-x-3", Number: 3, Amount: 100, State: reservation.Processing, ProviderID: "wx3", DueAt: at.Add(2 * time.Minute)},
	}
	isRow := func(m journal.Mark) bool { return strings.HasPrefix(m.Key, eventstore.ListPrefix) }
	tests := []struct {
		name   string
		noList bool                                    // the journal predates the list index
		edit   func(i int, req *journal.AppendRequest) // the i-th append; nil keeps all
		want   []string                                // the index problems, in order
		lists  string                                  // the start of Report.Lists
	}{
		{"every row", false, nil, nil, "match"},
		{"the last append's rows withheld", false, func(i int, r *journal.AppendRequest) {
			if i == len(history)-1 {
				r.Marks = slices.DeleteFunc(r.Marks, isRow)
			}
		}, []string{"is missing: lists do not show the reservation as it is", "is missing: lists do not show the refund T-x-3 as it is",
			"matches no reservation's state"}, "3 differ"},
		{"a refund's old row left behind", false, func(i int, r *journal.AppendRequest) {
			if i == 3 { // FAILED: the SUBMITTING row stays
				r.Marks = slices.DeleteFunc(r.Marks, func(m journal.Mark) bool { return isRow(m) && m.Clear && strings.Contains(m.Key, "/T-x-1/") })
			}
		}, []string{"matches no reservation's state"}, "1 differ"},
		{"no list index", true, nil, nil, "not kept"},
	}
	events := make([]reservation.Event, len(history))
	for i, d := range history {
		events[i] = reservation.Event{At: at.Add(time.Duration(i) * time.Second), By: "test", Data: d}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, index := verifyHistory(t, events, !tt.noList, tt.edit)
			if len(index) != len(tt.want) {
				t.Fatalf("index problems %q, want %d like %q", index, len(tt.want), tt.want)
			}
			for _, w := range tt.want {
				if !slices.ContainsFunc(index, func(m string) bool { return strings.Contains(m, w) }) {
					t.Errorf("no index problem mentions %q: %q", w, index)
				}
			}
			if !strings.HasPrefix(rep.Lists, tt.lists) {
				t.Errorf("Report.Lists = %q, want it to start %q", rep.Lists, tt.lists)
			}
		})
	}
}
