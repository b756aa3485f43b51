package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/crashpoint"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// TestCrash_EachPointEndsInProviderState kills the real refundd with
// SIGKILL at each crash point (a build with -tags crashpoints), restarts it
// on the same journal while WeChat (wxpaysim) keeps running, and checks that
// the refund ends in WeChat's state with exactly one provider refund, under
// the number it was given before the crash.
func TestCrash_EachPointEndsInProviderState(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	refunddBin, simBin := buildCrashBinaries(t)
	const paid, amount = 10000, 6000

	tests := []struct {
		point string
		// answered: the API must have answered 202 before the crash; when
		// false it may or may not have (the reply and the crash race).
		answered bool
		// faults are set for the order before the refund is requested.
		faults []map[string]any
		// dead checks WeChat while refundd is dead.
		dead func(t *testing.T, rec simRefund, found bool)
		// journaled checks the journal left by the crash.
		journaled func(t *testing.T, results []reservation.ProviderResult)
	}{
		{
			point: crashpoint.AfterSubmitJournaled,
			dead: func(t *testing.T, _ simRefund, found bool) {
				if found {
					t.Fatal("WeChat knows the refund: the crash was not before the provider call")
				}
			},
			journaled: func(t *testing.T, results []reservation.ProviderResult) {
				if len(results) != 0 {
					t.Fatalf("provider results journaled before the provider call: %+v", results)
				}
			},
		},
		{
			point: crashpoint.AfterProviderAnswered,
			// WeChat answers slowly, so the API has surely answered the
			// client before the provider's answer arrives and kills us.
			// (Less than --reconcile-after: a query due while the create
			// is still held would find nothing and resubmit; harmless, the
			// same bytes, but not this test's point.)
			answered: true,
			faults:   []map[string]any{{"kind": "delay", "op": "create", "delay": "100ms", "count": 1}},
			dead: func(t *testing.T, rec simRefund, found bool) {
				if !found || rec.Refund.Refund != 6000 || len(rec.Refund.BodyHashes) != 1 {
					t.Fatalf("WeChat must have accepted the submission: found %v, %+v", found, rec.Refund)
				}
			},
			journaled: func(t *testing.T, results []reservation.ProviderResult) {
				if len(results) != 0 {
					t.Fatalf("the provider's answer was journaled, the crash point is later than it says: %+v", results)
				}
			},
		},
		{
			point:    crashpoint.AfterNotificationJournaled,
			answered: true, // the notification comes WeChat's processing delay later
			dead: func(t *testing.T, rec simRefund, found bool) {
				if !found || rec.Refund.Status != "SUCCESS" {
					t.Fatalf("WeChat: found %v, %+v", found, rec.Refund)
				}
				for _, d := range rec.Deliveries {
					if d.Acked {
						t.Fatalf("a notification was acknowledged before the crash: %+v", d)
					}
				}
			},
			journaled: func(t *testing.T, results []reservation.ProviderResult) {
				// Usually the notification's own result; a query may have
				// recorded the success first, then the notification was a
				// duplicate and the crash came before its ack all the same.
				for _, r := range results {
					if r.To == reservation.Succeeded {
						return
					}
				}
				t.Fatalf("no SUCCEEDED result journaled before the crash: %+v", results)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.point, func(t *testing.T) {
			start := time.Now()
			addr := freeAddr(t)
			notify := "http://" + addr + "/v1/notify/wechatpay/refund"
			// Outcome 200ms after acceptance; WeChat's notification retries
			// at 150ms, 150ms, 300ms, 1.8s, ... after a failed delivery.
			sim := startSim(t, simBin, t.TempDir(), simOptions{processingDelay: "20s", timeFactor: "0.01", notifyURL: notify})
			data := t.TempDir()
			rd := newRefundd(refunddBin, data, addr, sim, false)
			d := rd.start(t, "REFUNDD_CRASH_AT="+tc.point)
			c := client{t: t, base: "http://" + addr}

			id, order := "crash-1", "ORD-CRASH-1"
			sim.createOrder(t, order, paid)
			if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
				"id": id, "user_id": "u", "out_trade_no": order, "amount": paid, "currency": "CNY",
			}); code != 201 {
				t.Fatalf("register: %d %v", code, body)
			}
			for _, f := range tc.faults {
				f["out_trade_no"] = order
				sim.setFault(t, f)
			}
			req := map[string]any{"user_id": "u", "amount": amount, "reason": "crash test"}
			code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", "k1", req)
			answeredNo := ""
			switch {
			case code == 202:
				answeredNo, _ = body["refund_no"].(string)
			case code == 0 && !tc.answered:
				t.Log("the crash came before the API's answer reached the client")
			default:
				t.Fatalf("refund request: %d %v; logs:\n%s", code, body, tail(rd.logs.String(), 40))
			}

			if !d.waitExit(30 * time.Second) {
				t.Fatalf("refundd did not crash at %s within 30s; logs:\n%s", tc.point, tail(rd.logs.String(), 40))
			}
			if !d.killedBySIGKILL() {
				t.Fatalf("refundd exited with %v, want death by SIGKILL at the crash point; logs:\n%s", d.cmd.ProcessState, tail(rd.logs.String(), 40))
			}

			// What the crash left: the journal verifies and holds the
			// refund with its number, and WeChat is where the point says.
			no, results := crashedJournal(t, data, id)
			if answeredNo != "" && answeredNo != no {
				t.Fatalf("the API answered refund %s, the journal holds %s", answeredNo, no)
			}
			tc.journaled(t, results)
			rec, found, err := sim.refund(no)
			if err != nil {
				t.Fatal(err)
			}
			tc.dead(t, rec, found)

			d = rd.start(t)
			// A client that got no answer retries: the same refund, never a
			// second one.
			if code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", "k1", req); code != 200 || body["refund_no"] != no {
				t.Fatalf("replay after restart: %d %v, want 200 with %s", code, body, no)
			}
			rec = waitSettled(t, c, sim, rd, id, no, "SUCCEEDED")
			if len(rec.Refund.BodyHashes) != 1 || rec.Refund.Refund != amount {
				t.Fatalf("WeChat's refund %s: %d bodies, amount %d; want 1 body of %d", no, len(rec.Refund.BodyHashes), rec.Refund.Refund, amount)
			}
			o, err := sim.order(order)
			if err != nil {
				t.Fatal(err)
			}
			if len(o.Refunds) != 1 || o.Refunds[0] != no || o.Refunded != amount {
				t.Fatalf("WeChat's order: %+v; want exactly one refund %s of %d", o, no, amount)
			}
			_, res := c.do("GET", "/v1/reservations/"+id, "", nil)
			refunds, _ := res["refunds"].([]any)
			refunded, _ := res["refunded"].(float64)
			inFlight, _ := res["in_flight"].(float64)
			if len(refunds) != 1 || refunded != amount || refunded+inFlight > paid {
				t.Fatalf("refundd's reservation: %v; want one refund of %d", res, amount)
			}

			if tc.point == crashpoint.AfterNotificationJournaled {
				// WeChat got no ack, so it retries; the restarted refundd
				// acknowledges the retry as a duplicate.
				waitFor(t, 30*time.Second, "an acknowledged duplicate notification", func() (bool, string) {
					rec, _, err := sim.refund(no)
					acked := false
					for _, d := range rec.Deliveries {
						acked = acked || d.Acked
					}
					_, stats := c.do("GET", "/v1/notify/stats", "", nil)
					counts, _ := stats["notifications"].(map[string]any)
					dup, _ := counts["duplicate"].(float64)
					return err == nil && acked && dup >= 1, fmtAny("deliveries", rec.Deliveries, "stats", stats)
				})
				_, r := c.do("GET", "/v1/reservations/"+id+"/refunds/"+no, "", nil)
				if r["state"] != "SUCCEEDED" {
					t.Fatalf("after the duplicate notification: %v", r)
				}
			}

			d.stop(t)
			verifyJournal(t, data)
			t.Logf("%s: crash, restart and settlement in %s", tc.point, time.Since(start).Round(time.Millisecond))
		})
	}
}

