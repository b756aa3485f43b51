package reservation

import (
	"fmt"
	"maps"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The property test drives one reservation through random commands and
// provider outcomes (duplicates, reorderings, stale timers, operator actions
// and restarts from the journal) and compares it after every step with a
// naive model written without looking at decide.go. rapid prints the seed
// (-rapid.seed=N) and a minimal failing sequence when a property breaks.

// model is what a careful clerk would believe about the reservation.
type model struct {
	registered bool
	amount     int64
	merchant   string // the merchant registered, for good
	canceled   bool
	refunds    []*modelRefund
	byKey      map[string]int
	lastCreate time.Time // the latest submission of any refund, any attempt
}

type modelRefund struct {
	no, key, fp string
	amount      int64
	state       RefundState
	request     []byte // the provider bytes, once journaled (maybe before the first submission)
	attempts    int    // submissions started; 0 = never sent
	queries     int
	queriedAt   time.Time // the last query's start
	providerID  string
	stuck       bool
	created     time.Time
	due         time.Time
	retry       bool      // the due time sends a submission rather than a query
	submittedAt time.Time // first submission
	resolved    bool      // settled by an operator
	conflict    Conflict  // the last conflict recorded
	// unsettled is when the latest attempt that may still land started
	// (each attempt may, until its own refusal); prior is the same before
	// the latest attempt.
	unsettled, prior time.Time
	paidLate         bool // WeChat paid it after it was FAILED
	// Approval: needed when a policy rule matched at the request; who
	// asked, who approved; closed by a rejection or an expiry.
	approval    bool
	requestedBy string
	approvedBy  string
	closedBy    string // CodeApprovalRejected or CodeApprovalExpired
	// abnormalType: an operator asked WeChat to pay the ABNORMAL refund out.
	abnormalType string
}

// succeeded is the money the model believes went back.
// modelMerchant is the merchant a registration names: none is the
// deployment's default, "default".
func modelMerchant(c Register) string { return modelMerchantName(c.Merchant) }

// modelMerchantName is the merchant a name stands for: none is "default".
func modelMerchantName(name string) string {
	if name == "" {
		return "default"
	}
	return name
}

func (m *model) succeeded() int64 {
	var n int64
	for _, r := range m.refunds {
		if r.state == Succeeded {
			n += r.amount
		}
	}
	return n
}

// held is the money of every refund the model does not believe FAILED.
func (m *model) held() int64 {
	var n int64
	for _, r := range m.refunds {
		if r.state != Failed {
			n += r.amount
		}
	}
	return n
}

// modelOutcome is the outcome specification: the refund's next state and
// what must be journaled ("" nothing, "result", "retry", "stopretry",
// "conflict" or "resend"). latest says a response answers the refund's latest attempt.
func (h *sim) modelOutcome(r *modelRefund, kind OutcomeKind, src Source, latest, newProviderID bool) (RefundState, string) {
	st := r.state
	if st == Failed && kind == OutcomeSucceeded && h.m.held()+r.amount <= h.m.amount {
		return Succeeded, "result" // paid after all: counted, since nothing else holds the money
	}
	if st == Succeeded || st == Failed {
		contradicts := (kind == OutcomeSucceeded || kind == OutcomeFailed || kind == OutcomeAbnormal) && kind.target() != st
		if contradicts {
			return st, "conflict"
		}
		return st, "" // duplicate or stale
	}
	attempt := func() (RefundState, string) {
		if src == SourceResponse {
			return st, "result" // every answered submission is journaled
		}
		return st, ""
	}
	switch kind {
	case OutcomeSucceeded:
		return Succeeded, "result"
	case OutcomeFailed:
		return Failed, "result"
	case OutcomeAbnormal:
		if st == Abnormal {
			return st, ""
		}
		return Abnormal, "result"
	case OutcomeProcessing:
		switch {
		case st == Abnormal:
			return st, ""
		case r.retry && r.attempts > 0:
			return Processing, "stopretry" // the provider has it: wait, do not resend
		case st == Processing && newProviderID:
			return st, "result"
		case st == Processing:
			return attempt()
		}
		return Processing, "result"
	case OutcomeRejected:
		// Only a submission's refusal of the latest attempt of a refund the
		// provider never acknowledged says that no money moved.
		if (st == Processing || st == Unknown) && src == SourceResponse && latest && r.providerID == "" {
			return Rejected, "result"
		}
		return attempt()
	case OutcomeUnknown:
		// Only the answer to the latest submission of a refund waiting on
		// it is news: retried while attempts are left, then UNKNOWN.
		if src != SourceResponse || st != Processing || !latest {
			return attempt()
		}
		if r.attempts < h.maxAttempts() {
			return Processing, "retry"
		}
		return Unknown, "result"
	case OutcomeNotFound:
		// Never sent (maybe waiting for spacing): "not found" is no news.
		if src == SourceQuery && r.attempts > 0 && (st == Processing || st == Unknown) {
			if st == Unknown && r.providerID == "" && r.attempts >= 2*h.maxAttempts() {
				return Rejected, "result" // resent enough: an operator decides
			}
			return Processing, "resend"
		}
		// A REJECTED refund still queried: "not found" ends the queries
		// only once no attempt may land any more.
		if src == SourceQuery && st == Rejected && !r.due.IsZero() && !h.settling(r.unsettled) {
			return Rejected, "result"
		}
		return st, ""
	}
	panic("modelOutcome: " + string(kind))
}

// sim runs one random scenario.
type sim struct {
	t       *rapid.T
	policy  Policy
	reg     Register
	now     time.Time
	jitter  float64 // Env.Jitter of the next command
	s       *State  // live state; replaced by a replayed one on restart
	journal []Event // every event as decided
	stored  []Event // the same events after Encode and Decode
	// Replays of journal and stored, kept up to date event by event.
	replayed, decoded *State
	m                 model
	terminal          map[string]RefundState
	attention         map[string]bool    // kept from AttentionOf alone: "KIND/refund_no"
	dueIndex          map[DueTime]bool   // kept from DueOf and DroppedDues alone, as an adapter keeps it
	searchIndex       map[SearchKey]bool // kept from AppendIndexes' Search alone
	listIndex         map[ListRow]bool   // kept from AppendIndexes' Rows alone
	bodies            map[string]string  // the first bytes journaled for each refund
	dues              []time.Time        // every due time ever seen, for stale timers
	lastStart         time.Time          // the latest SubmissionStarted journaled
	lastCmd           Command
	lastBy            string
	keys              int
	// encode gives Env an encoder, as the engine does: a request journals
	// its first submission (or its approval request) with the bytes.
	encode bool
	// firstSends counts each refund's first submissions journaled: an
	// approved refund is sent exactly once, one never approved never.
	firstSends map[string]int
	// answeredUnsent holds the refunds a provider result reached before
	// their first submission: an outcome the sim makes up (the engine
	// never would, for an attempt it did not start) may move one waiting
	// for the spacing elsewhere, even to ABNORMAL and from there back to
	// PROCESSING through an operator's apply-abnormal, without a send.
	answeredUnsent map[string]bool
}

// modelBody is the bytes the sim's encoder gives a refund.
func modelBody(no string) []byte { return []byte(`{"out_refund_no":"` + no + `"}`) }

// approvalNeeded is the model's reading of the approval rules.
func (h *sim) approvalNeeded(amount int64, by string) bool {
	p := h.policy
	if p.ApproveAll {
		return true
	}
	if p.ApproveAbove != 0 && amount > p.ApproveAbove {
		return true
	}
	if p.ApproveAbovePercent != 0 && float64(amount) > float64(h.m.amount)*float64(p.ApproveAbovePercent)/100 {
		return true
	}
	return p.ApproveNonService && !strings.HasPrefix(by, "service:")
}

func (h *sim) approvalTimeout() time.Duration {
	if h.policy.ApprovalTimeout == 0 {
		return 24 * time.Hour
	}
	return h.policy.ApprovalTimeout
}

// personOf is the name part of "role:name".
func personOf(by string) string { return by[strings.IndexByte(by, ':')+1:] }

// settling says an attempt started at unsettled may still land now.
func (h *sim) settling(unsettled time.Time) bool {
	horizon := h.policy.SettleHorizon
	if horizon == 0 {
		horizon = 48 * time.Hour
	}
	return !unsettled.IsZero() && h.now.Sub(unsettled) < horizon
}

func (h *sim) env(by string) Env {
	e := Env{Now: h.now, By: by, Policy: h.policy, Jitter: h.jitter}
	if h.encode {
		e.Encode = func(r RefundRequest) ([]byte, error) { return modelBody(r.RefundNo), nil }
	}
	return e
}

func (h *sim) prefix() string {
	if h.policy.RefundNoPrefix == "" {
		return "R"
	}
	return h.policy.RefundNoPrefix
}

func (h *sim) maxRefunds() int {
	if h.policy.MaxRefunds == 0 {
		return 50
	}
	return h.policy.MaxRefunds
}

func (h *sim) recheck() time.Duration {
	if h.policy.RecheckAfter == 0 {
		return 30 * time.Second
	}
	return h.policy.RecheckAfter
}

func (h *sim) stuckAfter() time.Duration {
	if h.policy.StuckAfter == 0 {
		return 24 * time.Hour
	}
	return h.policy.StuckAfter
}

func (h *sim) hintWindow() time.Duration {
	if h.policy.HintWindow == 0 {
		return time.Minute
	}
	return h.policy.HintWindow
}

func (h *sim) backoff(n int) time.Duration {
	b := h.policy.QueryBackoff
	if b == nil {
		b = []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour}
	}
	return b[min(n, len(b))-1]
}

