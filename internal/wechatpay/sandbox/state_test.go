package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// reopen closes f's sandbox (as a stopped process would leave it, or, with
// crash, without letting it save anything more) and starts a new fixture on
// the same state file with edit applied on top of base.
func reopen(t *testing.T, f *fixture, crash bool, base, edit func(*Config)) *fixture {
	t.Helper()
	var path string
	probe := f.keys.Config()
	base(&probe)
	path = probe.StateFile
	if crash {
		// Copy the file as it is now, as if the process were SIGKILLed,
		// and run the new sandbox on the copy.
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(t.TempDir(), "crashed.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		f.sb.Close()
	}
	return newFixture(t, func(c *Config) {
		base(c)
		c.StateFile = path
		if edit != nil {
			edit(c)
		}
	})
}

func readState(t *testing.T, path string) stateDoc {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc stateDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("state file %s: %v", data, err)
	}
	return doc
}

func TestNew_StateFileRestoresBooks(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := map[bool]string{false: "closed", true: "killed"}[crash]
		t.Run(name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "books.json")
			base := func(c *Config) { c.StateFile = state }
			f := newFixture(t, base)
			f.order(t, "O1", 1000)
			if err := f.sb.CreateOrder("O2", "4200000000000000000000000000002", 500); err != nil {
				t.Fatal(err)
			}
			body := refundBody("O1", "R1", 300, 1000, "")
			first := decodeRefund(t, f.m.must("POST", refundsPath, body))
			if r := f.m.must("POST", refundsPath, refundBody("O1", "R1", 301, 1000, "")); r.code() != "INVALID_REQUEST" {
				t.Fatalf("different body before reload: %d %s", r.status, r.body)
			}
			decodeRefund(t, f.m.create("O2", "R2", 500, 500, ""))
			recBefore, _ := f.sb.Refund("R1")

			g := reopen(t, f, crash, base, nil)
			rec, ok := g.sb.Refund("R1")
			if !ok || rec.RefundID != first.RefundID || rec.Status != "SUCCESS" || rec.Refund != 300 || rec.Total != 1000 ||
				rec.BodyHash != recBefore.BodyHash || len(rec.BodyHashes) != 2 || !rec.CreateTime.Equal(recBefore.CreateTime) ||
				!rec.SuccessTime.Equal(recBefore.SuccessTime) || rec.TransactionID != recBefore.TransactionID {
				t.Fatalf("after reload %+v, before %+v", rec, recBefore)
			}
			if g.sb.Refunded("O1") != 300 || g.sb.Refunded("O2") != 500 {
				t.Fatalf("refunded O1 %d O2 %d", g.sb.Refunded("O1"), g.sb.Refunded("O2"))
			}
			// The same body is the same refund; another body is refused.
			again := decodeRefund(t, g.m.must("POST", refundsPath, body))
			if again.RefundID != first.RefundID || again.Status != "SUCCESS" || g.sb.Refunded("O1") != 300 {
				t.Fatalf("resubmission after reload: %+v", again)
			}
			if r := g.m.must("POST", refundsPath, refundBody("O1", "R1", 299, 1000, "")); r.status != 400 || r.code() != "INVALID_REQUEST" {
				t.Fatalf("different body after reload: %d %s", r.status, r.body)
			}
			if got := g.sb.Submissions("R1"); len(got) != 3 {
				t.Fatalf("submissions %v, want the 2 saved bodies and the new one", got)
			}
			// Orders and paid totals survive: refunded <= paid still holds.
			if r := g.m.create("O2", "R3", 1, 500, ""); r.code() != "INVALID_REQUEST" {
				t.Fatalf("over-refund after reload: %d %s", r.status, r.body)
			}
			if r := g.m.create("O1", "R4", 800, 1000, ""); r.code() != "INVALID_REQUEST" {
				t.Fatalf("over-refund after reload: %d %s", r.status, r.body)
			}
			// The id sequence continues: a new refund gets a new id.
			r5 := decodeRefund(t, g.m.create("O1", "R5", 700, 1000, ""))
			if r5.RefundID == first.RefundID || g.sb.Refunded("O1") != 1000 {
				t.Fatalf("new refund %+v after reload", r5)
			}
			if err := g.sb.CreateOrder("O2", "", 501); !errors.Is(err, ErrOrderConflict) {
				t.Fatalf("order total changed after reload: %v", err)
			}
		})
	}
}

