package reservation

import "time"

// DueOf returns the due time an event sets on a refund, if any. The
// journal's due-time index that the scheduler drains holds exactly these
// (AppendIndexes), so every event that gives a refund a due time must be listed here;
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
	case RefundRecovered:
		return d.RefundNo, d.DueAt, !d.DueAt.IsZero()
	case ApprovalRequested:
		return d.RefundNo, d.DueAt, !d.DueAt.IsZero()
	case AbnormalApplied:
		return d.RefundNo, d.DueAt, !d.DueAt.IsZero()
	}
	return "", time.Time{}, false
}

// DueEffect says what an event does to its refund's due time, as Apply
// does it: set is true when the event replaces the due time with at (the
// zero time when it clears it). The property test checks that Apply agrees.
func DueEffect(d EventData) (refundNo string, at time.Time, set bool) {
	switch d := d.(type) {
	case SubmissionStarted:
		return d.RefundNo, d.DueAt, true
	case SubmissionScheduled:
		return d.RefundNo, d.DueAt, true
	case QueryStarted:
		return d.RefundNo, d.DueAt, true
	case ProviderResult:
		if d.To.Terminal() || (d.To == Rejected && d.DueAt.IsZero()) {
			return d.RefundNo, time.Time{}, true
		}
		return d.RefundNo, d.DueAt, !d.DueAt.IsZero()
	case Abandoned:
		return d.RefundNo, time.Time{}, true
	case Resolved:
		return d.RefundNo, time.Time{}, true
	case RefundRecovered:
		return d.RefundNo, d.DueAt, true
	case ApprovalRequested:
		return d.RefundNo, d.DueAt, true
	case AbnormalApplied:
		return d.RefundNo, d.DueAt, true
	case Approved:
		return d.RefundNo, time.Time{}, true
	case ApprovalRejected:
		return d.RefundNo, time.Time{}, true
	case ApprovalExpired:
		return d.RefundNo, time.Time{}, true
	}
	return "", time.Time{}, false
}

// DueTime is one refund's due time, as a due index holds it.
type DueTime struct {
	RefundNo string
	At       time.Time
}

// DroppedDues lists the due times that events, applied to s, leave behind:
// for each refund they touch, its due time before them and each one they
// set, except the one it holds after them. AppendIndexes lists them, so
// that the adapter deletes them in the same write as the events and its
// index holds only live due times: a superseded timer would otherwise fire
// later for nothing (Decide ignores it, but the scheduler has to wake the
// reservation to find out). s is not changed. An append carries a few
// events, so the quadratic scans cost less than a map; nothing is
// allocated unless something is dropped.
func DroppedDues(s *State, events []Event) []DueTime {
	return appendDroppedDues(nil, s, events)
}

// appendDroppedDues appends DroppedDues(s, events) to out; s may be nil
// (a new reservation).
func appendDroppedDues(out []DueTime, s *State, events []Event) []DueTime {
	start := len(out)
	for i, e := range events {
		no, _, set := DueEffect(e.Data)
		if !set || setsDue(events[:i], no) {
			continue // not a due time, or its refund was handled at an earlier event
		}
		var before time.Time
		if s != nil {
			if r := s.Refund(no); r != nil {
				before = r.DueAt
			}
		}
		final := before
		for _, later := range events[i:] {
			if n, at, ok := DueEffect(later.Data); ok && n == no {
				final = at
			}
		}
		out = appendDropped(out, start, no, before, final)
		for _, later := range events[i:] {
			if n, at, ok := DueEffect(later.Data); ok && n == no {
				out = appendDropped(out, start, no, at, final)
			}
		}
	}
	return out
}

// setsDue says whether any of events sets refund no's due time.
func setsDue(events []Event, no string) bool {
	for _, e := range events {
		if n, _, ok := DueEffect(e.Data); ok && n == no {
			return true
		}
	}
	return false
}

// appendDropped adds (no, at) to out unless at is zero, is the refund's
// final due time, or is listed already (in out[start:]).
func appendDropped(out []DueTime, start int, no string, at, final time.Time) []DueTime {
	if at.IsZero() || at.Equal(final) {
		return out
	}
	for _, d := range out[start:] {
		if d.RefundNo == no && d.At.Equal(at) {
			return out
		}
	}
	return append(out, DueTime{RefundNo: no, At: at})
}
