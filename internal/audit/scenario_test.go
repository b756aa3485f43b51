package audit_test

import (
	"context"
	"encoding/json"
	"os"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal"
)

// fixedClock is the engine's clock in scenarios: it moves only when told.
type fixedClock struct{ ns atomic.Int64 }

func (c *fixedClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fixedClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// scenarioStart is the first instant of every scripted scenario: 10:00 in
// Beijing on 2026-03-01.
var scenarioStart = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

// refundView and stateView are the parts of a reservation's state that the
// fixtures pin down; they are compared with what the tools replay.
type refundView struct {
	No     string `json:"no"`
	State  string `json:"state"`
	Amount int64  `json:"amount"`
}

type stateView struct {
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Amount  int64        `json:"amount"`
	Version uint64       `json:"version"`
	Refunds []refundView `json:"refunds"`
}

func viewOf(st *reservation.State) stateView {
	v := stateView{ID: st.ID, Status: string(st.Status), Amount: st.Amount, Version: st.Version, Refunds: []refundView{}}
	for _, r := range st.Refunds {
		v.Refunds = append(v.Refunds, refundView{No: r.No, State: string(r.State), Amount: r.Amount})
	}
	return v
}

// moment is a live observation: the states of every reservation after a
// scenario step, and the clock time at which they were observed.
type moment struct {
	At     time.Time            `json:"at"`
	States map[string]stateView `json:"states"`
}

// runScenario drives the real engine (eventstore on the journal at path,
// simprovider answering) through a scripted day and returns what it saw
// after each step. The journal is closed when it returns.
func runScenario(t *testing.T, path string) []moment {
	t.Helper()
	ctx := context.Background()
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fixedClock{}
	clock.ns.Store(scenarioStart.UnixNano())
	faults := map[string]reservation.Outcome{
		"T-r2-1": {Kind: reservation.OutcomeRejected, Code: "NOT_ENOUGH", Message: "balance"},
		"T-r3-1": {Kind: reservation.OutcomeUnknown, Code: "TIMEOUT"},
		"T-r5-2": {Kind: reservation.OutcomeAbnormal, Code: "USER_ACCOUNT_ABNORMAL"},
	}
	sim := simprovider.New(simprovider.Options{Now: clock.Now, Fault: func(op, no string, attempt int) (simprovider.Injected, bool) {
		if o, ok := faults[no]; ok && op == "submit" {
			return simprovider.Injected{Outcome: o, Apply: o.Kind == reservation.OutcomeAbnormal}, true
		}
		return simprovider.Injected{}, false
	}})
	engine, err := actors.New(actors.Config{
		Store: eventstore.New(db), Provider: sim, Encode: simprovider.Encode, Now: clock.Now,
		Policy: reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute, MaxAttempts: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	var moments []moment
	observe := func() {
		m := moment{At: clock.Now(), States: map[string]stateView{}}
		for id := range ids {
			st, err := engine.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			m.States[id] = viewOf(st)
		}
		moments = append(moments, m)
	}
	step := func() { clock.Advance(time.Minute) }
	exec := func(id, by string, cmd reservation.Command) *reservation.State {
		t.Helper()
		run := engine.Execute
		if c, ok := cmd.(reservation.Abandon); ok { // asks WeChat Pay first, as the API does
			run = func(ctx context.Context, id, by string, _ reservation.Command) (*reservation.State, []reservation.Event, error) {
				return engine.Abandon(ctx, id, by, c)
			}
		}
		st, _, err := run(ctx, id, by, cmd)
		if err != nil {
			t.Fatalf("%s %T: %v", id, cmd, err)
		}
		return st
	}
	register := func(id string, amount int64) {
		ids[id] = true
		exec(id, "booking", reservation.Register{ReservationID: id, UserID: "u-" + id, OutTradeNo: "ORD-" + id,
			Amount: amount, Currency: "CNY", PaidAt: clock.Now().Add(-time.Hour)})
	}
	refund := func(id, key string, amount int64, until func(reservation.RefundState) bool) string {
		t.Helper()
		var a *int64
		if amount > 0 {
			a = &amount
		}
		st := exec(id, "api", reservation.RequestRefund{UserID: "u-" + id, IdempotencyKey: key, Amount: a, Reason: "scenario"})
		no := st.RefundByKey(key).No
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := engine.Await(actx, id, func(s *reservation.State) bool {
			r := s.Refund(no)
			return r != nil && r.Attempts > 0 && until(r.State)
		}); err != nil {
			t.Fatalf("await %s: %v", no, err)
		}
		return no
	}
	is := func(want reservation.RefundState) func(reservation.RefundState) bool {
		return func(s reservation.RefundState) bool { return s == want }
	}

	register("r1", 10000)
	observe()
	step()
	refund("r1", "k1", 3000, is(reservation.Succeeded))
	observe()
	step()
	refund("r1", "k2", 2000, is(reservation.Succeeded))
	observe()
	step()
	register("r2", 5000)
	refund("r2", "k1", 0, is(reservation.Rejected))
	observe()
	step()
	exec("r2", "operator", reservation.Abandon{RefundNo: "T-r2-1", Reason: "customer paid cash"})
	observe()
	step()
	register("r3", 8000)
	st := exec("r3", "api", reservation.RequestRefund{UserID: "u-r3", IdempotencyKey: "k1", Reason: "scenario"})
	no := st.RefundByKey("k1").No
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := engine.Await(actx, "r3", func(s *reservation.State) bool { return s.Refund(no).Retry }); err != nil {
		t.Fatal(err)
	}
	cancel()
	observe()
	step()
	register("r4", 2000)
	refund("r4", "k1", 0, is(reservation.Succeeded))
	observe()
	step()
	register("r5", 3000)
	refund("r5", "k1", 1000, is(reservation.Succeeded))
	observe()
	step()
	refund("r5", "k2", 500, is(reservation.Abnormal))
	observe()
	step()
	exec("r5", "operator", reservation.Resolve{RefundNo: "T-r5-2", Reason: "settled by WeChat abnormal process"})
	observe()

	if err := engine.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return moments
}

// writeGolden stores the scenario's last observation beside a fixture.
func writeGolden(t *testing.T, path string, moments []moment) {
	t.Helper()
	b, err := json.MarshalIndent(moments, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sortedIDs(m map[string]stateView) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