// TestCreate_SavedBeforeAnswer reads the state file right after each
// answer, without closing the sandbox: what a killed process leaves.
func TestCreate_SavedBeforeAnswer(t *testing.T) {
	state := filepath.Join(t.TempDir(), "books.json")
	f := newFixture(t, func(c *Config) { c.StateFile = state; c.ProcessingDelay = time.Hour })
	f.order(t, "O1", 1000)
	if doc := readState(t, state); len(doc.Orders) != 1 || doc.Orders[0].OutTradeNo != "O1" || doc.Orders[0].Total != 1000 {
		t.Fatalf("order not saved by CreateOrder: %+v", doc)
	}
	got := decodeRefund(t, f.m.create("O1", "R1", 100, 1000, ""))
	doc := readState(t, state)
	if len(doc.Refunds) != 1 || doc.Refunds[0].RefundID != got.RefundID || doc.Refunds[0].Status != "PROCESSING" ||
		doc.Refunds[0].Amount != 100 || doc.Submissions["R1"].Calls != 1 || doc.Seq == 0 {
		t.Fatalf("refund not saved before the answer: %+v", doc)
	}
	// A refused second body is kept as evidence too.
	f.m.must("POST", refundsPath, refundBody("O1", "R1", 101, 1000, ""))
	if doc := readState(t, state); len(doc.Submissions["R1"].Hashes) != 2 {
		t.Fatalf("second body not saved: %+v", doc.Submissions)
	}
	// Nothing but the state file is left in the directory.
	entries, _ := os.ReadDir(filepath.Dir(state))
	if len(entries) != 1 {
		t.Fatalf("directory holds %v", entries)
	}
}

func TestNew_StateFileResumesProcessing(t *testing.T) {
	k := keys(t)
	rc := newReceiver(t, k, nil)
	state := filepath.Join(t.TempDir(), "books.json")
	base := func(c *Config) { c.StateFile = state }
	f := newFixture(t, func(c *Config) { base(c); c.ProcessingDelay = time.Hour })
	f.order(t, "O1", 1000)
	created := decodeRefund(t, f.m.create("O1", "R1", 250, 1000, rc.url()))

	// The delay has passed by the time the new sandbox starts (it is zero
	// now): the refund finishes at once and is notified at its stored URL.
	g := reopen(t, f, true, base, nil)
	eventually(t, 5*time.Second, "R1 SUCCESS", func() bool { rec, _ := g.sb.Refund("R1"); return rec.Status == "SUCCESS" })
	eventually(t, 5*time.Second, "notification", func() bool { return rc.count() == 1 })
	n := rc.all()[0]
	if n.err != nil || n.res.OutRefundNo != "R1" || n.res.RefundID != created.RefundID || n.res.RefundStatus != "SUCCESS" || n.res.Amount.Refund != 250 {
		t.Fatalf("notification %+v %v", n.res, n.err)
	}
	if got := decodeRefund(t, g.m.query("R1")); got.Status != "SUCCESS" || g.sb.Refunded("O1") != 250 {
		t.Fatalf("query %+v, refunded %d", got, g.sb.Refunded("O1"))
	}
}

func TestNew_StateFileRearmsTimer(t *testing.T) {
	state := filepath.Join(t.TempDir(), "books.json")
	var offset atomic.Int64 // added to the real time
	base := func(c *Config) {
		c.StateFile = state
		c.ProcessingDelay = time.Minute
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	}
	f := newFixture(t, base)
	f.order(t, "O1", 1000)
	f.m.create("O1", "R1", 10, 1000, "")
	f.sb.Close()
	// The new sandbox starts 59.5 s (on its clock) after the acceptance: the
	// outcome is due in half a second, not a minute from now.
	offset.Store(int64(time.Minute - 500*time.Millisecond))
	start := time.Now()
	g := reopen(t, f, false, base, nil)
	if rec, _ := g.sb.Refund("R1"); rec.Status != "PROCESSING" && time.Since(start) < 400*time.Millisecond {
		t.Fatalf("finished %s after reload, before it was due", time.Since(start))
	}
	eventually(t, 10*time.Second, "R1 SUCCESS", func() bool { rec, _ := g.sb.Refund("R1"); return rec.Status == "SUCCESS" })
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s, the timer was not re-armed from the accept time", d)
	}
}

