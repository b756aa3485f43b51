package reservation

import "time"

// Apply folds one journaled event into s. It never fails: events are facts.
func Apply(s *State, e Event) {
	s.Version++
	if applyApproval(s, e) {
		return
	}
	switch d := e.Data.(type) {
	case Registered:
		s.ID, s.UserID, s.OutTradeNo, s.TransactionID = d.ReservationID, d.UserID, d.OutTradeNo, d.TransactionID
		s.Amount, s.Currency, s.PaidAt = d.Amount, d.Currency, d.PaidAt
		s.Merchant = MerchantOf(d.Merchant)
		s.Status = StatusAccepted
		s.RegisteredAt, s.RegisteredBy = e.At, e.By
	case Canceled:
		s.Status = StatusCanceled
	case RefundRequested:
		s.Refunds = append(s.Refunds, &Refund{
			No: d.RefundNo, Number: d.Number, IdempotencyKey: d.IdempotencyKey, Fingerprint: d.Fingerprint,
			Amount: d.Amount, Reason: d.Reason, ReasonCode: d.ReasonCode, Metadata: d.Metadata, State: Processing, RequestedBy: e.By,
			CreatedAt: e.At, UpdatedAt: e.At,
		})
		s.indexLast()
	case SubmissionStarted:
		if r := s.Refund(d.RefundNo); r != nil {
			s.LastCreateAt = e.At
			r.Attempts = d.Attempt
			if len(d.Request) > 0 {
				r.Request = d.Request
			}
			if d.Attempt == 1 {
				r.SubmittedAt = e.At
			}
			r.PriorUnsettledAt, r.UnsettledAt = r.UnsettledAt, e.At
			r.State, r.DueAt, r.UpdatedAt, r.Retry = Processing, d.DueAt, e.At, false
		}
	case QueryStarted:
		if r := s.Refund(d.RefundNo); r != nil {
			r.Queries, r.DueAt, r.UpdatedAt, r.Retry = d.Query, d.DueAt, e.At, false
			r.QueriedAt = e.At
		}
	case ProviderResult:
		if r := s.Refund(d.RefundNo); r != nil {
			r.UnsettledAt = r.unsettledAfter(d.Source, d.Outcome, d.Attempt)
			if d.From == Failed && d.To == Succeeded {
				r.PaidAfterFailed = true
				r.Conflicts++
			}
			r.State, r.UpdatedAt = d.To, e.At
			if d.Code != "" || d.From != d.To {
				r.Code, r.Message = d.Code, d.Message
			}
			if d.ProviderID != "" {
				r.ProviderID = d.ProviderID
			}
			if d.To == Succeeded {
				r.SucceededAt = d.SuccessTime
				if r.SucceededAt.IsZero() {
					r.SucceededAt = e.At
				}
			}
			if !d.DueAt.IsZero() {
				r.DueAt, r.Retry = d.DueAt, d.Retry
			}
			if d.To.Terminal() || (d.To == Rejected && d.DueAt.IsZero()) {
				r.DueAt, r.Retry = time.Time{}, false
			}
		}
	case Abandoned:
		if r := s.Refund(d.RefundNo); r != nil {
			r.State, r.UpdatedAt, r.Code, r.Message = Failed, e.At, "ABANDONED", d.Reason
			r.DueAt = time.Time{}
		}
	case SubmissionScheduled:
		if r := s.Refund(d.RefundNo); r != nil {
			// A resubmission waiting for the spacing leaves REJECTED or
			// UNKNOWN as SubmissionStarted would (older events were all
			// of PROCESSING refunds).
			r.State, r.Request, r.DueAt, r.Retry, r.UpdatedAt = Processing, d.Request, d.DueAt, true, e.At
		}
	case Resolved:
		if r := s.Refund(d.RefundNo); r != nil {
			r.State, r.UpdatedAt, r.Code, r.Message = Succeeded, e.At, "RESOLVED_BY_OPERATOR", d.Reason
			r.SucceededAt, r.DueAt, r.Retry = e.At, time.Time{}, false
		}
	case Conflict:
		if r := s.Refund(d.RefundNo); r != nil {
			r.Conflicts++
			r.LastConflict = d
		}
	case FlaggedStuck:
		if r := s.Refund(d.RefundNo); r != nil {
			r.Stuck = true
		}
	case RefundRecovered:
		applyRecovered(s, e, d)
	case AbnormalApplied:
		applyAbnormalApplied(s, e, d)
	}
}
