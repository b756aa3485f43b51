package reservation

import (
	"fmt"
	"strconv"
	"time"
)

// Decide returns the events that cmd produces on s, or a domain error. No
// events and no error means the command changes nothing (a duplicate, a stale
// outcome, a replayed request): callers answer with the current state.
// Decide never modifies s.
func Decide(s *State, cmd Command, env Env) ([]Event, error) {
	var (
		data []EventData
		err  error
	)
	switch c := cmd.(type) {
	case Register:
		data, err = decideRegister(s, c, env)
	case RequestRefund:
		data, err = decideRequestRefund(s, c, env)
	case StartSubmission:
		data, err = decideStartSubmission(s, c, env)
	case Resubmit:
		data, err = decideResubmit(s, c, env)
	case Abandon:
		data, err = decideAbandon(s, c, env)
	case RecordOutcome:
		data, err = decideOutcome(s, c, env)
	case FireTimer:
		data, err = decideTimer(s, c, env)
	case CheckProvider:
		data, err = decideCheck(s, c, env)
	case Resolve:
		data, err = decideResolve(s, c)
	case RecordRecovered:
		data, err = decideRecovered(s, c, env)
	case Approve:
		data, err = decideApprove(s, c, env)
	case Reject:
		data, err = decideReject(s, c, env)
	case ApplyAbnormal:
		data, err = decideApplyAbnormal(s, c, env)
	default:
		return nil, invalid("command", "unknown command")
	}
	if err != nil || len(data) == 0 {
		return nil, err
	}
	events := make([]Event, len(data))
	for i, d := range data {
		events[i] = Event{At: env.Now, By: env.By, Data: d}
	}
	return events, nil
}

func decideRegister(s *State, c Register, env Env) ([]EventData, error) {
	if err := validateRegister(c); err != nil {
		return nil, err
	}
	merchant := MerchantOf(c.Merchant)
	if !s.Registered() && env.Unconfigured {
		return nil, ErrMerchantNotConfigured
	}
	if s.Registered() {
		// The merchant is part of the registration: another merchant's
		// registration of the same id is a conflict, and the merchant never
		// changes.
		if s.ID == c.ReservationID && s.UserID == c.UserID && s.OutTradeNo == c.OutTradeNo &&
			s.TransactionID == c.TransactionID && s.Amount == c.Amount && s.Currency == c.Currency &&
			s.PaidAt.Equal(c.PaidAt) && s.Merchant == merchant {
			return nil, nil
		}
		return nil, ErrConflict
	}
	return []EventData{Registered{
		ReservationID: c.ReservationID, UserID: c.UserID, OutTradeNo: c.OutTradeNo,
		TransactionID: c.TransactionID, Amount: c.Amount, Currency: c.Currency, PaidAt: c.PaidAt.UTC(),
		Merchant: merchant,
	}}, nil
}

// Fingerprint identifies a refund request's content, so a reused idempotency
// key with a different request is told apart from a replay. An omitted amount
// is distinct from any explicit amount.
func Fingerprint(c RequestRefund) string {
	amount := "all"
	if c.Amount != nil {
		amount = strconv.FormatInt(*c.Amount, 10)
	}
	return fingerprint(c, amount)
}

