package reservation

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestAppendIndexes(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// s holds R-1 processing, due at 30 s, and R-2 failed.
	s := &State{Version: 4, Refunds: []*Refund{{No: "R-1", State: Processing, DueAt: at(30)}, {No: "R-2", State: Failed}}}
	ev := func(d EventData) Event { return Event{At: t0, By: "test", Data: d} }
	tests := []struct {
		name   string
		state  *State
		prior  IndexChanges // what ix holds already
		events []Event
		want   IndexChanges
	}{
		{"a registration claims its order", nil, IndexChanges{},
			[]Event{ev(Registered{ReservationID: "r", OutTradeNo: "O-1", Amount: 1})},
			IndexChanges{Claims: []Claim{{ClaimOutTradeNo, "O-1"}}}},
		{"the default merchant's order keeps the key of journals before merchants", nil, IndexChanges{},
			[]Event{ev(Registered{ReservationID: "r", OutTradeNo: "O-1", Amount: 1, Merchant: DefaultMerchant})},
			IndexChanges{Claims: []Claim{{ClaimOutTradeNo, "O-1"}}}},
		{"another merchant's order is claimed under that merchant", nil, IndexChanges{},
			[]Event{ev(Registered{ReservationID: "r", OutTradeNo: "O-1", Amount: 1, Merchant: "hotel-sh"})},
			IndexChanges{Claims: []Claim{{ClaimOutTradeNo, "O-1/hotel-sh"}}}},
		{"a request with its first submission: the number, the due time, leaving UNKNOWN and REJECTED", s, IndexChanges{},
			[]Event{ev(RefundRequested{RefundNo: "R-3", Amount: 1}), ev(SubmissionStarted{RefundNo: "R-3", Attempt: 1, DueAt: at(60)})},
			IndexChanges{Claims: []Claim{{ClaimRefundNo, "R-3"}}, Dues: []DueTime{{"R-3", at(60)}},
				Marks: []Mark{{string(Unknown), "R-3", true}, {string(Rejected), "R-3", true}}}},
		{"success drops the recheck and the stuck flag", s, IndexChanges{},
			[]Event{ev(ProviderResult{RefundNo: "R-1", From: Processing, To: Succeeded})},
			IndexChanges{Dropped: []DueTime{{"R-1", at(30)}}, Marks: []Mark{{AttentionStuck, "R-1", true}}}},
		{"unknown: out of none, into UNKNOWN, due again", s, IndexChanges{},
			[]Event{ev(ProviderResult{RefundNo: "R-1", From: Processing, To: Unknown, DueAt: at(90)})},
			IndexChanges{Dues: []DueTime{{"R-1", at(90)}}, Dropped: []DueTime{{"R-1", at(30)}}, Marks: []Mark{{string(Unknown), "R-1", false}}}},
		{"paid after FAILED is a conflict for ever", s, IndexChanges{},
			[]Event{ev(ProviderResult{RefundNo: "R-2", From: Failed, To: Succeeded})},
			IndexChanges{Marks: []Mark{{AttentionStuck, "R-2", true}, {AttentionConflict, "R-2", false}}}},
		{"a recovered refund claims its number, with its due time and attention", s, IndexChanges{},
			[]Event{ev(RefundRecovered{RefundNo: "R-4", State: Unknown, DueAt: at(45)})},
			IndexChanges{Claims: []Claim{{ClaimRefundNo, "R-4"}}, Dues: []DueTime{{"R-4", at(45)}}, Marks: []Mark{{string(Unknown), "R-4", false}}}},
		{"a registration is found by its user and transaction ids", nil, IndexChanges{},
			[]Event{ev(Registered{ReservationID: "r", UserID: "u/1", OutTradeNo: "O-1", TransactionID: "42", Amount: 1})},
			IndexChanges{Claims: []Claim{{ClaimOutTradeNo, "O-1"}},
				Search: []SearchKey{{SearchUserID, "u/1", "", DefaultMerchant}, {SearchTransactionID, "42", "", DefaultMerchant}}}},
		{"a registration's entries name its merchant", nil, IndexChanges{},
			[]Event{ev(Registered{ReservationID: "r", Merchant: "hotel-sh", UserID: "u/1", OutTradeNo: "O-1", Amount: 1})},
			IndexChanges{Claims: []Claim{{ClaimOutTradeNo, "O-1/hotel-sh"}}, Search: []SearchKey{{SearchUserID, "u/1", "", "hotel-sh"}}}},
		{"another merchant's refund number is claimed id first", &State{Version: 2, Merchant: "hotel-sh"}, IndexChanges{},
			[]Event{ev(RefundRequested{RefundNo: "SH-r-3", Amount: 1}), ev(RefundRecovered{RefundNo: "SH-r-4", State: Unknown})},
			IndexChanges{Claims: []Claim{{ClaimRefundNo, "r/3/SH"}, {ClaimRefundNo, "r/4/SH"}}, Marks: []Mark{{string(Unknown), "SH-r-4", false}}}},
		{"WeChat's refund_id names the merchant of the state decided on", &State{Version: 3, Merchant: "hotel-bj", Refunds: []*Refund{{No: "R-2", State: Failed}}}, IndexChanges{},
			[]Event{ev(ProviderResult{RefundNo: "R-2", From: Failed, To: Failed, ProviderID: "50301"})},
			IndexChanges{Search: []SearchKey{{SearchProviderRefundID, "50301", "R-2", "hotel-bj"}}}},
		{"WeChat's refund_id is indexed when an answer first names it", s, IndexChanges{},
			[]Event{ev(ProviderResult{RefundNo: "R-2", From: Failed, To: Failed, ProviderID: "50300"})},
			IndexChanges{Search: []SearchKey{{SearchProviderRefundID, "50300", "R-2", ""}}}},
		{"an id the refund holds already is not written again", &State{Version: 2, Refunds: []*Refund{{No: "R-1", State: Processing, ProviderID: "50300"}}}, IndexChanges{},
			[]Event{ev(ProviderResult{RefundNo: "R-1", From: Processing, To: Processing, ProviderID: "50300"})},
			IndexChanges{}},
		{"an event without an index entry", s, IndexChanges{}, []Event{ev(Canceled{Refunded: 0})}, IndexChanges{}},
		{"appended after what ix holds, even the same drop", s,
			IndexChanges{Dropped: []DueTime{{"R-1", at(30)}}, Marks: []Mark{{AttentionStuck, "R-9", false}}},
			[]Event{ev(Abandoned{RefundNo: "R-1"})},
			IndexChanges{Dropped: []DueTime{{"R-1", at(30)}, {"R-1", at(30)}},
				Marks: []Mark{{AttentionStuck, "R-9", false}, {string(Rejected), "R-1", true}, {AttentionStuck, "R-1", true}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *State
			if tt.state != nil {
				before = tt.state.Clone()
			}
			got := AppendIndexes(tt.prior, tt.state, tt.events)
			got.Rows = nil // TestAppendIndexes_Rows and the property test check them
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("AppendIndexes =\n %+v\nwant\n %+v", got, tt.want)
			}
			if tt.state != nil {
				assertSameState(t, before, tt.state)
			}
		})
	}
}

