package eventstore

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// referenceRequest is how Append built its journal request before it
// encoded into one buffer and cut the attention keys from one string:
// appendRequest must build the same request.
func referenceRequest(id string, before *reservation.State, events []reservation.Event, dropped []reservation.DueTime) (journal.AppendRequest, error) {
	req := journal.AppendRequest{Stream: id, Expected: before.Version, Events: make([]journal.Event, 0, len(events))}
	var search []journal.Mark // after the attention marks
	merchant := before.Merchant
	for _, e := range events {
		typ, ver, data, err := reservation.Encode(e)
		if err != nil {
			return journal.AppendRequest{}, err
		}
		req.Events = append(req.Events, journal.Event{Type: typ, Version: ver, Data: data})
		switch d := e.Data.(type) {
		case reservation.Registered:
			req.Claims = append(req.Claims, journal.Claim{Namespace: NamespaceOutTradeNo, Key: d.OutTradeNo})
			merchant = reservation.MerchantOf(d.Merchant)
			if d.UserID != "" {
				search = append(search, journal.Mark{Key: SearchMarkKey(reservation.SearchUserID, d.UserID, merchant, id, "")})
			}
			if d.TransactionID != "" {
				search = append(search, journal.Mark{Key: SearchMarkKey(reservation.SearchTransactionID, d.TransactionID, merchant, id, "")})
			}
		case reservation.ProviderResult:
			if r := before.Refund(d.RefundNo); d.ProviderID != "" && (r == nil || r.ProviderID != d.ProviderID) {
				search = append(search, journal.Mark{Key: SearchMarkKey(reservation.SearchProviderRefundID, d.ProviderID, merchant, id, d.RefundNo)})
			}
		case reservation.RefundRequested:
			req.Claims = append(req.Claims, journal.Claim{Namespace: NamespaceRefundNo, Key: d.RefundNo})
		}
		if no, at, ok := reservation.DueOf(e.Data); ok {
			req.Dues = append(req.Dues, journal.Due{At: at, Stream: id, Key: no})
		}
		if no, add, remove := reservation.AttentionOf(e.Data); no != "" {
			for _, k := range remove {
				req.Marks = append(req.Marks, journal.Mark{Key: AttentionKey(k, id, no), Clear: true})
			}
			for _, k := range add {
				req.Marks = append(req.Marks, journal.Mark{Key: AttentionKey(k, id, no)})
			}
		}
	}
	req.Marks = append(req.Marks, search...)
	// The list rows, after the search marks: the core's own test checks
	// which rows an append changes.
	req.Marks = ListMarks(req.Marks, reservation.AppendIndexes(reservation.IndexChanges{}, before, events).Rows)
	for _, d := range dropped {
		req.DropDues = append(req.DropDues, journal.Due{At: d.At, Stream: id, Key: d.RefundNo})
	}
	return req, nil
}

// requestEvents are events of every type, with the provider results that
// move a refund into and out of each attention kind, with and without due
// times.
func requestEvents() []reservation.Event {
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	due := at.Add(time.Minute)
	no := "T-r1-1"
	var out []reservation.Event
	add := func(d reservation.EventData) { out = append(out, reservation.Event{At: at, By: "engine", Data: d}) }
	add(reservation.Registered{ReservationID: "r1", UserID: "u/1", OutTradeNo: "O1", TransactionID: "4200", Amount: 100, Currency: "CNY"})
	add(reservation.Canceled{Refunded: 100})
	add(reservation.RefundRequested{RefundNo: no, Number: 1, IdempotencyKey: "k", Fingerprint: "f", Amount: 100, Reason: "r"})
	add(reservation.SubmissionStarted{RefundNo: no, Attempt: 1, Request: []byte(`{"a":1}`), DueAt: due})
	add(reservation.SubmissionStarted{RefundNo: no, Attempt: 2, DueAt: due})
	add(reservation.QueryStarted{RefundNo: no, Query: 1, DueAt: due})
	add(reservation.QueryStarted{RefundNo: no, Query: 2})
	add(reservation.SubmissionScheduled{RefundNo: "T-r1-2", Request: []byte("x"), DueAt: due})
	add(reservation.Resolved{RefundNo: no, Reason: "ok"})
	add(reservation.Abandoned{RefundNo: no})
	add(reservation.Conflict{RefundNo: no, State: reservation.Failed, Source: reservation.SourceQuery, Outcome: reservation.OutcomeSucceeded})
	add(reservation.FlaggedStuck{RefundNo: no})
	states := []reservation.RefundState{reservation.Processing, reservation.Succeeded, reservation.Failed,
		reservation.Unknown, reservation.Rejected, reservation.Abnormal}
	for _, from := range states {
		for _, to := range states {
			add(reservation.ProviderResult{RefundNo: no, Source: reservation.SourceResponse, Outcome: reservation.OutcomeUnknown, From: from, To: to})
			add(reservation.ProviderResult{RefundNo: no, Source: reservation.SourceQuery, Outcome: reservation.OutcomeUnknown,
				From: from, To: to, DueAt: due, Retry: true})
			add(reservation.ProviderResult{RefundNo: no, Source: reservation.SourceQuery, Outcome: reservation.OutcomeUnknown,
				From: from, To: to, ProviderID: "50300"})
		}
	}
	return out
}

func TestAppendRequest_SameAsOneByOne(t *testing.T) {
	pool := requestEvents()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	cases := [][]reservation.Event{pool[:1], pool[2:4], pool}
	for _, e := range pool {
		cases = append(cases, []reservation.Event{e})
	}
	for range 500 {
		n := 1 + r.IntN(6)
		events := make([]reservation.Event, n)
		for i := range events {
			events[i] = pool[r.IntN(len(pool))]
		}
		cases = append(cases, events)
	}
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for i, events := range cases {
		// Before the events, none, one or two refunds have a due time
		// that the events may supersede.
		before := &reservation.State{Version: 7}
		for k := range i % 3 {
			// The first refund already holds WeChat's id half the time.
			before.Refunds = append(before.Refunds, &reservation.Refund{No: fmt.Sprintf("T-r1-%d", k+1), DueAt: at.Add(time.Duration(k) * time.Second)})
			if k == 0 && i%2 == 0 {
				before.Refunds[0].ProviderID = "50300"
			}
		}
		dropped := reservation.DroppedDues(before, events)
		got, err := appendRequest("r1", before, events)
		if err != nil {
			t.Fatal(err)
		}
		want, err := referenceRequest("r1", before, events, dropped)
		if err != nil {
			t.Fatal(err)
		}
		// The counters are checked against a fold of the events by
		// audit's TestCounters_*; the reference builds the rest.
		got.Counters = nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("events %v:\n got %+v\nwant %+v", events, got, want)
		}
		for i, e := range got.Events {
			if cap(e.Data) != len(e.Data) {
				t.Fatalf("event %d: data has room (cap %d, len %d): an append to it would overwrite the next", i, cap(e.Data), len(e.Data))
			}
		}
	}
}

func TestAppendRequest_EncodeError(t *testing.T) {
	events := []reservation.Event{{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), By: "x", Data: reservation.Canceled{Refunded: 1}}}
	_, err := appendRequest("r1", nil, events)
	_, _, _, want := reservation.Encode(events[0])
	if err == nil || want == nil || err.Error() != want.Error() {
		t.Fatalf("appendRequest error %v, Encode error %v", err, want)
	}
}
