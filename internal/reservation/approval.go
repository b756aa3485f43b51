package reservation

import (
	"strings"
	"time"
)

// Four-eyes approval. A refund that one of the policy's approval rules
// matches is created PENDING_APPROVAL: its amount is held (it counts in
// flight, so concurrent requests cannot overspend), its number and its
// provider request bytes are journaled, and nothing is sent. An approver
// other than the requester approves it (the first submission then follows
// the ordinary path, spacing included) or rejects it (FAILED, amount
// released); unapproved, it expires at its journaled due time and is
// released the same way.

// PendingApproval: the refund waits for an approver; nothing was sent to
// the provider. Holds its amount.
const PendingApproval RefundState = "PENDING_APPROVAL"

// Event type names of approval, stable forever.
const (
	TypeApprovalRequested = "refund.approval_requested"
	TypeApproved          = "refund.approved"
	TypeApprovalRejected  = "refund.rejected"
	TypeApprovalExpired   = "refund.approval_expired"
)

// Codes a refund closed by approval carries (Refund.Code).
const (
	CodeApprovalRejected = "APPROVAL_REJECTED"
	CodeApprovalExpired  = "APPROVAL_EXPIRED"
)

// Approval rules, as ApprovalRequested.Rule names them.
const (
	RuleAll       = "all"       // Policy.ApproveAll
	RuleAmount    = "amount"    // Policy.ApproveAbove
	RuleShare     = "share"     // Policy.ApproveAbovePercent
	RuleRequester = "requester" // Policy.ApproveNonService
)

// DefaultApprovalTimeout is used when Policy.ApprovalTimeout is zero.
const DefaultApprovalTimeout = 24 * time.Hour

// ServicePrincipalPrefix starts the principal of the booking/payment
// system's tokens as journaled ("service:NAME"): Policy.ApproveNonService
// asks for approval of refunds requested by anyone else.
const ServicePrincipalPrefix = "service:"

// Approve approves a PENDING_APPROVAL refund: its first submission starts
// (or is scheduled, within the order's spacing). The approver (Env.By) must
// not be its requester.
type Approve struct {
	RefundNo string
}

// Reject refuses a PENDING_APPROVAL refund: it becomes FAILED and releases
// its amount. A reason is required.
type Reject struct {
	RefundNo string
	Reason   string
}

func (Approve) command() {}
func (Reject) command()  {}

// ApprovalRequested: a refund just requested needs approval before it is
// sent. Request holds the exact provider bytes (empty when the core was
// driven without an encoder); DueAt is when it expires unapproved; Rule is
// the policy rule that asked for approval.
type ApprovalRequested struct {
	RefundNo string    `json:"refund_no"`
	Rule     string    `json:"rule"`
	Request  []byte    `json:"request,omitempty"`
	DueAt    time.Time `json:"due_at"`
}

// Approved: the refund was approved by the event's principal; RequestedBy
// is who requested it (journaled beside the approver, for the audit). Its
// first submission is the next event of the same append.
type Approved struct {
	RefundNo    string `json:"refund_no"`
	RequestedBy string `json:"requested_by"`
}

// ApprovalRejected: an approver refused the refund; it is FAILED and its
// amount released.
type ApprovalRejected struct {
	RefundNo    string `json:"refund_no"`
	RequestedBy string `json:"requested_by"`
	Reason      string `json:"reason"`
}

// ApprovalExpired: nobody approved the refund before its due time; it is
// FAILED and its amount released.
type ApprovalExpired struct {
	RefundNo string `json:"refund_no"`
}

// EventType implementations.
func (ApprovalRequested) EventType() string { return TypeApprovalRequested }
func (Approved) EventType() string          { return TypeApproved }
func (ApprovalRejected) EventType() string  { return TypeApprovalRejected }
func (ApprovalExpired) EventType() string   { return TypeApprovalExpired }

// approvalRule names the first approval rule a refund of amount requested
// by by matches, or "" when it needs none.
func (p Policy) approvalRule(s *State, amount int64, by string) string {
	switch {
	case p.ApproveAll:
		return RuleAll
	case p.ApproveAbove > 0 && amount > p.ApproveAbove:
		return RuleAmount
	// Amounts are at most MaxAmount (10^12), so neither product overflows.
	case p.ApproveAbovePercent > 0 && amount*100 > s.Amount*int64(p.ApproveAbovePercent):
		return RuleShare
	case p.ApproveNonService && !strings.HasPrefix(by, ServicePrincipalPrefix):
		return RuleRequester
	}
	return ""
}

// RequiresApproval reports whether the policy asks for approval of any
// refund at all.
func (p Policy) RequiresApproval() bool {
	return p.ApproveAll || p.ApproveAbove > 0 || p.ApproveAbovePercent > 0 || p.ApproveNonService
}

