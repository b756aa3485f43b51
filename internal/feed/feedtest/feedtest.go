// Package feedtest writes reservation histories into a journal for tests of
// the event feed and its consumers, and says which consumer events they must
// produce, worked out by its own bookkeeping rather than by package feed.
package feedtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
)

// Want is a consumer event a history must produce.
type Want struct {
	Global        uint64
	Type          string
	ReservationID string
	RefundNo      string
	Amount        int64 // the refund's amount; 0 for reservation.canceled
	Refunded      int64 // the reservation's succeeded total after the event
	State         string
}

// History appends events through eventstore, as the engine does, and keeps
// Want up to date. It assumes it is the journal's only writer.
type History struct {
	t     testing.TB
	db    Journal
	store *eventstore.Store
	rng   *rand.Rand
	now   time.Time
	res   map[string]*res
	ids   []string // registration order, for random picks

	// Want lists the consumer events written so far, in global order.
	Want []Want
	// Records counts the journal records written so far.
	Records int
}

type res struct {
	// st is the reservation as its events fold, the state each append
	// is decided on.
	st       reservation.State
	paid     int64
	counter  int
	refunds  []*refund
	canceled bool
}

type refund struct {
	no     string
	amount int64
	state  reservation.RefundState
}

// Journal is a journal History can write to: *journal.DB, or
// *pgjournal.DB (whose streams History activates before writing).
type Journal interface {
	eventstore.Journal
	LastGlobal(ctx context.Context) (uint64, error)
}

// New returns a History writing to db; seed drives Steps.
func New(t testing.TB, db Journal, seed uint64) *History {
	return &History{
		t: t, db: db, store: eventstore.New(db), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), res: map[string]*res{},
	}
}

// Reopen makes h write to db from now on: the same journal file, opened
// again after a restart.
func (h *History) Reopen(db Journal) {
	h.db, h.store = db, eventstore.New(db)
}

// appendEvents appends data to id's stream and returns the global sequence
// of each event.
func (h *History) appendEvents(id string, data ...reservation.EventData) []uint64 {
	h.t.Helper()
	r := h.res[id]
	events := make([]reservation.Event, len(data))
	for i, d := range data {
		h.now = h.now.Add(time.Second)
		events[i] = reservation.Event{At: h.now, By: "feedtest", Data: d}
	}
	ctx := context.Background()
	if a, ok := h.db.(eventstore.Activator); ok && r.st.Version == 0 {
		if _, err := a.Activate(ctx, id); err != nil {
			h.t.Fatalf("feedtest: activate %s: %v", id, err)
		}
	}
	if err := h.store.Append(ctx, id, &r.st, events); err != nil {
		h.t.Fatalf("feedtest: append to %s: %v", id, err)
	}
	last, err := h.db.LastGlobal(ctx)
	if err != nil {
		h.t.Fatalf("feedtest: %v", err)
	}
	for _, e := range events {
		reservation.Apply(&r.st, e)
	}
	h.Records += len(data)
	globals := make([]uint64, len(data))
	for i := range data {
		globals[i] = last - uint64(len(data)-1-i)
	}
	return globals
}

// Register registers reservation id, paid amount fen, naming no merchant
// (as registrations were journaled before reservations had merchants: the
// default merchant's). No consumer event.
func (h *History) Register(id string, paid int64) {
	h.t.Helper()
	h.RegisterFor(id, "", paid)
}

// RegisterFor registers reservation id for merchant, paid amount fen. No
// consumer event.
func (h *History) RegisterFor(id, merchant string, paid int64) {
	h.t.Helper()
	if _, ok := h.res[id]; ok {
		h.t.Fatalf("feedtest: %s registered twice", id)
	}
	h.res[id] = &res{paid: paid}
	h.ids = append(h.ids, id)
	h.appendEvents(id, reservation.Registered{
		ReservationID: id, UserID: "u-" + id, OutTradeNo: "ORD-" + id, Amount: paid, Currency: "CNY", Merchant: merchant,
	})
}

func (r *res) refundable() int64 {
	n := r.paid
	for _, f := range r.refunds {
		if f.state != reservation.Failed {
			n -= f.amount
		}
	}
	return n
}

func (r *res) refunded() int64 {
	var n int64
	for _, f := range r.refunds {
		if f.state == reservation.Succeeded {
			n += f.amount
		}
	}
	return n
}

func (r *res) find(no string) *refund {
	for _, f := range r.refunds {
		if f.no == no {
			return f
		}
	}
	return nil
}

func (h *History) get(id string) *res {
	h.t.Helper()
	r := h.res[id]
	if r == nil {
		h.t.Fatalf("feedtest: unknown reservation %s", id)
	}
	return r
}