func decideRequestRefund(s *State, c RequestRefund, env Env) ([]EventData, error) {
	p := env.Policy
	if err := validateRequestRefund(c); err != nil {
		return nil, err
	}
	if !s.Registered() || c.UserID != s.UserID {
		return nil, ErrNotFound
	}
	fp := Fingerprint(c)
	if r := s.RefundByKey(c.IdempotencyKey); r != nil {
		if r.Fingerprint == fp {
			return nil, nil
		}
		return nil, ErrIdempotencyKeyReused
	}
	if env.Unconfigured {
		return nil, ErrMerchantNotConfigured
	}
	if s.Status == StatusCanceled {
		return nil, ErrCanceled
	}
	if !s.PaidAt.IsZero() && env.Now.After(s.PaidAt.Add(p.refundWindow())) {
		return nil, ErrRefundWindowClosed
	}
	if len(s.Refunds) >= p.maxRefunds() {
		return nil, ErrRefundLimit
	}
	left := s.Refundable()
	amount := left
	if c.Amount != nil {
		amount = *c.Amount
	}
	if left <= 0 {
		return nil, withMessage(ErrInsufficientRefundable, "nothing is left to refund (refunds in flight hold the rest)")
	}
	if amount > left {
		return nil, withMessage(ErrInsufficientRefundable,
			"amount "+strconv.FormatInt(amount, 10)+" exceeds the refundable "+strconv.FormatInt(left, 10))
	}
	n := len(s.Refunds) + 1
	req := RefundRequested{
		RefundNo: RefundNo(p.prefix(), s.ID, n), Number: n, IdempotencyKey: c.IdempotencyKey,
		Fingerprint: fp, Amount: amount, Reason: c.Reason,
		ReasonCode: c.ReasonCode, Metadata: NewMetadata(c.Metadata),
	}
	rule := p.approvalRule(s, amount, env.By)
	if env.Encode == nil {
		if rule != "" {
			return []EventData{req, ApprovalRequested{RefundNo: req.RefundNo, Rule: rule, DueAt: env.Now.Add(p.approvalTimeout())}}, nil
		}
		return []EventData{req}, nil
	}
	// The first submission, with the exact provider bytes, goes in the same
	// append as the refund.
	body, err := env.Encode(RefundRequest{
		RefundNo: req.RefundNo, OutTradeNo: s.OutTradeNo, TransactionID: s.TransactionID,
		Amount: amount, Total: s.Amount, Currency: s.Currency, Reason: c.Reason,
	})
	if err != nil {
		return nil, fmt.Errorf("reservation: build provider request for %s: %w", req.RefundNo, err)
	}
	if len(body) == 0 {
		return nil, invalid("request", "the provider request bytes are required")
	}
	if rule != "" {
		// Held for approval: the bytes are journaled now, sent once approved.
		return []EventData{req, ApprovalRequested{RefundNo: req.RefundNo, Rule: rule, Request: body,
			DueAt: env.Now.Add(p.approvalTimeout())}}, nil
	}
	return []EventData{req, firstSubmission(s, req.RefundNo, body, env)}, nil
}

func refundOf(s *State, no string) (*Refund, error) {
	if !s.Registered() {
		return nil, ErrNotFound
	}
	r := s.Refund(no)
	if r == nil {
		return nil, withMessage(ErrNotFound, "refund not found")
	}
	return r, nil
}

func decideStartSubmission(s *State, c StartSubmission, env Env) ([]EventData, error) {
	r, err := refundOf(s, c.RefundNo)
	if err != nil {
		return nil, err
	}
	if len(c.Request) == 0 {
		return nil, invalid("request", "the provider request bytes are required")
	}
	if r.Attempts > 0 {
		// Already submitted once: its bytes are fixed forever.
		return nil, nil
	}
	if r.State != Processing || len(r.Request) > 0 {
		return nil, ErrInvalidState
	}
	return []EventData{firstSubmission(s, r.No, c.Request, env)}, nil
}

// firstSubmission starts the first attempt of refund no with body, or,
// within the spacing of the order's previous create request, schedules it
// for when the spacing ends. The refund's own RefundRequested changes
// nothing the spacing reads, so RequestRefund decides it on the state
// before that event.
func firstSubmission(s *State, no string, body []byte, env Env) EventData {
	if wait := spacingWait(s, env); wait > 0 {
		return SubmissionScheduled{RefundNo: no, Request: body, DueAt: env.Now.Add(wait)}
	}
	return SubmissionStarted{RefundNo: no, Attempt: 1, Request: body, DueAt: env.Now.Add(env.Policy.recheckAfter())}
}

// spacingWait is how long a create request made now must still wait so
// that it reaches WeChat Pay RefundSpacing after the order's previous one
// (WeChat Pay refuses it with FREQUENCY_LIMITED otherwise): first
// submissions, retries and resubmissions of every refund of the order.
func spacingWait(s *State, env Env) time.Duration {
	last := s.LastCreateAt
	if env.Policy.RefundSpacing <= 0 || last.IsZero() {
		return 0
	}
	return last.Add(env.Policy.RefundSpacing).Sub(env.Now)
}

func decideResubmit(s *State, c Resubmit, env Env) ([]EventData, error) {
	r, err := refundOf(s, c.RefundNo)
	if err != nil {
		return nil, err
	}
	if (r.State != Rejected && r.State != Unknown) || len(r.Request) == 0 {
		return nil, ErrInvalidState
	}
	if env.Unconfigured {
		return nil, ErrMerchantNotConfigured
	}
	return []EventData{resubmission(s, r, env)}, nil
}

