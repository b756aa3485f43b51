package actors

import (
	"context"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// Store is the durable event log the actors need. Implementations must be
// safe for concurrent use by many actors.
type Store interface {
	// Load returns every event of a reservation in order and the stream's
	// version (the number of events). An unknown reservation has none.
	Load(ctx context.Context, reservationID string) ([]reservation.Event, uint64, error)
	// Version returns the reservation's version (its number of events) as
	// the journal holds it now, without loading the events and without
	// taking ownership of the stream (unlike Load in cluster mode).
	Version(ctx context.Context, reservationID string) (uint64, error)
	// Append durably appends events, decided on the state before, after
	// version before.Version, and returns only once they are on disk. It
	// fails with ErrVersionConflict (reservation.ErrVersionConflict) when
	// the stream moved, with reservation.ErrOutTradeNoTaken when a
	// registration names an order held by another reservation, and
	// otherwise with an IO error; on any error nothing was appended. The index entries the events imply given
	// before (reservation.AppendIndexes: claims, due times put and
	// superseded, attention marks) are written in the same commit. before
	// (nil for a new reservation) is only read.
	Append(ctx context.Context, reservationID string, before *reservation.State, events []reservation.Event) error
	// LookupRefund returns the reservation owning a refund number, or
	// reservation.ErrNotFound.
	LookupRefund(ctx context.Context, refundNo string) (string, error)
	// DueBefore lists due timers at or before t, oldest first.
	DueBefore(ctx context.Context, t time.Time, limit int) ([]reservation.Timer, error)
	// DeleteDue removes handled timers; removing a missing one is no error.
	DeleteDue(ctx context.Context, timers []reservation.Timer) error
	// Attention lists refunds needing attention of one kind (a state in
	// reservation.AttentionKinds), kept atomically with the events, in
	// (reservation, refund) order after the cursor "RESERVATION/REFUND_NO".
	Attention(ctx context.Context, kind, after string, limit int) ([]reservation.RefundRef, error)
}

// ArchiveStore is a Store whose journal may have moved finished
// reservations to an archive (refundctl journal archive). The actors load
// with LoadArchived when the store has it: an archived reservation is
// read from the archive and refuses every command with
// reservation.ErrArchived.
type ArchiveStore interface {
	Store
	// LoadArchived is Load, reading an archived reservation from the
	// archive and saying so.
	LoadArchived(ctx context.Context, reservationID string) (events []reservation.Event, version uint64, archived bool, err error)
}
