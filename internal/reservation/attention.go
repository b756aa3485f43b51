package reservation

// Attention kinds: refunds an operator should look at. A refund is listed
// under its state while UNKNOWN, REJECTED or ABNORMAL, and under
// AttentionStuck while flagged stuck and not final, and for ever under
// AttentionConflict once WeChat Pay paid it after it was closed as FAILED.
const AttentionStuck = "stuck"

// AttentionConflict lists refunds WeChat Pay paid after refundd had closed
// them as FAILED.
const AttentionConflict = "conflict"

// AttentionKinds lists every attention kind.
var AttentionKinds = []string{string(Unknown), string(Rejected), string(Abnormal), AttentionStuck, AttentionConflict,
	string(PendingApproval)}

func needsAttention(s RefundState) bool {
	return s == Unknown || s == Rejected || s == Abnormal || s == PendingApproval
}

// AttentionOf says how an event changes the attention index: the kinds it
// adds the refund to and removes it from (refundNo is empty when it changes
// nothing). Adapters keep the index with it atomically, through
// AppendIndexes; the property test checks it agrees with the state.
func AttentionOf(d EventData) (refundNo string, add, remove []string) {
	var room [4]Mark
	for _, m := range appendAttention(room[:0], d) {
		refundNo = m.RefundNo
		if m.Clear {
			remove = append(remove, m.Kind)
		} else {
			add = append(add, m.Kind)
		}
	}
	return refundNo, add, remove
}

// AppendAttention appends to marks how d changes the attention index, as
// AttentionOf says, without allocating when marks has room (the engine
// logs each refund that enters a list).
func AppendAttention(marks []Mark, d EventData) []Mark { return appendAttention(marks, d) }

// appendAttention appends the marks of d to marks, the kinds it removes
// the refund from before those it adds it to (the order the index applies
// them in).
func appendAttention(marks []Mark, d EventData) []Mark {
	unset := func(no, kind string) { marks = append(marks, Mark{Kind: kind, RefundNo: no, Clear: true}) }
	set := func(no, kind string) { marks = append(marks, Mark{Kind: kind, RefundNo: no}) }
	switch d := d.(type) {
	case ProviderResult:
		if d.From == d.To {
			return marks
		}
		if needsAttention(d.From) {
			unset(d.RefundNo, string(d.From))
		}
		if d.To.Terminal() {
			unset(d.RefundNo, AttentionStuck)
		}
		if needsAttention(d.To) {
			set(d.RefundNo, string(d.To))
		}
		if d.From == Failed && d.To == Succeeded {
			set(d.RefundNo, AttentionConflict)
		}
	case SubmissionStarted:
		// A resubmission, started or waiting for the spacing, leaves
		// REJECTED or UNKNOWN for PROCESSING.
		unset(d.RefundNo, string(Unknown))
		unset(d.RefundNo, string(Rejected))
	case SubmissionScheduled:
		unset(d.RefundNo, string(Unknown))
		unset(d.RefundNo, string(Rejected))
	case Abandoned:
		unset(d.RefundNo, string(Rejected))
		unset(d.RefundNo, AttentionStuck)
	case Resolved:
		unset(d.RefundNo, string(Abnormal))
		unset(d.RefundNo, AttentionStuck)
	case AbnormalApplied:
		unset(d.RefundNo, string(Abnormal))
	case FlaggedStuck:
		set(d.RefundNo, AttentionStuck)
	case RefundRecovered:
		if needsAttention(d.State) {
			set(d.RefundNo, string(d.State))
		}
	case ApprovalRequested:
		set(d.RefundNo, string(PendingApproval))
	case Approved:
		unset(d.RefundNo, string(PendingApproval))
	case ApprovalRejected:
		unset(d.RefundNo, string(PendingApproval))
		unset(d.RefundNo, AttentionStuck)
	case ApprovalExpired:
		unset(d.RefundNo, string(PendingApproval))
		unset(d.RefundNo, AttentionStuck)
	}
	return marks
}

// Attention returns the attention kinds a refund belongs to now.
func (r *Refund) Attention() []string {
	var kinds []string
	if needsAttention(r.State) {
		kinds = append(kinds, string(r.State))
	}
	if r.Stuck && !r.State.Terminal() {
		kinds = append(kinds, AttentionStuck)
	}
	if r.PaidAfterFailed {
		kinds = append(kinds, AttentionConflict)
	}
	return kinds
}