// crashedJournal opens the journal a crashed refundd left, verifies it,
// and returns the reservation's one refund number and its provider results.
func crashedJournal(t *testing.T, data, id string) (string, []reservation.ProviderResult) {
	t.Helper()
	db, err := journal.Open(filepath.Join(data, "refundd.db"), &journal.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("journal after SIGKILL: %v", err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.Verify(ctx); err != nil {
		t.Fatalf("journal after SIGKILL: %v", err)
	}
	events, _, err := eventstore.New(db).Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var no string
	var submitted bool
	var results []reservation.ProviderResult
	for _, e := range events {
		switch d := e.Data.(type) {
		case reservation.RefundRequested:
			if no != "" {
				t.Fatalf("two refunds journaled: %s and %s", no, d.RefundNo)
			}
			no = d.RefundNo
		case reservation.SubmissionStarted:
			submitted = submitted || (d.RefundNo == no && d.Attempt == 1 && len(d.Request) > 0)
		case reservation.ProviderResult:
			results = append(results, d)
		}
	}
	if no == "" || !submitted {
		t.Fatalf("the journal lacks the refund or its first submission (with its bytes): %+v", events)
	}
	return no, results
}

// waitSettled waits until refundd and WeChat agree that refund no is in
// state want, and returns WeChat's record.
func waitSettled(t *testing.T, c client, sim *wxsim, rd *refunddProc, id, no, want string) simRefund {
	t.Helper()
	var rec simRefund
	waitFor(t, 30*time.Second, "refund "+no+" "+want+" in refundd and WeChat", func() (bool, string) {
		_, r := c.do("GET", "/v1/reservations/"+id+"/refunds/"+no+"?wait=500ms", "", nil)
		var found bool
		var err error
		rec, found, err = sim.refund(no)
		ok := err == nil && found && r["state"] == want && sandboxState[rec.Refund.Status] == want
		return ok, fmtAny("refundd", r, "wechat", rec.Refund, "found", found, "err", err, "logs", "\n"+grepLines(rd.logs.String(), no, 30))
	})
	return rec
}

// verifyJournal checks a stopped refundd's journal.
func verifyJournal(t *testing.T, data string) {
	t.Helper()
	db, err := journal.Open(filepath.Join(data, "refundd.db"), &journal.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Verify(context.Background()); err != nil {
		t.Fatalf("journal: %v", err)
	}
}