func (h *sim) maxAttempts() int {
	if h.policy.MaxAttempts == 0 {
		return 5
	}
	return h.policy.MaxAttempts
}

func (h *sim) window() time.Duration {
	if h.policy.RefundWindow == 0 {
		return 365 * 24 * time.Hour
	}
	return h.policy.RefundWindow
}

// retryDelay: a step of RetryBackoff (1s) doubling per attempt up to
// RetryBackoffMax (1m); half of it fixed, half scaled by the jitter.
func (h *sim) retryDelay(attempt int) time.Duration {
	step, ceiling := h.policy.RetryBackoff, h.policy.RetryBackoffMax
	if step == 0 {
		step = time.Second
	}
	if ceiling == 0 {
		ceiling = time.Minute
	}
	for range attempt - 1 {
		step = min(2*step, ceiling)
	}
	step = min(step, ceiling)
	j := h.jitter
	if math.IsNaN(j) || j < 0 || j >= 1 {
		j = 0
	}
	return step/2 + time.Duration(float64(step/2)*j)
}

// spacingWait is how long a submission (any attempt of any refund) made
// now must still wait.
func (h *sim) spacingWait() time.Duration {
	last := h.m.lastCreate
	if h.policy.RefundSpacing == 0 || last.IsZero() || !h.now.Before(last.Add(h.policy.RefundSpacing)) {
		return 0
	}
	return last.Add(h.policy.RefundSpacing).Sub(h.now)
}

func (h *sim) refund(no string) *modelRefund {
	for _, r := range h.m.refunds {
		if r.no == no {
			return r
		}
	}
	return nil
}

// expectation is the model's answer to a command: an error code, or the
// event types and what to do to the model once they are journaled.
type expectation struct {
	code   Code
	types  []string
	commit func(events []Event)
}

func fail(c Code) expectation { return expectation{code: c} }

