package reservation

import (
	"slices"
	"testing"
	"time"
)

func TestDroppedDues(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// s holds R-1 due at 30 s and R-2 with no due time.
	s := &State{Refunds: []*Refund{{No: "R-1", State: Processing, DueAt: at(30)}, {No: "R-2", State: Succeeded}}}
	ev := func(d EventData) Event { return Event{At: t0, By: "test", Data: d} }
	tests := []struct {
		name   string
		events []Event
		want   []DueTime
	}{
		{"a new refund's first submission drops nothing",
			[]Event{ev(RefundRequested{RefundNo: "R-3", Amount: 1}), ev(SubmissionStarted{RefundNo: "R-3", Attempt: 1, DueAt: at(30)})}, nil},
		{"success drops the recheck",
			[]Event{ev(ProviderResult{RefundNo: "R-1", From: Processing, To: Succeeded})}, []DueTime{{"R-1", at(30)}}},
		{"a query moves it",
			[]Event{ev(QueryStarted{RefundNo: "R-1", Query: 1, DueAt: at(90)})}, []DueTime{{"R-1", at(30)}}},
		{"still processing without a new time keeps it",
			[]Event{ev(ProviderResult{RefundNo: "R-1", From: Processing, To: Processing})}, nil},
		{"set again to the same time keeps it",
			[]Event{ev(QueryStarted{RefundNo: "R-1", Query: 1, DueAt: at(30)})}, nil},
		{"a time set and replaced in one append goes too",
			[]Event{ev(QueryStarted{RefundNo: "R-1", Query: 1, DueAt: at(60)}), ev(ProviderResult{RefundNo: "R-1", From: Processing, To: Failed})},
			[]DueTime{{"R-1", at(30)}, {"R-1", at(60)}}},
		{"back to the time it had drops only the one in between",
			[]Event{ev(QueryStarted{RefundNo: "R-1", Query: 1, DueAt: at(60)}), ev(QueryStarted{RefundNo: "R-1", Query: 2, DueAt: at(30)})},
			[]DueTime{{"R-1", at(60)}}},
		{"events without due times drop nothing",
			[]Event{ev(Conflict{RefundNo: "R-1"}), ev(FlaggedStuck{RefundNo: "R-1"})}, nil},
		{"a refund with no due time clears nothing",
			[]Event{ev(Resolved{RefundNo: "R-2", Reason: "ok"})}, nil},
		{"two refunds, each on its own",
			[]Event{ev(Abandoned{RefundNo: "R-1"}), ev(SubmissionScheduled{RefundNo: "R-2", DueAt: at(5)}), ev(SubmissionStarted{RefundNo: "R-2", Attempt: 1, DueAt: at(35)})},
			[]DueTime{{"R-1", at(30)}, {"R-2", at(5)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.Clone()
			got := DroppedDues(s, tt.events)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("DroppedDues = %v, want %v", got, tt.want)
			}
			assertSameState(t, before, s)
		})
	}
}

// TestDroppedDues_AllocatesOnlyToDrop: it runs for every append.
func TestDroppedDues_AllocatesOnlyToDrop(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	s := &State{Refunds: []*Refund{{No: "R-1", State: Processing, DueAt: t0}}}
	first := []Event{{Data: RefundRequested{RefundNo: "R-2", Amount: 1}}, {Data: SubmissionStarted{RefundNo: "R-2", Attempt: 1, DueAt: t0}}}
	if n := testing.AllocsPerRun(100, func() { DroppedDues(s, first) }); n != 0 {
		t.Errorf("a first submission: %v allocations", n)
	}
	done := []Event{{Data: ProviderResult{RefundNo: "R-1", From: Processing, To: Succeeded}}}
	if n := testing.AllocsPerRun(100, func() { DroppedDues(s, done) }); n != 1 {
		t.Errorf("a success: %v allocations, want the one for its answer", n)
	}
}
