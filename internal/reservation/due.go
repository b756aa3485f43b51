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
		if d.To.Terminal() || d.To == Rejected {
			return d.RefundNo, time.Time{}, true
		}
		return d.RefundNo, d.DueAt, !d.DueAt.IsZero()
	case Abandoned:
		return d.RefundNo, time.Time{}, true
	case Resolved:
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
// set, except the one it holds after them. An adapter that indexes DueOf
// deletes these in the same write as the events, so that its index holds
// only live due times: a superseded timer would otherwise fire later for
// nothing (Decide ignores it, but the scheduler has to wake the
// reservation to find out). s is not changed.
func DroppedDues(s *State, events []Event) []DueTime {
	// Most appends touch one refund; the array keeps that off the heap.
	var room [2]dueTrack
	touched := room[:0]
	for _, e := range events {
		no, at, set := DueEffect(e.Data)
		if !set {
			continue
		}
		i := 0
		for i < len(touched) && touched[i].no != no {
			i++
		}
		if i == len(touched) {
			var cur time.Time
			if r := s.Refund(no); r != nil {
				cur = r.DueAt
			}
			touched = append(touched, dueTrack{no: no, cur: cur})
			touched[i].seen(cur)
		}
		touched[i].seen(at)
		touched[i].cur = at
	}
	var out []DueTime
	for _, t := range touched {
		for _, at := range t.times {
			if !at.Equal(t.cur) {
				out = append(out, DueTime{RefundNo: t.no, At: at})
			}
		}
	}
	return out
}

// dueTrack follows one refund's due time through an append.
type dueTrack struct {
	no    string
	cur   time.Time   // the due time after the events so far
	times []time.Time // every non-zero due time it had, each once
}

func (t *dueTrack) seen(at time.Time) {
	if at.IsZero() {
		return
	}
	for _, x := range t.times {
		if x.Equal(at) {
			return
		}
	}
	t.times = append(t.times, at)
}