func (p Policy) approvalTimeout() time.Duration {
	if p.ApprovalTimeout <= 0 {
		return DefaultApprovalTimeout
	}
	return p.ApprovalTimeout
}

// SamePerson reports whether two journaled principals ("role:name") are
// the same person for four eyes: the same name, whatever the role, so one
// person holding two tokens under one name cannot approve their own refund.
func SamePerson(a, b string) bool {
	name := func(p string) string {
		if _, n, ok := strings.Cut(p, ":"); ok {
			return n
		}
		return p
	}
	return name(a) == name(b)
}

func decideApprove(s *State, c Approve, env Env) ([]EventData, error) {
	r, err := refundOf(s, c.RefundNo)
	if err != nil {
		return nil, err
	}
	if !r.ApprovalRequired {
		return nil, withMessage(ErrInvalidState, "this refund does not need approval")
	}
	if SamePerson(r.RequestedBy, env.By) {
		return nil, ErrSelfApproval
	}
	if r.ApprovedBy != "" {
		return nil, nil // approved already: the current state answers
	}
	if r.State != PendingApproval {
		return nil, withMessage(ErrInvalidState, "this refund was rejected or expired; it can no longer be approved")
	}
	if !env.Now.Before(r.DueAt) {
		return nil, withMessage(ErrInvalidState, "the approval window closed at "+r.DueAt.UTC().Format(time.RFC3339))
	}
	out := []EventData{Approved{RefundNo: r.No, RequestedBy: r.RequestedBy}}
	if len(r.Request) > 0 {
		out = append(out, firstSubmission(s, r.No, r.Request, env))
	}
	return out, nil
}

func decideReject(s *State, c Reject, env Env) ([]EventData, error) {
	r, err := refundOf(s, c.RefundNo)
	if err != nil {
		return nil, err
	}
	if !validText(c.Reason, MaxReasonBytes) {
		return nil, invalid("reason", "is required: 1..80 bytes of printable UTF-8")
	}
	if !r.ApprovalRequired {
		return nil, withMessage(ErrInvalidState, "this refund does not need approval")
	}
	if r.State == Failed && r.Code == CodeApprovalRejected {
		return nil, nil // rejected already: the current state answers
	}
	if r.State != PendingApproval {
		return nil, withMessage(ErrInvalidState, "only a refund pending approval can be rejected")
	}
	return []EventData{ApprovalRejected{RefundNo: r.No, RequestedBy: r.RequestedBy, Reason: c.Reason}}, nil
}

// decidePendingOutcome answers a provider outcome about a refund that was
// never approved, so never sent (pending, rejected or expired): it cannot be
// about this refund, so a final one is recorded
// as a conflict for operators (once) and anything else is stale.
func decidePendingOutcome(r *Refund, c RecordOutcome) []EventData {
	switch c.Outcome.Kind {
	case OutcomeSucceeded, OutcomeFailed, OutcomeAbnormal:
		conflict := Conflict{RefundNo: r.No, State: r.State, Source: c.Source, Outcome: c.Outcome.Kind,
			Code: c.Outcome.Code, ProviderID: c.Outcome.ProviderID}
		if conflict != r.LastConflict {
			return []EventData{conflict}
		}
	}
	return nil
}

// applyApproval folds the approval events into s; it reports whether e was
// one of them.
func applyApproval(s *State, e Event) bool {
	switch d := e.Data.(type) {
	case ApprovalRequested:
		if r := s.Refund(d.RefundNo); r != nil {
			r.State, r.ApprovalRequired, r.DueAt, r.Retry, r.UpdatedAt = PendingApproval, true, d.DueAt, false, e.At
			if len(d.Request) > 0 {
				r.Request = d.Request
			}
		}
	case Approved:
		if r := s.Refund(d.RefundNo); r != nil {
			// The submission that follows in the same append sets the due
			// time; without request bytes (no encoder) a StartSubmission
			// will.
			r.State, r.ApprovedBy, r.ApprovedAt, r.DueAt, r.UpdatedAt = Processing, e.By, e.At, time.Time{}, e.At
		}
	case ApprovalRejected:
		if r := s.Refund(d.RefundNo); r != nil {
			r.State, r.RejectedBy, r.Code, r.Message = Failed, e.By, CodeApprovalRejected, d.Reason
			r.DueAt, r.Retry, r.UpdatedAt = time.Time{}, false, e.At
		}
	case ApprovalExpired:
		if r := s.Refund(d.RefundNo); r != nil {
			r.State, r.Code, r.Message = Failed, CodeApprovalExpired, "not approved in time"
			r.DueAt, r.Retry, r.UpdatedAt = time.Time{}, false, e.At
		}
	default:
		return false
	}
	return true
}