func TestAppendIndexes_Rows(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	s := &State{ID: "r", Merchant: "hotel-sh", Amount: 500, Status: StatusAccepted, RegisteredAt: t0, Version: 2,
		Refunds: []*Refund{{No: "R-1", State: Processing, Amount: 100, ReasonCode: "stay", CreatedAt: at(1), UpdatedAt: at(1)}}}
	res := ListRow{Kind: ListReservations, Merchant: "hotel-sh", ReservationID: "r", At: t0, UpdatedAt: at(1),
		State: "ACCEPTED", Amount: 500, RefundStates: StateBit(Processing)}
	r1 := ListRow{Kind: ListRefunds, Merchant: "hotel-sh", ReservationID: "r", RefundNo: "R-1", At: at(1), UpdatedAt: at(1),
		State: "PROCESSING", Amount: 100, ReasonCode: "stay"}
	cleared := func(r ListRow) ListRow { r.Clear = true; return r }
	tests := []struct {
		name   string
		state  *State
		events []Event
		want   []ListRow
	}{
		{"a registration adds its row", nil,
			[]Event{{At: t0, Data: Registered{ReservationID: "r", OutTradeNo: "O", Amount: 500, Merchant: "hotel-sh"}}},
			[]ListRow{{Kind: ListReservations, Merchant: "hotel-sh", ReservationID: "r", At: t0, UpdatedAt: t0, State: "ACCEPTED", Amount: 500}}},
		{"an old registration names no merchant: the default one", nil,
			[]Event{{At: t0, Data: Registered{ReservationID: "r", OutTradeNo: "O", Amount: 500}}},
			[]ListRow{{Kind: ListReservations, Merchant: DefaultMerchant, ReservationID: "r", At: t0, UpdatedAt: t0, State: "ACCEPTED", Amount: 500}}},
		{"a result moves the refund's and the reservation's rows", s,
			[]Event{{At: at(9), Data: ProviderResult{RefundNo: "R-1", From: Processing, To: Unknown}}},
			[]ListRow{cleared(res), cleared(r1),
				func() ListRow { r := res; r.UpdatedAt, r.RefundStates = at(9), StateBit(Unknown); return r }(),
				func() ListRow { r := r1; r.UpdatedAt, r.State = at(9), "UNKNOWN"; return r }()}},
		{"an event that changes no row writes none", s, []Event{{At: at(9), Data: Canceled{}}},
			[]ListRow{cleared(res), func() ListRow { r := res; r.State = "CANCELED"; return r }()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendIndexes(IndexChanges{}, tt.state, tt.events).Rows
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Rows =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

func TestRefundNoKey(t *testing.T) {
	tests := []struct {
		merchant, no, want string
	}{
		{"", "R-r1-1", "R-r1-1"},              // journals before merchants
		{DefaultMerchant, "R-r1-1", "R-r1-1"}, // the default merchant by name
		{"hotel-sh", "SH-r1-12", "r1/12/SH"},
		{"hotel-sh", "SH-a-b-2", "a-b/2/SH"}, // an id with '-' in it
		{"hotel-sh", "legacy_no", "legacy_no"},
		{"hotel-sh", "SH-r1-0", "SH-r1-0"}, // not a number RefundNo makes
	}
	for _, tt := range tests {
		if got := RefundNoKey(tt.merchant, tt.no); got != tt.want {
			t.Errorf("RefundNoKey(%q, %q) = %q, want %q", tt.merchant, tt.no, got, tt.want)
		}
		if !slices.Contains(RefundNoKeys(tt.no), RefundNoKey(tt.merchant, tt.no)) {
			t.Errorf("RefundNoKeys(%q) = %q misses the key RefundNoKey gives for %q", tt.no, RefundNoKeys(tt.no), tt.merchant)
		}
	}
}

// Two different numbers never share a key, whatever their merchants: an
// id-first key holds '/', which no number does, and it parses back to its
// number.
func TestRefundNoKey_OneToOne(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.StringMatching(`[A-Za-z0-9_-]{1,20}`).Draw(t, "id")
		prefix := rapid.StringMatching(`[A-Z0-9]{1,6}`).Draw(t, "prefix")
		n := rapid.IntRange(1, 60).Draw(t, "n")
		no := RefundNo(prefix, id, n)
		other := rapid.StringMatching(`[A-Za-z0-9_-]{1,30}`).Draw(t, "other")
		if !ValidReservationID(id) {
			t.Skip("not an id")
		}
		k := RefundNoKey("m", no)
		if k == no || strings.Contains(no, "/") {
			t.Fatalf("number %q keyed as itself %q", no, k)
		}
		if other != no && (RefundNoKey("m", other) == k || other == k) {
			t.Fatalf("%q and %q share key %q", no, other, k)
		}
	})
}
