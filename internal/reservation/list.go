package reservation

import "time"

// List kinds: the two lists the list index keeps a row of every refund and
// every reservation in (GET /v1/refunds, GET /v1/reservations).
const (
	ListRefunds      = "refund"
	ListReservations = "reservation"
)

// ListStates are the refund states a list row can hold, in the order of
// their bits in ListRow.RefundStates.
var ListStates = []RefundState{Processing, Succeeded, Failed, Unknown, Rejected, Abnormal, PendingApproval}

// StateBit is st's bit in ListRow.RefundStates; 0 for a state not in
// ListStates.
func StateBit(st RefundState) uint16 {
	for i, s := range ListStates {
		if s == st {
			return 1 << i
		}
	}
	return 0
}

// ListRow is one row of the list index: what a list filters and orders
// by, for one refund (Kind ListRefunds) or one reservation
// (ListReservations). Rows are a function of the state alone (ListRows);
// an append replaces the rows it changes (AppendIndexes' Rows).
type ListRow struct {
	Kind          string
	Merchant      string // MerchantOf
	ReservationID string
	RefundNo      string // refunds only
	// At orders the list: when the refund was requested, or the
	// reservation registered. It never changes.
	At time.Time
	// UpdatedAt is the refund's; a reservation's is the latest of its
	// registration and its refunds' updates.
	UpdatedAt time.Time
	// State is the refund's state, or the reservation's status.
	State  string
	Amount int64 // the refund's, or the reservation's paid amount; fen
	// ReasonCode is the refund's reason code (refunds only).
	ReasonCode string
	// RefundStates has StateBit set for the state of each of the
	// reservation's refunds (reservations only).
	RefundStates uint16
	// Clear removes the row from the index (AppendIndexes).
	Clear bool
}

// ListRows appends to dst the rows of the list index s implies: one for
// the reservation and one per refund; none before it is registered.
func ListRows(dst []ListRow, s *State) []ListRow {
	if !s.Registered() {
		return dst
	}
	m := MerchantOf(s.Merchant)
	res := ListRow{Kind: ListReservations, Merchant: m, ReservationID: s.ID, At: s.RegisteredAt,
		UpdatedAt: s.RegisteredAt, State: string(s.Status), Amount: s.Amount}
	for _, r := range s.Refunds {
		if r.UpdatedAt.After(res.UpdatedAt) {
			res.UpdatedAt = r.UpdatedAt
		}
		res.RefundStates |= StateBit(r.State)
	}
	dst = append(dst, res)
	for _, r := range s.Refunds {
		dst = append(dst, ListRow{Kind: ListRefunds, Merchant: m, ReservationID: s.ID, RefundNo: r.No,
			At: r.CreatedAt, UpdatedAt: r.UpdatedAt, State: string(r.State), Amount: r.Amount, ReasonCode: r.ReasonCode})
	}
	return dst
}

// appendRowChanges appends to dst the list rows that change from s (nil:
// a new reservation) to after: the rows of before that are gone, cleared,
// then the rows of after that are new. Neither state is changed.
func appendRowChanges(dst []ListRow, s, after *State) []ListRow {
	// Room for a reservation with three refunds, on the stack.
	var beforeRoom, nowRoom [4]ListRow
	var before []ListRow
	if s != nil {
		before = ListRows(beforeRoom[:0], s)
	}
	now := ListRows(nowRoom[:0], after)
	for _, r := range before {
		if !containsRow(now, r) {
			r.Clear = true
			dst = append(dst, r)
		}
	}
	for _, r := range now {
		if !containsRow(before, r) {
			dst = append(dst, r)
		}
	}
	return dst
}

func containsRow(rows []ListRow, r ListRow) bool {
	for _, x := range rows {
		if x.Kind == r.Kind && x.ReservationID == r.ReservationID && x.RefundNo == r.RefundNo && x.State == r.State &&
			x.Amount == r.Amount && x.ReasonCode == r.ReasonCode && x.RefundStates == r.RefundStates &&
			x.Merchant == r.Merchant && x.At.Equal(r.At) && x.UpdatedAt.Equal(r.UpdatedAt) {
			return true
		}
	}
	return false
}