func (h *sim) predict(cmd Command, by string) expectation {
	m := &h.m
	switch c := cmd.(type) {
	case Register:
		if !m.registered {
			return expectation{types: []string{TypeRegistered}, commit: func([]Event) {
				m.registered, m.amount, m.merchant, h.reg = true, c.Amount, modelMerchant(c), c
			}}
		}
		// Another merchant's registration of the same reservation is a
		// conflict, naming the registered merchant or leaving it to the
		// default alike.
		if c.ReservationID == h.reg.ReservationID && c.Amount == h.reg.Amount && c.UserID == h.reg.UserID &&
			c.OutTradeNo == h.reg.OutTradeNo && c.TransactionID == h.reg.TransactionID && c.PaidAt.Equal(h.reg.PaidAt) &&
			modelMerchant(c) == m.merchant {
			return expectation{}
		}
		return fail(CodeConflict)

	case RequestRefund:
		if c.Amount != nil && *c.Amount <= 0 {
			return fail(CodeInvalid)
		}
		if c.ReasonCode != "" && !slices.Contains(modelReasonCodes, c.ReasonCode) || len(c.Metadata) > 20 {
			return fail(CodeInvalid)
		}
		if !m.registered || c.UserID != h.reg.UserID {
			return fail(CodeNotFound)
		}
		// The model's own idea of "the same request": every field the
		// client sent, metadata in key order (fmt sorts maps).
		fp := fmt.Sprintf("%s|%v|%s|%s|%v", c.UserID, modelAmount(c.Amount), c.Reason, c.ReasonCode, c.Metadata)
		if i, ok := m.byKey[c.IdempotencyKey]; ok {
			if m.refunds[i].fp != fp {
				return fail(CodeIdempotencyKeyReused)
			}
			return expectation{commit: func([]Event) {
				if got := h.s.RefundByKey(c.IdempotencyKey); got == nil || got.No != m.refunds[i].no {
					h.t.Fatalf("replayed key %s does not give refund %s", c.IdempotencyKey, m.refunds[i].no)
				}
			}}
		}
		if m.canceled {
			return fail(CodeCanceled)
		}
		if !h.reg.PaidAt.IsZero() && h.now.Sub(h.reg.PaidAt) > h.window() {
			return fail(CodeRefundWindowClosed)
		}
		if len(m.refunds) >= h.maxRefunds() {
			return fail(CodeRefundLimit)
		}
		left := m.amount - m.held()
		amount := left
		if c.Amount != nil {
			amount = *c.Amount
		}
		if left <= 0 || amount > left {
			return fail(CodeInsufficientRefundable)
		}
		types := []string{TypeRefundRequested}
		approval := h.approvalNeeded(amount, by)
		wait := h.spacingWait()
		switch {
		case approval:
			types = append(types, TypeApprovalRequested)
		case h.encode && wait > 0:
			types = append(types, TypeSubmissionWaits)
		case h.encode:
			types = append(types, TypeSubmissionStarted)
		}
		return expectation{types: types, commit: func(events []Event) {
			n := len(m.refunds) + 1
			d := events[0].Data.(RefundRequested)
			want := RefundRequested{RefundNo: RefundNo(h.prefix(), h.reg.ReservationID, n), Number: n,
				IdempotencyKey: c.IdempotencyKey, Fingerprint: Fingerprint(c), Amount: amount, Reason: c.Reason, ReasonCode: c.ReasonCode, Metadata: NewMetadata(c.Metadata)}
			if d != want {
				h.t.Fatalf("RefundRequested = %+v, want %+v", d, want)
			}
			r := &modelRefund{no: d.RefundNo, key: c.IdempotencyKey, fp: fp,
				amount: amount, state: Processing, created: h.now, requestedBy: by}
			m.refunds = append(m.refunds, r)
			m.byKey[c.IdempotencyKey] = n - 1
			switch {
			case approval:
				a := events[1].Data.(ApprovalRequested)
				var body []byte
				if h.encode {
					body = modelBody(r.no)
				}
				if a.RefundNo != r.no || string(a.Request) != string(body) || !a.DueAt.Equal(h.now.Add(h.approvalTimeout())) || a.Rule == "" {
					h.t.Fatalf("ApprovalRequested %+v, want bytes %q due %v", a, body, h.now.Add(h.approvalTimeout()))
				}
				r.state, r.approval, r.request, r.due = PendingApproval, true, body, a.DueAt
			case h.encode && wait > 0:
				h.deferred(r, modelBody(r.no), wait, events[1])
			case h.encode:
				h.firstSubmission(r, modelBody(r.no), events[1])
			}
		}}

	case Approve:
		r := h.refund(c.RefundNo)
		switch {
		case !m.registered || r == nil:
			return fail(CodeNotFound)
		case !r.approval:
			return fail(CodeInvalidState)
		case personOf(r.requestedBy) == personOf(by):
			return fail(CodeSelfApproval)
		case r.approvedBy != "":
			return expectation{} // a duplicate: the current state answers
		case r.state != PendingApproval, !h.now.Before(r.due):
			return fail(CodeInvalidState)
		}
		types := []string{TypeApproved}
		wait := h.spacingWait()
		switch {
		case r.request == nil:
		case wait > 0:
			types = append(types, TypeSubmissionWaits)
		default:
			types = append(types, TypeSubmissionStarted)
		}
		return expectation{types: types, commit: func(events []Event) {
			if d := events[0].Data.(Approved); d != (Approved{RefundNo: r.no, RequestedBy: r.requestedBy}) {
				h.t.Fatalf("Approved %+v, requested by %q", d, r.requestedBy)
			}
			r.state, r.approvedBy, r.due = Processing, by, time.Time{}
			switch {
			case r.request == nil:
			case wait > 0:
				h.deferred(r, r.request, wait, events[1])
			default:
				h.firstSubmission(r, r.request, events[1])
			}
		}}

	case Reject:
		r := h.refund(c.RefundNo)
		switch {
		case !m.registered || r == nil:
			return fail(CodeNotFound)
		case c.Reason == "" || strings.ContainsRune(c.Reason, '\n'):
			return fail(CodeInvalid)
		case !r.approval:
			return fail(CodeInvalidState)
		case r.closedBy == CodeApprovalRejected:
			return expectation{}
		case r.state != PendingApproval:
			return fail(CodeInvalidState)
		}
		return expectation{types: []string{TypeApprovalRejected}, commit: func(events []Event) {
			if d := events[0].Data.(ApprovalRejected); d != (ApprovalRejected{RefundNo: r.no, RequestedBy: r.requestedBy, Reason: c.Reason}) {
				h.t.Fatalf("ApprovalRejected %+v", d)
			}
			r.state, r.due, r.closedBy = Failed, time.Time{}, CodeApprovalRejected
		}}

	case StartSubmission:
		r := h.refund(c.RefundNo)
		switch {
		case !m.registered || r == nil:
			return fail(CodeNotFound)
		case len(c.Request) == 0:
			return fail(CodeInvalid)
		case r.attempts > 0:
			return expectation{} // sent already: its bytes are fixed
		case r.state != Processing || r.request != nil:
			return fail(CodeInvalidState) // settled, or waiting with its bytes journaled
		}
		if wait := h.spacingWait(); wait > 0 {
			return expectation{types: []string{TypeSubmissionWaits}, commit: func(events []Event) {
				h.deferred(r, c.Request, wait, events[0])
			}}
		}
		return expectation{types: []string{TypeSubmissionStarted}, commit: func(events []Event) {
			h.firstSubmission(r, c.Request, events[0])
		}}

	case Resubmit:
		r := h.refund(c.RefundNo)
		switch {
		case !m.registered || r == nil:
			return fail(CodeNotFound)
		case r.request == nil || (r.state != Rejected && r.state != Unknown):
			return fail(CodeInvalidState)
		}
		return h.resend(r)

	case Abandon:
		r := h.refund(c.RefundNo)
		switch {
		case !m.registered || r == nil:
			return fail(CodeNotFound)
		case strings.ContainsRune(c.Reason, '\n'):
			return fail(CodeInvalid)
		case r.state != Rejected:
			return fail(CodeInvalidState)
		case h.settling(r.unsettled):
			return fail(CodeRefundSettling) // an attempt may still land
		case c.Check == nil || c.Check.At.After(h.now) || h.now.Sub(c.Check.At) > time.Minute || c.Check.Outcome.Kind == OutcomeUnknown:
			return fail(CodeReleaseUnconfirmed)
		case c.Check.Outcome.Kind != OutcomeNotFound:
			return fail(CodeProviderHasRefund)
		}
		return expectation{types: []string{TypeProviderResult, TypeAbandoned}, commit: func(events []Event) {
			if d := events[0].Data.(ProviderResult); d.Outcome != OutcomeNotFound || d.Source != SourceQuery || d.From != Rejected || d.To != Rejected {
				h.t.Fatalf("abandon journaled %+v, want the query's NOT_FOUND", d)
			}
			r.state, r.due = Failed, time.Time{}
		}}

	case Resolve:
		r := h.refund(c.RefundNo)
		switch {
		case !m.registered || r == nil:
			return fail(CodeNotFound)
		case c.Reason == "" || strings.ContainsRune(c.Reason, '\n'):
			return fail(CodeInvalid)
		case r.state != Abnormal:
			return fail(CodeInvalidState)
		}
		cancels := m.succeeded()+r.amount == m.amount
		types := []string{TypeResolved}
		if cancels {
			types = append(types, TypeCanceled)
		}
		return expectation{types: types, commit: func(events []Event) {
			if d := events[0].Data.(Resolved); d != (Resolved{RefundNo: r.no, Reason: c.Reason}) {
				h.t.Fatalf("Resolved %+v", d)
			}
			r.state, r.due, r.retry, r.resolved = Succeeded, time.Time{}, false, true
			m.canceled = m.canceled || cancels
		}}

	case ApplyAbnormal:
		r := h.refund(c.RefundNo)
		switch {
		case !m.registered || r == nil:
			return fail(CodeNotFound)
		case c.Type != AbnormalUserBankCard && c.Type != AbnormalMerchantBankCard:
			return fail(CodeInvalid)
		case r.state != Abnormal && r.abnormalType != "":
			return expectation{} // applied already
		case r.state != Abnormal || r.providerID == "":
			return fail(CodeInvalidState)
		}
		return expectation{types: []string{TypeAbnormalApplied}, commit: func([]Event) {
			// Held as it was: ABNORMAL and PROCESSING both hold.
			r.state, r.due, r.retry, r.abnormalType = Processing, h.now.Add(h.recheck()), false, c.Type
		}}

	case RecordOutcome:
		r := h.refund(c.RefundNo)
		o := c.Outcome
		switch {
		case !m.registered || r == nil:
			return fail(CodeNotFound)
		case c.Source == SourceNotification && modelMerchantName(c.Merchant) != m.merchant:
			// Another merchant's notification changes nothing.
			return fail(CodeOutcomeMismatch)
		case !slices.Contains(allKinds, o.Kind):
			return fail(CodeInvalid)
		case (c.Source == SourceNotification || c.Source == SourceQuery) &&
			(o.Kind == OutcomeSucceeded || o.Kind == OutcomeFailed || o.Kind == OutcomeAbnormal || o.Kind == OutcomeProcessing) &&
			(o.ProviderID == "" || o.OutTradeNo != h.reg.OutTradeNo || o.RefundAmount != r.amount || o.TotalAmount != m.amount):
			// A refund object from a notification or query is complete.
			return fail(CodeOutcomeMismatch)
		case o.OutTradeNo != "" && o.OutTradeNo != h.reg.OutTradeNo,
			o.RefundAmount != 0 && o.RefundAmount != r.amount,
			o.TotalAmount != 0 && o.TotalAmount != m.amount,
			o.ProviderID != "" && r.providerID != "" && o.ProviderID != r.providerID:
			return fail(CodeOutcomeMismatch)
		}
		if r.approval && r.approvedBy == "" {
			// Never approved, so never sent: no outcome can be about it. A final one is a
			// conflict for operators, once.
			want := Conflict{RefundNo: r.no, State: r.state, Source: c.Source, Outcome: o.Kind, Code: o.Code, ProviderID: o.ProviderID}
			if (o.Kind != OutcomeSucceeded && o.Kind != OutcomeFailed && o.Kind != OutcomeAbnormal) || want == r.conflict {
				return expectation{}
			}
			return expectation{types: []string{TypeConflict}, commit: func([]Event) { r.conflict = want }}
		}
		to, what := h.modelOutcome(r, o.Kind, c.Source, c.Attempt == r.attempts, o.ProviderID != "" && r.providerID == "")
		// A refusal of the latest attempt says that attempt created nothing.
		unsettledAfter := r.unsettled
		refusedLatest := c.Source == SourceResponse && o.Kind == OutcomeRejected && c.Attempt > 0 && c.Attempt == r.attempts
		if refusedLatest {
			unsettledAfter = r.prior
		}
		switch what {
		case "":
			return expectation{}
		case "conflict":
			want := Conflict{RefundNo: r.no, State: r.state, Source: c.Source, Outcome: o.Kind, Code: o.Code, ProviderID: o.ProviderID}
			if want == r.conflict {
				return expectation{} // the same contradiction again is no news
			}
			return expectation{types: []string{TypeConflict}, commit: func(events []Event) {
				if d := events[0].Data.(Conflict); d != want {
					h.t.Fatalf("conflict %+v for a %s refund, want %+v", d, r.state, want)
				}
				r.conflict = want
			}}
		case "resend":
			return h.resend(r)
		}
		// The next due time the result carries, if any.
		var due time.Time
		switch {
		case what == "retry":
			due = h.now.Add(max(h.retryDelay(r.attempts), h.spacingWait()))
		case what == "stopretry":
			due = h.now.Add(h.recheck())
		case to == Abnormal && r.state != Abnormal:
			due = h.now.Add(h.backoff(r.queries + 1)) // reconciled like a waiting refund
		case (to == Processing || to == Unknown) && r.due.IsZero():
			due = h.now.Add(h.recheck()) // waiting on the provider again
		case to == Rejected && h.settling(unsettledAfter):
			due = r.due // not resent, but still queried
			if due.IsZero() {
				due = h.now.Add(h.backoff(r.queries + 1))
			}
		}
		cancels := to == Succeeded && m.succeeded()+r.amount == m.amount
		types := []string{TypeProviderResult}
		if cancels {
			types = append(types, TypeCanceled)
		}
		return expectation{types: types, commit: func(events []Event) {
			d := events[0].Data.(ProviderResult)
			if d.From != r.state || d.To != to || d.Outcome != o.Kind || d.Source != c.Source || d.Attempt != c.Attempt ||
				!d.DueAt.Equal(due) || d.Retry != (what == "retry") {
				h.t.Fatalf("ProviderResult %+v, model expected %s -> %s due %v (%s)", d, r.state, to, due, what)
			}
			if cancels && events[1].Data.(Canceled).Refunded != m.amount {
				h.t.Fatalf("Canceled %+v, want %d", events[1].Data, m.amount)
			}
			r.paidLate = r.paidLate || r.state == Failed && to == Succeeded
			r.unsettled = unsettledAfter
			r.state = to
			if o.ProviderID != "" {
				r.providerID = o.ProviderID
			}
			switch {
			case to.Terminal() || to == Rejected && due.IsZero():
				r.due, r.retry = time.Time{}, false
			case !due.IsZero():
				r.due, r.retry = due, what == "retry"
			}
			m.canceled = m.canceled || cancels
		}}

	case CheckProvider:
		r := h.refund(c.RefundNo)
		switch {
		case !m.registered || r == nil:
			return fail(CodeNotFound)
		case !c.Operator && modelMerchantName(c.Merchant) != m.merchant:
			// Another merchant's hint asks nothing.
			return fail(CodeOutcomeMismatch)
		case r.state.Terminal() || r.attempts == 0:
			return expectation{} // settled, or nothing to ask about yet
		case !c.Operator && !r.queriedAt.IsZero() && !h.now.Before(r.queriedAt) && h.now.Before(r.queriedAt.Add(h.hintWindow())):
			return expectation{} // a query just started: a hint only repeats it
		}
		return expectation{types: []string{TypeQueryStarted}, commit: func(events []Event) {
			r.queries++
			r.due, r.retry = h.now.Add(h.backoff(r.queries)), false
			r.queriedAt = h.now
		}}

	case FireTimer:
		r := h.refund(c.RefundNo)
		switch {
		case !m.registered || r == nil:
			return fail(CodeNotFound)
		case r.state == PendingApproval && r.due.Equal(c.DueAt):
			return expectation{types: []string{TypeApprovalExpired}, commit: func([]Event) {
				r.state, r.due, r.closedBy = Failed, time.Time{}, CodeApprovalExpired
			}}
		case r.due.IsZero() || !r.due.Equal(c.DueAt) || (r.state != Processing && r.state != Unknown && r.state != Abnormal && r.state != Rejected):
			return expectation{} // stale
		case r.retry && r.state == Processing:
			switch wait := h.spacingWait(); {
			case r.request == nil:
				return expectation{} // nothing journaled to send
			case r.attempts > 0:
				return h.resend(r)
			case wait > 0:
				return expectation{types: []string{TypeSubmissionWaits}, commit: func(events []Event) {
					h.deferred(r, r.request, wait, events[0])
				}}
			}
			return expectation{types: []string{TypeSubmissionStarted}, commit: func(events []Event) {
				h.firstSubmission(r, r.request, events[0])
			}}
		}
		var types []string
		stuck := !r.stuck && h.now.Sub(r.created) >= h.stuckAfter()
		if stuck {
			types = append(types, TypeFlaggedStuck)
		}
		types = append(types, TypeQueryStarted)
		return expectation{types: types, commit: func(events []Event) {
			d := events[len(events)-1].Data.(QueryStarted)
			r.queries++
			r.due, r.retry = h.now.Add(h.backoff(r.queries)), false
			r.queriedAt = h.now
			if d.Query != r.queries || !d.DueAt.Equal(r.due) {
				h.t.Fatalf("QueryStarted %+v, want query %d due %v", d, r.queries, r.due)
			}
			r.stuck = r.stuck || stuck
		}}
	}
	h.t.Fatalf("predict: unexpected command %T", cmd)
	return expectation{}
}

