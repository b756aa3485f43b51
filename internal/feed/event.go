package feed

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// SchemaVersion is the version of Event's JSON shape. Within a version
// fields are only ever added; a consumer must ignore fields it does not
// know.
const SchemaVersion = 1

// Event types, stable forever: consumers switch on them.
const (
	TypeRefundRequested     = "refund.requested"     // an amount was claimed under a new refund number
	TypeRefundSucceeded     = "refund.succeeded"     // the money went back to the payer (or an operator settled an abnormal refund)
	TypeRefundFailed        = "refund.failed"        // closed by WeChat, or abandoned by an operator; the amount is released
	TypeRefundAbnormal      = "refund.abnormal"      // WeChat could not deliver the money; an operator must act
	TypeRefundStuck         = "refund.stuck"         // unresolved past the policy's limit; an operator should look
	TypeReservationCanceled = "reservation.canceled" // refunds that succeeded add up to the paid amount
	// Four eyes: a refund held until someone other than its requester
	// approves it. An approved one goes on as usual (its outcome follows as
	// refund.succeeded and so on); a rejected one is closed and its amount
	// released; one not approved in time ends as refund.failed with the
	// code APPROVAL_EXPIRED.
	TypeRefundApprovalRequested = "refund.approval_requested" // held for approval; nothing sent to WeChat
	TypeRefundApproved          = "refund.approved"           // approved; its submission to WeChat follows
	TypeRefundRejected          = "refund.rejected"           // an approver refused it: FAILED, the amount is released
	// An operator had WeChat Pay pay an ABNORMAL refund out to a bank
	// account; it is PROCESSING again and its outcome follows as usual.
	TypeRefundAbnormalApplied = "refund.abnormal_applied"
)

// Types returns every event type, in a fixed order.
func Types() []string {
	return []string{TypeRefundRequested, TypeRefundSucceeded, TypeRefundFailed,
		TypeRefundAbnormal, TypeRefundStuck, TypeReservationCanceled,
		TypeRefundApprovalRequested, TypeRefundApproved, TypeRefundRejected, TypeRefundAbnormalApplied}
}

// KnownType reports whether typ is one of Types().
func KnownType(typ string) bool {
	switch typ {
	case TypeRefundRequested, TypeRefundSucceeded, TypeRefundFailed,
		TypeRefundAbnormal, TypeRefundStuck, TypeReservationCanceled,
		TypeRefundApprovalRequested, TypeRefundApproved, TypeRefundRejected, TypeRefundAbnormalApplied:
		return true
	}
	return false
}

// Event is one domain event for consumers. Amounts are int64 fen.
type Event struct {
	// ID is stable forever: "evt_" and the record's global sequence as 20
	// digits, so ids sort in feed order. Consumers de-duplicate on it.
	ID            string `json:"id"`
	Type          string `json:"type"`
	SchemaVersion int    `json:"schema_version"`
	// Global is the journal's global sequence of the record behind the
	// event: the feed cursor just after this event.
	Global        uint64 `json:"global"`
	ReservationID string `json:"reservation_id"`
	// Merchant is the merchant the reservation belongs to.
	Merchant   string `json:"merchant"`
	UserID     string `json:"user_id"`
	OutTradeNo string `json:"out_trade_no"`
	// RefundNo is the refund's out_refund_no; empty for reservation.canceled.
	RefundNo string `json:"refund_no,omitempty"`
	// Amount is the refund's amount; 0 for reservation.canceled.
	Amount int64 `json:"amount"`
	// Refunded is the reservation's total of succeeded refunds after this
	// event; Paid is what was paid for it.
	Refunded int64  `json:"refunded"`
	Paid     int64  `json:"paid"`
	Currency string `json:"currency"`
	// State is the refund's state after the event; empty for
	// reservation.canceled.
	State string `json:"state,omitempty"`
	// At is when refundd decided what the event reports.
	At   time.Time `json:"at"`
	Data Data      `json:"data"`
}

