package actors_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

// clock is a settable test clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

type harness struct {
	t        *testing.T
	db       *journal.DB
	store    actors.Store
	provider *simprovider.Provider
	engine   *actors.Engine
	clock    *clock
	log      *slog.Logger
	merchant string
	// policies is Config.Policies; start reads it, so a test may change
	// it between a Close and a start (a merchant taken out).
	policies map[string]reservation.Policy
}

type harnessOpts struct {
	sim    simprovider.Options
	idle   time.Duration
	store  func(actors.Store) actors.Store
	policy *reservation.Policy
	// log and merchant are the engine's Logger and Merchant; nil and ""
	// keep the defaults.
	log      *slog.Logger
	merchant string
	policies map[string]reservation.Policy
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, db: journaltest.Open(t), clock: newClock(), log: o.log, merchant: o.merchant, policies: o.policies}
	h.store = eventstore.New(h.db)
	if o.store != nil {
		h.store = o.store(h.store)
	}
	if o.sim.Now == nil {
		o.sim.Now = h.clock.Now
	}
	h.provider = simprovider.New(o.sim)
	policy := reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute}
	if o.policy != nil {
		policy = *o.policy
	}
	h.start(o.idle, policy)
	return h
}

func (h *harness) start(idle time.Duration, policy reservation.Policy) {
	e, err := actors.New(actors.Config{
		Store: h.store, Provider: h.provider, Encode: simprovider.Encode, Now: h.clock.Now, IdleTimeout: idle, Policy: policy,
		Policies: actors.NewPolicySet(h.policies), Logger: h.log, Merchant: h.merchant,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.engine = e
	h.t.Cleanup(func() { _ = e.Close(context.Background()) })
}

func (h *harness) register(id string, amount int64) {
	h.t.Helper()
	_, _, err := h.engine.Execute(context.Background(), id, "test", reservation.Register{
		ReservationID: id, UserID: "u-" + id, OutTradeNo: "ORD-" + id, Amount: amount, Currency: "CNY",
	})
	if err != nil {
		h.t.Fatalf("register %s: %v", id, err)
	}
}

func (h *harness) refund(id, key string, amount int64) (*reservation.State, []reservation.Event, error) {
	var a *int64
	if amount > 0 {
		a = &amount
	}
	return h.engine.Execute(context.Background(), id, "test",
		reservation.RequestRefund{UserID: "u-" + id, IdempotencyKey: key, Amount: a})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *harness) refundState(id, no string) reservation.RefundState {
	st, err := h.engine.Get(context.Background(), id)
	if err != nil {
		h.t.Fatalf("get %s: %v", id, err)
	}
	if r := st.Refund(no); r != nil {
		return r.State
	}
	return ""
}

func checkInvariants(t *testing.T, st *reservation.State) {
	t.Helper()
	if got := st.Refunded() + st.InFlight(); got > st.Amount {
		t.Fatalf("refunded %d + in flight %d > paid %d", st.Refunded(), st.InFlight(), st.Amount)
	}
}

func TestEngine_ConcurrentSameIdempotencyKey(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.register("r1", 10000)
	var wg sync.WaitGroup
	var created atomic.Int32
	nos := make([]string, 200)
	errs := make([]error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, events, err := h.refund("r1", "same-key", 4000)
			errs[i] = err
			if err == nil {
				nos[i] = st.RefundByKey("same-key").No
				if len(events) > 0 {
					created.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if nos[i] != nos[0] {
			t.Fatalf("request %d got refund %s, request 0 got %s", i, nos[i], nos[0])
		}
	}
	if created.Load() != 1 {
		t.Fatalf("created %d refunds, want 1", created.Load())
	}
	waitFor(t, "the refund to succeed", func() bool { return h.refundState("r1", nos[0]) == reservation.Succeeded })
	if n := h.provider.Submissions(); n != 1 {
		t.Fatalf("provider saw %d submissions, want 1", n)
	}
	st, _ := h.engine.Get(context.Background(), "r1")
	if len(st.Refunds) != 1 || st.Refunded() != 4000 {
		t.Fatalf("refunds=%d refunded=%d, want 1 and 4000", len(st.Refunds), st.Refunded())
	}
}

func TestEngine_ConcurrentDistinctKeysCannotOverRefund(t *testing.T) {
	h := newHarness(t, harnessOpts{sim: simprovider.Options{Delay: time.Hour}}) // keep them in flight
	h.register("r1", 10000)
	var wg sync.WaitGroup
	var ok, insufficient, other atomic.Int32
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := h.refund("r1", fmt.Sprintf("key-%d", i), 3000)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, reservation.ErrInsufficientRefundable):
				insufficient.Add(1)
			default:
				other.Add(1)
				t.Errorf("unexpected error: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 3 || insufficient.Load() != 97 || other.Load() != 0 {
		t.Fatalf("ok=%d insufficient=%d other=%d, want 3/97/0", ok.Load(), insufficient.Load(), other.Load())
	}
	st, err := h.engine.Get(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, st)
	if st.InFlight() != 9000 || st.Refundable() != 1000 {
		t.Fatalf("in flight %d refundable %d, want 9000 and 1000", st.InFlight(), st.Refundable())
	}
	if got := h.provider.Refunded("ORD-r1"); got != 9000 {
		t.Fatalf("provider holds %d for the order, want 9000", got)
	}
}

func TestEngine_PassivatedReservationReactivates(t *testing.T) {
	h := newHarness(t, harnessOpts{idle: 20 * time.Millisecond})
	h.register("r1", 10000)
	waitFor(t, "passivation", func() bool { return h.engine.Active() == 0 })
	st, events, err := h.refund("r1", "k1", 2500)
	if err != nil || len(events) == 0 {
		t.Fatalf("refund after passivation: events=%d err=%v", len(events), err)
	}
	no := st.RefundByKey("k1").No
	waitFor(t, "success", func() bool { return h.refundState("r1", no) == reservation.Succeeded })
	waitFor(t, "passivation again", func() bool { return h.engine.Active() == 0 })
	st, err = h.engine.Get(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Refunded() != 2500 || st.RefundByKey("k1").No != no {
		t.Fatalf("rebuilt state: refunded %d, refund %s; want 2500 and %s", st.Refunded(), st.RefundByKey("k1").No, no)
	}
}

// Many messages racing passivation must all be answered: none may fall into
// a stopping actor's mailbox.
func TestEngine_NoMessageLostAcrossPassivation(t *testing.T) {
	h := newHarness(t, harnessOpts{idle: time.Millisecond})
	h.register("r1", 1000000)
	for i := range 300 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := h.engine.Get(ctx, "r1")
		cancel()
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		if i%3 == 0 {
			time.Sleep(time.Millisecond) // let the idle timeout fire between some messages
		}
	}
}

// lostAnswers is a harness whose provider refunds every submission but
// loses the answer (TIMEOUT) while lost is set, which it is at first.
func lostAnswers(t *testing.T, maxAttempts int) (h *harness, lost *atomic.Bool) {
	lost = new(atomic.Bool)
	lost.Store(true)
	h = newHarness(t, harnessOpts{
		policy: &reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute, MaxAttempts: maxAttempts, RetryBackoff: time.Second},
		sim: simprovider.Options{Fault: func(op, no string, attempt int) (simprovider.Injected, bool) {
			if op == "submit" && lost.Load() {
				return simprovider.Injected{Apply: true, Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "TIMEOUT"}}, true
			}
			return simprovider.Injected{}, false
		}},
	})
	return h, lost
}

func TestEngine_LostResponsesRetriedThenResolvedByQuery(t *testing.T) {
	h, lost := lostAnswers(t, 3)
	h.register("r1", 10000)
	st, _, err := h.refund("r1", "k1", 0)
	if err != nil {
		t.Fatal(err)
	}
	no := st.RefundByKey("k1").No
	attempts := func() int {
		st, _ := h.engine.Get(context.Background(), "r1")
		return st.Refund(no).Attempts
	}
	// Each unknown answer schedules a retry of the same submission; the
	// scheduler (driven by hand here) sends it when due.
	for want := 2; want <= 3; want++ {
		waitFor(t, "a retry to be scheduled", func() bool {
			st, _ := h.engine.Get(context.Background(), "r1")
			r := st.Refund(no)
			return r.Retry && r.Attempts == want-1
		})
		h.clock.Advance(2 * time.Second << (want - 2))
		if _, err := h.engine.FireDue(context.Background(), h.clock.Now(), 100); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("attempt %d", want), func() bool { return attempts() == want })
	}
	waitFor(t, "UNKNOWN after the last attempt", func() bool { return h.refundState("r1", no) == reservation.Unknown })
	lost.Store(false)
	h.clock.Advance(2 * time.Minute)
	if n, err := h.engine.FireDue(context.Background(), h.clock.Now(), 100); err != nil || n == 0 {
		t.Fatalf("FireDue = %d, %v", n, err)
	}
	waitFor(t, "SUCCEEDED via query", func() bool { return h.refundState("r1", no) == reservation.Succeeded })
	st, _ = h.engine.Get(context.Background(), "r1")
	if len(st.Refunds) != 1 || st.Refund(no).Attempts != 3 {
		t.Fatalf("refunds %d attempts %d, want 1 refund after 3 attempts", len(st.Refunds), st.Refund(no).Attempts)
	}
	if got := h.provider.Refunded("ORD-r1"); got != 10000 {
		t.Fatalf("provider refunded %d for the order, want 10000 exactly once", got)
	}
}