// resend expects the refund's next attempt with its first bytes: now, or
// when the spacing after the order's last submission ends.
func (h *sim) resend(r *modelRefund) expectation {
	if wait := h.spacingWait(); wait > 0 {
		return expectation{types: []string{TypeSubmissionWaits}, commit: func(events []Event) {
			h.deferred(r, r.request, wait, events[0])
		}}
	}
	return expectation{types: []string{TypeSubmissionStarted}, commit: func(events []Event) {
		h.resent(r, events[0])
	}}
}

// deferred records a submission (first or later) held back by spacing: the
// refund waits as PROCESSING for its timer.
func (h *sim) deferred(r *modelRefund, request []byte, wait time.Duration, e Event) {
	d := e.Data.(SubmissionScheduled)
	if d.RefundNo != r.no || string(d.Request) != string(request) || !d.DueAt.Equal(h.now.Add(wait)) {
		h.t.Fatalf("SubmissionScheduled %+v, want %q due in %v", d, request, wait)
	}
	r.state, r.request, r.due, r.retry = Processing, request, h.now.Add(wait), true
}

// created records a submission, which must come the spacing after the
// order's previous one, whichever refund and attempt that was.
func (h *sim) created(r *modelRefund) {
	if sp, last := h.policy.RefundSpacing, h.m.lastCreate; sp > 0 && !last.IsZero() && h.now.Sub(last) < sp {
		h.t.Fatalf("%s attempt %d sent at %v, %v after the order's previous submission", r.no, r.attempts, h.now, h.now.Sub(last))
	}
	h.m.lastCreate = h.now
}

// firstSubmission records attempt 1, which must respect the spacing.
func (h *sim) firstSubmission(r *modelRefund, request []byte, e Event) {
	d := e.Data.(SubmissionStarted)
	if d.Attempt != 1 || string(d.Request) != string(request) || !d.DueAt.Equal(h.now.Add(h.recheck())) {
		h.t.Fatalf("first submission %+v, want %q", d, request)
	}
	r.request, r.attempts, r.due, r.retry, r.submittedAt = request, 1, h.now.Add(h.recheck()), false, h.now
	r.prior, r.unsettled = r.unsettled, h.now
	h.created(r)
}

// resent records a new submission attempt that reuses the first bytes.
func (h *sim) resent(r *modelRefund, e Event) {
	d := e.Data.(SubmissionStarted)
	r.attempts++
	r.state, r.due, r.retry = Processing, h.now.Add(h.recheck()), false
	r.prior, r.unsettled = r.unsettled, h.now
	if r.attempts == 1 {
		r.submittedAt = h.now // an operator's resubmission of a refund never sent
	}
	if d.Attempt != r.attempts || len(d.Request) != 0 || !d.DueAt.Equal(r.due) {
		h.t.Fatalf("resubmission %+v, want attempt %d without bytes", d, r.attempts)
	}
	h.created(r)
}