// Data holds the details that only some event types carry.
type Data struct {
	// Reason: the requester's reason (refund.requested) or the operator's
	// (refund.failed by abandonment).
	Reason string `json:"reason,omitempty"`
	// Code and Message: the provider's business code and text, or
	// "ABANDONED" when an operator gave up on the refund.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// ProviderRefundID is WeChat's refund_id, once known.
	ProviderRefundID string `json:"provider_refund_id,omitempty"`
	// SuccessTime is when WeChat says the money went back (refund.succeeded).
	SuccessTime time.Time `json:"success_time,omitzero"`
	// Source is where the outcome came from: response, notification, query,
	// or operator.
	Source string `json:"source,omitempty"`
	// RequestedBy and DecidedBy are the principals ("role:name") who
	// requested the refund and who approved or rejected it
	// (refund.approved, refund.rejected); RequestedBy also comes with
	// refund.approval_requested, with ApprovalRule (all, amount, share or
	// requester) and ExpiresAt, when it is released unless approved.
	RequestedBy  string    `json:"requested_by,omitempty"`
	DecidedBy    string    `json:"decided_by,omitempty"`
	ApprovalRule string    `json:"approval_rule,omitempty"`
	ExpiresAt    time.Time `json:"expires_at,omitzero"`
	// ReasonCode and Metadata are the refund's, as requested, on every
	// event of a refund that has them, so a consumer need not keep the
	// refund.requested event to file a later one.
	ReasonCode string               `json:"reason_code,omitempty"`
	Metadata   reservation.Metadata `json:"metadata,omitzero"`
	// AbnormalType is where refund.abnormal_applied has WeChat pay the
	// refund (USER_BANK_CARD or MERCHANT_BANK_CARD), with DecidedBy the
	// operator; never the bank details.
	AbnormalType string `json:"abnormal_type,omitempty"`
}

// ID returns the event id of the record with this global sequence.
func ID(global uint64) string { return fmt.Sprintf("evt_%020d", global) }

// RewrittenID returns the event id of a record written after a restore,
// whose global sequence may have named another record before it: ID and
// the first 8 bytes of the record's chain hash, which differs between two
// records at one sequence and stays the record's own in every journal
// that holds it.
func RewrittenID(global uint64, h journal.Hash) string {
	return fmt.Sprintf("evt_%020d_%x", global, h[:8])
}

