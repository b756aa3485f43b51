package audit

import (
	"fmt"
	"slices"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// Problem is something wrong with the events or the indexes, found by
// replaying them (problems with the file itself are journal.Problems).
type Problem struct {
	Global uint64 `json:"global,omitempty"`
	Stream string `json:"stream,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	// Kind is "decode" (an event this build cannot read), "transition" (an
	// event the state machine could not have decided from the state
	// before it), "invariant" (refunded + in flight > paid, a terminal
	// refund that changed), "index" (claims, attention marks or due
	// entries that disagree with the events) or "counter" (a counter of
	// the journal that disagrees with the events).
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Global != 0 {
		return fmt.Sprintf("global %d (%s #%d): %s: %s", p.Global, p.Stream, p.Seq, p.Kind, p.Message)
	}
	if p.Stream != "" {
		return fmt.Sprintf("%s: %s: %s", p.Stream, p.Kind, p.Message)
	}
	return p.Kind + ": " + p.Message
}

// replayer rebuilds every reservation from records in global order and
// checks each event against the state it is applied to.
type replayer struct {
	states map[string]*reservation.State
	report func(Problem)
	// broken streams had an event that could not be decoded: their state
	// is incomplete, so later rule checks on them would only add noise.
	broken map[string]bool
	// indexes, when set, gathers what each event implies for the
	// journal's indexes (Verify checks them).
	indexes  *implied
	terminal []terminalRefund // reused by apply
	// checkFrom, when set, is the first seq whose event is checked: the
	// events before it only build the state (Verify --since).
	checkFrom uint64
	// foldOnly skips the rule checks: stats, export and reconcile only
	// want the states (Verify checks the rules).
	foldOnly bool
}

// reset forgets every stream, keeping the maps' room: Verify replays one
// stream at a time with one replayer per worker.
func (p *replayer) reset() {
	clear(p.states)
	clear(p.broken)
	if p.indexes != nil {
		p.indexes.reset()
	}
}

func newReplayer(report func(Problem)) *replayer {
	if report == nil {
		report = func(Problem) {}
	}
	return &replayer{states: map[string]*reservation.State{}, report: report, broken: map[string]bool{}}
}

// apply decodes r and folds it into its stream's state. It returns the
// event and the state after it (shared: do not keep it across calls), or
// ok=false when the event does not decode.
func (p *replayer) apply(r journal.Record) (reservation.Event, *reservation.State, bool) {
	e, err := reservation.Decode(r.Type, r.Version, r.Data)
	if err != nil && r.Seq < p.checkFrom {
		p.broken[r.Stream] = true // not in the range checked: noted, not reported
		return reservation.Event{}, nil, false
	}
	if err != nil {
		p.report(Problem{Global: r.Global, Stream: r.Stream, Seq: r.Seq, Kind: "decode", Message: err.Error()})
		p.broken[r.Stream] = true
		return reservation.Event{}, nil, false
	}
	s := p.states[r.Stream]
	if s == nil {
		s = &reservation.State{}
		p.states[r.Stream] = s
	}
	if p.indexes != nil {
		p.indexes.add(r.Stream, s, e)
	}
	if p.broken[r.Stream] || r.Seq < p.checkFrom || p.foldOnly {
		reservation.Apply(s, e)
		return e, s, true
	}
	for _, msg := range checkEvent(r.Stream, s, e) {
		p.report(Problem{Global: r.Global, Stream: r.Stream, Seq: r.Seq, Kind: "transition", Message: msg})
	}
	p.terminal = terminalStates(p.terminal[:0], s)
	reservation.Apply(s, e)
	for _, msg := range checkInvariants(s, p.terminal) {
		p.report(Problem{Global: r.Global, Stream: r.Stream, Seq: r.Seq, Kind: "invariant", Message: msg})
	}
	return e, s, true
}

// terminalRefund is a refund in a terminal state before an event.
type terminalRefund struct {
	no    string
	state reservation.RefundState
}

// terminalStates appends the refunds of s in a terminal state to buf (a
// slice, not a map: a reservation has few refunds, and this runs for every
// event replayed).
func terminalStates(buf []terminalRefund, s *reservation.State) []terminalRefund {
	for _, r := range s.Refunds {
		if r.State.Terminal() {
			buf = append(buf, terminalRefund{r.No, r.State})
		}
	}
	return buf
}

// checkInvariants holds after every event: money never goes beyond what
// was paid, and a refund that reached SUCCEEDED or FAILED stays there.
func checkInvariants(s *reservation.State, terminalBefore []terminalRefund) []string {
	var out []string
	if got := s.Refunded() + s.InFlight(); got > s.Amount {
		out = append(out, fmt.Sprintf("refunded %d + in flight %d = %d fen exceeds the paid %d", s.Refunded(), s.InFlight(), got, s.Amount))
	}
	for _, r := range s.Refunds {
		// The one way out of a terminal state: WeChat Pay paid a refund
		// refundd had closed as FAILED, and the books count the money.
		paidLate := r.State == reservation.Succeeded && r.PaidAfterFailed
		if i := slices.IndexFunc(terminalBefore, func(t terminalRefund) bool { return t.no == r.No }); i >= 0 {
			if was := terminalBefore[i].state; r.State != was && !(was == reservation.Failed && paidLate) {
				out = append(out, fmt.Sprintf("refund %s left the terminal state %s for %s", r.No, was, r.State))
			}
		}
		if r.Amount <= 0 {
			out = append(out, fmt.Sprintf("refund %s has amount %d", r.No, r.Amount))
		}
	}
	if s.Status == reservation.StatusCanceled && s.Refunded() < s.Amount {
		out = append(out, fmt.Sprintf("canceled with %d of %d fen refunded", s.Refunded(), s.Amount))
	}
	return out
}

// checkEvent reports why e could not have been decided on s: the rules of
// reservation.Decide, restated from the events' side. An empty result
// means the transition is legal.
func checkEvent(stream string, s *reservation.State, e reservation.Event) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if reg, ok := e.Data.(reservation.Registered); ok {
		switch {
		case s.Registered():
			bad("registered again")
		case reg.ReservationID != stream:
			bad("registers reservation %q in stream %q", reg.ReservationID, stream)
		case reg.Amount <= 0:
			bad("registers a paid amount of %d", reg.Amount)
		}
		return out
	}
	if !s.Registered() {
		return []string{fmt.Sprintf("%s before the reservation was registered", e.Data.EventType())}
	}
	refund := func(no string) *reservation.Refund {
		r := s.Refund(no)
		if r == nil {
			bad("refers to unknown refund %s", no)
		}
		return r
	}
	switch d := e.Data.(type) {
	case reservation.Canceled:
		switch {
		case s.Status == reservation.StatusCanceled:
			bad("canceled again")
		case s.Refunded() < s.Amount:
			bad("canceled with %d of %d fen refunded", s.Refunded(), s.Amount)
		}
	case reservation.RefundRequested:
		prefix, id, n, ok := reservation.ParseRefundNo(d.RefundNo)
		switch {
		case s.Refund(d.RefundNo) != nil:
			bad("refund number %s requested twice", d.RefundNo)
		case s.RefundByKey(d.IdempotencyKey) != nil:
			bad("idempotency key %q used twice", d.IdempotencyKey)
		case s.Status == reservation.StatusCanceled:
			bad("refund %s requested on a canceled reservation", d.RefundNo)
		case d.Amount <= 0:
			bad("refund %s requests %d fen", d.RefundNo, d.Amount)
		case d.Amount > s.Refundable():
			bad("refund %s requests %d fen, only %d refundable", d.RefundNo, d.Amount, s.Refundable())
		case d.Number != len(s.Refunds)+1:
			bad("refund %s is number %d, want %d", d.RefundNo, d.Number, len(s.Refunds)+1)
		case !ok || id != stream || n != d.Number || prefix == "":
			bad("refund number %s is not PREFIX-%s-%d", d.RefundNo, stream, d.Number)
		}
	case reservation.SubmissionStarted:
		if r := refund(d.RefundNo); r != nil {
			switch {
			case r.State != reservation.Processing && r.State != reservation.Rejected && r.State != reservation.Unknown:
				bad("submission of refund %s in state %s", r.No, r.State)
			case d.Attempt != r.Attempts+1:
				bad("submission attempt %d of refund %s after %d attempts", d.Attempt, r.No, r.Attempts)
			case d.Attempt == 1 && len(d.Request) == 0 && len(r.Request) == 0:
				bad("first submission of refund %s without request bytes", r.No)
			}
		}
	case reservation.SubmissionScheduled:
		// A submission held back by the spacing: a first one, a retry, or a
		// resubmission of a REJECTED or UNKNOWN refund, from the states a
		// SubmissionStarted may come from, with the bytes already journaled.
		if r := refund(d.RefundNo); r != nil {
			switch {
			case r.State != reservation.Processing && r.State != reservation.Rejected && r.State != reservation.Unknown:
				bad("submission of refund %s scheduled in state %s after %d attempts", r.No, r.State, r.Attempts)
			case len(r.Request) > 0 && string(d.Request) != string(r.Request):
				bad("submission of refund %s scheduled with other request bytes", r.No)
			}
		}
	case reservation.QueryStarted:
		if r := refund(d.RefundNo); r != nil {
			switch {
			case r.State.Terminal():
				bad("query of refund %s in terminal state %s", r.No, r.State)
			case d.Query != r.Queries+1:
				bad("query %d of refund %s after %d queries", d.Query, r.No, r.Queries)
			}
		}
	case reservation.ProviderResult:
		if r := refund(d.RefundNo); r != nil {
			switch {
			case r.State == reservation.Failed && d.From == reservation.Failed && d.To == reservation.Succeeded:
				// Paid after it was closed: counted (it fits, or Decide
				// records a conflict instead).
				if s.Refunded()+s.InFlight()+r.Amount > s.Amount {
					bad("refund %s paid after FAILED, but %d fen are already refunded or in flight of %d", r.No, s.Refunded()+s.InFlight(), s.Amount)
				}
			case r.State.Terminal():
				bad("provider result %s -> %s applied to refund %s in terminal state %s", d.From, d.To, r.No, r.State)
			case d.From != r.State:
				bad("provider result says refund %s was %s, it was %s", r.No, d.From, r.State)
			case !validState(d.To):
				bad("provider result moves refund %s to unknown state %q", r.No, d.To)
			}
		}
	case reservation.Abandoned:
		if r := refund(d.RefundNo); r != nil && r.State != reservation.Rejected {
			bad("refund %s abandoned in state %s (only REJECTED may be)", r.No, r.State)
		}
	case reservation.Resolved:
		if r := refund(d.RefundNo); r != nil && r.State != reservation.Abnormal {
			bad("refund %s resolved in state %s (only ABNORMAL may be)", r.No, r.State)
		}
	case reservation.AbnormalApplied:
		if r := refund(d.RefundNo); r != nil && (r.State != reservation.Abnormal || r.ProviderID == "") {
			bad("refund %s paid out as abnormal in state %s (only ABNORMAL with a provider id may be)", r.No, r.State)
		}
	case reservation.Conflict:
		// A refund never approved was never sent: any final outcome about
		// it is a conflict, whatever its state.
		if r := refund(d.RefundNo); r != nil && (!(r.State.Terminal() || r.ApprovalRequired && r.ApprovedBy == "") || d.State != r.State) {
			bad("conflict recorded for refund %s in state %s (event says %s)", r.No, r.State, d.State)
		}
	case reservation.ApprovalRequested:
		if r := refund(d.RefundNo); r != nil && (r.State != reservation.Processing || r.Attempts > 0 || r.ApprovalRequired) {
			bad("approval of refund %s requested in state %s after %d attempts", r.No, r.State, r.Attempts)
		}
	case reservation.Approved:
		if r := refund(d.RefundNo); r != nil {
			switch {
			case r.State != reservation.PendingApproval:
				bad("refund %s approved in state %s", r.No, r.State)
			case reservation.SamePerson(e.By, r.RequestedBy):
				bad("refund %s approved by %s, who requested it as %s", r.No, e.By, r.RequestedBy)
			case d.RequestedBy != r.RequestedBy:
				bad("approval of refund %s names requester %s, the journal says %s", r.No, d.RequestedBy, r.RequestedBy)
			}
		}
	case reservation.ApprovalRejected:
		if r := refund(d.RefundNo); r != nil && r.State != reservation.PendingApproval {
			bad("refund %s rejected in state %s (only PENDING_APPROVAL may be)", r.No, r.State)
		}
	case reservation.ApprovalExpired:
		if r := refund(d.RefundNo); r != nil && r.State != reservation.PendingApproval {
			bad("refund %s expired in state %s (only PENDING_APPROVAL may)", r.No, r.State)
		}
	case reservation.FlaggedStuck:
		if r := refund(d.RefundNo); r != nil && (r.Stuck || r.State.Terminal()) {
			bad("refund %s flagged stuck in state %s (already flagged: %v)", r.No, r.State, r.Stuck)
		}
	case reservation.RefundRecovered:
		prefix, id, n, ok := reservation.ParseRefundNo(d.RefundNo)
		switch {
		case s.Refund(d.RefundNo) != nil:
			bad("refund number %s recovered, but it is already in the journal", d.RefundNo)
		case !ok || id != stream || n != d.Number || prefix == "":
			bad("recovered refund number %s is not PREFIX-%s-%d", d.RefundNo, stream, d.Number)
		case d.Amount <= 0:
			bad("recovered refund %s has %d fen", d.RefundNo, d.Amount)
		case d.State != reservation.Succeeded && d.State != reservation.Processing && d.State != reservation.Abnormal && d.State != reservation.Failed:
			bad("refund %s recovered in state %q (only a state the provider reports)", d.RefundNo, d.State)
		case d.State.Holds() && d.Amount > s.Refundable():
			bad("recovered refund %s holds %d fen, only %d refundable", d.RefundNo, d.Amount, s.Refundable())
		case d.ProviderID == "":
			bad("refund %s recovered without the provider's refund id", d.RefundNo)
		}
	}
	return out
}

func validState(s reservation.RefundState) bool {
	switch s {
	case reservation.Processing, reservation.Succeeded, reservation.Failed, reservation.Unknown, reservation.Rejected, reservation.Abnormal,
		reservation.PendingApproval:
		return true
	}
	return false
}
