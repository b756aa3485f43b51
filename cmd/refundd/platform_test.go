package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/crashpoint"
	"github.com/refundd/refundd/internal/merchant"
)

// A platform on real processes: wxpaysim serves two direct merchants and a
// service provider with two sub-merchants, and refundd serves all four
// from the merchants file wxpaysim wrote. Orders of every merchant (with
// the same out_trade_no at each: it is unique per merchant) are refunded
// concurrently, with duplicates (one idempotency key sent twice at once)
// and over-refund attempts, refundd is SIGKILLed mid-load, restarted, and
// the clients send everything again, as clients do after a lost answer.
// Once every refund has settled: each merchant's books at the sandbox
// equal refundd's, per order refunded <= paid on both sides, every refund
// lies in the books of the merchant whose prefix it carries, and WeChat
// Pay refused no request (no wrong key, no foreign or missing sub_mchid).
func TestPlatform_FourMerchantsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs refundd and wxpaysim")
	}
	refunddBin, simBin := buildCrashBinaries(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	sim, reg, file := startPlatformSim(t, simBin, dir, addr)
	merchants := reg.Merchants()
	proc := platformRefundd(refunddBin, dir, addr, file)
	d := proc.start(t)
	base := "http://" + addr

	const orders, paid = 5, 1000
	type order struct {
		m          *merchant.Merchant
		id, otn    string
		refundable int64
	}
	var all []order
	for i, m := range merchants {
		for j := range orders {
			o := order{m: m, id: fmt.Sprintf("m%d-r%d", i, j), otn: fmt.Sprintf("O-%d", j)}
			if _, err := sim.admin("POST", "/sandbox/books/"+book(m)+"/orders", map[string]any{"out_trade_no": o.otn, "total": paid}, nil); err != nil {
				t.Fatal(err)
			}
			code, body, err := apiCall(context.Background(), base, "POST", "/v1/reservations", "",
				map[string]any{"id": o.id, "user_id": "u-" + o.id, "out_trade_no": o.otn, "amount": paid, "currency": "CNY", "merchant": m.Name})
			if err != nil || code != http.StatusCreated {
				t.Fatalf("register %s under %s: %d %v %v", o.id, m.Name, code, body, err)
			}
			all = append(all, o)
		}
	}

	// Four refunds of 300 per order: at most three fit in 1000. Each is
	// sent twice at once with one key.
	type send struct{ id, key string }
	var sends []send
	for _, o := range all {
		for k := range 4 {
			sends = append(sends, send{o.id, fmt.Sprintf("k%d", k)}, send{o.id, fmt.Sprintf("k%d", k)})
		}
	}
	var accepted atomic.Int64
	killAt := int64(len(sends) / 4)
	killed := make(chan struct{})
	var killOnce sync.Once
	fire := func(round int) {
		var wg sync.WaitGroup
		for i, s := range sends {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				code, body, err := apiCall(ctx, base, "POST", "/v1/reservations/"+s.id+"/refunds", s.key,
					map[string]any{"user_id": "u-" + s.id, "amount": 300})
				switch {
				case err != nil:
					if round == 0 {
						return // refundd was killed under this request
					}
					t.Errorf("round %d, send %d: %v", round, i, err)
				case code == http.StatusAccepted || code == http.StatusOK:
					if round == 0 && accepted.Add(1) == killAt {
						killOnce.Do(func() { d.kill(); close(killed) })
					}
				case code == http.StatusConflict && body["error"].(map[string]any)["code"] == "insufficient_refundable":
				case round == 0 && code == http.StatusServiceUnavailable:
				default:
					t.Errorf("round %d: refund %s %s: %d %v", round, s.id, s.key, code, body)
				}
			})
		}
		wg.Wait()
	}
	fire(0)
	select {
	case <-killed:
	default:
		t.Fatalf("only %d refunds were accepted before the load ended; the kill needs %d", accepted.Load(), killAt)
	}
	if !d.killedBySIGKILL() {
		t.Fatal("refundd was not killed by SIGKILL")
	}
	proc.start(t)
	fire(1)

	type view struct {
		Merchant string `json:"merchant"`
		Refunded int64  `json:"refunded"`
		InFlight int64  `json:"in_flight"`
		Refunds  []struct {
			No     string `json:"refund_no"`
			State  string `json:"state"`
			Amount int64  `json:"amount"`
		} `json:"refunds"`
	}
	get := func(id string) (view, error) {
		var v view
		code, body, err := apiCall(context.Background(), base, "GET", "/v1/reservations/"+id, "", nil)
		if err != nil || code != http.StatusOK {
			return v, fmt.Errorf("GET %s: %d %v %v", id, code, body, err)
		}
		raw, _ := json.Marshal(body)
		return v, json.Unmarshal(raw, &v)
	}
	final := map[string]bool{"SUCCEEDED": true, "FAILED": true}
	waitFor(t, 60*time.Second, "every refund of every merchant to settle", func() (bool, string) {
		for _, o := range all {
			v, err := get(o.id)
			if err != nil {
				return false, err.Error()
			}
			for _, r := range v.Refunds {
				if !final[r.State] {
					return false, fmt.Sprintf("%s %s is %s", o.id, r.No, r.State)
				}
			}
		}
		return true, ""
	})

	for _, o := range all {
		v, err := get(o.id)
		if err != nil {
			t.Fatal(err)
		}
		var so simOrder
		if _, err := sim.admin("GET", "/sandbox/books/"+book(o.m)+"/orders/"+o.otn, nil, &so); err != nil {
			t.Fatal(err)
		}
		var ours []string
		for _, r := range v.Refunds {
			if r.State == "SUCCEEDED" {
				ours = append(ours, r.No)
			}
		}
		slices.Sort(ours)
		theirs := slices.Clone(so.Refunds)
		slices.Sort(theirs)
		switch {
		case v.Merchant != o.m.Name:
			t.Errorf("%s belongs to %q, registered under %q", o.id, v.Merchant, o.m.Name)
		case v.Refunded != so.Refunded || !slices.Equal(ours, theirs):
			t.Errorf("%s (%s): refundd refunded %d by %v; the sandbox's books %d by %v", o.id, o.m.Name, v.Refunded, ours, so.Refunded, theirs)
		case v.Refunded > paid || so.Refunded > paid || v.InFlight != 0:
			t.Errorf("%s: refunded %d (sandbox %d), in flight %d, of %d paid", o.id, v.Refunded, so.Refunded, v.InFlight, paid)
		case v.Refunded == 0:
			t.Errorf("%s: nothing refunded", o.id)
		}
		for _, no := range theirs {
			if m, ok := reg.ByRefundNo(no); !ok || m.Name != o.m.Name {
				t.Errorf("refund %s is in %s's books, but its prefix is not %s's", no, o.m.Name, o.m.Name)
			}
		}
	}
	checkNoRefusals(t, sim, proc)
	if t.Failed() {
		t.Logf("refundd logs:\n%s", tail(proc.logs.String(), 80))
	}
}