// Request claims amount on id (with its first submission, as the engine
// writes it) and returns the refund number: refund.requested.
func (h *History) Request(id string, amount int64) string {
	h.t.Helper()
	return h.RequestWith(id, amount, "", nil)
}

// RequestWith is Request with a reason code and metadata.
func (h *History) RequestWith(id string, amount int64, reasonCode string, md map[string]string) string {
	h.t.Helper()
	r := h.get(id)
	if amount <= 0 || amount > r.refundable() || r.canceled {
		h.t.Fatalf("feedtest: %s cannot refund %d (refundable %d)", id, amount, r.refundable())
	}
	r.counter++
	no := fmt.Sprintf("T-%s-%d", id, r.counter)
	f := &refund{no: no, amount: amount, state: reservation.Processing}
	r.refunds = append(r.refunds, f)
	g := h.appendEvents(id,
		reservation.RefundRequested{RefundNo: no, Number: r.counter, IdempotencyKey: fmt.Sprintf("k%d", r.counter),
			Fingerprint: "fp", Amount: amount, Reason: "reason " + no, ReasonCode: reasonCode, Metadata: reservation.NewMetadata(md)},
		reservation.SubmissionStarted{RefundNo: no, Attempt: 1, Request: []byte(`{"out_refund_no":"` + no + `"}`),
			DueAt: h.now.Add(time.Minute)},
	)
	h.Want = append(h.Want, Want{Global: g[0], Type: "refund.requested", ReservationID: id, RefundNo: no,
		Amount: amount, Refunded: r.refunded(), State: string(reservation.Processing)})
	return no
}

// Result records a provider result moving refund no of id to state to
// (which may equal its current state: an attempt that changed nothing). A
// success that completes the paid amount also cancels the reservation, in
// the same append, as the engine does.
func (h *History) Result(id, no string, to reservation.RefundState) {
	h.t.Helper()
	r := h.get(id)
	f := r.find(no)
	if f == nil || f.state.Terminal() {
		h.t.Fatalf("feedtest: %s/%s cannot take a result", id, no)
	}
	from := f.state
	f.state = to
	d := reservation.ProviderResult{RefundNo: no, Source: reservation.SourceNotification, Outcome: reservation.OutcomeKind(to),
		ProviderID: "wx-" + no, From: from, To: to}
	if to == reservation.Succeeded {
		d.SuccessTime = h.now
	}
	data := []reservation.EventData{d}
	cancel := to == reservation.Succeeded && r.refunded() == r.paid
	if cancel {
		r.canceled = true
		data = append(data, reservation.Canceled{Refunded: r.paid})
	}
	g := h.appendEvents(id, data...)
	if from != to {
		typ := map[reservation.RefundState]string{reservation.Succeeded: "refund.succeeded",
			reservation.Failed: "refund.failed", reservation.Abnormal: "refund.abnormal"}[to]
		if typ != "" {
			h.Want = append(h.Want, Want{Global: g[0], Type: typ, ReservationID: id, RefundNo: no,
				Amount: f.amount, Refunded: r.refunded(), State: string(to)})
		}
	}
	if cancel {
		h.Want = append(h.Want, Want{Global: g[1], Type: "reservation.canceled", ReservationID: id,
			Refunded: r.paid})
	}
}

// PaidLate is WeChat Pay's SUCCESS for a refund refundd closed as FAILED:
// counted, refund.succeeded, and reservation.canceled when that completes
// the paid amount.
func (h *History) PaidLate(id, no string) {
	h.t.Helper()
	r := h.get(id)
	f := r.find(no)
	if f == nil || f.state != reservation.Failed {
		h.t.Fatalf("feedtest: %s/%s is not failed", id, no)
	}
	f.state = reservation.Succeeded
	data := []reservation.EventData{reservation.ProviderResult{RefundNo: no, Source: reservation.SourceNotification,
		Outcome: reservation.OutcomeSucceeded, ProviderID: "wx-" + no, From: reservation.Failed, To: reservation.Succeeded, SuccessTime: h.now}}
	cancel := r.refunded() == r.paid
	if cancel {
		r.canceled = true
		data = append(data, reservation.Canceled{Refunded: r.paid})
	}
	g := h.appendEvents(id, data...)
	h.Want = append(h.Want, Want{Global: g[0], Type: "refund.succeeded", ReservationID: id, RefundNo: no,
		Amount: f.amount, Refunded: r.refunded(), State: string(reservation.Succeeded)})
	if cancel {
		h.Want = append(h.Want, Want{Global: g[1], Type: "reservation.canceled", ReservationID: id, Refunded: r.paid})
	}
}