// assertLiveDues checks that the store's due index holds exactly the due
// times of id's refunds that are waiting on one: a superseded timer must
// have left the index with the events that superseded it.
func (h *harness) assertLiveDues(what, id string) {
	h.t.Helper()
	st, err := h.engine.Get(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	var want []reservation.Timer
	for _, r := range st.Refunds {
		if !r.DueAt.IsZero() {
			want = append(want, reservation.Timer{ReservationID: id, RefundNo: r.No, DueAt: r.DueAt.UTC()})
		}
	}
	got, err := h.store.DueBefore(context.Background(), h.clock.Now().Add(24*time.Hour), 100)
	if err != nil {
		h.t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		h.t.Fatalf("%s: the due index holds %+v, the live due times are %+v", what, got, want)
	}
}

func TestEngine_DueIndexHoldsOnlyLiveTimers(t *testing.T) {
	t.Run("success at once", func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		h.register("r1", 10000)
		st, _, err := h.refund("r1", "k1", 700)
		if err != nil {
			t.Fatal(err)
		}
		no := st.RefundByKey("k1").No
		waitFor(t, "SUCCEEDED", func() bool { return h.refundState("r1", no) == reservation.Succeeded })
		h.assertLiveDues("after success", "r1")
	})
	t.Run("retries, then a query", func(t *testing.T) {
		h, lost := lostAnswers(t, 2)
		h.register("r1", 10000)
		st, _, err := h.refund("r1", "k1", 0)
		if err != nil {
			t.Fatal(err)
		}
		no := st.RefundByKey("k1").No
		waitFor(t, "a retry to be scheduled", func() bool {
			st, _ := h.engine.Get(context.Background(), "r1")
			return st.Refund(no).Retry
		})
		h.assertLiveDues("retry scheduled", "r1")
		h.clock.Advance(2 * time.Second)
		if _, err := h.engine.FireDue(context.Background(), h.clock.Now(), 100); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "UNKNOWN after the last attempt", func() bool { return h.refundState("r1", no) == reservation.Unknown })
		h.assertLiveDues("unknown, waiting for a query", "r1")
		lost.Store(false)
		h.clock.Advance(2 * time.Minute)
		if n, err := h.engine.FireDue(context.Background(), h.clock.Now(), 100); err != nil || n == 0 {
			t.Fatalf("FireDue = %d, %v", n, err)
		}
		waitFor(t, "SUCCEEDED via query", func() bool { return h.refundState("r1", no) == reservation.Succeeded })
		h.assertLiveDues("after success", "r1")
	})
}

