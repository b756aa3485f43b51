package client

import (
	"encoding/json"
	"time"
)

// Refund states (the RefundState schema). SUCCEEDED and FAILED are
// terminal; REJECTED and ABNORMAL wait for an operator; UNKNOWN is settled
// only by asking WeChat Pay.
const (
	StateProcessing = "PROCESSING"
	StateSucceeded  = "SUCCEEDED"
	StateFailed     = "FAILED"
	StateUnknown    = "UNKNOWN"
	StateRejected   = "REJECTED"
	StateAbnormal   = "ABNORMAL"
	// StatePendingApproval: held until an approver other than the
	// requester approves it (ApproveRefund); nothing was sent yet.
	StatePendingApproval = "PENDING_APPROVAL"
)

// states lists every state; the tests compare it with the document.
var states = []string{StateProcessing, StateSucceeded, StateFailed, StateUnknown, StateRejected, StateAbnormal, StatePendingApproval}

// Registration is the body of RegisterReservation: a payment the booking
// system took, which refunds may then draw on. Amounts are integer fen.
type Registration struct {
	ID            string     `json:"id"`
	UserID        string     `json:"user_id"`
	OutTradeNo    string     `json:"out_trade_no"`
	TransactionID string     `json:"transaction_id,omitempty"`
	Amount        int64      `json:"amount"`
	Currency      string     `json:"currency,omitempty"`
	PaidAt        *time.Time `json:"paid_at,omitempty"`
	// Merchant names the merchant the reservation belongs to; required
	// when the service has more than one, empty for the only one.
	Merchant string `json:"merchant,omitempty"`
}

// Reservation is a registered payment and its refunds.
type Reservation struct {
	ID string `json:"id"`
	// Merchant is the merchant it belongs to, for good ("default" in a
	// single-merchant service).
	Merchant      string     `json:"merchant"`
	UserID        string     `json:"user_id"`
	OutTradeNo    string     `json:"out_trade_no"`
	TransactionID string     `json:"transaction_id,omitempty"`
	Amount        int64      `json:"amount"`
	Currency      string     `json:"currency"`
	PaidAt        *time.Time `json:"paid_at,omitempty"`
	Status        string     `json:"status"`
	Refunded      int64      `json:"refunded"`
	InFlight      int64      `json:"in_flight"`
	Refundable    int64      `json:"refundable"`
	Refunds       []Refund   `json:"refunds"`
	RegisteredAt  time.Time  `json:"registered_at"`
}

// Reason codes of a refund request (RefundRequest.ReasonCode), for your own
// reports; the free-text Reason is what the payer sees.
const (
	ReasonRequestedByCustomer = "requested_by_customer"
	ReasonDuplicate           = "duplicate"
	ReasonFraudulent          = "fraudulent"
	ReasonCanceledByMerchant  = "canceled_by_merchant"
	ReasonServiceNotProvided  = "service_not_provided"
	ReasonOther               = "other"
)

// Destinations of an abnormal refund's payout (AbnormalPayout.Type).
const (
	AbnormalUserBankCard     = "USER_BANK_CARD"
	AbnormalMerchantBankCard = "MERCHANT_BANK_CARD"
)

// AbnormalPayout is where WeChat Pay pays an ABNORMAL refund to. For
// AbnormalUserBankCard, BankType (e.g. ICBC_DEBIT), BankAccount (the card
// number, digits) and RealName (the holder) are required; for
// AbnormalMerchantBankCard they must be empty. Never log a value of it.
type AbnormalPayout struct {
	Type        string `json:"type"`
	BankType    string `json:"bank_type,omitempty"`
	BankAccount string `json:"bank_account,omitempty"`
	RealName    string `json:"real_name,omitempty"`
}

// String hides the card and the name, so that a logged value shows neither.
func (p AbnormalPayout) String() string {
	if p.Type == AbnormalUserBankCard {
		return "{" + p.Type + " " + p.BankType + " card and name hidden}"
	}
	return "{" + p.Type + "}"
}