// resubmission sends refund r's journaled bytes again as its next attempt,
// or, within the spacing of the order's previous create request, schedules
// that for when the spacing ends (the timer re-checks it then).
func resubmission(s *State, r *Refund, env Env) EventData {
	if wait := spacingWait(s, env); wait > 0 {
		return SubmissionScheduled{RefundNo: r.No, Request: r.Request, DueAt: env.Now.Add(wait)}
	}
	return SubmissionStarted{RefundNo: r.No, Attempt: r.Attempts + 1, DueAt: env.Now.Add(env.Policy.recheckAfter())}
}

// freshCheck bounds how old the provider answer an abandon relies on may be.
const checkFreshFor = time.Minute

func decideAbandon(s *State, c Abandon, env Env) ([]EventData, error) {
	r, err := refundOf(s, c.RefundNo)
	if err != nil {
		return nil, err
	}
	if c.Reason != "" && !validText(c.Reason, MaxReasonBytes) {
		return nil, invalid("reason", "must be at most 80 bytes of printable UTF-8")
	}
	// Only a rejection is known not to have moved money. UNKNOWN or
	// ABNORMAL may have, so releasing their amount could over-refund.
	if r.State != Rejected {
		return nil, ErrInvalidState
	}
	// Not even a rejection is, while an earlier attempt whose outcome is
	// unknown may still be applied by WeChat Pay; and REJECTED may be old
	// news: only a fresh "not found", journaled with the release, says
	// WeChat Pay has no such refund now.
	if env.Policy.settling(r.UnsettledAt, env.Now) {
		return nil, withMessage(ErrRefundSettling, "an attempt of this refund may still be applied by WeChat Pay until "+
			r.UnsettledAt.Add(env.Policy.settleHorizon()).UTC().Format(time.RFC3339)+"; its amount cannot be released before")
	}
	ck := c.Check
	switch {
	case ck == nil || ck.At.After(env.Now) || env.Now.Sub(ck.At) > checkFreshFor:
		return nil, withMessage(ErrReleaseUnconfirmed, "abandoning needs a fresh query of WeChat Pay; retry")
	case ck.Outcome.Kind == OutcomeUnknown:
		return nil, withMessage(ErrReleaseUnconfirmed, "WeChat Pay could not be asked about this refund; retry later")
	case ck.Outcome.Kind != OutcomeNotFound:
		return nil, ErrProviderHasRefund
	}
	return []EventData{
		ProviderResult{RefundNo: r.No, Source: SourceQuery, Outcome: OutcomeNotFound, Code: ck.Outcome.Code,
			Message: ck.Outcome.Message, From: r.State, To: r.State},
		Abandoned{RefundNo: r.No, Reason: c.Reason},
	}, nil
}

// checkOutcome rejects outcomes that disagree with local records. A
// notification or a query answer that reports a refund object always
// carries its id, out_trade_no and amounts (PROTOCOL.md §1.3, §3.4), so
// from those sources an absent value is a mismatch, not "not reported": a
// verified message stripped to its refund number must not settle a refund.
func checkOutcome(s *State, r *Refund, src Source, o Outcome) error {
	if reportsRefundObject(src, o.Kind) {
		if o.ProviderID == "" {
			return withMessage(ErrOutcomeMismatch, "provider refund id not reported")
		}
		if err := matchReported(s, r, o); err != nil {
			return err
		}
	}
	switch {
	case o.OutTradeNo != "" && o.OutTradeNo != s.OutTradeNo:
		return withMessage(ErrOutcomeMismatch, "out_trade_no does not match the reservation")
	case o.RefundAmount != 0 && o.RefundAmount != r.Amount:
		return withMessage(ErrOutcomeMismatch, "refund amount does not match the refund")
	case o.TotalAmount != 0 && o.TotalAmount != s.Amount:
		return withMessage(ErrOutcomeMismatch, "order total does not match the paid amount")
	case o.ProviderID != "" && r.ProviderID != "" && o.ProviderID != r.ProviderID:
		return withMessage(ErrOutcomeMismatch, "provider refund id does not match")
	}
	return nil
}

