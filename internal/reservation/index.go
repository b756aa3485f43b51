package reservation

import "strconv"

// Claim namespaces: the unique keys a reservation's events take, so that
// no second reservation takes the same order or refund number.
const (
	ClaimOutTradeNo = "out_trade_no"
	ClaimRefundNo   = "refund_no"
)

// OutTradeNoKey is the key of the out_trade_no claim of an order of
// merchant: order numbers are unique per merchant. The default merchant's
// key is the order number alone, the key every journal written before
// reservations had merchants holds; another merchant's is "NO/MERCHANT",
// which no order number alone can be ('/' is in neither a merchant name
// nor an order number).
//
// The order number comes first so that a platform's orders, numbered in
// sequence across its merchants, append at one end of the claims index:
// merchant first gave each merchant its own tail, and a group commit of 64
// registrations for 64 merchants rewrote up to 64 leaf pages instead of
// one or two (docs/BENCHMARKS.md, "Many merchants").
func OutTradeNoKey(merchant, outTradeNo string) string {
	if merchant == "" || merchant == DefaultMerchant {
		return outTradeNo
	}
	return outTradeNo + "/" + merchant
}

// RefundNoKey is the key of the refund_no claim of refund number no of a
// reservation of merchant. The default merchant's key is the number alone,
// as in every journal written before reservations had merchants. Another
// merchant's number, made by RefundNo, is keyed "RESERVATION/N/PREFIX": the
// reservation id first, for the reason OutTradeNoKey puts the order number
// first (the prefix, one per merchant, would give each merchant its own
// tail). The mapping is one to one, and no number alone contains '/', so
// the two forms never meet. A number RefundNo did not make is keyed as it
// is.
func RefundNoKey(merchant, no string) string {
	if merchant == "" || merchant == DefaultMerchant {
		return no
	}
	if k, ok := refundNoIDFirst(no); ok {
		return k
	}
	return no
}

// RefundNoKeys are the keys a refund number may be claimed under, for a
// lookup that does not know the refund's merchant: the number itself, and
// its id-first form when it has one.
func RefundNoKeys(no string) []string {
	if k, ok := refundNoIDFirst(no); ok {
		return []string{no, k}
	}
	return []string{no}
}

func refundNoIDFirst(no string) (string, bool) {
	prefix, id, n, ok := ParseRefundNo(no)
	if !ok {
		return "", false
	}
	return id + "/" + strconv.Itoa(n) + "/" + prefix, true
}

// Claim is one unique key an event takes for its reservation.
type Claim struct {
	Namespace string // ClaimOutTradeNo or ClaimRefundNo
	Key       string
}

// Mark is one change of the attention index: refund RefundNo enters the
// list of Kind (one of AttentionKinds), or leaves it when Clear.
type Mark struct {
	Kind     string
	RefundNo string
	Clear    bool
}

// IndexChanges is every index entry an append implies, in event order:
// the adapter writes them in the same commit as the events.
type IndexChanges struct {
	Claims []Claim
	// Dues are the due times the events set (DueOf); the scheduler drains
	// them.
	Dues []DueTime
	// Dropped are the due times the events supersede (DroppedDues): they
	// leave the index in the same commit, after Dues are put.
	Dropped []DueTime
	// Marks are applied in order: a later mark of the same key wins.
	Marks []Mark
	// Search are the ids the reservation is found by besides its claims
	// (GET /v1/search): entries are only ever added.
	Search []SearchKey
	// Rows are the list index's changes (GET /v1/refunds, GET
	// /v1/reservations): the rows of the state decided on that the events
	// change, cleared, then their new versions (ListRows).
	Rows []ListRow
}

// Search kinds: the ids, other than the claimed order and refund numbers,
// a reservation or refund is found by. None is unique (a user has many
// reservations), so each entry names its reservation.
const (
	SearchUserID        = "user_id"
	SearchTransactionID = "transaction_id"
	// SearchProviderRefundID is WeChat Pay's refund_id, known once an
	// answer names it.
	SearchProviderRefundID = "refund_id"
)

