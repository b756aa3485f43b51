package actors_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal/journaltest"
)

// refusedOutcomes signals each provider outcome the engine could not
// journal (the engine logs it and leaves the refund's due time).
type refusedOutcomes struct{ ch chan string }

func (h refusedOutcomes) Enabled(context.Context, slog.Level) bool { return true }
func (h refusedOutcomes) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "provider outcome not journaled") {
		var err string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				err = a.Value.String()
			}
			return true
		})
		select {
		case h.ch <- err:
		default: // the test reads the first ones only
		}
	}
	return nil
}
func (h refusedOutcomes) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h refusedOutcomes) WithGroup(string) slog.Handler      { return h }

// TestEngine_IncompleteQueryAnswerIsNotApplied: a query answer that says
// SUCCESS without the amounts is not applied; the refund stays PROCESSING
// with its next query due, and the next, complete answer settles it.
func TestEngine_IncompleteQueryAnswerIsNotApplied(t *testing.T) {
	clock := newClock()
	var strip atomic.Bool
	strip.Store(true)
	provider := simprovider.New(simprovider.Options{Delay: time.Minute, Now: clock.Now,
		Fault: func(op, no string, _ int) (simprovider.Injected, bool) {
			if op != "query" || !strip.Load() {
				return simprovider.Injected{}, false
			}
			// What a stripped answer maps to: the kind, id and order, no amounts.
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded,
				ProviderID: simprovider.RefundID(no), OutTradeNo: "ORD-r1"}}, true
		}})
	refused := refusedOutcomes{ch: make(chan string, 4)}
	e, err := actors.New(actors.Config{Store: eventstore.New(journaltest.Open(t)), Provider: provider, Encode: simprovider.Encode, Now: clock.Now,
		Policy: reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute}, Logger: slog.New(refused)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	ctx := context.Background()
	if _, _, err := e.Execute(ctx, "r1", "test", reservation.Register{ReservationID: "r1", UserID: "u", OutTradeNo: "ORD-r1",
		Amount: 10000, Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	amount := int64(700)
	st, _, err := e.Execute(ctx, "r1", "test", reservation.RequestRefund{UserID: "u", IdempotencyKey: "k", Amount: &amount})
	if err != nil {
		t.Fatal(err)
	}
	no := st.RefundByKey("k").No
	refund := func() *reservation.Refund {
		st, err := e.Get(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		return st.Refund(no)
	}
	waitFor(t, "the submission's answer", func() bool { return refund().ProviderID != "" })

	clock.Advance(2 * time.Minute) // the provider has refunded; the recheck is due
	if n, err := e.FireDue(ctx, clock.Now(), 100); err != nil || n != 1 {
		t.Fatalf("FireDue = %d, %v", n, err)
	}
	select {
	case msg := <-refused.ch:
		if !strings.Contains(msg, "refund amount does not match") {
			t.Fatalf("refused with %q, want a mismatch on the absent refund amount", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the incomplete answer was not refused: refund %s after %d queries", refund().State, refund().Queries)
	}
	r := refund()
	if r.State != reservation.Processing || r.Queries != 1 || !r.DueAt.After(clock.Now()) {
		t.Fatalf("after the incomplete answer: %s, %d queries, due %v (now %v); want PROCESSING with the next query due",
			r.State, r.Queries, r.DueAt, clock.Now())
	}

	strip.Store(false)
	clock.Advance(r.DueAt.Sub(clock.Now()))
	if n, err := e.FireDue(ctx, clock.Now(), 100); err != nil || n != 1 {
		t.Fatalf("FireDue = %d, %v", n, err)
	}
	waitFor(t, "SUCCEEDED by the complete answer", func() bool { return refund().State == reservation.Succeeded })
	if r := refund(); r.Queries != 2 {
		t.Fatalf("settled after %d queries, want 2", r.Queries)
	}
}
