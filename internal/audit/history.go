package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// Entry is one event of a reservation's timeline: what happened, when, by
// whom, and the state it left.
type Entry struct {
	Global  uint64          `json:"global"`
	Seq     uint64          `json:"seq"`
	At      time.Time       `json:"at"`
	By      string          `json:"by"`
	Type    string          `json:"type"`
	Version uint16          `json:"version"`
	Refund  string          `json:"refund_no,omitempty"`
	Summary string          `json:"summary"`
	Data    json.RawMessage `json:"data"`
	// Problems are rule violations of this event (see Verify).
	Problems []string  `json:"problems,omitempty"`
	State    StateView `json:"state"`
}

// Timeline replays one reservation and returns every event with the state
// after it. It fails with ErrNotFound for a reservation the journal does
// not hold, and with reservation.ErrUnknownEvent for an event this build
// cannot read.
func Timeline(ctx context.Context, db *journal.DB, id string) ([]Entry, error) {
	recs, err := load(ctx, db, id)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(recs))
	var probs []string
	rp := newReplayer(func(p Problem) { probs = append(probs, p.Kind+": "+p.Message) })
	for _, r := range recs {
		probs = nil
		e, st, ok := rp.apply(r)
		if !ok {
			_, err := reservation.Decode(r.Type, r.Version, r.Data)
			return nil, fmt.Errorf("audit: %s seq %d: %w", id, r.Seq, err)
		}
		data, _ := json.Marshal(e.Data)
		out = append(out, Entry{Global: r.Global, Seq: r.Seq, At: e.At, By: e.By, Type: r.Type, Version: r.Version,
			Refund: reservation.RefundNoOf(e.Data), Summary: Describe(e), Data: data, Problems: probs, State: View(st)})
	}
	return out, nil
}

// At selects a past moment of a reservation: the state after the events
// up to and including Seq, or after those decided at or before Time. Set
// exactly one.
type At struct {
	Time time.Time
	Seq  uint64
}

// StateAt returns the reservation's state as it was at the moment at: the
// fold of its events in sequence order, stopping before the first event
// after the moment (events are decided in order, so this is the state the
// service held then). It also returns the last event applied (nil when the
// reservation did not exist yet: then the state is zero).
func StateAt(ctx context.Context, db *journal.DB, id string, at At) (StateView, *Entry, error) {
	if at.Time.IsZero() == (at.Seq == 0) {
		return StateView{}, nil, fmt.Errorf("%w: give either a time or a sequence", ErrInvalid)
	}
	tl, err := Timeline(ctx, db, id)
	if err != nil {
		return StateView{}, nil, err
	}
	var last *Entry
	for i := range tl {
		e := &tl[i]
		if (at.Seq != 0 && e.Seq > at.Seq) || (!at.Time.IsZero() && e.At.After(at.Time)) {
			break
		}
		last = e
	}
	if last == nil {
		return StateView{ID: id, Refunds: []RefundView{}}, nil, nil
	}
	return last.State, last, nil
}

func load(ctx context.Context, db *journal.DB, id string) ([]journal.Record, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty reservation id", ErrInvalid)
	}
	recs, err := db.Load(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		// An archived reservation is read from its segment.
		recs, archived, err := db.LoadArchived(ctx, id)
		if err != nil || archived {
			return recs, err
		}
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return recs, nil
}

// Describe says in a line what an event did.
func Describe(e reservation.Event) string {
	ts := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }
	switch d := e.Data.(type) {
	case reservation.Registered:
		return fmt.Sprintf("registered: paid %s %s (%d fen), order %s of merchant %s", Yuan(d.Amount), d.Currency, d.Amount,
			d.OutTradeNo, reservation.MerchantOf(d.Merchant))
	case reservation.Canceled:
		return fmt.Sprintf("canceled: refunds reached the paid amount (%s)", Yuan(d.Refunded))
	case reservation.RefundRequested:
		s := fmt.Sprintf("refund %s requested: %s (%d fen)", d.RefundNo, Yuan(d.Amount), d.Amount)
		if d.Reason != "" {
			s += ", reason " + fmt.Sprintf("%q", d.Reason)
		}
		if d.ReasonCode != "" {
			s += ", reason code " + d.ReasonCode
		}
		if !d.Metadata.IsZero() {
			s += ", metadata " + string(d.Metadata.AppendJSON(nil))
		}
		return s
	case reservation.SubmissionStarted:
		return fmt.Sprintf("refund %s: submission attempt %d, check at %s", d.RefundNo, d.Attempt, ts(d.DueAt))
	case reservation.SubmissionScheduled:
		return fmt.Sprintf("refund %s: next submission held back until %s (refund spacing)", d.RefundNo, ts(d.DueAt))
	case reservation.QueryStarted:
		return fmt.Sprintf("refund %s: query %d of the provider, next at %s", d.RefundNo, d.Query, ts(d.DueAt))
	case reservation.ProviderResult:
		s := fmt.Sprintf("refund %s: %s says %s: %s -> %s", d.RefundNo, d.Source, d.Outcome, d.From, d.To)
		if d.Code != "" {
			s += " (" + d.Code + ")"
		}
		if d.Retry {
			s += ", resubmit at " + ts(d.DueAt)
		}
		return s
	case reservation.Abandoned:
		return fmt.Sprintf("refund %s abandoned by an operator: FAILED, amount released", d.RefundNo)
	case reservation.Resolved:
		return fmt.Sprintf("refund %s resolved by an operator: SUCCEEDED (%q)", d.RefundNo, d.Reason)
	case reservation.AbnormalApplied:
		return fmt.Sprintf("refund %s: %s asked WeChat Pay to pay the ABNORMAL refund to %s: PROCESSING, check at %s", d.RefundNo, e.By, d.Type, ts(d.DueAt))
	case reservation.Conflict:
		return fmt.Sprintf("refund %s: %s said %s, but it is %s: not applied, needs an operator", d.RefundNo, d.Source, d.Outcome, d.State)
	case reservation.FlaggedStuck:
		return fmt.Sprintf("refund %s flagged stuck", d.RefundNo)
	case reservation.ApprovalRequested:
		return fmt.Sprintf("refund %s needs approval (rule %s): held, not sent; expires at %s", d.RefundNo, d.Rule, ts(d.DueAt))
	case reservation.Approved:
		return fmt.Sprintf("refund %s approved by %s (requested by %s)", d.RefundNo, e.By, d.RequestedBy)
	case reservation.ApprovalRejected:
		return fmt.Sprintf("refund %s rejected by %s (requested by %s): FAILED, amount released (%q)", d.RefundNo, e.By, d.RequestedBy, d.Reason)
	case reservation.ApprovalExpired:
		return fmt.Sprintf("refund %s not approved in time: FAILED, amount released", d.RefundNo)
	case reservation.RefundRecovered:
		return fmt.Sprintf("refund %s recovered after a restore: the provider has it %s, %s (%d fen), refund id %s",
			d.RefundNo, d.State, Yuan(d.Amount), d.Amount, d.ProviderID)
	}
	return e.Data.EventType()
}