// ParseID returns the global sequence in an event id (of either form).
func ParseID(id string) (uint64, error) {
	digits, ok := strings.CutPrefix(id, "evt_")
	if ok && len(digits) == 20+1+16 && digits[20] == '_' && isLowerHex(digits[21:]) {
		digits = digits[:20]
	}
	if !ok || len(digits) != 20 {
		return 0, fmt.Errorf("%w: %q", ErrBadID, id)
	}
	g, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || g == 0 {
		return 0, fmt.Errorf("%w: %q", ErrBadID, id)
	}
	return g, nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// candidate reports whether e can produce a consumer event, looking only at
// e itself, so records that cannot are skipped without loading their
// reservation.
func candidate(e reservation.Event) bool {
	switch d := e.Data.(type) {
	case reservation.RefundRequested, reservation.Abandoned, reservation.Resolved, reservation.FlaggedStuck,
		reservation.Canceled, reservation.ApprovalRequested, reservation.Approved, reservation.ApprovalRejected,
		reservation.ApprovalExpired, reservation.AbnormalApplied:
		return true
	case reservation.ProviderResult:
		return d.From != d.To && (d.To == reservation.Succeeded || d.To == reservation.Failed || d.To == reservation.Abnormal)
	}
	return false
}

// derive builds the consumer event of e, the record with global sequence
// global and event id id, from st: the reservation's state with e already applied. It is
// pure. ok is false when e produces no event.
func derive(id string, global uint64, e reservation.Event, st *reservation.State) (ev Event, ok bool, err error) {
	if !candidate(e) {
		return Event{}, false, nil
	}
	ev = Event{
		ID: id, SchemaVersion: SchemaVersion, Global: global,
		ReservationID: st.ID, Merchant: st.Merchant, UserID: st.UserID, OutTradeNo: st.OutTradeNo,
		Refunded: st.Refunded(), Paid: st.Amount, Currency: st.Currency,
		At: e.At.UTC(),
	}
	refund := func(no string) (*reservation.Refund, error) {
		r := st.Refund(no)
		if r == nil {
			return nil, fmt.Errorf("%w: record %d (%s) names refund %q, which reservation %q never requested",
				ErrInconsistent, global, e.Data.EventType(), no, st.ID)
		}
		ev.RefundNo, ev.Amount, ev.State = r.No, r.Amount, string(r.State)
		if r.ProviderID != "" {
			ev.Data.ProviderRefundID = r.ProviderID
		}
		ev.Data.ReasonCode, ev.Data.Metadata = r.ReasonCode, r.Metadata
		return r, nil
	}
	switch d := e.Data.(type) {
	case reservation.RefundRequested:
		if _, err := refund(d.RefundNo); err != nil {
			return Event{}, false, err
		}
		ev.Type, ev.Data.Reason = TypeRefundRequested, d.Reason
	case reservation.ProviderResult:
		r, err := refund(d.RefundNo)
		if err != nil {
			return Event{}, false, err
		}
		switch d.To {
		case reservation.Succeeded:
			ev.Type, ev.Data.SuccessTime = TypeRefundSucceeded, r.SucceededAt.UTC()
		case reservation.Failed:
			ev.Type = TypeRefundFailed
		default:
			ev.Type = TypeRefundAbnormal
		}
		ev.Data.Code, ev.Data.Message, ev.Data.Source = d.Code, d.Message, string(d.Source)
	case reservation.Abandoned:
		if _, err := refund(d.RefundNo); err != nil {
			return Event{}, false, err
		}
		ev.Type, ev.Data.Reason, ev.Data.Code, ev.Data.Source = TypeRefundFailed, d.Reason, "ABANDONED", "operator"
	case reservation.Resolved:
		// An operator settled an ABNORMAL refund outside refundd: for
		// consumers the money went back.
		r, err := refund(d.RefundNo)
		if err != nil {
			return Event{}, false, err
		}
		ev.Type, ev.Data.SuccessTime, ev.Data.Reason = TypeRefundSucceeded, r.SucceededAt.UTC(), d.Reason
		ev.Data.Code, ev.Data.Source = "RESOLVED_BY_OPERATOR", "operator"
	case reservation.FlaggedStuck:
		if _, err := refund(d.RefundNo); err != nil {
			return Event{}, false, err
		}
		ev.Type = TypeRefundStuck
	case reservation.Canceled:
		ev.Type = TypeReservationCanceled
	case reservation.ApprovalRequested:
		r, err := refund(d.RefundNo)
		if err != nil {
			return Event{}, false, err
		}
		ev.Type, ev.Data.RequestedBy, ev.Data.ApprovalRule, ev.Data.ExpiresAt = TypeRefundApprovalRequested, r.RequestedBy, d.Rule, d.DueAt.UTC()
		ev.Data.Reason = r.Reason
	case reservation.Approved:
		if _, err := refund(d.RefundNo); err != nil {
			return Event{}, false, err
		}
		ev.Type, ev.Data.RequestedBy, ev.Data.DecidedBy = TypeRefundApproved, d.RequestedBy, e.By
	case reservation.ApprovalRejected:
		if _, err := refund(d.RefundNo); err != nil {
			return Event{}, false, err
		}
		ev.Type, ev.Data.RequestedBy, ev.Data.DecidedBy, ev.Data.Reason = TypeRefundRejected, d.RequestedBy, e.By, d.Reason
		ev.Data.Code, ev.Data.Source = reservation.CodeApprovalRejected, "approver"
	case reservation.AbnormalApplied:
		if _, err := refund(d.RefundNo); err != nil {
			return Event{}, false, err
		}
		ev.Type, ev.Data.AbnormalType, ev.Data.DecidedBy, ev.Data.Source = TypeRefundAbnormalApplied, d.Type, e.By, "operator"
	case reservation.ApprovalExpired:
		r, err := refund(d.RefundNo)
		if err != nil {
			return Event{}, false, err
		}
		ev.Type, ev.Data.Code, ev.Data.Message, ev.Data.Source = TypeRefundFailed, reservation.CodeApprovalExpired, r.Message, "engine"
	}
	if st.ID == "" {
		return Event{}, false, fmt.Errorf("%w: record %d (%s) belongs to a reservation that was never registered",
			ErrInconsistent, global, e.Data.EventType())
	}
	return ev, true, nil
}
