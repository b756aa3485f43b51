package reservation

import (
	"strconv"
	"time"
)

// What happens next to a refund, and who must act, in words an operator
// reads (the API's next_step, the console's refund page). NextOf derives
// it from the refund as the journal left it, the merchant's policy and the
// time only, under the package's determinism rules: the same refund, policy
// and time always give the same answer.

// NextKind names what happens next to a refund. The set is closed and
// stable (the API documents it as an enum).
type NextKind string

// Next kinds.
const (
	// NextNone: the refund is final; nothing more happens to it.
	NextNone NextKind = "none"
	// NextSubmitAt: its first submission waits (for WeChat Pay's spacing
	// between create requests of one order) until At; zero At: it is
	// being submitted now.
	NextSubmitAt NextKind = "submit_at"
	// NextRetryAt: WeChat Pay's answer to the last attempt was unknown;
	// refundd sends the same request again at At.
	NextRetryAt NextKind = "retry_at"
	// NextRecheckAt: whether WeChat Pay made the refund is not known yet;
	// refundd asks it at At.
	NextRecheckAt NextKind = "recheck_at"
	// NextWaitForWeChat: WeChat Pay has the refund and is processing it;
	// its notification is awaited, and refundd asks at At if none comes.
	NextWaitForWeChat NextKind = "wait_for_wechat"
	// NextOperatorMustAct: nothing settles the refund without an
	// operator (REJECTED, ABNORMAL, or UNKNOWN with no check scheduled).
	NextOperatorMustAct NextKind = "operator_must_act"
	// NextApproverMustAct: the refund waits for an approver
	// (PENDING_APPROVAL); At is when it expires unapproved.
	NextApproverMustAct NextKind = "approver_must_act"
)

// Operator actions on a refund, named as the API's routes name them
// (POST /v1/reservations/{id}/refunds/{refund_no}/{action}).
const (
	ActionReconcile     = "reconcile"
	ActionResubmit      = "resubmit"
	ActionAbandon       = "abandon"
	ActionResolve       = "resolve"
	ActionApplyAbnormal = "apply-abnormal"
	ActionApprove       = "approve"
	ActionReject        = "reject"
)

// NextStep says what happens next to a refund and who must act.
type NextStep struct {
	Kind NextKind
	// At is when refundd acts next by itself: a query, a retry, a
	// submission held back by spacing, or the expiry of an approval. Zero
	// when nothing is scheduled. It may be in the past: the scheduler
	// picks it up on its next pass.
	At time.Time
	// AttemptsLeft is how many more submissions refundd may still make by
	// itself: for PROCESSING, the attempts an unknown answer gets
	// (Policy.MaxAttempts) minus those made; for UNKNOWN, the resending
	// after WeChat Pay reports no such refund, up to twice MaxAttempts;
	// for PENDING_APPROVAL, MaxAttempts (none made yet); zero otherwise.
	AttemptsLeft int
	// AbandonFrom is, for a REJECTED refund with an earlier attempt that
	// WeChat Pay may still apply, when abandoning it becomes possible (the
	// policy's SettleHorizon after that attempt); zero otherwise.
	AbandonFrom time.Time
	// Actions are the operator actions the refund's state allows now, in
	// a fixed order (Action* names); a token's role decides which of them
	// it may take, and Decide checks each again. Approve is listed though
	// the requester may not approve their own refund.
	Actions []string
	// Why is one or two plain sentences on why the refund is where it is
	// and what happens next. Times are left to At and AbandonFrom, so a
	// reader shows them in its own zone.
	Why string
}

// NextOf says what happens next to refund r under policy p at now.
func NextOf(r *Refund, p Policy, now time.Time) NextStep {
	n := NextStep{At: r.DueAt, Actions: actionsOf(r, p, now)}
	switch r.State {
	case Succeeded, Failed:
		n.Kind, n.At, n.Why = NextNone, time.Time{}, finalWhy(r)
	case PendingApproval:
		n.Kind, n.AttemptsLeft = NextApproverMustAct, p.maxAttempts()
		if now.Before(r.DueAt) {
			n.Why = "It waits for an approver other than its requester (" + r.RequestedBy + "); nothing was sent to WeChat. " +
				"Unapproved, it expires at the time shown and its amount is released."
		} else {
			n.Why = "Its approval window has closed: refundd expires it on its next pass and releases its amount; it can no longer be approved."
		}
	case Processing:
		n.Kind, n.AttemptsLeft, n.Why = processingNext(r, p)
	case Unknown:
		n.AttemptsLeft = max(0, 2*p.maxAttempts()-r.Attempts)
		n.Why = "WeChat's answers to its " + plural(r.Attempts, "attempt") + " did not say whether the refund was made" + codeOf(r) + "; only WeChat can tell. "
		if r.DueAt.IsZero() {
			n.Kind = NextOperatorMustAct
			n.Why += "No check is scheduled: an operator must reconcile it (ask WeChat now) or resubmit it."
		} else {
			n.Kind = NextRecheckAt
			n.Why += "refundd asks WeChat again at the time shown (" + plural(r.Queries, "query") + " so far); " +
				"if WeChat has no such refund it sends the same request again. An operator may reconcile it now."
		}
	case Rejected:
		n.Kind = NextOperatorMustAct
		n.Why = "WeChat refused attempt " + strconv.Itoa(r.Attempts) + codeOf(r) + ", so that attempt moved no money. " +
			"An operator must fix the cause and resubmit it, or abandon it to release its amount."
		if p.settling(r.UnsettledAt, now) {
			n.AbandonFrom = r.UnsettledAt.Add(p.settleHorizon())
			n.Why += " An earlier attempt may still be applied by WeChat: it cannot be abandoned before the time shown, " +
				"and refundd keeps asking WeChat until then."
		}
	case Abnormal:
		n.Kind = NextOperatorMustAct
		n.Why = "WeChat could not return the money to the user's account" + codeOf(r) + ". An operator must have WeChat pay it out " +
			"to another account (apply-abnormal), or settle it with WeChat and resolve it. refundd keeps asking WeChat meanwhile."
	default:
		n.Kind, n.Why = NextNone, "Its state "+string(r.State)+" is not one refundd knows."
	}
	if r.Stuck && !r.State.Terminal() {
		n.Why += " It was flagged stuck: unresolved longer than the policy allows."
	}
	return n
}

