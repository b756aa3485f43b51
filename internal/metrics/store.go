package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// Store wraps the engine's store to time appends and loads, count
// activations (an actor loads its reservation exactly once when it
// activates) and count the events and refund transitions that were
// journaled. Give the result to actors.Config.Store only: any other Load
// through it would count as an activation.
func (m *Metrics) Store(next Store) Store { return &store{Store: next, m: m} }

// Store is the engine's store (actors.Store), declared here so that the
// decorator need not import the driver.
type Store interface {
	Load(ctx context.Context, reservationID string) ([]reservation.Event, uint64, error)
	Version(ctx context.Context, reservationID string) (uint64, error)
	Append(ctx context.Context, reservationID string, before *reservation.State, events []reservation.Event) error
	LookupRefund(ctx context.Context, refundNo string) (string, error)
	DueBefore(ctx context.Context, t time.Time, limit int) ([]reservation.Timer, error)
	DeleteDue(ctx context.Context, timers []reservation.Timer) error
	Attention(ctx context.Context, kind, after string, limit int) ([]reservation.RefundRef, error)
}

type store struct {
	Store
	m *Metrics
}

func (s *store) Load(ctx context.Context, id string) ([]reservation.Event, uint64, error) {
	start := time.Now()
	events, version, err := s.Store.Load(ctx, id)
	s.m.activations.Add(1)
	if err == nil {
		s.m.loadDuration.Observe(time.Since(start).Seconds())
	}
	return events, version, err
}

// LoadArchived is Load for a store that reads archived reservations
// (actors.ArchiveStore); on another it is Load, never archived.
func (s *store) LoadArchived(ctx context.Context, id string) ([]reservation.Event, uint64, bool, error) {
	as, ok := s.Store.(interface {
		LoadArchived(ctx context.Context, id string) ([]reservation.Event, uint64, bool, error)
	})
	if !ok {
		events, version, err := s.Load(ctx, id)
		return events, version, false, err
	}
	start := time.Now()
	events, version, archived, err := as.LoadArchived(ctx, id)
	s.m.activations.Add(1)
	if err == nil {
		s.m.loadDuration.Observe(time.Since(start).Seconds())
	}
	return events, version, archived, err
}

func (s *store) Append(ctx context.Context, id string, before *reservation.State, events []reservation.Event) error {
	start := time.Now()
	err := s.Store.Append(ctx, id, before, events)
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, reservation.ErrVersionConflict):
		result = "conflict"
	case errors.Is(err, reservation.ErrOutTradeNoTaken):
		result = "taken"
	default:
		result = "error"
	}
	s.m.appendDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
	if err == nil {
		s.m.countEvents(before, events)
	}
	return err
}

// countEvents counts journaled events by type and the refund transitions
// they carry, by the merchant of the reservation (before, or the
// registration among events). A resubmission (REJECTED or UNKNOWN back to PROCESSING) does
// not say which state it left, so it shows as a refund.submission_started
// event and in the attention gauges, not as a transition.
func (m *Metrics) countEvents(before *reservation.State, events []reservation.Event) {
	var merchant string
	if before != nil && before.Registered() {
		merchant = m.merchant(before.Merchant)
	}
	for _, e := range events {
		if e.Data == nil {
			continue
		}
		m.events.WithLabelValues(e.Data.EventType()).Inc()
		var from, to reservation.RefundState
		switch d := e.Data.(type) {
		case reservation.Registered:
			merchant = m.merchant(reservation.MerchantOf(d.Merchant))
		case reservation.RefundRequested:
			from, to = "NEW", reservation.Processing
		case reservation.ProviderResult:
			from, to = d.From, d.To
		case reservation.Abandoned:
			from, to = reservation.Rejected, reservation.Failed
		case reservation.Resolved:
			from, to = reservation.Abnormal, reservation.Succeeded
		case reservation.RefundRecovered:
			from, to = "RECOVERED", d.State
		case reservation.ApprovalRequested:
			from, to = reservation.Processing, reservation.PendingApproval
		case reservation.Approved:
			from, to = reservation.PendingApproval, reservation.Processing
		case reservation.ApprovalRejected, reservation.ApprovalExpired:
			from, to = reservation.PendingApproval, reservation.Failed
		}
		if from != to {
			if merchant == "" { // a refund event before the registration: not journaled by the engine
				merchant = OtherMerchant
			}
			m.transitions.WithLabelValues(string(from), string(to), merchant).Inc()
		}
	}
}