// ListFilter is what a list asks of the list index (GET /v1/refunds, GET
// /v1/reservations): rows of Kind of Merchants, matching every field set.
// The zero value of a field matches everything.
type ListFilter struct {
	Kind      string   // ListRefunds or ListReservations
	Merchants []string // the merchants read; none: no row
	// States are the refund states (Kind ListRefunds) or reservation
	// statuses wanted: any of them.
	States []string
	// RefundStates: a reservation with a refund in any of these states
	// (StateBit); ListReservations only.
	RefundStates uint16
	// AtFrom (inclusive) and AtTo (exclusive) bound ListRow.At; UpdatedFrom
	// and UpdatedTo bound ListRow.UpdatedAt.
	AtFrom, AtTo           time.Time
	UpdatedFrom, UpdatedTo time.Time
	// AmountMin and AmountMax bound the amount, inclusive; AmountMax 0
	// means no upper bound (every amount is at least 1 fen).
	AmountMin, AmountMax int64
	ReasonCode           string
	// Exact ids: rows of reservations (and refunds) that hold them. The
	// refund's ids (RefundNo, ProviderRefundID) apply to refund rows only.
	RefundNo, ProviderRefundID        string
	OutTradeNo, UserID, TransactionID string
}

// HasIDs reports whether f names an exact id: such a list reads the
// reservations the ids name rather than the whole list.
func (f *ListFilter) HasIDs() bool {
	return f.RefundNo != "" || f.ProviderRefundID != "" || f.OutTradeNo != "" || f.UserID != "" || f.TransactionID != ""
}

// Matches reports whether row r matches every field of f but the exact
// ids, which a row does not hold (MatchesIDs).
func (f *ListFilter) Matches(r ListRow) bool {
	switch {
	case r.Kind != f.Kind:
		return false
	case len(f.States) > 0 && !contains(f.States, r.State):
		return false
	case f.RefundStates != 0 && r.RefundStates&f.RefundStates == 0:
		return false
	case !f.AtFrom.IsZero() && r.At.Before(f.AtFrom), !f.AtTo.IsZero() && !r.At.Before(f.AtTo):
		return false
	case !f.UpdatedFrom.IsZero() && r.UpdatedAt.Before(f.UpdatedFrom), !f.UpdatedTo.IsZero() && !r.UpdatedAt.Before(f.UpdatedTo):
		return false
	case r.Amount < f.AmountMin, f.AmountMax != 0 && r.Amount > f.AmountMax:
		return false
	case f.ReasonCode != "" && r.ReasonCode != f.ReasonCode:
		return false
	}
	return contains(f.Merchants, r.Merchant)
}

// MatchesIDs reports whether s (and its refund no, for a refund row) holds
// every exact id of f.
func (f *ListFilter) MatchesIDs(s *State, no string) bool {
	switch {
	case f.OutTradeNo != "" && s.OutTradeNo != f.OutTradeNo,
		f.UserID != "" && s.UserID != f.UserID,
		f.TransactionID != "" && s.TransactionID != f.TransactionID:
		return false
	}
	if f.Kind != ListRefunds || (f.RefundNo == "" && f.ProviderRefundID == "") {
		return true
	}
	r := s.Refund(no)
	return r != nil && (f.RefundNo == "" || r.No == f.RefundNo) && (f.ProviderRefundID == "" || r.ProviderID == f.ProviderRefundID)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ErrListCursor is returned by a list (eventstore.Reader.List) for a
// cursor that is not a position of its list.
var ErrListCursor = &Error{Code: CodeInvalid, Field: "cursor", Message: "is not a cursor of this list"}

// ListPage is one page of a list.
type ListPage struct {
	Rows []ListRow
	// Next is the position to read on from (ListOptions.After); "" when
	// the list has no more rows. A page may hold fewer than the limit
	// rows, even none, with Next set: the read stops after
	// ListOptions.MaxScan keys.
	Next string
}

// ListOptions are how a list is read.
type ListOptions struct {
	// Oldest reads the list oldest first; the zero value is newest first.
	Oldest bool
	// After is a position (ListPage.Next) to read on from; "" starts at
	// the beginning.
	After string
	// Limit is the most rows a page holds; at least 1.
	Limit int
	// MaxScan bounds the keys one page reads (zero: 5,000): a filter
	// that matches few rows answers in bounded time, with a short page
	// and a Next to read on from.
	MaxScan int
}
