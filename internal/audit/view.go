package audit

import (
	"fmt"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// StateView is a reservation's state for tools and reports.
type StateView struct {
	ID             string       `json:"id"`
	Merchant       string       `json:"merchant"`
	UserID         string       `json:"user_id"`
	OutTradeNo     string       `json:"out_trade_no"`
	TransactionID  string       `json:"transaction_id,omitempty"`
	Status         string       `json:"status"`
	Amount         int64        `json:"amount"`
	AmountYuan     string       `json:"amount_yuan"`
	Currency       string       `json:"currency"`
	PaidAt         time.Time    `json:"paid_at,omitzero"`
	RegisteredAt   time.Time    `json:"registered_at,omitzero"`
	Refunded       int64        `json:"refunded"`
	InFlight       int64        `json:"in_flight"`
	Refundable     int64        `json:"refundable"`
	RefundedYuan   string       `json:"refunded_yuan"`
	InFlightYuan   string       `json:"in_flight_yuan"`
	RefundableYuan string       `json:"refundable_yuan"`
	Version        uint64       `json:"version"` // events applied
	Refunds        []RefundView `json:"refunds"`
}

// RefundView is one refund of a StateView.
type RefundView struct {
	No          string    `json:"refund_no"`
	Number      int       `json:"number"`
	Amount      int64     `json:"amount"`
	AmountYuan  string    `json:"amount_yuan"`
	State       string    `json:"state"`
	Reason      string    `json:"reason,omitempty"`
	Code        string    `json:"code,omitempty"`
	Message     string    `json:"message,omitempty"`
	ProviderID  string    `json:"provider_id,omitempty"`
	Attempts    int       `json:"attempts"`
	Queries     int       `json:"queries"`
	DueAt       time.Time `json:"due_at,omitzero"`
	Stuck       bool      `json:"stuck,omitempty"`
	Conflicts   int       `json:"conflicts,omitempty"`
	Recovered   bool      `json:"recovered,omitempty"` // found at the provider after a restore
	RequestedBy string    `json:"requested_by"`
	CreatedAt   time.Time `json:"created_at"`
	SubmittedAt time.Time `json:"submitted_at,omitzero"`
	UpdatedAt   time.Time `json:"updated_at"`
	SucceededAt time.Time `json:"succeeded_at,omitzero"`
}

// View returns the view of st.
func View(st *reservation.State) StateView {
	v := StateView{
		ID: st.ID, Merchant: st.Merchant, UserID: st.UserID, OutTradeNo: st.OutTradeNo, TransactionID: st.TransactionID,
		Status: string(st.Status), Amount: st.Amount, AmountYuan: Yuan(st.Amount), Currency: st.Currency,
		PaidAt: st.PaidAt, RegisteredAt: st.RegisteredAt, Refunded: st.Refunded(), InFlight: st.InFlight(),
		Refundable: st.Refundable(), Version: st.Version, Refunds: []RefundView{},
	}
	v.RefundedYuan, v.InFlightYuan, v.RefundableYuan = Yuan(v.Refunded), Yuan(v.InFlight), Yuan(v.Refundable)
	for _, r := range st.Refunds {
		v.Refunds = append(v.Refunds, RefundView{
			No: r.No, Number: r.Number, Amount: r.Amount, AmountYuan: Yuan(r.Amount), State: string(r.State),
			Reason: r.Reason, Code: r.Code, Message: r.Message, ProviderID: r.ProviderID, Attempts: r.Attempts,
			Queries: r.Queries, DueAt: r.DueAt, Stuck: r.Stuck, Conflicts: r.Conflicts, Recovered: r.Recovered, RequestedBy: r.RequestedBy,
			CreatedAt: r.CreatedAt, SubmittedAt: r.SubmittedAt, UpdatedAt: r.UpdatedAt, SucceededAt: r.SucceededAt,
		})
	}
	return v
}

// Yuan formats fen as yuan with two decimals ("12.34", "-0.05").
func Yuan(fen int64) string {
	sign := ""
	u := uint64(fen)
	if fen < 0 {
		sign, u = "-", uint64(-(fen+1))+1 // no overflow at MinInt64
	}
	return fmt.Sprintf("%s%d.%02d", sign, u/100, u%100)
}