// reportsRefundObject says whether an outcome of this kind from this source
// comes from a refund object that WeChat Pay always sends complete. A
// submission's answer is not held to it here (its refusals and failures
// carry no refund object); the provider adapter vets its refund object.
func reportsRefundObject(src Source, k OutcomeKind) bool {
	if src != SourceNotification && src != SourceQuery {
		return false
	}
	switch k {
	case OutcomeSucceeded, OutcomeFailed, OutcomeAbnormal, OutcomeProcessing:
		return true
	}
	return false
}

func decideOutcome(s *State, c RecordOutcome, env Env) ([]EventData, error) {
	r, err := refundOf(s, c.RefundNo)
	if err != nil {
		return nil, err
	}
	if c.Source == SourceNotification {
		if err := matchMerchant(s, c.Merchant); err != nil {
			return nil, err
		}
	}
	o := c.Outcome
	if !o.Kind.valid() {
		return nil, invalid("outcome", "unknown outcome kind")
	}
	if err := checkOutcome(s, r, c.Source, o); err != nil {
		return nil, err
	}
	result := func(to RefundState) ProviderResult {
		pr := ProviderResult{
			RefundNo: r.No, Source: c.Source, Attempt: c.Attempt, Outcome: o.Kind, Code: o.Code,
			Message: o.Message, ProviderID: o.ProviderID, From: r.State, To: to, SuccessTime: o.SuccessTime,
		}
		// A refund waiting on the provider needs a due time, or no timer
		// would ever check on it again (REJECTED has none).
		switch {
		case (to == Processing || to == Unknown) && r.DueAt.IsZero():
			pr.DueAt = env.Now.Add(env.Policy.recheckAfter())
		case to == Abnormal && r.State != Abnormal:
			// Reconciliation keeps asking about an ABNORMAL refund: an
			// operator may settle it at WeChat.
			pr.DueAt = env.Now.Add(env.Policy.queryBackoff(r.Queries + 1))
		case to == Rejected && env.Policy.settling(r.unsettledAfter(c.Source, o.Kind, c.Attempt), env.Now):
			// An attempt that may still land: REJECTED stops the resending,
			// not the queries, until the settle horizon has passed.
			pr.DueAt = r.DueAt
			if pr.DueAt.IsZero() {
				pr.DueAt = env.Now.Add(env.Policy.queryBackoff(r.Queries + 1))
			}
		}
		return pr
	}
	if r.ApprovalRequired && r.ApprovedBy == "" {
		// Never approved, so never sent (approval.go).
		return decidePendingOutcome(r, c), nil
	}
	target := o.Kind.target()

	if r.State.Terminal() {
		if target == Succeeded || target == Failed || target == Abnormal {
			if target == r.State {
				return nil, nil // duplicate
			}
			// WeChat Pay paid a refund refundd had closed as FAILED (a
			// delayed attempt, or a FAILED that was wrong): the money is
			// gone, so the books count it, unless other refunds hold the
			// amount, which they could then never have.
			if r.State == Failed && target == Succeeded && s.Refunded()+s.InFlight()+r.Amount <= s.Amount {
				out := []EventData{result(Succeeded)}
				if refunded := s.Refunded() + r.Amount; refunded >= s.Amount {
					out = append(out, Canceled{Refunded: refunded})
				}
				return out, nil
			}
			conflict := Conflict{
				RefundNo: r.No, State: r.State, Source: c.Source, Outcome: o.Kind, Code: o.Code, ProviderID: o.ProviderID,
			}
			if conflict == r.LastConflict {
				// The same contradiction again (WeChat re-sending it, or a
				// replay within its signature's time window) is no new
				// evidence: operators already have it.
				return nil, nil
			}
			return []EventData{conflict}, nil
		}
		return nil, nil // processing, unknown, rejected, not found: stale
	}
	if r.State == Rejected && !r.DueAt.IsZero() && o.Kind == OutcomeNotFound && c.Source == SourceQuery {
		// A settling REJECTED refund: "not found" is final only once the
		// horizon has passed; the query already set the next due time.
		if env.Policy.settling(r.UnsettledAt, env.Now) {
			return nil, nil
		}
		return []EventData{result(Rejected)}, nil
	}

	// noChange records an answered submission attempt (so every attempt is
	// journaled) and ignores repeated notifications and queries.
	noChange := func() ([]EventData, error) {
		if c.Source == SourceResponse {
			return []EventData{result(r.State)}, nil
		}
		return nil, nil
	}

	switch o.Kind {
	case OutcomeSucceeded:
		out := []EventData{result(Succeeded)}
		if refunded := s.Refunded() + r.Amount; refunded >= s.Amount {
			out = append(out, Canceled{Refunded: refunded})
		}
		return out, nil
	case OutcomeFailed:
		return []EventData{result(Failed)}, nil
	case OutcomeAbnormal:
		if r.State == Abnormal {
			return nil, nil
		}
		return []EventData{result(Abnormal)}, nil
	case OutcomeProcessing:
		switch {
		case r.State == Abnormal:
			return nil, nil // abnormal is later news than processing
		case r.Retry && r.Attempts > 0:
			// The provider has the refund after all: stop resubmitting and
			// wait for its outcome (queried if it does not come).
			pr := result(Processing)
			pr.DueAt = env.Now.Add(env.Policy.recheckAfter())
			return []EventData{pr}, nil
		case r.State != Processing || (o.ProviderID != "" && r.ProviderID == ""):
			return []EventData{result(Processing)}, nil
		}
		return noChange()
	case OutcomeRejected:
		// REJECTED means no money moved, and lets an operator abandon the
		// refund and free its amount. Only a submission's answer to the
		// latest attempt of a refund the provider never acknowledged says
		// that: a later attempt may have been taken after an older one was
		// refused, and a provider refund id means the provider has the
		// refund.
		if (r.State == Processing || r.State == Unknown) && c.Source == SourceResponse && c.Attempt == r.Attempts && r.ProviderID == "" {
			return []EventData{result(Rejected)}, nil
		}
		return noChange()
	case OutcomeUnknown:
		// Only a submission's own answer can leave it unknown; a query
		// that failed says nothing (the next query is already due), and an
		// answer to an older attempt is stale.
		if c.Source != SourceResponse || r.State != Processing || c.Attempt != r.Attempts {
			return noChange()
		}
		if r.Attempts < env.Policy.maxAttempts() {
			pr := result(Processing)
			// Not before the spacing ends: this attempt itself started it.
			pr.Retry, pr.DueAt = true, env.Now.Add(max(env.Policy.retryDelay(r.Attempts, env.Jitter), spacingWait(s, env)))
			return []EventData{pr}, nil
		}
		return []EventData{result(Unknown)}, nil
	case OutcomeNotFound:
		// The provider never received the submission: send the same bytes
		// again under the same number. Only a query can say this, and only
		// of a refund that was submitted: one held back by spacing has its
		// bytes journaled but waits for its timer.
		if c.Source == SourceQuery && (r.State == Processing || r.State == Unknown) && r.Attempts > 0 && len(r.Request) > 0 {
			// A refund left UNKNOWN (its last attempt answered, none in
			// flight) that the provider still does not have after twice
			// the attempts an unknown answer gets was refused or never
			// arrived, again and again (WeChat Pay answers a refusal of a
			// resubmission, which it cannot tell from a duplicate, without
			// creating a refund). No money moved: it stops as REJECTED, for
			// an operator to resubmit or abandon, instead of being resent
			// for ever.
			if r.State == Unknown && r.ProviderID == "" && r.Attempts >= 2*env.Policy.maxAttempts() {
				return []EventData{result(Rejected)}, nil
			}
			return []EventData{resubmission(s, r, env)}, nil
		}
		return nil, nil
	}
	return nil, nil
}

