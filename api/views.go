package api

import (
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// reservationView is the JSON shape of a reservation. The responses of
// the lifecycle are encoded by appendReservation and appendRefund
// (fastjson.go), which must agree with these views (fastjson_test.go).
type reservationView struct {
	ID            string       `json:"id"`
	Merchant      string       `json:"merchant"`
	UserID        string       `json:"user_id"`
	OutTradeNo    string       `json:"out_trade_no"`
	TransactionID string       `json:"transaction_id,omitempty"`
	Amount        int64        `json:"amount"`
	Currency      string       `json:"currency"`
	PaidAt        *time.Time   `json:"paid_at,omitempty"`
	Status        string       `json:"status"`
	Refunded      int64        `json:"refunded"`
	InFlight      int64        `json:"in_flight"`
	Refundable    int64        `json:"refundable"`
	Refunds       []refundView `json:"refunds"`
	RegisteredAt  time.Time    `json:"registered_at"`
}

// refundView is the JSON shape of a refund.
type refundView struct {
	RefundNo      string `json:"refund_no"`
	ReservationID string `json:"reservation_id"`
	Merchant      string `json:"merchant"`
	Amount        int64  `json:"amount"`
	State         string `json:"state"`
	Reason        string `json:"reason,omitempty"`
	// ReasonCode and Metadata are the requester's (omitted when none).
	ReasonCode       string               `json:"reason_code,omitempty"`
	Metadata         reservation.Metadata `json:"metadata,omitzero"`
	Code             string               `json:"code,omitempty"`
	Message          string               `json:"message,omitempty"`
	ProviderRefundID string               `json:"provider_refund_id,omitempty"`
	Attempts         int                  `json:"attempts"`
	Stuck            bool                 `json:"stuck,omitempty"` // flagged stuck and not final, as the attention index says
	DueAt            *time.Time           `json:"next_check_at,omitempty"`
	Conflicts        int                  `json:"conflicts,omitempty"`
	PaidAfterFailed  bool                 `json:"paid_after_failed,omitempty"`
	Recovered        bool                 `json:"recovered,omitempty"`
	CreatedAt        time.Time            `json:"created_at"`
	UpdatedAt        time.Time            `json:"updated_at"`
	SucceededAt      *time.Time           `json:"succeeded_at,omitempty"`
	// AbnormalType is where an operator had WeChat Pay pay the refund out
	// after it was ABNORMAL (apply-abnormal); never the bank details.
	AbnormalType string `json:"abnormal_type,omitempty"`
	// Four eyes, for a refund held for approval: who asked, who approved
	// or rejected it and when, and until when it waits (PENDING_APPROVAL).
	ApprovalRequired  bool       `json:"approval_required,omitempty"`
	RequestedBy       string     `json:"requested_by,omitempty"`
	ApprovedBy        string     `json:"approved_by,omitempty"`
	ApprovedAt        *time.Time `json:"approved_at,omitempty"`
	RejectedBy        string     `json:"rejected_by,omitempty"`
	ApprovalExpiresAt *time.Time `json:"approval_expires_at,omitempty"`
	// NextStep is what happens next and who must act
	// (reservation.NextOf), under the merchant's policy at the time of
	// the answer.
	NextStep nextStepView `json:"next_step"`
}

// nextStepView is the JSON shape of reservation.NextStep.
type nextStepView struct {
	Kind         string     `json:"kind"`
	At           *time.Time `json:"at,omitempty"`
	AttemptsLeft int        `json:"attempts_left"`
	AbandonFrom  *time.Time `json:"abandon_from,omitempty"`
	Actions      []string   `json:"actions"`
	Why          string     `json:"why"`
}

// viewAt is what a view needs besides the state, for next_step: the
// policy of the reservation's merchant and the time of the answer.
type viewAt struct {
	policy reservation.Policy
	now    time.Time
}

// viewAt returns the viewAt of st, now.
func (s *Server) viewAt(st *reservation.State) viewAt {
	va := viewAt{now: time.Now()}
	if s.opts.Now != nil {
		va.now = s.opts.Now()
	}
	if s.opts.PolicyOf != nil {
		va.policy = s.opts.PolicyOf(st.Merchant)
	}
	return va
}

func viewReservation(s *reservation.State, va viewAt) reservationView {
	v := reservationView{
		ID: s.ID, Merchant: s.Merchant, UserID: s.UserID, OutTradeNo: s.OutTradeNo, TransactionID: s.TransactionID,
		Amount: s.Amount, Currency: s.Currency, PaidAt: timePtr(s.PaidAt), Status: string(s.Status),
		Refunded: s.Refunded(), InFlight: s.InFlight(), Refundable: s.Refundable(),
		Refunds: make([]refundView, 0, len(s.Refunds)), RegisteredAt: s.RegisteredAt,
	}
	for _, r := range s.Refunds {
		v.Refunds = append(v.Refunds, viewRefund(s, r, va))
	}
	return v
}

// viewRefund is the view of refund r of the reservation s.
func viewRefund(s *reservation.State, r *reservation.Refund, va viewAt) refundView {
	v := refundView{
		RefundNo: r.No, ReservationID: s.ID, Merchant: s.Merchant, Amount: r.Amount, State: string(r.State), Reason: r.Reason,
		ReasonCode: r.ReasonCode, Metadata: r.Metadata,
		Code: r.Code, Message: r.Message, ProviderRefundID: r.ProviderID, Attempts: r.Attempts, Stuck: r.Stuck && !r.State.Terminal(),
		Conflicts: r.Conflicts, PaidAfterFailed: r.PaidAfterFailed, Recovered: r.Recovered, DueAt: timePtr(r.DueAt), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, SucceededAt: timePtr(r.SucceededAt),
		AbnormalType: r.AbnormalType,
	}
	if r.ApprovalRequired {
		v.ApprovalRequired, v.RequestedBy, v.ApprovedBy, v.ApprovedAt, v.RejectedBy = true, r.RequestedBy, r.ApprovedBy, timePtr(r.ApprovedAt), r.RejectedBy
		if r.State == reservation.PendingApproval {
			v.ApprovalExpiresAt = timePtr(r.DueAt)
		}
	}
	n := reservation.NextOf(r, va.policy, va.now)
	v.NextStep = nextStepView{Kind: string(n.Kind), At: timePtr(n.At), AttemptsLeft: n.AttemptsLeft,
		AbandonFrom: timePtr(n.AbandonFrom), Actions: n.Actions, Why: n.Why}
	if v.NextStep.Actions == nil {
		v.NextStep.Actions = []string{}
	}
	return v
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