// exec decides cmd on the live state, journals and applies the events, and
// checks the outcome against the model.
func (h *sim) exec(cmd Command, by string) {
	t := h.t
	want := h.predict(cmd, by)
	env := h.env(by)
	before := h.s.Clone()
	events, err := Decide(h.s, cmd, env)
	assertSameState(t, before, h.s) // Decide never mutates
	if got := CodeOf(err); got != want.code || (err != nil && got == "") {
		t.Fatalf("%T %+v: error %v (code %q), model wants code %q", cmd, cmd, err, got, want.code)
	}
	if err != nil && events != nil {
		t.Fatalf("%T: events %v together with error %v", cmd, types(events), err)
	}
	if got := types(events); !slices.Equal(got, want.types) {
		t.Fatalf("%T %+v: events %v, model wants %v", cmd, cmd, got, want.types)
	}
	for _, e := range events {
		if !e.At.Equal(env.Now) || e.At.Location() != env.Now.Location() || e.By != env.By {
			t.Fatalf("event %s At=%v By=%q, env %v %q", e.Data.EventType(), e.At, e.By, env.Now, env.By)
		}
		typ, ver, data, err := Encode(e)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		back, err := Decode(typ, ver, data)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("codec round trip changed the event:\n%#v\n%#v", e, back)
		}
		dues := map[string]time.Time{}
		for _, r := range h.s.Refunds {
			dues[r.No] = r.DueAt
		}
		Apply(h.s, e)
		// DueEffect must say exactly what Apply did to due times.
		no, at, set := DueEffect(e.Data)
		for _, r := range h.s.Refunds {
			want := dues[r.No]
			if set && r.No == no {
				want = at
			}
			if !r.DueAt.Equal(want) {
				t.Fatalf("%s left refund %s due %v (before %v) but DueEffect says %q %v %v", e.Data.EventType(), r.No, r.DueAt, dues[r.No], no, at, set)
			}
		}
		// Every due time Apply sets must be visible to the adapters that
		// index due times, through DueOf.
		for _, r := range h.s.Refunds {
			if !r.DueAt.IsZero() && !r.DueAt.Equal(dues[r.No]) {
				no, at, ok := DueOf(e.Data)
				if !ok || no != r.No || !at.Equal(r.DueAt) {
					t.Fatalf("%s set refund %s due %v but DueOf says %q %v %v", e.Data.EventType(), r.No, r.DueAt, no, at, ok)
				}
			}
		}
		// The attention index kept from AttentionOf alone must equal what
		// the state says.
		if no, add, remove := AttentionOf(e.Data); no != "" {
			for _, k := range remove {
				delete(h.attention, k+"/"+no)
			}
			for _, k := range add {
				h.attention[k+"/"+no] = true
			}
		}
		fromState := map[string]bool{}
		for _, r := range h.s.Refunds {
			for _, k := range r.Attention() {
				fromState[k+"/"+r.No] = true
			}
		}
		if !reflect.DeepEqual(fromState, h.attention) {
			t.Fatalf("after %s the attention index is %v, the state says %v", e.Data.EventType(), h.attention, fromState)
		}
		// WeChat Pay's spacing, on the journal itself: no two create
		// requests of the order closer than RefundSpacing, and the state
		// knows the last one.
		if d, ok := e.Data.(ProviderResult); ok && h.firstSends[d.RefundNo] == 0 {
			h.answeredUnsent[d.RefundNo] = true
		}
		if d, ok := e.Data.(SubmissionStarted); ok && d.Attempt == 1 {
			h.firstSends[d.RefundNo]++
			r := h.s.Refund(d.RefundNo)
			if h.firstSends[d.RefundNo] > 1 || r.ApprovalRequired && r.ApprovedBy == "" {
				t.Fatalf("refund %s sent a first time again (%d), or unapproved (%+v)", d.RefundNo, h.firstSends[d.RefundNo], *r)
			}
		}
		if _, ok := e.Data.(SubmissionStarted); ok {
			if sp := h.policy.RefundSpacing; sp > 0 && !h.lastStart.IsZero() && e.At.Sub(h.lastStart) < sp {
				t.Fatalf("%s %+v at %v, %v after the previous SubmissionStarted", e.Data.EventType(), e.Data, e.At, e.At.Sub(h.lastStart))
			}
			h.lastStart = e.At
		}
		if !h.s.LastCreateAt.Equal(h.lastStart) {
			t.Fatalf("after %s LastCreateAt is %v, the last SubmissionStarted was at %v", e.Data.EventType(), h.s.LastCreateAt, h.lastStart)
		}
		Apply(h.replayed, e)
		Apply(h.decoded, back)
		h.journal = append(h.journal, e)
		h.stored = append(h.stored, back)
	}
	// A due index kept as the adapters keep it (DueOf's times put, then
	// DroppedDues' times deleted, in one write) holds exactly the live
	// due times: nothing superseded is left to fire.
	for _, e := range events {
		if no, at, ok := DueOf(e.Data); ok {
			h.dueIndex[DueTime{RefundNo: no, At: at.UTC()}] = true
		}
	}
	for _, d := range DroppedDues(before, events) {
		if !h.dueIndex[DueTime{RefundNo: d.RefundNo, At: d.At.UTC()}] {
			t.Fatalf("%T: DroppedDues names %s %v, which the index does not hold", cmd, d.RefundNo, d.At)
		}
		delete(h.dueIndex, DueTime{RefundNo: d.RefundNo, At: d.At.UTC()})
	}
	live := map[DueTime]bool{}
	for _, r := range h.s.Refunds {
		if !r.DueAt.IsZero() {
			live[DueTime{RefundNo: r.No, At: r.DueAt.UTC()}] = true
		}
	}
	if !maps.Equal(live, h.dueIndex) {
		t.Fatalf("after %T the due index is %v, the live due times are %v", cmd, h.dueIndex, live)
	}
	// AppendIndexes, what the event store writes, is exactly the pieces
	// checked above, in event order.
	var pieces IndexChanges
	for _, e := range events {
		if no, at, ok := DueOf(e.Data); ok {
			pieces.Dues = append(pieces.Dues, DueTime{RefundNo: no, At: at})
		}
		if no, add, remove := AttentionOf(e.Data); no != "" {
			for _, k := range remove {
				pieces.Marks = append(pieces.Marks, Mark{Kind: k, RefundNo: no, Clear: true})
			}
			for _, k := range add {
				pieces.Marks = append(pieces.Marks, Mark{Kind: k, RefundNo: no})
			}
		}
	}
	pieces.Dropped = DroppedDues(before, events)
	ix := AppendIndexes(IndexChanges{}, before, events)
	// AppendKeyIndexes, what the audit replays with, is the same but for
	// the rows, which it leaves as given.
	keyed := AppendKeyIndexes(IndexChanges{Rows: []ListRow{{RefundNo: "given"}}}, before, events)
	if len(keyed.Rows) != 1 || keyed.Rows[0].RefundNo != "given" {
		t.Fatalf("after %T AppendKeyIndexes changed the rows: %+v", cmd, keyed.Rows)
	}
	keyed.Rows = ix.Rows
	if !reflect.DeepEqual(keyed, ix) {
		t.Fatalf("after %T AppendKeyIndexes gives %+v, AppendIndexes %+v", cmd, keyed, ix)
	}
	ix.Claims = nil
	// The search index, kept from Search alone, finds the reservation by
	// every id it holds, and the refunds by WeChat's refund_id.
	for _, k := range ix.Search {
		h.searchIndex[k] = true
	}
	ix.Search = nil
	// The list index, kept from Rows alone (clears first, in order), holds
	// exactly the rows of the state.
	for _, r := range ix.Rows {
		clear := r.Clear
		r.Clear = false
		r.At, r.UpdatedAt = r.At.UTC(), r.UpdatedAt.UTC()
		if clear {
			if !h.listIndex[r] {
				t.Fatalf("after %T Rows clears %+v, which the index does not hold", cmd, r)
			}
			delete(h.listIndex, r)
		} else {
			h.listIndex[r] = true
		}
	}
	ix.Rows = nil
	wantRows := map[ListRow]bool{}
	for _, r := range ListRows(nil, h.s) {
		r.At, r.UpdatedAt = r.At.UTC(), r.UpdatedAt.UTC()
		wantRows[r] = true
	}
	if !maps.Equal(wantRows, h.listIndex) {
		t.Fatalf("after %T the list index is %+v, the state's rows are %+v", cmd, h.listIndex, wantRows)
	}
	if s := h.s; s.Registered() {
		want := []SearchKey{{SearchUserID, s.UserID, "", s.Merchant}, {SearchTransactionID, s.TransactionID, "", s.Merchant}}
		for _, r := range s.Refunds {
			want = append(want, SearchKey{SearchProviderRefundID, r.ProviderID, r.No, s.Merchant})
		}
		for _, k := range want {
			if k.Value != "" && !h.searchIndex[k] {
				t.Fatalf("after %T the search index %v lacks %+v", cmd, h.searchIndex, k)
			}
		}
	}
	if !reflect.DeepEqual(ix, pieces) {
		t.Fatalf("after %T AppendIndexes = %+v, its pieces say %+v", cmd, ix, pieces)
	}
	if want.commit != nil {
		want.commit(events)
	}
	h.lastCmd, h.lastBy = cmd, by
}

// restart rebuilds the state from the stored (encoded and decoded) journal
// and continues from it, as an actor does after a crash or passivation.
func (h *sim) restart() {
	h.s = Replay(h.stored)
}