// startPlatformSim runs wxpaysim with two direct merchants and a service
// provider with two sub-merchants, and reads the merchants file it wrote
// for refundd at addr.
func startPlatformSim(t *testing.T, simBin, dir, addr string) (*wxsim, *merchant.Registry, string) {
	t.Helper()
	keys, books := filepath.Join(dir, "keys"), filepath.Join(dir, "books")
	if err := os.Mkdir(books, 0o700); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, simBin, "wxpaysim: point refundd at it with --merchants-file=", nil, nil,
		"--listen", "127.0.0.1:0", "--keys-dir", keys, "--state-dir", books,
		"--processing-delay", "2s", "--time-factor", "0.05", "--log-level", "warn",
		"--direct-merchants=1900000101,1900000102", "--service-provider=1900000200", "--sub-merchants=1900000201,1900000202",
		"--refundd-url", "http://"+addr)
	file := filepath.Join(keys, "merchants.toml")
	reg, err := merchant.ReadFile(file, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(reg.Merchants()); n != 4 {
		t.Fatalf("wxpaysim's merchants file has %d merchants, want 4", n)
	}
	return &wxsim{d: d, url: reg.Merchants()[0].Account.BaseURL, http: &http.Client{Timeout: 10 * time.Second}}, reg, file
}

// platformRefundd is refundd on the merchants file, with short schedules.
func platformRefundd(bin, dir, addr, file string) *refunddProc {
	data := filepath.Join(dir, "data")
	return &refunddProc{bin: bin, data: data, addr: addr, logs: &lockedWriter{},
		flags: []string{"--listen", addr, "--data", data, "--provider", "wechatpay", "--merchants-file", file,
			"--reconcile-after", "300ms", "--reconcile-schedule", "200ms", "--retry-backoff", "30ms",
			"--retry-backoff-max", "200ms", "--refund-spacing", "0", "--scheduler-interval", "20ms",
			"--lock-timeout", "5s", "--shutdown-timeout", "10s", "--log-level", "warn"}}
}

// book is the sandbox's admin name of a merchant's books.
func book(m *merchant.Merchant) string {
	if m.SubMchID == "" {
		return m.Account.MchID
	}
	return m.Account.MchID + "-" + m.SubMchID
}

