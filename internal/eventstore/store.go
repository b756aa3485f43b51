// Package eventstore adapts a journal (the bbolt journal, or the PostgreSQL
// one in cluster mode) to the actors' Store: it encodes reservation events
// into journal records (decoding them is reservation.Decode's, for every
// reader), and writes the index entries an append implies
// (reservation.AppendIndexes: the unique claims, due times and attention
// marks) and the changes to the journal's counters (counters.go), so they
// commit atomically with it.
//
// On a journal that fences appends by ownership (Activator, implemented by
// pgjournal), loading a reservation first activates its stream: the actor
// that loads takes the reservation over, and an append of an actor that was
// taken over fails with an error matching both reservation.ErrVersionConflict
// and pgjournal.ErrFenced; the actor then replies with an error and
// passivates, and the next request reloads (and re-activates) it.
package eventstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal"
)

// Claim namespaces in the journal: the core's.
const (
	NamespaceOutTradeNo = reservation.ClaimOutTradeNo
	NamespaceRefundNo   = reservation.ClaimRefundNo
)

// Journal is what Store needs from a journal. *journal.DB and
// *pgjournal.DB implement it, with the error contracts documented there.
// Implementations must be safe for concurrent use.
type Journal interface {
	Append(ctx context.Context, req journal.AppendRequest) (uint64, error)
	Load(ctx context.Context, stream string, afterSeq uint64) ([]journal.Record, error)
	Head(ctx context.Context, stream string) (uint64, error)
	Lookup(ctx context.Context, namespace, key string) (string, error)
	DueBefore(ctx context.Context, t time.Time, limit int) ([]journal.Due, error)
	DeleteDue(ctx context.Context, dues []journal.Due) error
	Marks(ctx context.Context, prefix, after string, limit int) ([]string, error)
	MarksDesc(ctx context.Context, prefix, before string, limit int) ([]string, error)
}

// Activator is implemented by a journal whose appends are fenced by
// ownership (*pgjournal.DB): Activate makes this process the stream's
// owner, waiting for an append of the previous owner that is in flight.
type Activator interface {
	Activate(ctx context.Context, stream string) (epoch uint64, err error)
}

var (
	_ Journal   = (*journal.DB)(nil)
	_ Journal   = (*pgjournal.DB)(nil)
	_ Activator = (*pgjournal.DB)(nil)
)

// Store implements actors.Store on a Journal.
type Store struct {
	db Journal
}

// New wraps db (a *journal.DB or a *pgjournal.DB). The caller keeps
// ownership of db and closes it.
func New(db Journal) *Store { return &Store{db: db} }

// Load implements actors.Store. On an Activator it activates the stream
// first, so the caller (the actor starting) owns it from then on.
func (s *Store) Load(ctx context.Context, id string) ([]reservation.Event, uint64, error) {
	if a, ok := s.db.(Activator); ok {
		if _, err := a.Activate(ctx, id); err != nil {
			return nil, 0, fmt.Errorf("eventstore: activate %s: %w", id, err)
		}
	}
	return Reader{s.db}.Load(ctx, id)
}

// archiveJournal is a Journal that may hold archived streams
// (*journal.DB).
type archiveJournal interface {
	LoadArchived(ctx context.Context, stream string) ([]journal.Record, bool, error)
}

// LoadArchived implements actors.ArchiveStore: Load, and for a stream the
// hot journal does not hold, its archived records when it was archived.
func (s *Store) LoadArchived(ctx context.Context, id string) ([]reservation.Event, uint64, bool, error) {
	events, version, err := s.Load(ctx, id)
	aj, ok := s.db.(archiveJournal)
	if err != nil || version > 0 || !ok {
		return events, version, false, err
	}
	recs, archived, err := aj.LoadArchived(ctx, id)
	if err != nil || !archived {
		return events, version, archived, err
	}
	if events, err = DecodeStream(id, recs); err != nil {
		return nil, 0, true, err
	}
	return events, uint64(len(recs)), true, nil
}

