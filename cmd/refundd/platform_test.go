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
	keys, books := filepath.Join(dir, "keys"), filepath.Join(dir, "books")
	if err := os.Mkdir(books, 0o700); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	startDaemon(t, simBin, "wxpaysim: point refundd at it with --merchants-file=", nil, nil,
		"--listen", "127.0.0.1:0", "--keys-dir", keys, "--state-dir", books,
		"--processing-delay", "2s", "--time-factor", "0.05", "--log-level", "warn",
		"--direct-merchants=1900000101,1900000102", "--service-provider=1900000200", "--sub-merchants=1900000201,1900000202",
		"--refundd-url", "http://"+addr)
	file := filepath.Join(keys, "merchants.toml")
	reg, err := merchant.ReadFile(file, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	merchants := reg.Merchants()
	if len(merchants) != 4 {
		t.Fatalf("wxpaysim's merchants file has %d merchants, want 4", len(merchants))
	}
	simURL := merchants[0].Account.BaseURL
	sim := &wxsim{url: simURL, http: &http.Client{Timeout: 10 * time.Second}}
	book := func(m *merchant.Merchant) string {
		if m.SubMchID == "" {
			return m.Account.MchID
		}
		return m.Account.MchID + "-" + m.SubMchID
	}

	proc := &refunddProc{bin: refunddBin, data: filepath.Join(dir, "data"), addr: addr, logs: &lockedWriter{},
		flags: []string{"--listen", addr, "--data", filepath.Join(dir, "data"), "--provider", "wechatpay", "--merchants-file", file,
			"--reconcile-after", "300ms", "--reconcile-schedule", "200ms", "--retry-backoff", "30ms",
			"--retry-backoff-max", "200ms", "--refund-spacing", "0", "--scheduler-interval", "20ms",
			"--lock-timeout", "5s", "--shutdown-timeout", "10s", "--log-level", "warn"}}
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
	var refusals map[string]int
	if _, err := sim.admin("GET", "/sandbox/refusals", nil, &refusals); err != nil {
		t.Fatal(err)
	}
	if len(refusals) != 0 {
		t.Errorf("WeChat Pay refused requests (by status): %v; refundd logs:\n%s", refusals, grepLines(proc.logs.String(), "wechatpay", 20))
	}
	if t.Failed() {
		t.Logf("refundd logs:\n%s", tail(proc.logs.String(), 80))
	}
}
