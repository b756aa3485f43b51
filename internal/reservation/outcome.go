package reservation

import "time"

// OutcomeKind is what the provider said about a refund.
type OutcomeKind string

// Provider outcome kinds. Adapters map wire answers onto these.
const (
	OutcomeSucceeded  OutcomeKind = "SUCCEEDED"  // WeChat SUCCESS
	OutcomeProcessing OutcomeKind = "PROCESSING" // accepted, not finished
	OutcomeFailed     OutcomeKind = "FAILED"     // WeChat CLOSED
	OutcomeAbnormal   OutcomeKind = "ABNORMAL"   // WeChat ABNORMAL
	OutcomeRejected   OutcomeKind = "REJECTED"   // refused with a business code on submission
	OutcomeUnknown    OutcomeKind = "UNKNOWN"    // timeout, 5xx, unverifiable answer
	OutcomeNotFound   OutcomeKind = "NOT_FOUND"  // a query found no such refund: the submission never arrived
)

// Source says where an outcome came from.
type Source string

// Outcome sources.
const (
	SourceResponse     Source = "response"
	SourceNotification Source = "notification"
	SourceQuery        Source = "query"
)

// Outcome is a provider's answer about one refund. Reported values must
// match local records. Zero amounts and an empty OutTradeNo or ProviderID
// mean "not reported", which only a submission's answer may do: a
// notification or query that reports a refund state (SUCCEEDED, FAILED,
// ABNORMAL, PROCESSING) must carry all four, or it is a mismatch.
type Outcome struct {
	Kind         OutcomeKind
	Code         string
	Message      string
	ProviderID   string
	OutTradeNo   string
	RefundAmount int64
	TotalAmount  int64
	SuccessTime  time.Time
	// MchID and SubMchID are the merchant a notification names: the
	// account's mchid (a direct merchant's, or a service provider's
	// sp_mchid) and, in partner mode, the sub-merchant. Empty when the
	// source does not name one (WeChat Pay's create and query answers do
	// not). The receiver resolves them, through the account whose keys
	// verified the notification, into Notification.Merchant, which the
	// core matches against the reservation's merchant.
	MchID    string `json:",omitempty"`
	SubMchID string `json:",omitempty"`
}

// target is the refund state an outcome asks for, or "" when it asks for no
// state of its own.
func (k OutcomeKind) target() RefundState {
	switch k {
	case OutcomeSucceeded:
		return Succeeded
	case OutcomeFailed:
		return Failed
	case OutcomeAbnormal:
		return Abnormal
	case OutcomeRejected:
		return Rejected
	case OutcomeProcessing:
		return Processing
	case OutcomeUnknown:
		return Unknown
	}
	return ""
}

func (k OutcomeKind) valid() bool { return k.target() != "" || k == OutcomeNotFound }