func decideTimer(s *State, c FireTimer, env Env) ([]EventData, error) {
	r, err := refundOf(s, c.RefundNo)
	if err != nil {
		return nil, err
	}
	if r.DueAt.IsZero() || !r.DueAt.Equal(c.DueAt) {
		return nil, nil // stale timer
	}
	if r.State == PendingApproval {
		return []EventData{ApprovalExpired{RefundNo: r.No}}, nil
	}
	// A REJECTED refund has a due time only while an attempt may still
	// land: it is queried.
	if r.State != Processing && r.State != Unknown && r.State != Abnormal && r.State != Rejected {
		return nil, nil
	}
	if r.Retry && r.State == Processing {
		if len(r.Request) == 0 {
			return nil, nil
		}
		// A submission held back by spacing, or a retry: the spacing is
		// checked again, as another refund may have gone first.
		if r.Attempts == 0 {
			if wait := spacingWait(s, env); wait > 0 {
				return []EventData{SubmissionScheduled{RefundNo: r.No, Request: r.Request, DueAt: env.Now.Add(wait)}}, nil
			}
			return []EventData{SubmissionStarted{RefundNo: r.No, Attempt: 1, Request: r.Request,
				DueAt: env.Now.Add(env.Policy.recheckAfter())}}, nil
		}
		return []EventData{resubmission(s, r, env)}, nil
	}
	var out []EventData
	if !r.Stuck && env.Now.Sub(r.CreatedAt) >= env.Policy.stuckAfter() {
		out = append(out, FlaggedStuck{RefundNo: r.No})
	}
	n := r.Queries + 1
	out = append(out, QueryStarted{RefundNo: r.No, Query: n, DueAt: env.Now.Add(env.Policy.queryBackoff(n))})
	return out, nil
}