// TestNew_StateFileRenotifies: a notification not yet acknowledged when
// the sandbox stopped is sent again, from the first attempt, after reload;
// once acknowledged it is not pending any more.
func TestNew_StateFileRenotifies(t *testing.T) {
	k := keys(t)
	var up atomic.Bool
	rc := newReceiver(t, k, func(int) int {
		if up.Load() {
			return http.StatusNoContent
		}
		return http.StatusServiceUnavailable
	})
	state := filepath.Join(t.TempDir(), "books.json")
	base := func(c *Config) { c.StateFile = state } // TimeFactor 1: next retry 15 s away
	f := newFixture(t, base)
	f.order(t, "O1", 1000)
	f.m.create("O1", "R1", 10, 1000, rc.url())
	eventually(t, 5*time.Second, "first failed attempt", func() bool { return len(f.sb.Deliveries("R1")) == 1 })
	up.Store(true)
	g := reopen(t, f, false, base, nil)
	eventually(t, 5*time.Second, "acked after reload", func() bool {
		d := g.sb.Deliveries("R1")
		return len(d) == 1 && d[0].Acked
	})
	if d := g.sb.Deliveries("R1")[0]; d.Attempt != 1 || d.RefundStatus != "SUCCESS" {
		t.Fatalf("delivery after reload %+v", d)
	}
	all := rc.all()
	// The notification is rebuilt after reload (a new id), for the same
	// refund and status.
	if len(all) != 2 || all[1].err != nil || all[1].res.OutRefundNo != "R1" || all[1].res.RefundStatus != "SUCCESS" ||
		all[1].res.RefundID != all[0].res.RefundID || all[1].sent != http.StatusNoContent {
		t.Fatalf("receiver saw %+v", all)
	}
	g.sb.Close()
	if doc := readState(t, state); len(doc.Refunds) != 1 || doc.Refunds[0].NotifyPending {
		t.Fatalf("notification still pending after its ack: %+v", doc.Refunds)
	}
}

func TestNew_StateFileErrors(t *testing.T) {
	k := keys(t)
	good := func(t *testing.T) []byte {
		state := filepath.Join(t.TempDir(), "good.json")
		cfg := k.Config()
		cfg.StateFile = state
		sb, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.CreateOrder("O1", "", 1000); err != nil {
			t.Fatal(err)
		}
		sb.Close()
		data, _ := os.ReadFile(state)
		return data
	}(t)
	tests := []struct {
		name string
		data string // "" = no file, in a directory that does not exist
		want string
	}{
		{"missing directory", "", "no such file"},
		{"not json", "{", "decode"},
		{"other version", strings.Replace(string(good), `"version":1`, `"version":2`, 1), "format version 2"},
		{"other merchant", strings.Replace(string(good), `"mchid":"`+testMchID+`"`, `"mchid":"1900000999"`, 1), "1900000999"},
		{"unknown field", strings.Replace(string(good), `"version":1`, `"version":1,"extra":true`, 1), "extra"},
		{"zero total", strings.Replace(string(good), `"total":1000`, `"total":0`, 1), "total 0"},
		{"refund of an unknown order", strings.Replace(string(good), `"refunds":[]`,
			`"refunds":[{"out_refund_no":"R1","refund_id":"1","out_trade_no":"NOPE","amount":1,"status":"SUCCESS","outcome":"SUCCESS","body_hash":"x","created_at":"2025-01-01T00:00:00Z","processing_since":"2025-01-01T00:00:00Z","channel":"ORIGINAL","received_account":"x"}]`, 1), "unknown order"},
		{"refunds above the total", strings.Replace(string(good), `"refunds":[]`,
			`"refunds":[{"out_refund_no":"R1","refund_id":"1","out_trade_no":"O1","amount":1001,"status":"SUCCESS","outcome":"SUCCESS","body_hash":"x","created_at":"2025-01-01T00:00:00Z","processing_since":"2025-01-01T00:00:00Z","channel":"ORIGINAL","received_account":"x"}]`, 1), "exceed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "books.json")
			if tt.data == "" {
				state = filepath.Join(t.TempDir(), "nodir", "books.json")
			} else if err := os.WriteFile(state, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := k.Config()
			cfg.StateFile = state
			sb, err := New(cfg)
			if err == nil {
				sb.Close()
			}
			if !errors.Is(err, ErrStateFile) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrStateFile mentioning %q", err, tt.want)
			}
		})
	}
}

// TestClose_StateFileDetached: after Close the file belongs to the next
// sandbox, so a change is refused rather than answered and forgotten.
func TestClose_StateFileDetached(t *testing.T) {
	state := filepath.Join(t.TempDir(), "books.json")
	f := newFixture(t, func(c *Config) { c.StateFile = state })
	f.order(t, "O1", 1000)
	f.sb.Close()
	if r := f.m.create("O1", "R1", 10, 1000, ""); r.status != 500 || r.code() != "SYSTEM_ERROR" {
		t.Fatalf("create after Close: %d %s", r.status, r.body)
	}
	if err := f.sb.CreateOrder("O2", "", 10); !errors.Is(err, ErrStateFile) {
		t.Fatalf("CreateOrder after Close: %v", err)
	}
	if doc := readState(t, state); len(doc.Refunds) != 0 || len(doc.Orders) != 1 {
		t.Fatalf("written after Close: %+v", doc)
	}
}