// Reader reads streams without activating them: for readers that must not
// take a reservation over from the node that owns it (the console's
// timeline in a cluster).
type Reader struct{ DB Journal }

// Load returns id's events and its version, as Store.Load does but without
// activating the stream.
func (r Reader) Load(ctx context.Context, id string) ([]reservation.Event, uint64, error) {
	recs, err := r.DB.Load(ctx, id, 0)
	if err != nil {
		return nil, 0, err
	}
	events, err := DecodeStream(id, recs)
	if err != nil {
		return nil, 0, err
	}
	return events, uint64(len(recs)), nil
}

// DecodeStream decodes a whole stream, id's records loaded from its start,
// checking that they are its sequence 1, 2, ... with none missing: what
// Load does, for a reader that must not activate the stream.
func DecodeStream(id string, recs []journal.Record) ([]reservation.Event, error) {
	events := make([]reservation.Event, len(recs))
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			return nil, fmt.Errorf("eventstore: %s: record %d has sequence %d", id, i+1, r.Seq)
		}
		var err error
		if events[i], err = reservation.Decode(r.Type, r.Version, r.Data); err != nil {
			return nil, fmt.Errorf("eventstore: %s seq %d: %w", id, r.Seq, err)
		}
	}
	return events, nil
}

// Version implements actors.Store: the stream's head, read without
// activating it.
func (s *Store) Version(ctx context.Context, id string) (uint64, error) {
	return s.db.Head(ctx, id)
}

// Append implements actors.Store.
func (s *Store) Append(ctx context.Context, id string, before *reservation.State, events []reservation.Event) error {
	req, err := appendRequest(id, before, events)
	if err != nil {
		return err
	}
	_, err = s.db.Append(ctx, req)
	var taken *journal.KeyTakenError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &taken) && taken.Namespace == NamespaceOutTradeNo:
		return reservation.ErrOutTradeNoTaken
	case errors.Is(err, journal.ErrSequenceMismatch):
		return fmt.Errorf("%w: %v", reservation.ErrVersionConflict, err)
	case errors.Is(err, pgjournal.ErrFenced):
		// Another node took the reservation over: this actor's state is
		// stale, like after a sequence conflict.
		return fmt.Errorf("eventstore: %s: %w: %w", id, reservation.ErrVersionConflict, err)
	}
	return err
}

// AttentionKey is the marks-index key of a refund needing attention:
// "attention/KIND/RESERVATION/REFUND_NO" (neither id contains '/').
func AttentionKey(kind, id, no string) string {
	return AttentionPrefix + kind + "/" + id + "/" + no
}

// AttentionPrefix starts every key of the attention index.
const AttentionPrefix = "attention/"

// attentionKeyLen is len(attentionKey(kind, id, no)).
func attentionKeyLen(kind, id, no string) int {
	return len(AttentionPrefix) + len(kind) + 1 + len(id) + 1 + len(no)
}

// requestRoom holds a journal request's slices for a typical append (a
// refund requested with its first submission, or a provider result), so
// that building one costs a single allocation; a larger append grows them.
type requestRoom struct {
	events [2]journal.Event
	claims [1]journal.Claim
	dues   [1]journal.Due
	drops  [1]journal.Due
	marks  [2]journal.Mark
	// A refund's result: four totals, the state counts, refunded and in
	// flight with their merchant's, one type, the latest.
	counters [16]journal.Counter
}

// indexRoom holds the index changes of a typical append, on the stack.
type indexRoom struct {
	claims [1]reservation.Claim
	dues   [1]reservation.DueTime
	drops  [1]reservation.DueTime
	marks  [4]reservation.Mark
	rows   [4]reservation.ListRow
}