// check verifies every invariant after a step.
func (h *sim) check() {
	t, s, m := h.t, h.s, &h.m
	if s.Version != uint64(len(h.journal)) {
		t.Fatalf("Version %d after %d events", s.Version, len(h.journal))
	}
	// Replaying the journal, raw or through the codec, rebuilds the live state.
	for name, r := range map[string]*State{"journal": h.replayed, "stored": h.decoded} {
		if !reflect.DeepEqual(exported(r), exported(s)) {
			t.Fatalf("replay of %s differs:\nlive   %s\nreplay %s", name, dump(s), dump(r))
		}
	}
	if s.Registered() != m.registered {
		t.Fatalf("registered %v, model %v", s.Registered(), m.registered)
	}
	if !m.registered {
		return
	}
	if s.Merchant != m.merchant {
		t.Fatalf("merchant %q, model %q", s.Merchant, m.merchant)
	}
	// Money.
	if s.Refunded()+s.InFlight() > s.Amount || s.Refundable() < 0 {
		t.Fatalf("over-claimed: refunded %d + in-flight %d > paid %d", s.Refunded(), s.InFlight(), s.Amount)
	}
	if (s.Status == StatusCanceled) != (s.Refunded() == s.Amount) {
		t.Fatalf("status %s with refunded %d of %d", s.Status, s.Refunded(), s.Amount)
	}
	if s.Refunded() != m.succeeded() || s.InFlight() != m.held()-m.succeeded() || s.Refundable() != m.amount-m.held() ||
		m.canceled != (s.Status == StatusCanceled) || s.Amount != m.amount {
		t.Fatalf("money: refunded %d in-flight %d refundable %d %s; model succeeded %d held %d canceled %v",
			s.Refunded(), s.InFlight(), s.Refundable(), s.Status, m.succeeded(), m.held(), m.canceled)
	}
	// Refunds, numbers and keys.
	if len(s.Refunds) != len(m.refunds) {
		t.Fatalf("%d refunds, model %d", len(s.Refunds), len(m.refunds))
	}
	nos, keys := map[string]bool{}, map[string]bool{}
	var next time.Time
	for i, r := range s.Refunds {
		mr := m.refunds[i]
		if r.No != mr.no || r.Number != i+1 || nos[r.No] || !ValidRefundNo(r.No) {
			t.Fatalf("refund %d number %q (number %d), model %q, seen %v", i, r.No, r.Number, mr.no, nos[r.No])
		}
		nos[r.No] = true
		if p, id, n, ok := ParseRefundNo(r.No); !ok || p != h.prefix() || id != h.reg.ReservationID || n != i+1 {
			t.Fatalf("ParseRefundNo(%q) = %q %q %d %v", r.No, p, id, n, ok)
		}
		if keys[r.IdempotencyKey] || s.RefundByKey(r.IdempotencyKey) != r || s.Refund(r.No) != r || m.byKey[r.IdempotencyKey] != i {
			t.Fatalf("key %q does not map to exactly refund %s", r.IdempotencyKey, r.No)
		}
		keys[r.IdempotencyKey] = true
		if r.State != mr.state || r.Amount != mr.amount || r.Attempts != mr.attempts || r.Queries != mr.queries ||
			r.ProviderID != mr.providerID || !r.QueriedAt.Equal(mr.queriedAt) || r.LastConflict != mr.conflict || r.Stuck != mr.stuck || !r.DueAt.Equal(mr.due) || r.Retry != mr.retry ||
			!r.SubmittedAt.Equal(mr.submittedAt) || string(r.Request) != string(mr.request) || !r.CreatedAt.Equal(mr.created) ||
			mr.resolved != (r.Code == "RESOLVED_BY_OPERATOR") || !r.UnsettledAt.Equal(mr.unsettled) || r.PaidAfterFailed != mr.paidLate ||
			r.ApprovalRequired != mr.approval || r.ApprovedBy != mr.approvedBy || r.RequestedBy != mr.requestedBy || r.AbnormalType != mr.abnormalType ||
			(mr.closedBy != "") != (r.Code == CodeApprovalRejected || r.Code == CodeApprovalExpired) || (mr.closedBy != "" && r.Code != mr.closedBy) {
			t.Fatalf("refund %s = %+v\nmodel %+v", r.No, *r, *mr)
		}
		if prev, ok := h.terminal[r.No]; ok && r.State != prev && !(prev == Failed && r.State == Succeeded && mr.paidLate) {
			t.Fatalf("terminal refund %s moved %s -> %s", r.No, prev, r.State)
		}
		if r.State.Terminal() {
			h.terminal[r.No] = r.State
		}
		// One number, one body: the bytes never change once journaled.
		if first, ok := h.bodies[r.No]; ok && first != string(r.Request) {
			t.Fatalf("refund %s body changed %q -> %q", r.No, first, r.Request)
		} else if len(r.Request) > 0 {
			h.bodies[r.No] = string(r.Request)
		}
		// Four eyes: a refund not approved was never sent, and one that
		// waits for approval expires at its due time.
		if r.ApprovalRequired && r.ApprovedBy == "" && (r.Attempts > 0 || h.firstSends[r.No] > 0) {
			t.Fatalf("refund %s was sent without approval: %+v", r.No, *r)
		}
		if r.State == PendingApproval && r.DueAt.IsZero() {
			t.Fatalf("refund %s waits for approval with no expiry", r.No)
		}
		if r.ApprovedBy != "" && SamePerson(r.ApprovedBy, r.RequestedBy) {
			t.Fatalf("refund %s approved by its requester %s", r.No, r.ApprovedBy)
		}
		// Liveness: whatever waits on the provider, or on its turn to be
		// sent, is looked at again.
		waiting := r.State == Processing || r.State == Unknown || r.State == Abnormal
		if waiting && (r.Attempts > 0 || len(r.Request) > 0 || r.State == Abnormal) && r.DueAt.IsZero() {
			t.Fatalf("refund %s is %s with no due time: nothing will look at it again", r.No, r.State)
		}
		// And so is a REJECTED refund while an attempt may still land.
		if r.State == Rejected && h.settling(mr.unsettled) && r.DueAt.IsZero() {
			t.Fatalf("refund %s is REJECTED, an attempt may land until %v, and nothing will ask WeChat", r.No, mr.unsettled)
		}
		if r.Retry && (r.DueAt.IsZero() || r.State.Terminal() || r.State == Rejected) {
			t.Fatalf("refund %s is %s with a retry due %v", r.No, r.State, r.DueAt)
		}
		if !r.DueAt.IsZero() && (next.IsZero() || r.DueAt.Before(next)) {
			next = r.DueAt
		}
		h.checkNext(r)
	}
	if !s.NextDue().Equal(next) {
		t.Fatalf("NextDue %v, want %v", s.NextDue(), next)
	}
}

// checkNext checks NextOf on refund r: final exactly when the state is,
// its time the refund's due time, and each action listed exactly when
// Decide, asked by an approver who is not the requester, journals
// something for it.
func (h *sim) checkNext(r *Refund) {
	t := h.t
	n := NextOf(r, h.policy, h.now)
	if (n.Kind == NextNone) != r.State.Terminal() || (!r.State.Terminal() && !n.At.Equal(r.DueAt)) || n.Why == "" || n.AttemptsLeft < 0 {
		t.Fatalf("NextOf(%s %s) = %+v", r.No, r.State, n)
	}
	commands := map[string]Command{
		ActionReconcile: CheckProvider{RefundNo: r.No, Operator: true},
		ActionResubmit:  Resubmit{RefundNo: r.No},
		ActionAbandon: Abandon{RefundNo: r.No, Reason: "prop", Check: &ProviderCheck{At: h.now,
			Outcome: Outcome{Kind: OutcomeNotFound}}},
		ActionResolve:       Resolve{RefundNo: r.No, Reason: "prop"},
		ActionApplyAbnormal: ApplyAbnormal{RefundNo: r.No, Type: AbnormalMerchantBankCard},
		ActionApprove:       Approve{RefundNo: r.No},
		ActionReject:        Reject{RefundNo: r.No, Reason: "prop"},
	}
	for _, action := range []string{ActionReconcile, ActionResubmit, ActionAbandon, ActionResolve, ActionApplyAbnormal, ActionApprove, ActionReject} {
		events, err := Decide(h.s, commands[action], h.env("approver:zz-property"))
		if decided, listed := err == nil && len(events) > 0, slices.Contains(n.Actions, action); decided != listed {
			t.Fatalf("refund %s %s: %s listed %v, Decide: %d events, %v", r.No, r.State, action, listed, len(events), err)
		}
	}
}