func decideCheck(s *State, c CheckProvider, env Env) ([]EventData, error) {
	r, err := refundOf(s, c.RefundNo)
	if err != nil {
		return nil, err
	}
	if !c.Operator {
		if err := matchMerchant(s, c.Merchant); err != nil {
			return nil, err
		}
	}
	if c.Reported != nil {
		if err := matchReported(s, r, *c.Reported); err != nil {
			return nil, err
		}
	}
	// Terminal refunds are settled, and a refund never submitted has
	// nothing to ask about yet.
	if r.State.Terminal() || r.Attempts == 0 {
		return nil, nil
	}
	// A hint while the last query is in flight or was just answered would
	// only repeat it; anyone can replay an APIv2 notification. A clock set
	// back does not hold hints back.
	if since := env.Now.Sub(r.QueriedAt); !c.Operator && !r.QueriedAt.IsZero() && since >= 0 && since < env.Policy.hintWindow() {
		return nil, nil
	}
	n := r.Queries + 1
	return []EventData{QueryStarted{RefundNo: r.No, Query: n, DueAt: env.Now.Add(env.Policy.queryBackoff(n))}}, nil
}

// matchMerchant checks that a notification for merchant (empty:
// DefaultMerchant) is for the reservation's merchant. A notification
// verified with one account's keys that names another merchant's refund
// changes nothing: a mismatch, which operators see.
func matchMerchant(s *State, merchant string) error {
	if MerchantOf(merchant) != MerchantOf(s.Merchant) {
		return withMessage(ErrOutcomeMismatch, "merchant does not match the reservation")
	}
	return nil
}

// matchReported checks the order and amounts that a refund object or a
// hint's notification reports against our records. Every field counts,
// zero included: WeChat Pay always sends them (the parsers refuse a
// notification without them).
func matchReported(s *State, r *Refund, o Outcome) error {
	switch {
	case o.OutTradeNo != s.OutTradeNo:
		return withMessage(ErrOutcomeMismatch, "out_trade_no does not match the reservation")
	case o.RefundAmount != r.Amount:
		return withMessage(ErrOutcomeMismatch, "refund amount does not match the refund")
	case o.TotalAmount != s.Amount:
		return withMessage(ErrOutcomeMismatch, "order total does not match the paid amount")
	}
	return nil
}

func decideResolve(s *State, c Resolve) ([]EventData, error) {
	r, err := refundOf(s, c.RefundNo)
	if err != nil {
		return nil, err
	}
	if !validText(c.Reason, MaxReasonBytes) {
		return nil, invalid("reason", "is required: 1..80 bytes of printable UTF-8")
	}
	if r.State != Abnormal {
		return nil, ErrInvalidState
	}
	out := []EventData{Resolved{RefundNo: r.No, Reason: c.Reason}}
	if refunded := s.Refunded() + r.Amount; refunded >= s.Amount {
		out = append(out, Canceled{Refunded: refunded})
	}
	return out, nil
}

// NextDue returns the earliest due time among refunds, or the zero time.
func (s *State) NextDue() time.Time {
	var t time.Time
	for _, r := range s.Refunds {
		if !r.DueAt.IsZero() && (t.IsZero() || r.DueAt.Before(t)) {
			t = r.DueAt
		}
	}
	return t
}