// RefundRequest asks for a refund of Amount fen (nil: everything still
// refundable).
type RefundRequest struct {
	UserID string `json:"user_id"`
	Amount *int64 `json:"amount,omitempty"`
	Reason string `json:"reason,omitempty"`
	// ReasonCode is one of the Reason* constants, or empty. Metadata is
	// up to 20 of your own keys (1..40 bytes) and values (1..500 bytes).
	// Both are kept with the refund and shown on reads, events and
	// exports; neither is sent to WeChat Pay (Reason is). Both are part of
	// the request: a retry must send the same.
	ReasonCode string            `json:"reason_code,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	// IdempotencyKey names the logical request (1..64 of [0-9A-Za-z_-]);
	// empty: the client makes one for this call and all its retries. Give
	// your own, stored with your order, to ask again after a crash.
	IdempotencyKey string `json:"-"`
	// Wait asks the server to hold the answer up to this long (capped by
	// the server, 10s by default) for the refund to become final.
	Wait time.Duration `json:"-"`
}

// Refund is one refund of a reservation.
type Refund struct {
	RefundNo         string            `json:"refund_no"`
	ReservationID    string            `json:"reservation_id"`
	Merchant         string            `json:"merchant"`
	Amount           int64             `json:"amount"`
	State            string            `json:"state"`
	Reason           string            `json:"reason,omitempty"`
	ReasonCode       string            `json:"reason_code,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	Code             string            `json:"code,omitempty"`
	Message          string            `json:"message,omitempty"`
	ProviderRefundID string            `json:"provider_refund_id,omitempty"`
	Attempts         int               `json:"attempts"`
	Stuck            bool              `json:"stuck,omitempty"`
	NextCheckAt      *time.Time        `json:"next_check_at,omitempty"`
	Conflicts        int               `json:"conflicts,omitempty"`
	PaidAfterFailed  bool              `json:"paid_after_failed,omitempty"`
	Recovered        bool              `json:"recovered,omitempty"`
	CreatedAt        time.Time         `json:"created_at"`
	UpdatedAt        time.Time         `json:"updated_at"`
	SucceededAt      *time.Time        `json:"succeeded_at,omitempty"`
	// AbnormalType is where an operator had WeChat Pay pay the refund
	// out after it was ABNORMAL (AbnormalUserBankCard or
	// AbnormalMerchantBankCard); the bank details are never shown.
	AbnormalType string `json:"abnormal_type,omitempty"`
	// Four eyes: set when the refund was held for approval.
	ApprovalRequired  bool       `json:"approval_required,omitempty"`
	RequestedBy       string     `json:"requested_by,omitempty"`
	ApprovedBy        string     `json:"approved_by,omitempty"`
	ApprovedAt        *time.Time `json:"approved_at,omitempty"`
	RejectedBy        string     `json:"rejected_by,omitempty"`
	ApprovalExpiresAt *time.Time `json:"approval_expires_at,omitempty"`
	// NextStep says what happens next and who must act, as of the answer.
	NextStep NextStep `json:"next_step"`
}

// NextStep is what happens next to a refund and who must act, under its
// merchant's policy at the time of the answer.
type NextStep struct {
	// Kind is one of the Next* constants; treat one you do not know as
	// NextOperatorMustAct.
	Kind string `json:"kind"`
	// At is when refundd acts next by itself (a query, a retry, a
	// held-back submission, an approval's expiry); nil when nothing is
	// scheduled.
	At *time.Time `json:"at,omitempty"`
	// AttemptsLeft is how many submissions refundd may still make by
	// itself.
	AttemptsLeft int `json:"attempts_left"`
	// AbandonFrom is, for a REJECTED refund with an earlier attempt WeChat
	// Pay may still apply, when it may be abandoned.
	AbandonFrom *time.Time `json:"abandon_from,omitempty"`
	// Actions are the operator actions the state allows now ("reconcile",
	// "resubmit", "abandon", "resolve", "apply-abnormal", "approve",
	// "reject"); the token's role decides which it may take.
	Actions []string `json:"actions"`
	// Why says in plain English why the refund is where it is.
	Why string `json:"why"`
}

// Next step kinds (NextStep.Kind).
const (
	NextNone            = "none"
	NextSubmitAt        = "submit_at"
	NextRetryAt         = "retry_at"
	NextRecheckAt       = "recheck_at"
	NextWaitForWeChat   = "wait_for_wechat"
	NextOperatorMustAct = "operator_must_act"
	NextApproverMustAct = "approver_must_act"
)

// Terminal reports whether the refund is SUCCEEDED or FAILED: it will
// never change again (what ?wait= waits for).
func (r *Refund) Terminal() bool { return r.State == StateSucceeded || r.State == StateFailed }

// AttentionQuery selects refunds an operator should look at.
type AttentionQuery struct {
	// State is UNKNOWN, REJECTED, ABNORMAL, stuck, conflict or
	// PENDING_APPROVAL.
	State string
	// After is the Next of the previous page; empty starts at the first.
	After string
	// Limit is 1..1000; zero means the server's 100.
	Limit int
	// Merchant keeps one merchant's refunds (one of Whoami's Sees); empty
	// means every merchant the token sees.
	Merchant string
}