// appendRequest builds the journal request of an append of events decided
// on before (nil for a new reservation): the encoded events (all in one
// buffer), and the index entries reservation.AppendIndexes says they
// imply: claims, due times put and dropped, attention marks.
func appendRequest(id string, before *reservation.State, events []reservation.Event) (journal.AppendRequest, error) {
	var expected uint64
	if before != nil {
		expected = before.Version
	}
	room := new(requestRoom)
	req := journal.AppendRequest{Stream: id, Expected: expected,
		Events: room.events[:0], Claims: room.claims[:0], Dues: room.dues[:0]}
	if len(events) > len(room.events) {
		req.Events = make([]journal.Event, 0, len(events))
	}
	size := 0
	for _, e := range events {
		size += reservation.EncodedSizeHint(e)
	}
	buf := make([]byte, 0, size)
	for _, e := range events {
		start := len(buf)
		var err error
		if buf, err = reservation.AppendEncoded(buf, e); err != nil {
			return journal.AppendRequest{}, err
		}
		// Capped: the next event's bytes must not be appended into it.
		data := buf[start:len(buf):len(buf)]
		req.Events = append(req.Events, journal.Event{Type: e.Data.EventType(), Version: reservation.EventVersion, Data: data})
	}
	// The state after the events, once: the list rows and the counters
	// both follow from it and the state before.
	after := reservation.After(before, events)
	var ir indexRoom
	ix := reservation.AppendIndexesTo(reservation.IndexChanges{Claims: ir.claims[:0], Dues: ir.dues[:0],
		Dropped: ir.drops[:0], Marks: ir.marks[:0], Rows: ir.rows[:0]}, before, after, events)
	for _, c := range ix.Claims {
		req.Claims = append(req.Claims, journal.Claim{Namespace: c.Namespace, Key: c.Key})
	}
	for _, d := range ix.Dues {
		req.Dues = append(req.Dues, journal.Due{At: d.At, Stream: id, Key: d.RefundNo})
	}
	if len(ix.Marks) > 0 {
		req.Marks = room.marks[:0]
		// The keys are cut from one string: one allocation for them all.
		keysLen := 0
		for _, m := range ix.Marks {
			keysLen += attentionKeyLen(m.Kind, id, m.RefundNo)
		}
		var b strings.Builder
		b.Grow(keysLen)
		for _, m := range ix.Marks {
			b.WriteString(AttentionPrefix)
			b.WriteString(m.Kind)
			b.WriteByte('/')
			b.WriteString(id)
			b.WriteByte('/')
			b.WriteString(m.RefundNo)
		}
		keys := b.String()
		for _, m := range ix.Marks {
			n := attentionKeyLen(m.Kind, id, m.RefundNo)
			req.Marks = append(req.Marks, journal.Mark{Key: keys[:n], Clear: m.Clear})
			keys = keys[n:]
		}
	}
	for _, k := range ix.Search {
		req.Marks = append(req.Marks, journal.Mark{Key: SearchMarkKey(k.Kind, k.Value, k.Merchant, id, k.RefundNo)})
	}
	req.Marks = ListMarks(req.Marks, ix.Rows)
	req.Counters = counterChangesTo(room.counters[:0], before, after, events)
	// As nil when empty, like a request built by appending from nothing.
	if len(req.Claims) == 0 {
		req.Claims = nil
	}
	if len(req.Dues) == 0 {
		req.Dues = nil
	}
	if len(ix.Dropped) > 0 {
		req.DropDues = room.drops[:0]
		for _, d := range ix.Dropped {
			req.DropDues = append(req.DropDues, journal.Due{At: d.At, Stream: id, Key: d.RefundNo})
		}
	}
	return req, nil
}

// Attention implements actors.Store.
func (s *Store) Attention(ctx context.Context, kind, after string, limit int) ([]reservation.RefundRef, error) {
	prefix := AttentionPrefix + kind + "/"
	var from string
	if after != "" {
		from = prefix + after
	}
	keys, err := s.db.Marks(ctx, prefix, from, limit)
	if err != nil {
		return nil, err
	}
	refs := make([]reservation.RefundRef, 0, len(keys))
	for _, k := range keys {
		rest := strings.TrimPrefix(k, prefix)
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return nil, fmt.Errorf("eventstore: malformed attention key %q", k)
		}
		refs = append(refs, reservation.RefundRef{ReservationID: rest[:i], RefundNo: rest[i+1:]})
	}
	return refs, nil
}

