// Package eventstore adapts the bbolt journal to the actors' Store: it
// encodes reservation events into journal records and derives the unique
// claims (order number, refund number) and due times each event carries, so
// they commit atomically with it.
package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"refundd/actors"
	"refundd/internal/reservation"
	"refundd/journal"
)

// Claim namespaces in the journal.
const (
	NamespaceOutTradeNo = "out_trade_no"
	NamespaceRefundNo   = "refund_no"
)

// Store implements actors.Store on a journal.DB.
type Store struct {
	db *journal.DB
}

// New wraps db. The caller keeps ownership of db and closes it.
func New(db *journal.DB) *Store { return &Store{db: db} }

var _ actors.Store = (*Store)(nil)

// Load implements actors.Store.
func (s *Store) Load(ctx context.Context, id string) ([]reservation.Event, uint64, error) {
	recs, err := s.db.Load(ctx, id, 0)
	if err != nil {
		return nil, 0, err
	}
	events := make([]reservation.Event, len(recs))
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			return nil, 0, fmt.Errorf("eventstore: %s: record %d has sequence %d", id, i+1, r.Seq)
		}
		if events[i], err = reservation.Decode(r.Type, r.Version, r.Data); err != nil {
			return nil, 0, fmt.Errorf("eventstore: %s seq %d: %w", id, r.Seq, err)
		}
	}
	return events, uint64(len(recs)), nil
}

// Append implements actors.Store.
func (s *Store) Append(ctx context.Context, id string, expected uint64, events []reservation.Event) error {
	req := journal.AppendRequest{Stream: id, Expected: expected, Events: make([]journal.Event, 0, len(events))}
	for _, e := range events {
		typ, ver, data, err := reservation.Encode(e)
		if err != nil {
			return err
		}
		req.Events = append(req.Events, journal.Event{Type: typ, Version: ver, Data: data})
		switch d := e.Data.(type) {
		case reservation.Registered:
			req.Claims = append(req.Claims, journal.Claim{Namespace: NamespaceOutTradeNo, Key: d.OutTradeNo})
		case reservation.RefundRequested:
			req.Claims = append(req.Claims, journal.Claim{Namespace: NamespaceRefundNo, Key: d.RefundNo})
		}
		if no, at, ok := reservation.DueOf(e.Data); ok {
			req.Dues = append(req.Dues, journal.Due{At: at, Stream: id, Key: no})
		}
		if no, add, remove := reservation.AttentionOf(e.Data); no != "" {
			for _, k := range remove {
				req.Marks = append(req.Marks, journal.Mark{Key: attentionKey(k, id, no), Clear: true})
			}
			for _, k := range add {
				req.Marks = append(req.Marks, journal.Mark{Key: attentionKey(k, id, no)})
			}
		}
	}
	_, err := s.db.Append(ctx, req)
	var taken *journal.KeyTakenError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &taken) && taken.Namespace == NamespaceOutTradeNo:
		return reservation.ErrOutTradeNoTaken
	case errors.Is(err, journal.ErrSequenceMismatch):
		return fmt.Errorf("%w: %v", actors.ErrVersionConflict, err)
	}
	return err
}

// attentionKey is the marks-index key of a refund needing attention:
// "attention/KIND/RESERVATION/REFUND_NO" (neither id contains '/').
func attentionKey(kind, id, no string) string {
	return "attention/" + kind + "/" + id + "/" + no
}

// Attention implements actors.Store.
func (s *Store) Attention(ctx context.Context, kind, after string, limit int) ([]actors.RefundRef, error) {
	prefix := "attention/" + kind + "/"
	var from string
	if after != "" {
		from = prefix + after
	}
	keys, err := s.db.Marks(ctx, prefix, from, limit)
	if err != nil {
		return nil, err
	}
	refs := make([]actors.RefundRef, 0, len(keys))
	for _, k := range keys {
		rest := strings.TrimPrefix(k, prefix)
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return nil, fmt.Errorf("eventstore: malformed attention key %q", k)
		}
		refs = append(refs, actors.RefundRef{ReservationID: rest[:i], RefundNo: rest[i+1:]})
	}
	return refs, nil
}

// LookupRefund implements actors.Store.
func (s *Store) LookupRefund(ctx context.Context, refundNo string) (string, error) {
	id, err := s.db.Lookup(ctx, NamespaceRefundNo, refundNo)
	if errors.Is(err, journal.ErrNotFound) {
		return "", reservation.ErrNotFound
	}
	return id, err
}

// DueBefore implements actors.Store.
func (s *Store) DueBefore(ctx context.Context, t time.Time, limit int) ([]actors.Timer, error) {
	dues, err := s.db.DueBefore(ctx, t, limit)
	if err != nil {
		return nil, err
	}
	out := make([]actors.Timer, len(dues))
	for i, d := range dues {
		out[i] = actors.Timer{ReservationID: d.Stream, RefundNo: d.Key, DueAt: d.At}
	}
	return out, nil
}

// DeleteDue implements actors.Store.
func (s *Store) DeleteDue(ctx context.Context, timers []actors.Timer) error {
	dues := make([]journal.Due, len(timers))
	for i, t := range timers {
		dues[i] = journal.Due{At: t.DueAt, Stream: t.ReservationID, Key: t.RefundNo}
	}
	return s.db.DeleteDue(ctx, dues)
}
