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
var AttentionKinds = []string{string(Unknown), string(Rejected), string(Abnormal), AttentionStuck, AttentionConflict}

func needsAttention(s RefundState) bool { return s == Unknown || s == Rejected || s == Abnormal }

// AttentionOf says how an event changes the attention index: the kinds it
// adds the refund to and removes it from. Adapters keep the index with it
// atomically; the property test checks it agrees with the state.
func AttentionOf(d EventData) (refundNo string, add, remove []string) {
	switch d := d.(type) {
	case ProviderResult:
		if d.From == d.To {
			return d.RefundNo, nil, nil
		}
		if needsAttention(d.From) {
			remove = append(remove, string(d.From))
		}
		if needsAttention(d.To) {
			add = append(add, string(d.To))
		}
		if d.To.Terminal() {
			remove = append(remove, AttentionStuck)
		}
		if d.From == Failed && d.To == Succeeded {
			add = append(add, AttentionConflict)
		}
		return d.RefundNo, add, remove
	case SubmissionStarted, SubmissionScheduled:
		// A resubmission, started or waiting for the spacing, leaves
		// REJECTED or UNKNOWN for PROCESSING.
		return RefundNoOf(d), nil, []string{string(Unknown), string(Rejected)}
	case Abandoned:
		return d.RefundNo, nil, []string{string(Rejected), AttentionStuck}
	case Resolved:
		return d.RefundNo, nil, []string{string(Abnormal), AttentionStuck}
	case FlaggedStuck:
		return d.RefundNo, []string{AttentionStuck}, nil
	case RefundRecovered:
		if needsAttention(d.State) {
			add = []string{string(d.State)}
		}
		return d.RefundNo, add, nil
	}
	return "", nil, nil
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