// SearchPrefix starts every key of the search index, a part of the marks
// index: "search/KIND/VALUE/MERCHANT/RESERVATION/REFUND_NO", VALUE
// path-escaped (a user id may hold '/'), REFUND_NO empty for a
// reservation's own ids. MERCHANT after VALUE: a search reads only the
// merchants its caller sees.
const SearchPrefix = "search/"

// SearchMarkKey is the marks-index key of one search entry
// (reservation.SearchKey) of reservation id.
func SearchMarkKey(kind, value, merchant, id, no string) string {
	return searchValuePrefix(kind, value) + merchant + "/" + id + "/" + no
}

func searchValuePrefix(kind, value string) string {
	return SearchPrefix + kind + "/" + url.PathEscape(value) + "/"
}

// Find returns up to limit reservations and refunds with an id equal to
// value, from the indexes kept with the journal (no scan of the log): the
// refund number and, for each of merchants, the order number (claims), and
// the user id, transaction_id and WeChat refund_id (the search index, of
// merchants only). A match on a reservation's own id has no RefundNo. The
// refund number is global: its match may be another merchant's.
func (r Reader) Find(ctx context.Context, merchants []string, value string, limit int) ([]reservation.Found, error) {
	if value == "" {
		return nil, nil // no id is empty, and the journal refuses an empty key
	}
	var out []reservation.Found
	lookup := func(ns, key, no string) error {
		id, err := r.DB.Lookup(ctx, ns, key)
		switch {
		case errors.Is(err, journal.ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		out = append(out, reservation.Found{By: ns, ReservationID: id, RefundNo: no})
		return nil
	}
	for _, k := range reservation.RefundNoKeys(value) {
		if err := lookup(NamespaceRefundNo, k, value); err != nil {
			return nil, err
		}
	}
	for _, m := range merchants {
		if err := lookup(NamespaceOutTradeNo, reservation.OutTradeNoKey(m, value), ""); err != nil {
			return nil, err
		}
	}
	for _, kind := range []string{reservation.SearchUserID, reservation.SearchTransactionID, reservation.SearchProviderRefundID} {
		for _, m := range merchants {
			if len(out) >= limit {
				break
			}
			prefix := searchValuePrefix(kind, value) + m + "/"
			keys, err := r.DB.Marks(ctx, prefix, "", limit-len(out))
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				id, no, ok := strings.Cut(strings.TrimPrefix(k, prefix), "/")
				if !ok {
					return nil, fmt.Errorf("eventstore: malformed search key %q", k)
				}
				out = append(out, reservation.Found{By: kind, ReservationID: id, RefundNo: no})
			}
		}
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// LookupRefund implements actors.Store.
// A number is claimed under one of its keys (reservation.RefundNoKey: the
// default merchant's as it is, another's id first); the number alone does
// not say which merchant's it is, so both are tried.
func (s *Store) LookupRefund(ctx context.Context, refundNo string) (string, error) {
	for _, k := range reservation.RefundNoKeys(refundNo) {
		id, err := s.db.Lookup(ctx, NamespaceRefundNo, k)
		if errors.Is(err, journal.ErrNotFound) {
			continue
		}
		return id, err
	}
	return "", reservation.ErrNotFound
}

// DueBefore implements actors.Store.
func (s *Store) DueBefore(ctx context.Context, t time.Time, limit int) ([]reservation.Timer, error) {
	dues, err := s.db.DueBefore(ctx, t, limit)
	if err != nil {
		return nil, err
	}
	out := make([]reservation.Timer, len(dues))
	for i, d := range dues {
		out[i] = reservation.Timer{ReservationID: d.Stream, RefundNo: d.Key, DueAt: d.At}
	}
	return out, nil
}

// DeleteDue implements actors.Store.
func (s *Store) DeleteDue(ctx context.Context, timers []reservation.Timer) error {
	dues := make([]journal.Due, len(timers))
	for i, t := range timers {
		dues[i] = journal.Due{At: t.DueAt, Stream: t.ReservationID, Key: t.RefundNo}
	}
	return s.db.DeleteDue(ctx, dues)
}