// slowRefund is a harness whose provider answers after an hour, with
// reservation r1 registered and a refund of 700 fen requested: PROCESSING
// until the test's clock moves.
func slowRefund(t *testing.T) (*harness, string) {
	t.Helper()
	h := newHarness(t, harnessOpts{sim: simprovider.Options{Delay: time.Hour}})
	h.register("r1", 10000)
	st, _, err := h.refund("r1", "k1", 700)
	if err != nil {
		t.Fatal(err)
	}
	return h, st.RefundByKey("k1").No
}

// In cluster mode two nodes may briefly both believe they own a
// reservation, and only appends are fenced. An old owner whose actor still
// holds an older state must not answer the refund's live timer as stale:
// the scheduler would delete it from the shared index, and nothing would
// check on the refund again. Two engines on one journal play the nodes.
func TestEngine_StaleOwnerKeepsTheLiveTimer(t *testing.T) {
	ctx := context.Background()
	h, no := slowRefund(t)
	waitFor(t, "PROCESSING with a provider id", func() bool {
		st, _ := h.engine.Get(ctx, "r1")
		return st.Refund(no).ProviderID != ""
	})
	queried := make(chan reservation.Outcome, 1)
	owner, err := actors.New(actors.Config{Store: h.store, Provider: queryDone{h.provider, queried}, Encode: simprovider.Encode, Now: h.clock.Now,
		Policy: reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Close(ctx) })
	// The new owner fires the first recheck: a query, and a later due time.
	h.clock.Advance(2 * time.Minute)
	if n, err := owner.FireDue(ctx, h.clock.Now(), 100); err != nil || n != 1 {
		t.Fatalf("new owner's FireDue = %d, %v; want 1 timer handled", n, err)
	}
	// Its query runs after FireDue returns. Answered after the clock moved
	// on below, it would find the refund paid, and journal that before
	// the old owner's turn, which then had no timer to handle.
	select {
	case o := <-queried:
		if o.Kind != reservation.OutcomeProcessing {
			t.Fatalf("new owner's query: %+v, want PROCESSING (the provider pays after an hour)", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the new owner's query did not run")
	}
	ost, err := owner.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	live := ost.Refund(no).DueAt
	if live.IsZero() {
		t.Fatal("no due time after the query started")
	}
	// The old owner's actor still holds the state from before the query.
	if st, _ := h.engine.Get(ctx, "r1"); st.Version >= ost.Version {
		t.Fatalf("old owner's state is at version %d, the journal at %d: nothing to test", st.Version, ost.Version)
	}
	h.clock.Advance(2 * time.Hour)
	if n, err := h.engine.FireDue(ctx, h.clock.Now(), 100); err != nil || n != 0 {
		t.Fatalf("old owner's FireDue = %d, %v; want the live timer left alone", n, err)
	}
	dues, err := h.store.DueBefore(ctx, h.clock.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(dues) != 1 || dues[0].RefundNo != no || !dues[0].DueAt.Equal(live) {
		t.Fatalf("due index %+v, want the live timer of %s at %v", dues, no, live)
	}
	// Reloaded from the journal, the old owner's next pass handles it.
	waitFor(t, "the old owner's handled timer", func() bool {
		n, err := h.engine.FireDue(ctx, h.clock.Now(), 100)
		return err == nil && n == 1
	})
	// The provider paid the refund meanwhile (its delay is an hour): the
	// query finds it.
	waitFor(t, "SUCCEEDED via the query", func() bool { return h.refundState("r1", no) == reservation.Succeeded })
	st, _ := h.engine.Get(ctx, "r1")
	if r := st.Refund(no); r.Queries != ost.Refund(no).Queries+1 {
		t.Fatalf("after the reload: %d queries, want %d", r.Queries, ost.Refund(no).Queries+1)
	}
	h.assertLiveDues("after the reload", "r1")
}

// queryDone is a provider that sends each query's answer on done.
type queryDone struct {
	*simprovider.Provider
	done chan<- reservation.Outcome
}

func (q queryDone) Query(ctx context.Context, refundNo string) reservation.Outcome {
	o := q.Provider.Query(ctx, refundNo)
	select {
	case q.done <- o:
	default: // only the first answer is waited for
	}
	return o
}

// A refund that does not change, polled with short waits: the actor must
// not keep a waiter for every poll that ended (and its request with it)
// until the reservation changes. Polling keeps the actor from the idle
// check, so only the actor itself can forget them.
func TestEngine_PollingAnUnchangedRefundKeepsNoWaiterPerPoll(t *testing.T) {
	ctx := context.Background()
	h, no := slowRefund(t)
	final := func(s *reservation.State) bool { return s.Refund(no).State.Terminal() }
	// Three callers still waiting, for as long as it takes.
	live, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = h.engine.Await(live, "r1", final)
		}()
	}
	waitFor(t, "three waiters", func() bool { return h.engine.Waiting() == 3 })
	// Polls that each end at once, as GET ...?wait=1ms does.
	for i := range 2000 {
		poll, cancel := context.WithTimeout(ctx, time.Duration(i%3)*time.Microsecond)
		if _, err := h.engine.Await(poll, "r1", final); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	if n := h.engine.Waiting(); n > 2*3+8 {
		t.Fatalf("%d waiters kept after 2000 finished polls and 3 live callers, want at most %d", n, 2*3+8)
	}
	stop()
	wg.Wait()
	// The refund's next change answers or forgets every waiter.
	h.clock.Advance(2 * time.Minute)
	if _, err := h.engine.FireDue(ctx, h.clock.Now(), 100); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no waiters", func() bool { return h.engine.Waiting() == 0 })
}

func TestEngine_SubmissionThatNeverArrivedIsResubmittedWithSameNumber(t *testing.T) {
	var drop atomic.Bool
	drop.Store(true)
	h := newHarness(t, harnessOpts{policy: &reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute, MaxAttempts: 1}, sim: simprovider.Options{
		Fault: func(op, no string, attempt int) (simprovider.Injected, bool) {
			if op == "submit" && drop.Load() {
				return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "CONN_RESET"}}, true
			}
			return simprovider.Injected{}, false
		},
	}})
	h.register("r1", 10000)
	st, _, err := h.refund("r1", "k1", 6000)
	if err != nil {
		t.Fatal(err)
	}
	no := st.RefundByKey("k1").No
	waitFor(t, "UNKNOWN", func() bool { return h.refundState("r1", no) == reservation.Unknown })
	if h.provider.Known(no) {
		t.Fatal("the dropped submission reached the provider")
	}
	drop.Store(false)
	h.clock.Advance(2 * time.Minute)
	if _, err := h.engine.FireDue(context.Background(), h.clock.Now(), 100); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SUCCEEDED after resubmission", func() bool { return h.refundState("r1", no) == reservation.Succeeded })
	st, _ = h.engine.Get(context.Background(), "r1")
	r := st.Refund(no)
	if r.Attempts != 2 || len(st.Refunds) != 1 {
		t.Fatalf("attempts %d refunds %d, want 2 and 1", r.Attempts, len(st.Refunds))
	}
}

