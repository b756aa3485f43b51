package reservation

import (
	"strconv"
	"time"
)

// A restore takes the journal back to a backup: refunds made after it are
// forgotten, though WeChat Pay may have paid them. The restore gate finds
// them by asking about the numbers the lost epochs would have issued, and
// journals each one it finds with RecordRecovered before refunds resume, so
// that what is refundable counts them: a client retrying a lost request
// (with an idempotency key the restored journal no longer knows) is then
// refused when the money is gone, instead of being paid twice.

// TypeRefundRecovered is the stored name of RefundRecovered.
const TypeRefundRecovered = "refund.recovered"

// RecordRecovered journals a refund that the provider has under a number
// of this reservation from an earlier refund-number epoch, and that the
// journal lacks (it was made after the backup that a restore went back
// to). Outcome is the provider's query answer about it: SUCCEEDED,
// PROCESSING, ABNORMAL or FAILED, with the refund's amount and the
// provider's refund id.
//
// Recording it again changes nothing. A recovered refund was never
// submitted by this journal and has no request bytes: it is only ever
// queried, never sent.
type RecordRecovered struct {
	RefundNo string
	Outcome  Outcome
}

func (RecordRecovered) command() {}

// RefundRecovered: a refund found at the provider after a restore was
// journaled, with the provider's amount, state and id. It holds its amount
// like any refund in that state. DueAt is the next query of one not final.
type RefundRecovered struct {
	RefundNo    string      `json:"refund_no"`
	Number      int         `json:"number"`
	Amount      int64       `json:"amount"`
	State       RefundState `json:"state"`
	ProviderID  string      `json:"provider_id"`
	SuccessTime time.Time   `json:"success_time,omitzero"`
	DueAt       time.Time   `json:"due_at,omitzero"`
}

// EventType implements EventData.
func (RefundRecovered) EventType() string { return TypeRefundRecovered }

// recoveredState is the state a recovered refund starts in: the provider's
// own. Answers that do not prove the provider has the refund have none.
func recoveredState(k OutcomeKind) (RefundState, bool) {
	switch k {
	case OutcomeSucceeded, OutcomeProcessing, OutcomeAbnormal, OutcomeFailed:
		return k.target(), true
	}
	return "", false
}

func decideRecovered(s *State, c RecordRecovered, env Env) ([]EventData, error) {
	if !s.Registered() {
		return nil, ErrNotFound
	}
	prefix, id, n, ok := ParseRefundNo(c.RefundNo)
	if !ok || id != s.ID {
		return nil, invalid("refund_no", "is not a refund number of this reservation")
	}
	// Numbers with the current prefix are this journal's to issue: one it
	// lacks was never made, or it would collide with the next request.
	if prefix == env.Policy.prefix() {
		return nil, invalid("refund_no", "has the current refund-number prefix; only numbers of earlier epochs can be recovered")
	}
	o := c.Outcome
	to, ok := recoveredState(o.Kind)
	if !ok {
		return nil, invalid("outcome", "a recovered refund needs an answer that the provider has it")
	}
	switch {
	case o.RefundAmount <= 0 || o.RefundAmount > MaxAmount:
		return nil, invalid("amount", "the provider's answer must carry the refund amount")
	case o.ProviderID == "":
		return nil, invalid("provider_id", "the provider's answer must carry its refund id")
	case o.OutTradeNo != "" && o.OutTradeNo != s.OutTradeNo:
		return nil, withMessage(ErrOutcomeMismatch, "out_trade_no does not match the reservation")
	case o.TotalAmount != 0 && o.TotalAmount != s.Amount:
		return nil, withMessage(ErrOutcomeMismatch, "order total does not match the paid amount")
	}
	if r := s.Refund(c.RefundNo); r != nil {
		// Recovered already (a gate run again after a crash), or known
		// all along: later changes come in as outcomes, like any refund's.
		if r.Amount != o.RefundAmount || (r.ProviderID != "" && r.ProviderID != o.ProviderID) {
			return nil, withMessage(ErrOutcomeMismatch, "the provider's refund differs from the journal's under the same number")
		}
		return nil, nil
	}
	// WeChat Pay never refunds more than the order's total, so a refund it
	// has that does not fit means the journal holds money that was not
	// paid (say a REJECTED refund abandoned after the backup): an operator
	// must settle that first.
	if left := s.Refundable(); to.Holds() && o.RefundAmount > left {
		return nil, withMessage(ErrOutcomeMismatch, "recovered refund of "+strconv.FormatInt(o.RefundAmount, 10)+
			" fen exceeds the refundable "+strconv.FormatInt(left, 10)+": the journal holds refunds the provider did not pay")
	}
	ev := RefundRecovered{RefundNo: c.RefundNo, Number: n, Amount: o.RefundAmount, State: to, ProviderID: o.ProviderID}
	switch to {
	case Succeeded:
		ev.SuccessTime = o.SuccessTime
	case Processing:
		ev.DueAt = env.Now.Add(env.Policy.recheckAfter())
	case Abnormal:
		// Queried on, like any ABNORMAL refund: it may be settled at WeChat.
		ev.DueAt = env.Now.Add(env.Policy.queryBackoff(1))
	}
	out := []EventData{ev}
	if refunded := s.Refunded() + o.RefundAmount; to == Succeeded && refunded >= s.Amount && s.Status != StatusCanceled {
		out = append(out, Canceled{Refunded: refunded})
	}
	return out, nil
}

// applyRecovered adds a recovered refund: no idempotency key, fingerprint
// or request bytes, so nothing can match it to a request or resend it.
func applyRecovered(s *State, e Event, d RefundRecovered) {
	r := &Refund{
		No: d.RefundNo, Number: d.Number, Amount: d.Amount, State: d.State, ProviderID: d.ProviderID,
		DueAt: d.DueAt, Recovered: true, RequestedBy: e.By, CreatedAt: e.At, UpdatedAt: e.At,
	}
	if d.State == Succeeded {
		r.SucceededAt = d.SuccessTime
		if r.SucceededAt.IsZero() {
			r.SucceededAt = e.At
		}
	}
	s.Refunds = append(s.Refunds, r)
	s.indexLast()
}