// drain lets the engine run with a provider that answers every submission
// "unknown": each pending retry and deferred submission is fired when due.
// It must end within a bounded number of rounds, every automatic retry
// used up, with no refund resubmitting forever. Under the spacing a fire
// may only wait again, and only because another submission went out since
// its due time was set: each refund's attempts (at most maxAttempts, plus
// the one it may have been waiting to send) take at most two fires each.
func (h *sim) drain() {
	for round := 0; ; round++ {
		var pending []*modelRefund
		for _, r := range h.m.refunds {
			if r.retry && r.request != nil {
				pending = append(pending, r)
			}
		}
		if len(pending) == 0 {
			// Every approved refund still waiting on the provider was
			// sent, once, unless an outcome reached it first
			// (answeredUnsent).
			for _, r := range h.s.Refunds {
				if r.ApprovedBy != "" && len(r.Request) > 0 && r.State == Processing && h.firstSends[r.No] != 1 && !h.answeredUnsent[r.No] {
					h.t.Fatalf("approved refund %s (%s) was sent %d times", r.No, r.State, h.firstSends[r.No])
				}
			}
			return
		}
		if round > 2*len(h.m.refunds)*(h.maxAttempts()+1)+1 {
			h.t.Fatalf("still %d refunds to send after %d rounds", len(pending), round)
		}
		for _, r := range pending {
			if r.due.After(h.now) {
				h.now = r.due
			}
			h.exec(FireTimer{RefundNo: r.no, DueAt: r.due}, "engine")
			if r.state == Processing && r.attempts > 0 && !r.retry {
				h.exec(RecordOutcome{RefundNo: r.no, Source: SourceResponse, Attempt: r.attempts, Outcome: Outcome{Kind: OutcomeUnknown}}, "provider:wechatpay")
			}
			h.check()
		}
	}
}

var (
	propIDs  = []string{"r1", "resv-2025-000001", "a-" + strings.Repeat("Z9_-", 9) + "xy"}
	propKeys = []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	// Merchants: none named (the default), the default by name, others.
	propMerchants = []string{"", "default", "hotel-sh", "hotel-bj"}
	reasons       = []string{"", "trip canceled", "重复预订"}
	// The core's closed set, written out again so a change to it shows here.
	modelReasonCodes = []string{"requested_by_customer", "duplicate", "fraudulent", "canceled_by_merchant", "service_not_provided", "other"}
)

// uniform draws 0..n-1 with even odds. rapid's own integers and SampledFrom
// favour the ends of a range, which would make the weights below guesses.
// It still shrinks towards 0.
func uniform(n int) *rapid.Generator[int] {
	return rapid.Custom(func(t *rapid.T) int {
		v := 0
		for range bits.Len(uint(n-1)) + 3 { // spare bits keep the modulo bias small
			v <<= 1
			if rapid.Bool().Draw(t, "bit") {
				v |= 1
			}
		}
		return v % n
	})
}

// oneOf draws one of items with even odds.
func oneOf[V any](t *rapid.T, label string, items ...V) V {
	return items[uniform(len(items)).Draw(t, label)]
}

// chance reports true with probability num/den.
func chance(t *rapid.T, label string, num, den int) bool {
	return uniform(den).Draw(t, label) < num
}

// weighted draws a name; each comes with its weight.
func weighted(t *rapid.T, label string, choices ...any) string {
	total := 0
	for i := 1; i < len(choices); i += 2 {
		total += choices[i].(int)
	}
	v := uniform(total).Draw(t, label)
	for i := 0; i < len(choices); i += 2 {
		if v -= choices[i+1].(int); v < 0 {
			return choices[i].(string)
		}
	}
	panic("weighted: unreachable")
}

// pickRefund returns the number of a known refund, mostly one that is not
// settled yet, or now and then one that does not exist.
// notifiedMerchant is the merchant a notification says it is for: mostly
// the reservation's (by name, or none for the default), now and then
// another merchant's.
func (h *sim) notifiedMerchant(t *rapid.T) string {
	if chance(t, "otherMerchant", 1, 10) {
		return oneOf(t, "notifiedMerchant", propMerchants...)
	}
	if h.m.merchant == "default" && chance(t, "defaultUnnamed", 1, 2) {
		return ""
	}
	return h.m.merchant
}

func (h *sim) pickRefund(t *rapid.T) string {
	n := len(h.m.refunds)
	var open []string
	for _, r := range h.m.refunds {
		if !r.state.Terminal() {
			open = append(open, r.no)
		}
	}
	switch {
	case n == 0 || chance(t, "unknownRefund", 1, 30):
		return RefundNo(h.prefix(), h.reg.ReservationID, n+1+uniform(3).Draw(t, "beyond"))
	case len(open) > 0 && chance(t, "open", 4, 5):
		return open[uniform(len(open)).Draw(t, "which")]
	}
	return h.m.refunds[uniform(n).Draw(t, "which")].no
}

