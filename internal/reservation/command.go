package reservation

import "time"

// Command is a request to change a reservation. Decide turns it into events.
type Command interface {
	command()
}

// Register records a paid reservation. Only the trusted booking/payment
// system sends it; it is the only source of the paid amount.
type Register struct {
	ReservationID string
	UserID        string
	OutTradeNo    string
	TransactionID string // optional WeChat transaction_id
	Amount        int64  // paid, fen, > 0
	Currency      string // "CNY"
	PaidAt        time.Time
	// Merchant names the merchant the reservation belongs to; empty means
	// DefaultMerchant. It never changes once registered.
	Merchant string
}

// RequestRefund claims an amount for a new refund. Amount nil means
// "everything still refundable".
type RequestRefund struct {
	UserID         string
	IdempotencyKey string
	Amount         *int64
	Reason         string
	// ReasonCode is one of ReasonCodes(), or empty; Metadata is the
	// merchant's own keys and values (validateMetadata). Both are journaled
	// and shown, and never sent to the provider.
	ReasonCode string
	Metadata   map[string]string
}

// StartSubmission journals the first submission of a new refund with the exact
// provider request bytes. RequestRefund does the same itself when Env.Encode
// is set (the engine always sets it); this command drives the core step by
// step where no encoder is given (tests, tools).
type StartSubmission struct {
	RefundNo string
	Request  []byte
}

// Resubmit starts another submission of a REJECTED or UNKNOWN refund with the
// same refund number and the same request bytes (an operator action). Within
// the spacing after the order's last create request it is scheduled for when
// the spacing ends (SubmissionScheduled), not refused.
type Resubmit struct {
	RefundNo string
}

// Abandon turns a REJECTED refund into FAILED, releasing its amount (an
// operator action). Check is the provider query the adapter made just
// before: only a fresh "not found", journaled with the release, lets the
// amount go.
type Abandon struct {
	RefundNo string
	Reason   string
	Check    *ProviderCheck `json:",omitempty"`
}

// ProviderCheck is a provider query's answer and when it came.
type ProviderCheck struct {
	Outcome Outcome
	At      time.Time
}

// RecordOutcome applies a provider outcome to a refund.
type RecordOutcome struct {
	RefundNo string
	Source   Source
	Attempt  int // the submission attempt a response answers; 0 otherwise
	Outcome  Outcome
	// Merchant is the merchant a notification (SourceNotification) is
	// for, as the keys that verified it say; empty is DefaultMerchant. A
	// notification for another merchant than the reservation's is a
	// mismatch: one account's keys never change another's refunds. Other
	// sources name none and are not checked.
	Merchant string `json:",omitempty"`
}

// FireTimer says a refund's due time has come. A timer whose DueAt is no
// longer the refund's is stale and produces nothing.
type FireTimer struct {
	RefundNo string
	DueAt    time.Time
}

// Resolve settles an ABNORMAL refund that an operator resolved outside
// refundd; it then counts as SUCCEEDED. A reason is required.
type Resolve struct {
	RefundNo string
	Reason   string
}

// CheckProvider asks the provider about a refund now: something (an
// unsigned APIv2 notification, an operator) suggests its outcome changed.
// The answer is applied like any other outcome; the hint itself changes
// nothing. A hint is held back while the refund's last query started less
// than Policy.HintWindow ago: anyone can replay a captured APIv2
// notification, and each replay must not cost a journal write and a query.
type CheckProvider struct {
	RefundNo string
	// Operator marks an operator's explicit reconcile: authenticated,
	// journaled under the operator's name and not held back by the hint
	// window (an operator who just settled a refund at WeChat wants the
	// answer now).
	Operator bool `json:",omitempty"`
	// Reported is what the notification behind a hint says about the
	// refund; nil for a hint that reports nothing (an operator's). Only its
	// out_trade_no and amounts are read, and they must match our records
	// exactly: an unsigned notification that names our refund with another
	// order or amount is a mismatch, never a query. Nothing else in it is
	// applied; the query's answer is.
	Reported *Outcome `json:",omitempty"`
	// Merchant is the merchant the notification behind a hint is for (see
	// RecordOutcome.Merchant); empty is DefaultMerchant. Every hint but an
	// operator's is checked against the reservation's merchant.
	Merchant string `json:",omitempty"`
}

// Notification is what one provider notification says about a refund,
// mapped by the protocol adapter; the engine records it in the refund's
// actor (actors.Engine.RecordNotification) through Command.
type Notification struct {
	RefundNo string
	// Outcome is what the notification reports.
	Outcome Outcome
	// Hint marks a notification that is not applied as it stands: an
	// unsigned APIv2 one, or a verified one whose status has no outcome
	// kind. Matched against our records, it asks the provider instead
	// (CheckProvider), within Policy.HintWindow's limits.
	Hint bool
	// Merchant is the merchant the notification is for: the name (a
	// reservation's merchant) that the account whose keys verified it gives
	// the mchid and sub_mchid it names; empty is DefaultMerchant. The core
	// refuses it for another merchant's reservation.
	Merchant string
}

// Command is the command that records n: a provider check for a hint, the
// notification's outcome otherwise.
func (n Notification) Command() Command {
	if n.Hint {
		o := n.Outcome
		return CheckProvider{RefundNo: n.RefundNo, Reported: &o, Merchant: n.Merchant}
	}
	return RecordOutcome{RefundNo: n.RefundNo, Source: SourceNotification, Outcome: n.Outcome, Merchant: n.Merchant}
}

func (CheckProvider) command()   {}
func (Resolve) command()         {}
func (Register) command()        {}
func (RequestRefund) command()   {}
func (StartSubmission) command() {}
func (Resubmit) command()        {}
func (Abandon) command()         {}
func (RecordOutcome) command()   {}
func (FireTimer) command()       {}
