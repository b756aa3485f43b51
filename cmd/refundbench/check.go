package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
)

// ledger is what the service told this run: reservations registered and
// refunds accepted, with their amounts.
type ledger struct {
	mu         sync.Mutex
	res        map[string]*booked
	violations []string // found while running (a refund number answered with two amounts)
}

type booked struct {
	paid     int64
	merchant string           // named at registration; "" when none was
	accepted map[string]int64 // refund number -> amount
}

func newLedger() *ledger { return &ledger{res: map[string]*booked{}} }

func (l *ledger) registered(id, merchant string, paid int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.res[id] == nil {
		l.res[id] = &booked{paid: paid, merchant: merchant, accepted: map[string]int64{}}
	}
}

func (l *ledger) accepted(id, no string, amount int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.res[id]
	if b == nil {
		l.violations = append(l.violations, fmt.Sprintf("%s: refund %s accepted on a reservation this run never registered", id, no))
		return
	}
	if prev, ok := b.accepted[no]; ok && prev != amount {
		l.violations = append(l.violations, fmt.Sprintf("%s: refund %s accepted for %d and for %d", id, no, prev, amount))
	}
	b.accepted[no] = amount
}

func (l *ledger) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.res)
}

// CheckResult is the end-of-run correctness check.
type CheckResult struct {
	OK           bool     `json:"ok"`
	Skipped      bool     `json:"skipped,omitempty"`
	Reservations int      `json:"reservations"` // checked
	Total        int      `json:"total"`        // registered by the run
	Refunds      int      `json:"refunds"`      // accepted refunds checked
	Unsettled    int      `json:"unsettled"`    // accepted refunds not final when checked
	Violations   int      `json:"violations"`
	Examples     []string `json:"examples,omitempty"` // the first violations
}

// check reads back every reservation of the ledger (or a random --check-max
// of them) and verifies:
//   - the paid amount is the registered one;
//   - refunded + in flight <= paid, and equals the sum of the refunds the
//     service lists as holding money (not FAILED);
//   - every refund the service accepted is listed, with its amount;
//   - the refunds this run was told were accepted (less those FAILED) never
//     add up to more than was paid.
//
// Refunds not final are re-read until --settle has passed; for notify-storm
// a refund that is not SUCCEEDED by then is a violation (the storm carried
// its SUCCESS notification).
func (b *bench) check(ctx context.Context) CheckResult {
	l := b.ledger
	l.mu.Lock()
	ids := make([]string, 0, len(l.res))
	for id := range l.res {
		ids = append(ids, id)
	}
	res := CheckResult{Total: len(ids)}
	var bad []string
	bad = append(bad, l.violations...)
	l.mu.Unlock()
	sort.Strings(ids)
	if max := b.cfg.CheckMax; max > 0 && len(ids) > max {
		rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		ids = ids[:max]
	}
	res.Reservations = len(ids)
	deadline := time.Now().Add(time.Duration(b.cfg.Settle * float64(time.Second)))
	var mu sync.Mutex
	unsettled := 0
	refunds := 0
	_ = b.parallelN(ctx, min(max(b.cfg.Clients, 4), 64), len(ids), func(i int) error {
		id := ids[i]
		l.mu.Lock()
		bk := l.res[id]
		want := make(map[string]int64, len(bk.accepted))
		for no, a := range bk.accepted {
			want[no] = a
		}
		paid, merchant := bk.paid, bk.merchant
		l.mu.Unlock()
		for {
			v, r := b.client.getReservation(ctx, "", id)
			var problems []string
			open := 0
			if !r.ok() || r.err != nil {
				problems = append(problems, fmt.Sprintf("%s: read back failed: %s %v", id, errorKey("get", r), r.err))
			} else {
				problems, open = verify(id, paid, want, v, b.cfg.Scenario == scenarioNotifyStorm)
				problems = append(problems, verifyMerchant(id, merchant, v)...)
			}
			if len(problems) > 0 || open == 0 || time.Now().After(deadline) {
				mu.Lock()
				bad = append(bad, problems...)
				refunds += len(want)
				if open > 0 {
					unsettled += open
					if b.cfg.Scenario == scenarioNotifyStorm {
						bad = append(bad, fmt.Sprintf("%s: %d refunds not SUCCEEDED after the storm", id, open))
					}
				}
				mu.Unlock()
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	res.Refunds, res.Unsettled = refunds, unsettled
	res.Violations = len(bad)
	sort.Strings(bad)
	if len(bad) > 20 {
		bad = bad[:20]
	}
	res.Examples = bad
	res.OK = res.Violations == 0 && ctx.Err() == nil
	return res
}

// verifyMerchant checks that a reservation registered for merchant (named
// by benchMerchant) belongs to it and that each of its refund numbers
// carries its prefix.
func verifyMerchant(id, merchant string, v reservationView) (problems []string) {
	if merchant == "" {
		return nil
	}
	if v.Merchant != merchant {
		problems = append(problems, fmt.Sprintf("%s: registered for merchant %s, read back as %q's", id, merchant, v.Merchant))
	}
	prefix := benchPrefix(merchant)
	for _, r := range v.Refunds {
		if !strings.HasPrefix(r.RefundNo, prefix+"-") {
			problems = append(problems, fmt.Sprintf("%s: refund %s of merchant %s lacks its prefix %s", id, r.RefundNo, merchant, prefix))
		}
	}
	return problems
}

// verify checks one reservation as read back; open counts accepted
// refunds not yet final (or, with wantSucceeded, not yet SUCCEEDED).
func verify(id string, paid int64, accepted map[string]int64, v reservationView, wantSucceeded bool) (problems []string, open int) {
	if v.Amount != paid {
		problems = append(problems, fmt.Sprintf("%s: paid %d, registered %d", id, v.Amount, paid))
	}
	if v.Refunded < 0 || v.InFlight < 0 || v.Refunded+v.InFlight > v.Amount {
		problems = append(problems, fmt.Sprintf("%s: refunded %d + in flight %d > paid %d", id, v.Refunded, v.InFlight, v.Amount))
	}
	var holding int64
	listed := make(map[string]refundView, len(v.Refunds))
	for _, r := range v.Refunds {
		listed[r.RefundNo] = r
		if r.State != "FAILED" {
			holding += r.Amount
		}
	}
	if holding != v.Refunded+v.InFlight {
		problems = append(problems, fmt.Sprintf("%s: refunds holding money add up to %d, refunded + in flight is %d",
			id, holding, v.Refunded+v.InFlight))
	}
	var sum int64
	for no, amount := range accepted {
		r, ok := listed[no]
		if !ok || r.State != "FAILED" { // a FAILED refund released its amount
			sum += amount
		}
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: accepted refund %s is missing", id, no))
		case r.Amount != amount:
			problems = append(problems, fmt.Sprintf("%s: refund %s was accepted for %d, is listed for %d", id, no, amount, r.Amount))
		case wantSucceeded && r.State != "SUCCEEDED", !terminal(r.State):
			open++
		}
	}
	if sum > paid {
		problems = append(problems, fmt.Sprintf("%s: accepted refunds add up to %d, paid %d", id, sum, paid))
	}
	return problems, open
}