func TestEngine_ContradictingNotificationIsAConflict(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.register("r1", 10000)
	st, _, _ := h.refund("r1", "k1", 0)
	no := st.RefundByKey("k1").No
	waitFor(t, "SUCCEEDED", func() bool { return h.refundState("r1", no) == reservation.Succeeded })
	st, _ = h.engine.Get(context.Background(), "r1")
	st, events, err := h.engine.Execute(context.Background(), "r1", "provider", reservation.RecordOutcome{
		RefundNo: no, Source: reservation.SourceNotification, Outcome: complete(st, no, reservation.OutcomeFailed),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Data.EventType() != reservation.TypeConflict {
		t.Fatalf("events = %+v, want one conflict", events)
	}
	if r := st.Refund(no); r.State != reservation.Succeeded || r.Conflicts != 1 {
		t.Fatalf("state %s conflicts %d, want SUCCEEDED and 1", r.State, r.Conflicts)
	}
}

// failingStore fails appends while fail is set.
type failingStore struct {
	actors.Store
	fail atomic.Bool
}

func (f *failingStore) Append(ctx context.Context, id string, before *reservation.State, events []reservation.Event) error {
	if f.fail.Load() {
		return errors.New("disk on fire")
	}
	return f.Store.Append(ctx, id, before, events)
}

func TestEngine_FailedAppendRepliesErrorAndRecovers(t *testing.T) {
	var fs *failingStore
	h := newHarness(t, harnessOpts{store: func(s actors.Store) actors.Store { fs = &failingStore{Store: s}; return fs }})
	h.register("r1", 10000)
	fs.fail.Store(true)
	if _, _, err := h.refund("r1", "k1", 1000); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	fs.fail.Store(false)
	st, events, err := h.refund("r1", "k1", 1000)
	if err != nil || len(events) == 0 {
		t.Fatalf("retry after failure: events %d err %v", len(events), err)
	}
	if len(st.Refunds) != 1 || st.Refunds[0].Number != 1 {
		t.Fatalf("refunds %+v, want exactly one, numbered 1", st.Refunds)
	}
	if h.provider.Submissions() > 1 {
		t.Fatalf("provider saw %d submissions", h.provider.Submissions())
	}
}

func TestEngine_OutTradeNoUniqueAcrossReservations(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.register("r1", 10000)
	_, _, err := h.engine.Execute(context.Background(), "r2", "test", reservation.Register{
		ReservationID: "r2", UserID: "u-r2", OutTradeNo: "ORD-r1", Amount: 500, Currency: "CNY",
	})
	if !errors.Is(err, reservation.ErrOutTradeNoTaken) {
		t.Fatalf("err = %v, want ErrOutTradeNoTaken", err)
	}
	if _, err := h.engine.Get(context.Background(), "r2"); !errors.Is(err, reservation.ErrNotFound) {
		t.Fatalf("r2 exists after a refused registration: %v", err)
	}
}

func TestEngine_AwaitWakesOnChange(t *testing.T) {
	h := newHarness(t, harnessOpts{sim: simprovider.Options{Delay: time.Hour}})
	h.register("r1", 10000)
	st, _, _ := h.refund("r1", "k1", 0)
	no := st.RefundByKey("k1").No
	done := make(chan *reservation.State, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, _ := h.engine.Await(ctx, "r1", func(s *reservation.State) bool { return s.Refund(no).State.Terminal() })
		done <- s
	}()
	if _, _, err := h.engine.Execute(context.Background(), "r1", "provider", reservation.RecordOutcome{
		RefundNo: no, Source: reservation.SourceNotification, Outcome: complete(st, no, reservation.OutcomeSucceeded),
	}); err != nil {
		t.Fatal(err)
	}
	if s := <-done; s == nil || s.Refund(no).State != reservation.Succeeded {
		t.Fatalf("Await returned %+v", s)
	}
}

func TestEngine_CloseTwice(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.register("r1", 100)
	if err := h.engine.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.engine.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := h.engine.Get(context.Background(), "r1"); !errors.Is(err, actors.ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
}

func TestEngine_AwaitAlreadyDone(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.register("r1", 10000)
	calls := 0
	st, err := h.engine.Await(context.Background(), "r1", func(s *reservation.State) bool { calls++; return s.Registered() })
	if err != nil || st == nil || st.ID != "r1" {
		t.Fatalf("Await = %+v, %v", st, err)
	}
	if calls != 1 {
		t.Fatalf("condition checked %d times, want once", calls)
	}
	if _, err := h.engine.Await(context.Background(), "nobody", func(*reservation.State) bool { return true }); !errors.Is(err, reservation.ErrNotFound) {
		t.Fatalf("Await on an unknown reservation: %v, want ErrNotFound", err)
	}
}

func TestEngine_AwaitTimeoutReturnsLastState(t *testing.T) {
	h := newHarness(t, harnessOpts{sim: simprovider.Options{Delay: time.Hour}})
	h.register("r1", 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	st, err := h.engine.Await(ctx, "r1", func(s *reservation.State) bool { return len(s.Refunds) > 0 })
	if err != nil || st == nil || st.ID != "r1" || len(st.Refunds) != 0 {
		t.Fatalf("Await after its deadline = %+v, %v; want the registered state and no error", st, err)
	}
}

func TestEngine_AwaitConditionPanicFailsOnlyThatCall(t *testing.T) {
	h := newHarness(t, harnessOpts{sim: simprovider.Options{Delay: time.Hour}})
	h.register("r1", 10000)
	// Panics at once.
	if _, err := h.engine.Await(context.Background(), "r1", func(*reservation.State) bool { panic("boom") }); err == nil {
		t.Fatal("a panicking condition returned no error")
	}
	// Panics after a change.
	errc := make(chan error, 1)
	waiting := make(chan struct{}, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := h.engine.Await(ctx, "r1", func(s *reservation.State) bool {
			if len(s.Refunds) > 0 {
				panic("boom")
			}
			select {
			case waiting <- struct{}{}:
			default:
			}
			return false
		})
		errc <- err
	}()
	<-waiting // the first check ran on the actor: the waiter is registered
	if _, _, err := h.refund("r1", "k1", 100); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Fatal("a condition panicking after a change returned no error")
	}
	// The reservation is fine.
	if st, err := h.engine.Get(context.Background(), "r1"); err != nil || len(st.Refunds) != 1 {
		t.Fatalf("after the panics: %+v, %v", st, err)
	}
}

func TestEngine_AwaitGivenUpDoesNotPinTheActor(t *testing.T) {
	h := newHarness(t, harnessOpts{idle: 50 * time.Millisecond, sim: simprovider.Options{Delay: time.Hour}})
	h.register("r1", 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := h.engine.Await(ctx, "r1", func(*reservation.State) bool { return false }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle actor to passivate", func() bool { return h.engine.Active() == 0 })
}

func TestEngine_AwaitAcrossClose(t *testing.T) {
	h := newHarness(t, harnessOpts{sim: simprovider.Options{Delay: time.Hour}})
	h.register("r1", 10000)
	type result struct {
		st  *reservation.State
		err error
	}
	res := make(chan result, 1)
	waiting := make(chan struct{}, 1)
	go func() {
		st, err := h.engine.Await(context.Background(), "r1", func(*reservation.State) bool {
			select {
			case waiting <- struct{}{}:
			default:
			}
			return false
		})
		res <- result{st, err}
	}()
	// Close stops the actor; the waiter is released and its retry finds
	// the engine closed.
	<-waiting
	if err := h.engine.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if !errors.Is(r.err, actors.ErrClosed) || r.st == nil || r.st.ID != "r1" {
		t.Fatalf("Await across Close = %+v, %v; want the last state and ErrClosed", r.st, r.err)
	}
}

// complete is an outcome of kind about refund no as WeChat Pay reports it
// in a notification or query: with its id, order and amounts.
func complete(st *reservation.State, no string, kind reservation.OutcomeKind) reservation.Outcome {
	r := st.Refund(no)
	id := r.ProviderID
	if id == "" {
		id = simprovider.RefundID(no) // the memory provider's id
	}
	return reservation.Outcome{Kind: kind, ProviderID: id, OutTradeNo: st.OutTradeNo, RefundAmount: r.Amount, TotalAmount: st.Amount}
}