func (h *sim) step(t *rapid.T) {
	// The adapter draws the jitter in [0, 1); now and then it is out of
	// range, which must count as 0.
	h.jitter = oneOf(t, "jitter", 0, 0.5, 0.999, 0.25, 1, math.NaN())
	action := weighted(t, "action",
		"outcome", 32, "request", 16, "timer", 16, "advance", 8, "start", 3, "resubmit", 5,
		"abandon", 4, "resolve", 4, "applyAbnormal", 4, "check", 3, "restart", 6, "duplicate", 8, "register", 3, "approve", 6, "reject", 3)
	switch action {
	case "register":
		c := h.reg
		if chance(t, "conflicting", 1, 2) {
			c.Amount++
		}
		if chance(t, "otherMerchant", 1, 3) {
			c.Merchant = oneOf(t, "merchant", propMerchants...)
		}
		h.exec(c, "system:booking")

	case "request":
		c := RequestRefund{UserID: h.reg.UserID, Reason: oneOf(t, "reason", reasons...)}
		c.ReasonCode = oneOf(t, "reasonCode", "", "", "duplicate", "other", "not_a_code")
		switch weighted(t, "metadata", "none", 6, "one", 2, "other", 1, "tooMany", 1) {
		case "one":
			c.Metadata = map[string]string{"order": "o-1"}
		case "other":
			c.Metadata = map[string]string{"order": "o-2", "agent": "a"}
		case "tooMany":
			c.Metadata = map[string]string{}
			for i := range 21 {
				c.Metadata[fmt.Sprint("k", i)] = "v"
			}
		}
		if chance(t, "intruder", 1, 12) {
			c.UserID = "intruder"
		}
		if chance(t, "freshKey", 1, 3) {
			h.keys++
			c.IdempotencyKey = fmt.Sprintf("fresh-%d", h.keys)
		} else {
			c.IdempotencyKey = oneOf(t, "key", propKeys...)
		}
		switch weighted(t, "amount", "all", 2, "share", 6, "small", 2, "any", 1, "invalid", 1) {
		case "all": // omitted: everything still refundable
		case "share":
			c.Amount = ptr(max(1, h.reg.Amount/int64(2+uniform(9).Draw(t, "share"))))
		case "small":
			c.Amount = ptr(int64(1 + uniform(3).Draw(t, "small")))
		case "any":
			c.Amount = ptr(rapid.Int64Range(1, h.reg.Amount+1).Draw(t, "any"))
		case "invalid":
			c.Amount = ptr(int64(-uniform(2).Draw(t, "invalid")))
		}
		n := len(h.m.refunds)
		h.exec(c, oneOf(t, "requester", "service:booking", "service:booking", "operator:alice", "operator:dave"))
		// The engine journals the first submission in the same append.
		if len(h.m.refunds) > n && chance(t, "submitNow", 9, 10) {
			no := h.m.refunds[n].no
			h.exec(StartSubmission{RefundNo: no, Request: []byte(`{"out_refund_no":"` + no + `"}`)}, "engine")
		}

	case "start":
		no := h.pickRefund(t)
		body := []byte(oneOf(t, "body", "", `{"out_refund_no":"`+no+`"}`, "other bytes"))
		h.exec(StartSubmission{RefundNo: no, Request: body}, "engine")

	case "resubmit":
		h.exec(Resubmit{RefundNo: h.pickRefund(t)}, "operator:alice")

	case "approve":
		// Now and then by the requester (alice), under another role too.
		h.exec(Approve{RefundNo: h.pickRefund(t)}, oneOf(t, "approver", "approver:carol", "approver:carol", "approver:alice", "operator:erin"))

	case "reject":
		h.exec(Reject{RefundNo: h.pickRefund(t), Reason: oneOf(t, "rejectReason", "", "not justified", "not justified", "bad\nreason")},
			oneOf(t, "rejecter", "approver:carol", "approver:alice"))

	case "check":
		if chance(t, "operator", 1, 3) {
			h.exec(CheckProvider{RefundNo: h.pickRefund(t), Operator: true}, "operator:alice")
		} else {
			h.exec(CheckProvider{RefundNo: h.pickRefund(t), Merchant: h.notifiedMerchant(t)}, "wechatpay:notification")
		}

	case "abandon":
		no := h.pickRefund(t)
		c := Abandon{RefundNo: no, Reason: oneOf(t, "abandonReason", "", "gave up", "gave up", "bad\nreason")}
		// The adapter's query just before; now and then none, a stale one,
		// a failed one or one that finds the refund.
		switch weighted(t, "check", "fresh", 8, "none", 1, "stale", 1, "failed", 1, "found", 1, "paid", 1) {
		case "fresh":
			c.Check = &ProviderCheck{Outcome: Outcome{Kind: OutcomeNotFound, Code: "RESOURCE_NOT_EXISTS"}, At: h.now}
		case "stale":
			c.Check = &ProviderCheck{Outcome: Outcome{Kind: OutcomeNotFound}, At: h.now.Add(-2 * time.Minute)}
		case "failed":
			c.Check = &ProviderCheck{Outcome: Outcome{Kind: OutcomeUnknown}, At: h.now}
		case "found":
			c.Check = &ProviderCheck{Outcome: Outcome{Kind: OutcomeProcessing}, At: h.now}
		case "paid":
			c.Check = &ProviderCheck{Outcome: Outcome{Kind: OutcomeSucceeded}, At: h.now}
		}
		h.exec(c, "operator:alice")

	case "applyAbnormal":
		c := ApplyAbnormal{RefundNo: h.pickRefund(t), Type: oneOf(t, "abnormalType", AbnormalUserBankCard, AbnormalMerchantBankCard, "ORIGINAL")}
		if c.Type == AbnormalUserBankCard {
			c.BankType, c.EncryptedAccount, c.EncryptedName, c.KeySerial = "ICBC_DEBIT", "QUJDRA==", "RUZHSA==", "PUB_KEY_ID_1"
		}
		h.exec(c, "operator:alice")

	case "resolve":
		no := h.pickRefund(t)
		h.exec(Resolve{RefundNo: no, Reason: oneOf(t, "resolveReason", "", "settled at WeChat", "settled at WeChat", "bad\nreason")}, "operator:alice")

	case "outcome":
		no := h.pickRefund(t)
		var amount int64
		if r := h.refund(no); r != nil {
			amount = r.amount
		}
		o := Outcome{
			Kind:       OutcomeKind(weighted(t, "kind", "PROCESSING", 3, "REJECTED", 2, "UNKNOWN", 4, "NOT_FOUND", 2, "ABNORMAL", 2, "SUCCEEDED", 1, "FAILED", 1)),
			Code:       oneOf(t, "code", "", "NOT_ENOUGH", "SYSTEM_ERROR"),
			ProviderID: oneOf(t, "providerID", "", "wx-"+no, "wx-"+no),
		}
		if chance(t, "reportsAmounts", 3, 4) {
			o.OutTradeNo, o.RefundAmount, o.TotalAmount = h.reg.OutTradeNo, amount, h.reg.Amount
		}
		if chance(t, "successTimeKnown", 1, 2) {
			o.SuccessTime = h.now.Add(-time.Second)
		}
		switch weighted(t, "mangle", "none", 40, "order", 1, "amount", 1, "total", 1, "providerID", 2, "kind", 1) {
		case "order":
			o.OutTradeNo = "OTHER-ORDER"
		case "amount":
			o.RefundAmount = amount + 1
		case "total":
			o.TotalAmount = h.reg.Amount - 1
		case "providerID":
			o.ProviderID = "wx-someone-else"
		case "kind":
			o.Kind = "BOGUS"
		}
		attempt := 0
		src := oneOf(t, "source", allSources...)
		if r := h.refund(no); r != nil && src == SourceResponse {
			// Mostly the latest attempt's answer; sometimes a late one.
			switch weighted(t, "attempt", "latest", 8, "older", 1, "newer", 1) {
			case "latest":
				attempt = r.attempts
			case "older":
				attempt = max(0, r.attempts-1)
			case "newer":
				attempt = r.attempts + 1
			}
		}
		c := RecordOutcome{RefundNo: no, Source: src, Attempt: attempt, Outcome: o}
		if src == SourceNotification {
			c.Merchant = h.notifiedMerchant(t)
		}
		h.exec(c, "provider:wechatpay")

	case "timer":
		no := h.pickRefund(t)
		var due time.Time
		if r := h.refund(no); r != nil {
			due = r.due
		}
		switch weighted(t, "timerKind", "due", 6, "old", 3, "off", 1) {
		case "old": // a late timer, reordered after newer work
			if len(h.dues) > 0 {
				due = h.dues[uniform(len(h.dues)).Draw(t, "oldDue")]
			}
		case "off":
			due = due.Add(time.Nanosecond)
		}
		if due.After(h.now) {
			h.now = due // a timer fires when its time has come
		}
		h.exec(FireTimer{RefundNo: no, DueAt: due}, "engine")

	case "advance":
		h.now = h.now.Add(oneOf(t, "advance", time.Second, 30*time.Second, 5*time.Minute, time.Hour, 25*time.Hour))

	case "restart":
		h.restart()

	case "duplicate":
		if h.lastCmd != nil {
			h.exec(h.lastCmd, h.lastBy)
		}
	}
	for _, r := range h.s.Refunds {
		if !r.DueAt.IsZero() && !slices.ContainsFunc(h.dues, r.DueAt.Equal) {
			h.dues = append(h.dues, r.DueAt)
		}
	}
}

func TestDecide_Properties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		policy := Policy{
			RefundNoPrefix: oneOf(t, "prefix", "", "T1", "ABCDEFGHIJKLMNOP"),
			MaxRefunds:     oneOf(t, "maxRefunds", 0, 4, 8),
			RecheckAfter:   oneOf(t, "recheckAfter", 0, 10*time.Second),
			StuckAfter:     oneOf(t, "stuckAfter", 0, 90*time.Minute),
			QueryBackoff:   oneOf(t, "backoff", nil, []time.Duration{time.Minute, 7 * time.Minute}),
			MaxAttempts:    oneOf(t, "maxAttempts", 0, 1, 3),
			RetryBackoff:   oneOf(t, "retryBackoff", 0, 2*time.Second),
			// 0 means 1m, above either base.
			RetryBackoffMax: oneOf(t, "retryBackoffMax", 0, 5*time.Second),
			RefundSpacing:   oneOf(t, "spacing", 0, time.Minute),
			RefundWindow:    oneOf(t, "window", 0, 6*time.Hour),
			HintWindow:      oneOf(t, "hintWindow", 0, 10*time.Minute),
			SettleHorizon:   oneOf(t, "settleHorizon", 0, 10*time.Minute, 2*time.Hour),
		}
		if chance(t, "approval", 1, 2) {
			policy.ApproveAll = chance(t, "approveAll", 1, 4)
			policy.ApproveAbove = oneOf[int64](t, "approveAbove", 0, 0, 400, 100_000)
			policy.ApproveAbovePercent = oneOf(t, "approvePercent", 0, 0, 30, 100)
			policy.ApproveNonService = chance(t, "approveNonService", 1, 2)
			policy.ApprovalTimeout = oneOf(t, "approvalTimeout", 0, 2*time.Hour)
		}
		if err := policy.Validate(); err != nil {
			t.Fatalf("policy: %v", err)
		}
		paid := rapid.Int64Range(1000, 1_000_000).Draw(t, "paid")
		if chance(t, "tinyPaid", 1, 8) {
			paid = int64(1 + uniform(3).Draw(t, "tiny"))
		}
		h := &sim{
			t: t, policy: policy, now: t0, s: &State{}, replayed: &State{}, decoded: &State{},
			m:        model{byKey: map[string]int{}},
			terminal: map[string]RefundState{}, attention: map[string]bool{}, dueIndex: map[DueTime]bool{}, searchIndex: map[SearchKey]bool{}, listIndex: map[ListRow]bool{},
			reg: Register{
				ReservationID: oneOf(t, "id", propIDs...),
				Merchant:      oneOf(t, "merchant", propMerchants...),
				UserID:        "u-42", OutTradeNo: "OT-1", Currency: "CNY",
				// Unknown, recent, or close to the default year's end.
				PaidAt: oneOf(t, "paidAt", t0.Add(-time.Hour), time.Time{}, t0.Add(-365*24*time.Hour+12*time.Hour)),
				Amount: paid,
			},
			bodies: map[string]string{}, firstSends: map[string]int{}, answeredUnsent: map[string]bool{},
			encode: chance(t, "encode", 1, 2),
		}
		// A few steps before the reservation exists: everything is "not found".
		for range uniform(3).Draw(t, "early") {
			h.step(t)
			h.check()
		}
		h.exec(h.reg, "system:booking")
		h.check()
		for range 40 + uniform(160).Draw(t, "steps") {
			h.step(t)
			h.check()
		}
		h.drain()
	})
}

// modelAmount is a request's amount as the model tells requests apart: an
// omitted amount differs from every explicit one.
func modelAmount(a *int64) string {
	if a == nil {
		return "all"
	}
	return fmt.Sprint(*a)
}
