package reservation

import "time"

// Event is a fact decided by Decide and journaled before anything acts on it.
type Event struct {
	At   time.Time // when it was decided (from Env.Now)
	By   string    // who caused it: an authenticated principal, "provider:...", or "engine"
	Data EventData
}

// EventData is the payload of one event type.
type EventData interface {
	EventType() string
}

// Event type names, stable forever: they are stored in the journal.
const (
	TypeRegistered        = "reservation.registered"
	TypeCanceled          = "reservation.canceled"
	TypeRefundRequested   = "refund.requested"
	TypeSubmissionStarted = "refund.submission_started"
	TypeQueryStarted      = "refund.query_started"
	TypeProviderResult    = "refund.provider_result"
	TypeAbandoned         = "refund.abandoned"
	TypeConflict          = "refund.conflict"
	TypeFlaggedStuck      = "refund.flagged_stuck"
	TypeSubmissionWaits   = "refund.submission_scheduled"
	TypeResolved          = "refund.resolved"
)

// Registered: the booking/payment system registered the paid reservation.
type Registered struct {
	ReservationID string    `json:"reservation_id"`
	UserID        string    `json:"user_id"`
	OutTradeNo    string    `json:"out_trade_no"`
	TransactionID string    `json:"transaction_id,omitempty"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	PaidAt        time.Time `json:"paid_at,omitzero"`
	// Merchant is the merchant the reservation belongs to. Events written
	// before reservations had merchants lack it: empty is DefaultMerchant.
	Merchant string `json:"merchant,omitempty"`
}

// Canceled: refunds that succeeded now add up to the paid amount.
type Canceled struct {
	Refunded int64 `json:"refunded"`
}

// RefundRequested: an amount is claimed under a new refund number.
type RefundRequested struct {
	RefundNo       string `json:"refund_no"`
	Number         int    `json:"number"`
	IdempotencyKey string `json:"idempotency_key"`
	Fingerprint    string `json:"fingerprint"`
	Amount         int64  `json:"amount"`
	Reason         string `json:"reason,omitempty"`
	// ReasonCode and Metadata are absent from events written before they
	// existed, and decode empty.
	ReasonCode string   `json:"reason_code,omitempty"`
	Metadata   Metadata `json:"metadata,omitzero"`
}

// SubmissionStarted: a submission to the provider is about to be made. It is
// journaled before the call; Request holds the exact bytes on the first
// attempt and is empty afterwards (retries resend the first bytes). DueAt is
// when to check on it if no answer arrives (a crash, a lost response).
type SubmissionStarted struct {
	RefundNo string    `json:"refund_no"`
	Attempt  int       `json:"attempt"`
	Request  []byte    `json:"request,omitempty"`
	DueAt    time.Time `json:"due_at"`
}

// QueryStarted: the provider is about to be asked for the refund's outcome;
// DueAt is the next check if this one does not settle it.
type QueryStarted struct {
	RefundNo string    `json:"refund_no"`
	Query    int       `json:"query"`
	DueAt    time.Time `json:"due_at"`
}

// ProviderResult: a provider outcome (response, notification or query) was
// applied to a refund. From == To records an attempt that changed nothing.
type ProviderResult struct {
	RefundNo    string      `json:"refund_no"`
	Source      Source      `json:"source"`
	Attempt     int         `json:"attempt,omitempty"`
	Outcome     OutcomeKind `json:"outcome"`
	Code        string      `json:"code,omitempty"`
	Message     string      `json:"message,omitempty"`
	ProviderID  string      `json:"provider_id,omitempty"`
	From        RefundState `json:"from"`
	To          RefundState `json:"to"`
	SuccessTime time.Time   `json:"success_time,omitzero"`
	// DueAt is set when the refund goes back to waiting on the provider
	// without a due time (REJECTED -> PROCESSING): the next check on it;
	// with Retry, when to submit the same bytes again.
	DueAt time.Time `json:"due_at,omitzero"`
	// Retry says the answer was unknown and the submission is to be repeated
	// at DueAt (bounded by the policy's MaxAttempts).
	Retry bool `json:"retry,omitempty"`
}

// SubmissionScheduled: a refund's next submission waits until DueAt,
// because the order's previous create request (any attempt of any of its
// refunds) was made less than the spacing ago (WeChat Pay's rule). For a
// first submission the exact request bytes are journaled now; a retry or
// resubmission (Attempts > 0) repeats the bytes already journaled, and
// leaves REJECTED or UNKNOWN for PROCESSING as SubmissionStarted does.
// Events written before retries were spaced are all first submissions.
type SubmissionScheduled struct {
	RefundNo string    `json:"refund_no"`
	Request  []byte    `json:"request"`
	DueAt    time.Time `json:"due_at"`
}

// Resolved: an operator settled an ABNORMAL refund outside refundd (for
// example by WeChat's abnormal-refund process); it counts as SUCCEEDED.
type Resolved struct {
	RefundNo string `json:"refund_no"`
	Reason   string `json:"reason"`
}

// Abandoned: an operator gave up on a rejected refund; it becomes FAILED and
// releases its amount.
type Abandoned struct {
	RefundNo string `json:"refund_no"`
	Reason   string `json:"reason,omitempty"`
}

// Conflict: a provider outcome contradicted a terminal state. It was not
// applied; operators must look.
type Conflict struct {
	RefundNo   string      `json:"refund_no"`
	State      RefundState `json:"state"`
	Source     Source      `json:"source"`
	Outcome    OutcomeKind `json:"outcome"`
	Code       string      `json:"code,omitempty"`
	ProviderID string      `json:"provider_id,omitempty"`
}

// FlaggedStuck: a refund stayed unresolved past the policy's limit.
type FlaggedStuck struct {
	RefundNo string `json:"refund_no"`
}

// EventType implementations.
func (Registered) EventType() string          { return TypeRegistered }
func (Canceled) EventType() string            { return TypeCanceled }
func (RefundRequested) EventType() string     { return TypeRefundRequested }
func (SubmissionStarted) EventType() string   { return TypeSubmissionStarted }
func (QueryStarted) EventType() string        { return TypeQueryStarted }
func (ProviderResult) EventType() string      { return TypeProviderResult }
func (Abandoned) EventType() string           { return TypeAbandoned }
func (Conflict) EventType() string            { return TypeConflict }
func (FlaggedStuck) EventType() string        { return TypeFlaggedStuck }
func (SubmissionScheduled) EventType() string { return TypeSubmissionWaits }
func (Resolved) EventType() string            { return TypeResolved }

// RefundNoOf returns the refund number an event is about, or "" for the
// reservation's own events.
func RefundNoOf(d EventData) string {
	switch d := d.(type) {
	case RefundRequested:
		return d.RefundNo
	case SubmissionStarted:
		return d.RefundNo
	case SubmissionScheduled:
		return d.RefundNo
	case QueryStarted:
		return d.RefundNo
	case ProviderResult:
		return d.RefundNo
	case Abandoned:
		return d.RefundNo
	case Resolved:
		return d.RefundNo
	case Conflict:
		return d.RefundNo
	case FlaggedStuck:
		return d.RefundNo
	case RefundRecovered:
		return d.RefundNo
	case ApprovalRequested:
		return d.RefundNo
	case Approved:
		return d.RefundNo
	case ApprovalRejected:
		return d.RefundNo
	case ApprovalExpired:
		return d.RefundNo
	case AbnormalApplied:
		return d.RefundNo
	}
	return ""
}