// processingNext is NextOf's answer for a PROCESSING refund.
func processingNext(r *Refund, p Policy) (NextKind, int, string) {
	left := max(0, p.maxAttempts()-r.Attempts)
	switch {
	case r.Attempts == 0 && !r.Recovered && r.DueAt.IsZero():
		return NextSubmitAt, left, "It is being submitted to WeChat."
	case r.Attempts == 0 && !r.Recovered:
		return NextSubmitAt, left, "Its first submission waits for WeChat's spacing between refunds of one order; refundd submits it at the time shown."
	case r.Retry:
		// An unknown answer, or a resubmission held back by spacing.
		return NextRetryAt, left, "Attempt " + strconv.Itoa(r.Attempts) + " did not settle it" + codeOf(r) +
			"; refundd sends the same request again at the time shown (" + plural(left, "attempt") + " left before it is left UNKNOWN)."
	case r.AbnormalType != "":
		return NextWaitForWeChat, left, "An operator asked WeChat to pay it out to " + abnormalWhere(r.AbnormalType) +
			"; refundd waits for WeChat's notification and asks WeChat at the time shown if none comes."
	case r.ProviderID != "":
		return NextWaitForWeChat, left, "WeChat accepted it and is processing it; refundd waits for WeChat's notification " +
			"and asks WeChat at the time shown if none comes."
	}
	return NextRecheckAt, left, "Attempt " + strconv.Itoa(r.Attempts) + " was sent to WeChat and has no answer yet; " +
		"refundd asks WeChat at the time shown if none comes."
}

// finalWhy says how a final refund ended. The usual endings are constant
// strings: every answer about a final refund carries one, and building it
// would cost an allocation per answer.
func finalWhy(r *Refund) string {
	const done = " Nothing more happens to it."
	var why string
	switch {
	case r.State == Succeeded && r.PaidAfterFailed:
		why = "WeChat paid it after refundd had closed it as FAILED: it counts as refunded. Find out why it had failed." + done
	case r.State == Succeeded && r.Code == "RESOLVED_BY_OPERATOR":
		why = "An operator resolved it outside refundd after WeChat reported it ABNORMAL: it counts as refunded." + done
	case r.State == Succeeded:
		why = "WeChat refunded the money." + done
	case r.Code == "ABANDONED":
		why = "An operator abandoned it after WeChat refused it; its amount was released." + done
	case r.Code == CodeApprovalRejected:
		why = "An approver (" + r.RejectedBy + ") rejected it; nothing was sent to WeChat and its amount was released." + done
	case r.Code == CodeApprovalExpired:
		why = "Nobody approved it in time; nothing was sent to WeChat and its amount was released." + done
	default:
		why = "WeChat closed the refund" + codeOf(r) + "; its amount was released." + done
	}
	if r.Conflicts > 0 && !r.PaidAfterFailed {
		why += " WeChat later reported an outcome that contradicts it (" + plural(r.Conflicts, "time") + "): an operator should look."
	}
	return why
}

// actionsOf lists the operator actions r's state allows at now, as Decide
// would take them (next_test.go checks the two agree).
func actionsOf(r *Refund, p Policy, now time.Time) []string {
	var out []string
	if !r.State.Terminal() && r.Attempts > 0 {
		out = append(out, ActionReconcile)
	}
	if (r.State == Rejected || r.State == Unknown) && len(r.Request) > 0 {
		out = append(out, ActionResubmit)
	}
	if r.State == Rejected && !p.settling(r.UnsettledAt, now) {
		out = append(out, ActionAbandon)
	}
	if r.State == Abnormal {
		out = append(out, ActionResolve)
		if r.ProviderID != "" {
			out = append(out, ActionApplyAbnormal)
		}
	}
	if r.State == PendingApproval {
		if now.Before(r.DueAt) {
			out = append(out, ActionApprove)
		}
		out = append(out, ActionReject)
	}
	return out
}

// codeOf is " (code X)" for a refund with a provider code, else "".
func codeOf(r *Refund) string {
	if r.Code == "" {
		return ""
	}
	return " (code " + r.Code + ")"
}

func abnormalWhere(t string) string {
	switch t {
	case AbnormalUserBankCard:
		return "the user's bank card"
	case AbnormalMerchantBankCard:
		return "the merchant's bank account"
	}
	return t
}

// plural is "1 attempt", "2 attempts"; query becomes queries.
func plural(n int, noun string) string {
	s := strconv.Itoa(n) + " " + noun
	if n == 1 {
		return s
	}
	if noun == "query" {
		return strconv.Itoa(n) + " queries"
	}
	return s + "s"
}