// AttentionPage is one page of ListAttention.
type AttentionPage struct {
	Refunds []Refund `json:"refunds"`
	// Next continues the listing; empty on the last page.
	Next string `json:"next,omitempty"`
}

// ListQuery filters ListRefunds and ListReservations; a zero field
// filters nothing, and every field set must match.
type ListQuery struct {
	// Exact ids. RefundNo and ProviderRefundID (WeChat's refund_id) are
	// refunds' only.
	RefundNo, ProviderRefundID        string
	OutTradeNo, TransactionID, UserID string
	// Merchants: any of these (each one of Whoami's Sees); none means every
	// merchant the token sees.
	Merchants []string
	// States: refund states (ListRefunds) or reservation statuses
	// (ListReservations), any of them.
	States []string
	// RefundStates: reservations with a refund in any of these states
	// (ListReservations only).
	RefundStates []string
	// From (inclusive) and To (exclusive) bound when the refund was
	// requested or the reservation registered; UpdatedFrom and UpdatedTo
	// when it last changed.
	From, To, UpdatedFrom, UpdatedTo time.Time
	// AmountMin and AmountMax bound the amount in fen, inclusive.
	AmountMin, AmountMax int64
	ReasonCode           string // ListRefunds only
	// Oldest lists oldest first; the default is newest first.
	Oldest bool
	// Limit is 1..200; zero means the server's 50.
	Limit int
	// Cursor is the NextCursor of the previous page.
	Cursor string
}

// ListedRefund is a refund in a RefundPage, with its reservation's order
// number.
type ListedRefund struct {
	Refund
	OutTradeNo string `json:"out_trade_no"`
}

