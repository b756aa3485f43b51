package reservation

import "time"

// Status is the reservation's status.
type Status string

// Reservation statuses.
const (
	StatusAccepted Status = "ACCEPTED"
	StatusCanceled Status = "CANCELED" // refunds that succeeded add up to the paid amount
)

// RefundState is where one refund stands.
type RefundState string

// Refund states. SUCCEEDED and FAILED are terminal; nothing ever goes back to
// "not requested".
const (
	// Processing: claimed and being submitted, or accepted by the provider.
	Processing RefundState = "PROCESSING"
	// Succeeded: the money went back. Terminal.
	Succeeded RefundState = "SUCCEEDED"
	// Failed: WeChat closed the refund, or an operator abandoned a rejected
	// one. Terminal; releases its amount.
	Failed RefundState = "FAILED"
	// Unknown: the outcome is not known (timeout, 5xx, unverifiable answer);
	// resolved only by a provider query.
	Unknown RefundState = "UNKNOWN"
	// Rejected: the provider refused the request with a business code; the
	// amount stays held until an operator resubmits or abandons it.
	Rejected RefundState = "REJECTED"
	// Abnormal: WeChat could not deliver the money; needs an operator. Held.
	Abnormal RefundState = "ABNORMAL"
)

// Terminal reports whether the state can never change again.
func (s RefundState) Terminal() bool { return s == Succeeded || s == Failed }

// Holds reports whether a refund in this state counts against what is
// refundable: every state but FAILED does.
func (s RefundState) Holds() bool { return s != Failed }

// unsettledAfter is r.UnsettledAt once an outcome from src about attempt
// is applied: only a refusal answering the latest attempt says that attempt
// created nothing. A refusal of an older attempt, or any query, settles
// nothing (a resubmission WeChat Pay cannot tell from a duplicate is refused
// while the first may still be applied).
func (r *Refund) unsettledAfter(src Source, kind OutcomeKind, attempt int) time.Time {
	if src == SourceResponse && kind == OutcomeRejected && attempt > 0 && attempt == r.Attempts {
		return r.PriorUnsettledAt
	}
	return r.UnsettledAt
}

// Refund is one refund of a reservation.
type Refund struct {
	No             string // out_refund_no, generated once and stored in the event
	Number         int    // per-reservation counter that produced No
	IdempotencyKey string
	Fingerprint    string
	Amount         int64
	Reason         string
	ReasonCode     string
	Metadata       Metadata
	State          RefundState
	Code           string // last provider business code, if any
	Message        string
	ProviderID     string    // WeChat refund_id
	Request        []byte    // exact provider request bytes, resent unchanged
	Attempts       int       // submissions started
	Queries        int       // provider queries started
	QueriedAt      time.Time // when the last provider query started (Policy.HintWindow)
	DueAt          time.Time
	Retry          bool      // the due time resubmits (or first submits) rather than queries
	SubmittedAt    time.Time // first submission to the provider
	// UnsettledAt is when the latest attempt whose outcome is unknown (no
	// answer, or no definite one) started: WeChat Pay may still apply it
	// until the policy's SettleHorizon has passed. Zero when every attempt
	// was refused outright. PriorUnsettledAt is the same before the latest
	// attempt, which its own refusal restores.
	UnsettledAt      time.Time
	PriorUnsettledAt time.Time
	// PaidAfterFailed says WeChat Pay reported SUCCESS for the refund after
	// refundd had closed it as FAILED: counted as refunded, and listed for
	// operators as a conflict.
	PaidAfterFailed bool
	Stuck           bool
	Conflicts       int
	LastConflict    Conflict // the latest conflict recorded, so a repeat of it records nothing
	RequestedBy     string
	CreatedAt       time.Time
	UpdatedAt       time.Time
	SucceededAt     time.Time
	// Recovered: found at the provider after a restore (RefundRecovered),
	// never submitted by this journal; it has no key and no request.
	Recovered bool
	// ApprovalRequired: the refund was created PENDING_APPROVAL (approval.go).
	// ApprovedBy and ApprovedAt say who approved it and when; RejectedBy who
	// rejected it.
	ApprovalRequired bool
	ApprovedBy       string
	ApprovedAt       time.Time
	RejectedBy       string
	// AbnormalType is where an operator asked WeChat Pay to pay the refund
	// out after it was ABNORMAL (ApplyAbnormal); empty if never.
	AbnormalType string
}