// checkNoRefusals fails the test if WeChat Pay refused any request for
// its merchant: a wrong key, a foreign or missing sub_mchid.
func checkNoRefusals(t *testing.T, sim *wxsim, proc *refunddProc) {
	t.Helper()
	var refusals map[string]int
	if _, err := sim.admin("GET", "/sandbox/refusals", nil, &refusals); err != nil {
		t.Fatal(err)
	}
	if len(refusals) != 0 {
		t.Errorf("WeChat Pay refused requests (by status): %v; refundd logs:\n%s", refusals, grepLines(proc.logs.String(), "wechatpay", 20))
	}
}

// The crash points of TestCrash_EachPointEndsInProviderState with several
// merchants: a sub-merchant's refund, whose out_trade_no the other
// sub-merchant of the same provider also has, is SIGKILLed before and after
// WeChat Pay answered its submission. After the restart it ends SUCCEEDED
// with exactly one refund in its own merchant's books, none in the other's,
// and WeChat Pay refused nothing. (The notification crash point is left
// out: this branch serves notifications of the first account only.)
func TestCrash_SubMerchantRefundAtEachSubmissionPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	refunddBin, simBin := buildCrashBinaries(t)
	const paid, amount = 10000, 6000
	for _, point := range []string{crashpoint.AfterSubmitJournaled, crashpoint.AfterProviderAnswered} {
		t.Run(point, func(t *testing.T) {
			dir, addr := t.TempDir(), freeAddr(t)
			sim, reg, file := startPlatformSim(t, simBin, dir, addr)
			inn1, ok1 := reg.ByMchID("1900000200", "1900000201")
			inn2, ok2 := reg.ByMchID("1900000200", "1900000202")
			if !ok1 || !ok2 {
				t.Fatal("the merchants file lacks the sub-merchants")
			}
			const order = "ORD-CRASH-1"
			for _, m := range []*merchant.Merchant{inn1, inn2} {
				if _, err := sim.admin("POST", "/sandbox/books/"+book(m)+"/orders", map[string]any{"out_trade_no": order, "total": paid}, nil); err != nil {
					t.Fatal(err)
				}
			}
			rd := platformRefundd(refunddBin, dir, addr, file)
			d := rd.start(t, "REFUNDD_CRASH_AT="+point)
			c := client{t: t, base: "http://" + addr}
			const id = "crash-1"
			if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
				"id": id, "user_id": "u", "out_trade_no": order, "amount": paid, "currency": "CNY", "merchant": inn2.Name,
			}); code != 201 {
				t.Fatalf("register: %d %v", code, body)
			}
			req := map[string]any{"user_id": "u", "amount": amount}
			if code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", "k1", req); code != 202 && code != 0 {
				t.Fatalf("refund request: %d %v; logs:\n%s", code, body, tail(rd.logs.String(), 40))
			}
			if !d.waitExit(30*time.Second) || !d.killedBySIGKILL() {
				t.Fatalf("refundd did not die by SIGKILL at %s (%v); logs:\n%s", point, d.cmd.ProcessState, tail(rd.logs.String(), 40))
			}
			no, _ := crashedJournal(t, rd.data, id)
			if m, ok := reg.ByRefundNo(no); !ok || m.Name != inn2.Name {
				t.Fatalf("refund %s is not numbered as %s's", no, inn2.Name)
			}

			rd.start(t)
			if code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", "k1", req); code != 200 && code != 202 || body["refund_no"] != no {
				t.Fatalf("replay after restart: %d %v, want %s", code, body, no)
			}
			waitFor(t, 30*time.Second, "refund "+no+" to succeed", func() (bool, string) {
				_, r := c.do("GET", "/v1/reservations/"+id+"/refunds/"+no+"?wait=500ms", "", nil)
				return r["state"] == "SUCCEEDED", fmtAny("refundd", r, "logs", "\n"+grepLines(rd.logs.String(), no, 20))
			})
			for _, tc := range []struct {
				m    *merchant.Merchant
				want []string
			}{{inn2, []string{no}}, {inn1, nil}} {
				var o simOrder
				if _, err := sim.admin("GET", "/sandbox/books/"+book(tc.m)+"/orders/"+order, nil, &o); err != nil {
					t.Fatal(err)
				}
				wantAmount := int64(0)
				if len(tc.want) > 0 {
					wantAmount = amount
				}
				if !slices.Equal(o.Refunds, tc.want) || o.Refunded != wantAmount {
					t.Errorf("%s's books: refunds %v of %d; want %v of %d", tc.m.Name, o.Refunds, o.Refunded, tc.want, wantAmount)
				}
			}
			checkNoRefusals(t, sim, rd)
		})
	}
}