// RefundPage is one page of ListRefunds.
type RefundPage struct {
	Refunds []ListedRefund `json:"refunds"`
	// NextCursor continues the list; empty at its end.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ReservationPage is one page of ListReservations.
type ReservationPage struct {
	Reservations []Reservation `json:"reservations"`
	// NextCursor continues the list; empty at its end.
	NextCursor string `json:"next_cursor,omitempty"`
}

// SearchResult is what Search found.
type SearchResult struct {
	Matches []SearchMatch `json:"matches"`
	// Truncated says there were more matches than the limit.
	Truncated bool `json:"truncated,omitempty"`
}

// SearchMatch is one reservation a search found.
type SearchMatch struct {
	// By is the kind of id that matched: refund_no, out_trade_no,
	// user_id, transaction_id or refund_id (WeChat Pay's).
	By string `json:"by"`
	// RefundNo is the refund the id names (refund_no, refund_id).
	RefundNo    string      `json:"refund_no,omitempty"`
	Reservation Reservation `json:"reservation"`
}

// TimelineEvent is one journaled event of a reservation.
type TimelineEvent struct {
	Seq      int             `json:"seq"`
	Type     string          `json:"type"`
	At       time.Time       `json:"at"`
	By       string          `json:"by"`
	RefundNo string          `json:"refund_no,omitempty"`
	Data     json.RawMessage `json:"data"`
}

// Timeline is a reservation's journal, in order.
type Timeline struct {
	ReservationID string          `json:"reservation_id"`
	Merchant      string          `json:"merchant"`
	Events        []TimelineEvent `json:"events"`
}

// AttentionCount is the number of refunds of one attention kind; More is
// set when the server stopped counting at its cap.
type AttentionCount struct {
	Count int  `json:"count"`
	More  bool `json:"more"`
}

// Identity is a token as refundd sees it.
type Identity struct {
	Principal string `json:"principal"` // role:name, as recorded with events
	Role      string `json:"role"`
	// Merchants the token is limited to; empty for all.
	Merchants []string `json:"merchants"`
	// Sees is the configured merchants the token sees: the values
	// AttentionQuery.Merchant accepts.
	Sees        []string `json:"sees"`
	Permissions []string `json:"permissions"` // read, write, audit, operate
}

// Summary is the operator's overview.
type Summary struct {
	Attention     map[string]AttentionCount `json:"attention"`
	ActiveActors  int                       `json:"active_actors"`
	Notifications map[string]int64          `json:"notifications,omitempty"`
	Webhooks      []WebhookEndpoint         `json:"webhooks,omitempty"`
	// CountersDurable says the counters below (and Notifications) are
	// kept in the journal: they survive restarts, summed over every node.
	// The maps are nested by merchant or operation or endpoint, then by
	// outcome; all are absent when the server keeps no such counters, or
	// for a token limited to some merchants.
	CountersDurable          bool                        `json:"counters_durable,omitempty"`
	NotificationsByMerchant  map[string]map[string]int64 `json:"notifications_by_merchant,omitempty"`
	NotificationsQuarantined int64                       `json:"notifications_quarantined,omitempty"`
	ProviderCalls            map[string]map[string]int64 `json:"provider_calls,omitempty"`
	ProviderCodeClasses      map[string]map[string]int64 `json:"provider_code_classes,omitempty"`
	WebhookDeliveries        map[string]map[string]int64 `json:"webhook_deliveries,omitempty"`
}

// Total is the number and amount (fen) of some refunds.
type Total struct {
	Refunds int64 `json:"refunds"`
	Amount  int64 `json:"amount"`
}

// MerchantTotals is one merchant's refunds of a Totals range.
type MerchantTotals struct {
	Merchant string           `json:"merchant"`
	States   map[string]Total `json:"states"` // by current state
	InFlight Total            `json:"in_flight"`
	Refunded Total            `json:"refunded"`
	Released Total            `json:"released"`
}

// Totals is money in flight, refunded and released for the refunds
// requested in a time range (GET /v1/totals).
type Totals struct {
	From      *time.Time       `json:"from"`
	To        *time.Time       `json:"to"`
	Merchants []MerchantTotals `json:"merchants"`
	InFlight  Total            `json:"in_flight"`
	Refunded  Total            `json:"refunded"`
	Released  Total            `json:"released"`
}

// Feed event types.
const (
	EventRefundRequested     = "refund.requested"
	EventRefundSucceeded     = "refund.succeeded"
	EventRefundFailed        = "refund.failed"
	EventRefundAbnormal      = "refund.abnormal"
	EventRefundStuck         = "refund.stuck"
	EventReservationCanceled = "reservation.canceled"
	// Four-eyes approval.
	EventRefundApprovalRequested = "refund.approval_requested"
	EventRefundApproved          = "refund.approved"
	EventRefundRejected          = "refund.rejected"
	// EventRefundAbnormalApplied: an operator had WeChat Pay pay an
	// ABNORMAL refund out to a bank account (Data.AbnormalType); its
	// outcome follows as usual.
	EventRefundAbnormalApplied = "refund.abnormal_applied"
)

// Event is one event of the feed and of webhook deliveries. Within one
// SchemaVersion fields are only added; unknown ones are ignored.
type Event struct {
	// ID is stable forever; consumers de-duplicate on it.
	ID            string    `json:"id"`
	Type          string    `json:"type"`
	SchemaVersion int       `json:"schema_version"`
	Global        uint64    `json:"global"`
	ReservationID string    `json:"reservation_id"`
	Merchant      string    `json:"merchant"`
	UserID        string    `json:"user_id"`
	OutTradeNo    string    `json:"out_trade_no"`
	RefundNo      string    `json:"refund_no,omitempty"`
	Amount        int64     `json:"amount"`
	Refunded      int64     `json:"refunded"`
	Paid          int64     `json:"paid"`
	Currency      string    `json:"currency"`
	State         string    `json:"state,omitempty"`
	At            time.Time `json:"at"`
	Data          EventData `json:"data"`
}

// EventData holds the details only some event types carry.
type EventData struct {
	Reason           string    `json:"reason,omitempty"`
	Code             string    `json:"code,omitempty"`
	Message          string    `json:"message,omitempty"`
	ProviderRefundID string    `json:"provider_refund_id,omitempty"`
	SuccessTime      time.Time `json:"success_time,omitzero"`
	Source           string    `json:"source,omitempty"`
	// Approval events: who requested and who decided (role:name), the rule
	// that held the refund, and when it is released unless approved.
	RequestedBy  string    `json:"requested_by,omitempty"`
	DecidedBy    string    `json:"decided_by,omitempty"`
	ApprovalRule string    `json:"approval_rule,omitempty"`
	ExpiresAt    time.Time `json:"expires_at,omitzero"`
	// ReasonCode and Metadata are the refund's, on every event of a
	// refund that has them.
	ReasonCode string            `json:"reason_code,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	// AbnormalType is where refund.abnormal_applied has WeChat Pay pay the
	// refund (AbnormalUserBankCard or AbnormalMerchantBankCard), with
	// DecidedBy the operator.
	AbnormalType string `json:"abnormal_type,omitempty"`
}

// EventsQuery reads the feed after a cursor.
type EventsQuery struct {
	// After is a cursor ("next" of a page) or an event id; empty starts at
	// the beginning of the journal.
	After string
	// Limit bounds the page; zero means the server's default.
	Limit int
	// Types keeps only these event types; empty means all.
	Types []string
	// Wait long-polls: the server holds an empty answer up to this long
	// (capped by the server, 20s by default) for a first event.
	Wait time.Duration
}

// EventsPage is one page of the feed; Next is the cursor to continue from
// (it moves past records that match nothing, too).
type EventsPage struct {
	Events []Event `json:"events"`
	Next   string  `json:"next"`
}

// WebhookEndpoint is one endpoint's delivery state.
type WebhookEndpoint struct {
	Name                        string  `json:"name"`
	Cursor                      string  `json:"cursor"`
	EventsBehind                uint64  `json:"events_behind"`
	Parked                      int     `json:"parked"`
	OldestUndeliveredAgeSeconds float64 `json:"oldest_undelivered_age_seconds"`
	Delivered                   uint64  `json:"delivered"`
	FailedAttempts              uint64  `json:"failed_attempts"`
}

// ParkedEvent is an event that exhausted its delivery attempts.
type ParkedEvent struct {
	Event      Event     `json:"event"`
	Attempts   int       `json:"attempts"`
	LastError  string    `json:"last_error,omitempty"`
	ParkedAt   time.Time `json:"parked_at"`
	Replaying  bool      `json:"replaying"`
	HeldBehind string    `json:"held_behind,omitempty"`
}

// NotifyStats counts WeChat Pay notifications by outcome, in total and by
// merchant ("(unattributed)" for those no configured merchant's), and the
// quarantine of refused ones when there is one.
type NotifyStats struct {
	Notifications map[string]int64            `json:"notifications"`
	ByMerchant    map[string]map[string]int64 `json:"by_merchant,omitempty"`
	Quarantine    *struct {
		Entries int64 `json:"entries"`
		Bytes   int64 `json:"bytes"`
		Dropped int64 `json:"dropped"`
	} `json:"quarantine,omitempty"`
	// QuarantinedTotal is refused notifications ever kept, and Durable
	// says the counts survive restarts (newer servers only).
	QuarantinedTotal int64 `json:"quarantined_total,omitempty"`
	Durable          bool  `json:"durable,omitempty"`
}

// QuarantineEntry is one refused notification kept for operators.
type QuarantineEntry struct {
	Name     string    `json:"name"`
	At       time.Time `json:"at"`
	Endpoint string    `json:"endpoint"`
	Reason   string    `json:"reason"`
	Size     int64     `json:"size"`
}

// Checkpoint is a point of the journal's hash chain, signed when the
// server has a checkpoint key.
type Checkpoint struct {
	Global    uint64    `json:"global"`
	Hash      string    `json:"hash"`
	Time      time.Time `json:"time"`
	KeyID     string    `json:"key_id,omitempty"`
	Signature []byte    `json:"signature,omitempty"`
}

// AuditHead is the journal's chain head and last checkpoint.
type AuditHead struct {
	Head              Checkpoint      `json:"head"`
	Checkpoint        *Checkpoint     `json:"checkpoint,omitempty"`
	Epoch             uint64          `json:"epoch"`
	ReconcileRequired bool            `json:"reconcile_required"`
	Restore           json.RawMessage `json:"restore,omitempty"`
}

// Credentials are the WeChat Pay credentials refundd holds, per account;
// never key material.
type Credentials struct {
	Accounts []AccountCredentials `json:"accounts"`
}

// AccountCredentials is one account's credentials.
type AccountCredentials struct {
	Account        string          `json:"account"`
	MchID          string          `json:"mchid"`
	MerchantSerial string          `json:"merchant_serial"`
	APIv3Key       bool            `json:"apiv3_key"` // loaded
	APIv2Key       bool            `json:"apiv2_key"`
	Keys           []CredentialKey `json:"keys"`
	// Download is set for an account in certificate mode.
	Download *CertificateDownload `json:"download,omitempty"`
}

// CredentialKey is a WeChat Pay public key or platform certificate.
type CredentialKey struct {
	Serial    string     `json:"serial"`
	Kind      string     `json:"kind"`   // public_key, platform_certificate
	Source    string     `json:"source"` // file, download, store, sandbox
	NotBefore *time.Time `json:"not_before,omitempty"`
	NotAfter  *time.Time `json:"not_after,omitempty"`
}

// CertificateDownload is an account's certificate download history.
type CertificateDownload struct {
	Refresh             string    `json:"refresh"`
	LastAttempt         time.Time `json:"last_attempt"`
	LastSuccess         time.Time `json:"last_success"`
	LastError           string    `json:"last_error,omitempty"`
	Downloads           int64     `json:"downloads"`
	Failures            int64     `json:"failures"`
	ConsecutiveFailures int64     `json:"consecutive_failures"`
	OnDemand            int64     `json:"on_demand"`
	OnDemandDropped     int64     `json:"on_demand_dropped"`
}