// State is everything a reservation knows, rebuilt by applying its events in
// order.
type State struct {
	ID            string
	UserID        string
	OutTradeNo    string
	TransactionID string
	Amount        int64 // paid, fen
	Currency      string
	PaidAt        time.Time
	Merchant      string // never empty once registered (DefaultMerchant for old journals)
	Status        Status
	RegisteredAt  time.Time
	RegisteredBy  string
	Refunds       []*Refund // in request order
	Version       uint64    // number of events applied
	// LastCreateAt is when the latest create request of the order (any
	// attempt of any refund) was journaled: WeChat Pay's spacing counts
	// from it. It is derived from SubmissionStarted events, so a replay
	// rebuilds it; the zero time means none yet.
	LastCreateAt time.Time

	// Lookup indexes, kept only once a reservation has indexFrom refunds
	// (below that a scan is as fast) and not copied by Clone, so that a
	// copy stays small.
	byNo  map[string]int
	byKey map[string]int
}

// indexFrom is the number of refunds from which State keeps lookup maps.
const indexFrom = 8

// Registered reports whether the reservation exists.
func (s *State) Registered() bool { return s != nil && s.ID != "" }

// Refund returns the refund with the given number, or nil.
func (s *State) Refund(no string) *Refund {
	if s.byNo != nil {
		if i, ok := s.byNo[no]; ok {
			return s.Refunds[i]
		}
		return nil
	}
	for i := len(s.Refunds) - 1; i >= 0; i-- {
		if s.Refunds[i].No == no {
			return s.Refunds[i]
		}
	}
	return nil
}

// RefundByKey returns the refund created with an idempotency key, or nil.
func (s *State) RefundByKey(key string) *Refund {
	if s.byKey != nil {
		if i, ok := s.byKey[key]; ok {
			return s.Refunds[i]
		}
		return nil
	}
	for i := len(s.Refunds) - 1; i >= 0; i-- {
		if s.Refunds[i].IdempotencyKey == key {
			return s.Refunds[i]
		}
	}
	return nil
}

// indexLast indexes the refund just appended, building the lookup maps when
// the reservation reaches indexFrom refunds. Like the maps, a scan finds
// the last refund with a number or key.
func (s *State) indexLast() {
	last := len(s.Refunds) - 1
	if s.byNo == nil {
		if len(s.Refunds) < indexFrom {
			return
		}
		s.byNo, s.byKey = make(map[string]int, len(s.Refunds)), make(map[string]int, len(s.Refunds))
		for i, r := range s.Refunds[:last] {
			s.byNo[r.No], s.byKey[r.IdempotencyKey] = i, i
		}
	}
	r := s.Refunds[last]
	s.byNo[r.No], s.byKey[r.IdempotencyKey] = last, last
}

// Refunded is the sum of refunds that SUCCEEDED.
func (s *State) Refunded() int64 {
	var n int64
	for _, r := range s.Refunds {
		if r.State == Succeeded {
			n += r.Amount
		}
	}
	return n
}

// InFlight is the sum of refunds that hold money but have not succeeded.
func (s *State) InFlight() int64 {
	var n int64
	for _, r := range s.Refunds {
		if r.State.Holds() && r.State != Succeeded {
			n += r.Amount
		}
	}
	return n
}

// Refundable is what a new refund may still claim.
func (s *State) Refundable() int64 { return s.Amount - s.Refunded() - s.InFlight() }

// Clone returns a deep copy, so a caller can apply events tentatively.
// The refunds are copied into one block: three allocations whatever their
// number. The lookup maps are not copied: the copy scans (as every state
// below indexFrom refunds does, and finding the same refunds) until a
// refund is added to it, which builds them again.
func (s *State) Clone() *State {
	c := *s
	c.Refunds = make([]*Refund, len(s.Refunds))
	block := make([]Refund, len(s.Refunds))
	for i, r := range s.Refunds {
		block[i] = *r
		c.Refunds[i] = &block[i]
	}
	c.byNo, c.byKey = nil, nil
	return &c
}

// Replay rebuilds a state from events.
func Replay(events []Event) *State { return After(nil, events) }

// After is the state events lead to from s (nil: a new reservation), in a
// new State; s is not changed.
func After(s *State, events []Event) *State {
	after := &State{}
	if s != nil {
		after = s.Clone()
	}
	for _, e := range events {
		Apply(after, e)
	}
	return after
}
