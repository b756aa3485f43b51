package reservation

import "time"

// DueOf returns the due time an event sets on a refund, if any. Adapters
// index exactly these (the journal's due-time index that the scheduler
// drains), so every event that gives a refund a due time must be listed here;
// the property test checks that Apply agrees.
func DueOf(d EventData) (refundNo string, at time.Time, ok bool) {
	switch d := d.(type) {
	case SubmissionStarted:
		return d.RefundNo, d.DueAt, !d.DueAt.IsZero()
	case SubmissionScheduled:
		return d.RefundNo, d.DueAt, !d.DueAt.IsZero()
	case QueryStarted:
		return d.RefundNo, d.DueAt, !d.DueAt.IsZero()
	case ProviderResult:
		return d.RefundNo, d.DueAt, !d.DueAt.IsZero()
	}
	return "", time.Time{}, false
}