// Abandon gives up on a rejected refund: refund.failed.
func (h *History) Abandon(id, no string) {
	h.t.Helper()
	r := h.get(id)
	f := r.find(no)
	if f == nil || f.state != reservation.Rejected {
		h.t.Fatalf("feedtest: %s/%s is not rejected", id, no)
	}
	f.state = reservation.Failed
	g := h.appendEvents(id, reservation.Abandoned{RefundNo: no, Reason: "operator gave up"})
	h.Want = append(h.Want, Want{Global: g[0], Type: "refund.failed", ReservationID: id, RefundNo: no,
		Amount: f.amount, Refunded: r.refunded(), State: string(reservation.Failed)})
}

// Resolve settles an ABNORMAL refund by an operator: refund.succeeded, and
// reservation.canceled when that completes the paid amount.
func (h *History) Resolve(id, no string) {
	h.t.Helper()
	r := h.get(id)
	f := r.find(no)
	if f == nil || f.state != reservation.Abnormal {
		h.t.Fatalf("feedtest: %s/%s is not abnormal", id, no)
	}
	f.state = reservation.Succeeded
	data := []reservation.EventData{reservation.Resolved{RefundNo: no, Reason: "settled by hand"}}
	cancel := r.refunded() == r.paid
	if cancel {
		r.canceled = true
		data = append(data, reservation.Canceled{Refunded: r.paid})
	}
	g := h.appendEvents(id, data...)
	h.Want = append(h.Want, Want{Global: g[0], Type: "refund.succeeded", ReservationID: id, RefundNo: no,
		Amount: f.amount, Refunded: r.refunded(), State: string(reservation.Succeeded)})
	if cancel {
		h.Want = append(h.Want, Want{Global: g[1], Type: "reservation.canceled", ReservationID: id,
			Refunded: r.paid})
	}
}

// Stuck flags a refund as stuck: refund.stuck.
func (h *History) Stuck(id, no string) {
	h.t.Helper()
	r := h.get(id)
	f := r.find(no)
	if f == nil {
		h.t.Fatalf("feedtest: %s/%s unknown", id, no)
	}
	g := h.appendEvents(id, reservation.FlaggedStuck{RefundNo: no})
	h.Want = append(h.Want, Want{Global: g[0], Type: "refund.stuck", ReservationID: id, RefundNo: no,
		Amount: f.amount, Refunded: r.refunded(), State: string(f.state)})
}

// Noise writes a provider query and a conflict for no: records that produce
// no consumer event.
func (h *History) Noise(id, no string) {
	h.t.Helper()
	r := h.get(id)
	f := r.find(no)
	if f == nil {
		h.t.Fatalf("feedtest: %s/%s unknown", id, no)
	}
	h.appendEvents(id,
		reservation.QueryStarted{RefundNo: no, Query: 1, DueAt: h.now.Add(time.Minute)},
		reservation.Conflict{RefundNo: no, State: f.state, Source: reservation.SourceQuery, Outcome: reservation.OutcomeFailed},
	)
}

// Steps takes n random steps: new reservations, requests, provider results
// (including ones that change nothing), abandonments, stuck flags and noise,
// interleaved across reservations.
func (h *History) Steps(n int) {
	h.t.Helper()
	for range n {
		if len(h.ids) == 0 || h.rng.IntN(6) == 0 {
			id := fmt.Sprintf("res-%03d", len(h.ids)+1)
			h.Register(id, int64(100+h.rng.IntN(10000)))
			continue
		}
		id := h.ids[h.rng.IntN(len(h.ids))]
		r := h.res[id]
		var open []*refund
		for _, f := range r.refunds {
			if !f.state.Terminal() {
				open = append(open, f)
			}
		}
		switch k := h.rng.IntN(10); {
		case k < 3 && !r.canceled && r.refundable() > 0:
			h.Request(id, 1+h.rng.Int64N(r.refundable()))
		case k < 7 && len(open) > 0:
			f := open[h.rng.IntN(len(open))]
			states := []reservation.RefundState{reservation.Processing, reservation.Unknown, reservation.Rejected,
				reservation.Succeeded, reservation.Succeeded, reservation.Failed, reservation.Abnormal}
			h.Result(id, f.no, states[h.rng.IntN(len(states))])
		case k < 8 && len(open) > 0:
			f := open[h.rng.IntN(len(open))]
			switch f.state {
			case reservation.Rejected:
				h.Abandon(id, f.no)
			case reservation.Abnormal:
				h.Resolve(id, f.no)
			default:
				h.Stuck(id, f.no)
			}
		case len(r.refunds) > 0:
			h.Noise(id, r.refunds[h.rng.IntN(len(r.refunds))].no)
		}
	}
}