// TestCreate_ConcurrentSaved: every refund answered 200 by concurrent
// creates is in the file a kill would leave, with the same id.
func TestCreate_ConcurrentSaved(t *testing.T) {
	state := filepath.Join(t.TempDir(), "books.json")
	base := func(c *Config) { c.StateFile = state }
	f := newFixture(t, func(c *Config) { base(c); c.ProcessingDelay = 10 * time.Millisecond })
	const n = 40
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		no := fmt.Sprintf("C%02d", i)
		f.order(t, "O"+no, 100)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := f.m.send("POST", refundsPath, refundBody("O"+no, no, 100, 100, ""), reqOpts{})
			if err != nil || r.status != 200 {
				t.Errorf("%s: %v %d %s", no, err, r.status, r.body)
				return
			}
			var got refundResp
			json.Unmarshal(r.body, &got)
			ids[i] = got.RefundID
		}()
	}
	wg.Wait()
	g := reopen(t, f, true, base, nil)
	for i := range n {
		no := fmt.Sprintf("C%02d", i)
		rec, ok := g.sb.Refund(no)
		if !ok || rec.RefundID != ids[i] {
			t.Fatalf("%s: answered %s, reloaded %+v", no, ids[i], rec)
		}
	}
	eventually(t, 5*time.Second, "all SUCCESS after reload", func() bool {
		for i := range n {
			if rec, _ := g.sb.Refund(fmt.Sprintf("C%02d", i)); rec.Status != "SUCCESS" {
				return false
			}
		}
		return true
	})
}

// BenchmarkCreate_StateFile measures a create (accepted, then SUCCESS at
// once) through HTTP with the books in memory, and in a state file that
// already holds 1000 orders with a refund each: every save rewrites it.
func BenchmarkCreate_StateFile(b *testing.B) {
	for _, withFile := range []bool{false, true} {
		b.Run(map[bool]string{false: "memory", true: "file_1000_refunds"}[withFile], func(b *testing.B) {
			k, err := testKeys()
			if err != nil {
				b.Fatal(err)
			}
			cfg := k.Config()
			if withFile {
				cfg.StateFile = filepath.Join(b.TempDir(), "books.json")
				doc := stateDoc{Version: stateVersion, MchID: k.MchID, Seq: 1000, Submissions: map[string]stateSubmission{}}
				now := time.Now()
				for i := range 1000 {
					no := fmt.Sprintf("B%04d", i)
					doc.Orders = append(doc.Orders, stateOrder{OutTradeNo: "O" + no, TransactionID: "4200" + no, Total: 1000, PaidAt: now, OpenID: "o" + no})
					doc.Refunds = append(doc.Refunds, stateRefund{OutRefundNo: no, RefundID: "50300" + no, OutTradeNo: "O" + no, Amount: 100,
						Status: "SUCCESS", Outcome: "SUCCESS", BodyHash: bodyHash([]byte(no)), CreatedAt: now, ProcessingSince: now, SucceededAt: now,
						Channel: channelOriginal, ReceivedAccount: accountUserBalance})
					doc.Submissions[no] = stateSubmission{Hashes: []string{bodyHash([]byte(no))}, Calls: 1}
				}
				data, _ := marshalJSON(doc)
				if err := os.WriteFile(cfg.StateFile, data, 0o600); err != nil {
					b.Fatal(err)
				}
			}
			sb, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close()
			hs := httptest.NewServer(sb)
			defer hs.Close()
			signer := k.Signer()
			for i := range b.N/maxRefundsByOrder + 1 {
				sb.CreateOrder(fmt.Sprintf("X%d", i), "", 1000000)
			}
			b.ResetTimer()
			for i := range b.N {
				body := refundBody(fmt.Sprintf("X%d", i/maxRefundsByOrder), fmt.Sprintf("XR%d", i), 1, 1000000, "")
				req, _ := http.NewRequest("POST", hs.URL+refundsPath, bytes.NewReader(body))
				auth, _ := signer.Authorization("POST", refundsPath, body, time.Now().Unix(), wechatpay.NewNonce())
				req.Header.Set("Authorization", auth)
				req.Header.Set("Accept", "application/json")
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