// Found is one reservation (and refund, when RefundNo is set) a search
// found, and By, the kind of id it matched: ClaimRefundNo,
// ClaimOutTradeNo or a search kind.
type Found struct {
	By            string
	ReservationID string
	RefundNo      string
}

// SearchKey is one search entry: Value of Kind finds the reservation (and
// its refund RefundNo, "" for the reservation's own ids).
type SearchKey struct {
	Kind, Value, RefundNo string
	// Merchant is the reservation's (MerchantOf): a search reads the
	// entries of the merchants its caller sees only, so another merchant's
	// entries neither cost it reads nor crowd out its own.
	Merchant string
}

// AppendIndexes appends to ix the index entries that events, applied to s
// (the state they were decided on; nil is a new reservation), imply, and
// returns it. It is the one place that says what the journal's indexes
// hold: the event store writes them with each append, and the audit checks
// a journal's indexes against them. s is not changed. The entries go into
// ix's slices, so an adapter on the hot path can supply their room.
func AppendIndexes(ix IndexChanges, s *State, events []Event) IndexChanges {
	return AppendIndexesTo(ix, s, After(s, events), events)
}

// AppendIndexesTo is AppendIndexes given after, the state events lead to
// from s (After): the append's path needs it for the counters too, and
// computes it once.
func AppendIndexesTo(ix IndexChanges, s, after *State, events []Event) IndexChanges {
	ix = AppendKeyIndexes(ix, s, events)
	ix.Rows = appendRowChanges(ix.Rows, s, after)
	return ix
}

// AppendKeyIndexes is AppendIndexes without the list index's rows (Rows
// stays as given). The other entries follow from the events alone; the
// rows need the whole state before and after them (a clone, two ListRows),
// which made half of the audit's replay: it checks the rows once against
// each reservation's final state instead.
func AppendKeyIndexes(ix IndexChanges, s *State, events []Event) IndexChanges {
	var merchant string // the reservation's, once registered
	if s != nil {
		merchant = s.Merchant
	}
	for _, e := range events {
		switch d := e.Data.(type) {
		case Registered:
			ix.Claims = append(ix.Claims, Claim{Namespace: ClaimOutTradeNo, Key: OutTradeNoKey(d.Merchant, d.OutTradeNo)})
			merchant = MerchantOf(d.Merchant)
			if d.UserID != "" {
				ix.Search = append(ix.Search, SearchKey{Kind: SearchUserID, Value: d.UserID, Merchant: merchant})
			}
			if d.TransactionID != "" {
				ix.Search = append(ix.Search, SearchKey{Kind: SearchTransactionID, Value: d.TransactionID, Merchant: merchant})
			}
		case ProviderResult:
			// Every answer repeats the id: written once, when it is new to
			// the state decided on (a later event of the same append may
			// write it again, which changes nothing).
			if d.ProviderID != "" {
				if s == nil || s.Refund(d.RefundNo) == nil || s.Refund(d.RefundNo).ProviderID != d.ProviderID {
					ix.Search = append(ix.Search, SearchKey{Kind: SearchProviderRefundID, Value: d.ProviderID, RefundNo: d.RefundNo, Merchant: merchant})
				}
			}
		case RefundRequested:
			ix.Claims = append(ix.Claims, Claim{Namespace: ClaimRefundNo, Key: RefundNoKey(merchant, d.RefundNo)})
		case RefundRecovered:
			ix.Claims = append(ix.Claims, Claim{Namespace: ClaimRefundNo, Key: RefundNoKey(merchant, d.RefundNo)})
		}
		if no, at, ok := DueOf(e.Data); ok {
			ix.Dues = append(ix.Dues, DueTime{RefundNo: no, At: at})
		}
		ix.Marks = appendAttention(ix.Marks, e.Data)
	}
	ix.Dropped = appendDroppedDues(ix.Dropped, s, events)
	return ix
}
