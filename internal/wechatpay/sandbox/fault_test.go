package sandbox

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// TestSetFault_APIFaults injects each API fault on a create, then checks
// the answer, whether the refund was applied, and that a resubmission of
// the same body afterwards gets the same refund.
func TestSetFault_APIFaults(t *testing.T) {
	tests := []struct {
		name       string
		fault      Fault
		client     *http.Client
		wantErr    bool // transport error (timeout, dropped connection)
		status     int
		code       string
		verify     error // expected response verification error; nil = must verify
		applied    bool
		appliedLag bool // applied only after the answer (delay fault)
	}{
		{name: "system error", fault: Fault{Kind: FaultSystemError}, status: 500, code: "SYSTEM_ERROR"},
		{name: "bare 500", fault: Fault{Kind: FaultHTTP500}, status: 500, verify: wechatpay.ErrMissingHeader},
		{name: "frequency limited", fault: Fault{Kind: FaultFrequencyLimited}, status: 429, code: "FREQUENCY_LIMITED"},
		{name: "accepted 202", fault: Fault{Kind: FaultAccepted}, status: 202},
		{name: "merchant balance short", fault: Fault{Kind: FaultNotEnough}, status: 403, code: "NOT_ENOUGH"},
		{name: "response lost as 500", fault: Fault{Kind: FaultResponseLost}, status: 500, code: "SYSTEM_ERROR", applied: true},
		{name: "response lost, connection dropped", fault: Fault{Kind: FaultResponseLost, Delay: 50 * time.Millisecond}, wantErr: true, applied: true},
		{name: "bad signature", fault: Fault{Kind: FaultBadSignature}, status: 200, verify: wechatpay.ErrBadSignature, applied: true},
		{name: "probe signature", fault: Fault{Kind: FaultProbeSignature}, status: 200, verify: wechatpay.ErrProbe, applied: true},
		{name: "delay beyond client timeout", fault: Fault{Kind: FaultDelay, Delay: 400 * time.Millisecond},
			client: &http.Client{Timeout: 100 * time.Millisecond}, wantErr: true, appliedLag: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.order(t, "O1", 1000)
			tt.fault.OutRefundNo, tt.fault.Count = "R1", 1
			if err := f.sb.SetFault(tt.fault); err != nil {
				t.Fatal(err)
			}
			body := refundBody("O1", "R1", 100, 1000, "")
			r, err := f.m.send("POST", refundsPath, body, reqOpts{client: tt.client})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %d %s, want a transport error", r.status, r.body)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if r.status != tt.status || tt.code != "" && r.code() != tt.code {
					t.Fatalf("got %d %s, want %d %s", r.status, r.body, tt.status, tt.code)
				}
				if tt.verify == nil && r.verifyErr != nil || tt.verify != nil && !errors.Is(r.verifyErr, tt.verify) {
					t.Fatalf("verify: %v, want %v", r.verifyErr, tt.verify)
				}
			}
			if tt.appliedLag {
				eventually(t, 5*time.Second, "delayed create applied", func() bool { _, ok := f.sb.Refund("R1"); return ok })
			} else if _, ok := f.sb.Refund("R1"); ok != tt.applied {
				t.Fatalf("applied = %v, want %v", ok, tt.applied)
			}
			// The fault is used up: the same request now gets the one refund.
			again := decodeRefund(t, f.m.must("POST", refundsPath, body))
			rec, _ := f.sb.Refund("R1")
			if again.RefundID != rec.RefundID || f.sb.Refunded("O1") != 100 || len(rec.BodyHashes) != 1 {
				t.Fatalf("after fault: %+v record %+v refunded %d", again, rec, f.sb.Refunded("O1"))
			}
		})
	}
}

func TestSetFault_CountOpAndTarget(t *testing.T) {
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	f.order(t, "O2", 1000)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.sb.SetFault(Fault{Kind: FaultSystemError, OutTradeNo: "O1", Op: OpCreate, Count: 2}))
	must(f.sb.SetFault(Fault{Kind: FaultFrequencyLimited, OutRefundNo: "Q1", Op: OpQuery}))

	// O2 is not targeted.
	if r := f.m.create("O2", "Q1", 10, 1000, ""); r.status != 200 {
		t.Fatalf("O2 create: %d %s", r.status, r.body)
	}
	// Q1's query is (until cleared), its create was not.
	for range 2 {
		if r := f.m.query("Q1"); r.status != 429 || r.code() != "FREQUENCY_LIMITED" {
			t.Fatalf("Q1 query: %d %s", r.status, r.body)
		}
	}
	// O1 creates fail twice, then the count is used up.
	for i := range 3 {
		r := f.m.create("O1", "P1", 10, 1000, "")
		if want := map[bool]int{true: 500, false: 200}[i < 2]; r.status != want {
			t.Fatalf("O1 create %d: %d %s", i+1, r.status, r.body)
		}
	}
	// O1 queries were never affected (Op create).
	if r := f.m.query("P1"); r.status != 200 {
		t.Fatalf("P1 query: %d", r.status)
	}
	if fs := f.sb.Faults(); len(fs) != 1 || fs[0].Kind != FaultFrequencyLimited || fs[0].Count != 0 {
		t.Fatalf("faults left: %+v", fs)
	}
	f.sb.ClearFaults()
	if r := f.m.query("Q1"); r.status != 200 {
		t.Fatalf("after ClearFaults: %d", r.status)
	}
	if err := f.sb.SetFault(Fault{Kind: "nope"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unknown kind: %v", err)
	}
	if err := f.sb.SetFault(Fault{Kind: FaultOutcome, Outcome: "SUCCESS"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad outcome: %v", err)
	}
}

func TestSetFault_QueryResponseLost(t *testing.T) {
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	f.m.create("O1", "R1", 10, 1000, "")
	if err := f.sb.SetFault(Fault{Kind: FaultResponseLost, OutRefundNo: "R1", Op: OpQuery, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if r := f.m.query("R1"); r.status != 500 || r.code() != "SYSTEM_ERROR" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got := decodeRefund(t, f.m.query("R1")); got.Status != "SUCCESS" {
		t.Fatalf("status %s", got.Status)
	}
}

func TestSetFault_Outcome(t *testing.T) {
	for _, outcome := range []string{"CLOSED", "ABNORMAL"} {
		t.Run(outcome, func(t *testing.T) {
			k := keys(t)
			rc := newReceiver(t, k, nil)
			f := newFixture(t, func(c *Config) { c.ProcessingDelay = 20 * time.Millisecond })
			f.order(t, "O1", 1000)
			if err := f.sb.SetFault(Fault{Kind: FaultOutcome, OutTradeNo: "O1", Outcome: outcome, Count: 1}); err != nil {
				t.Fatal(err)
			}
			if got := decodeRefund(t, f.m.create("O1", "R1", 1000, 1000, rc.url())); got.Status != "PROCESSING" {
				t.Fatalf("create status %s", got.Status)
			}
			eventually(t, 5*time.Second, "final status", func() bool { return decodeRefund(t, f.m.query("R1")).Status == outcome })
			eventually(t, 5*time.Second, "notification", func() bool { return rc.count() == 1 })
			g := rc.all()[0]
			if g.err != nil || g.res.RefundStatus != outcome || g.n.EventType != "REFUND."+outcome || g.res.SuccessTime != "" {
				t.Fatalf("notification %+v %+v %v", g.n, g.res, g.err)
			}
			// CLOSED gives the money back to the order; ABNORMAL holds it.
			wantHeld := map[string]int64{"CLOSED": 0, "ABNORMAL": 1000}[outcome]
			if got := f.sb.Refunded("O1"); got != wantHeld {
				t.Fatalf("refunded %d, want %d", got, wantHeld)
			}
			r := f.m.create("O1", "R2", 1000, 1000, "")
			if outcome == "CLOSED" && r.status != 200 || outcome == "ABNORMAL" && r.code() != "INVALID_REQUEST" {
				t.Fatalf("new refund after %s: %d %s", outcome, r.status, r.body)
			}
		})
	}
}

func TestSetFault_NotifyDuplicate(t *testing.T) {
	k := keys(t)
	rc := newReceiver(t, k, nil)
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	if err := f.sb.SetFault(Fault{Kind: FaultNotifyDuplicate, OutRefundNo: "R1", Repeat: 2}); err != nil {
		t.Fatal(err)
	}
	f.m.create("O1", "R1", 10, 1000, rc.url())
	eventually(t, 5*time.Second, "three copies", func() bool { return rc.count() == 3 })
	got := rc.all()
	for _, g := range got {
		if g.err != nil || g.n.ID != got[0].n.ID || g.res.OutRefundNo != "R1" {
			t.Fatalf("copy %+v %v", g.n, g.err)
		}
	}
	eventually(t, 2*time.Second, "deliveries", func() bool { return len(f.sb.Deliveries("R1")) == 3 })
	copies := map[int]bool{}
	for _, d := range f.sb.Deliveries("R1") {
		copies[d.Copy] = d.Acked
	}
	if len(copies) != 3 || !copies[0] || !copies[1] || !copies[2] {
		t.Fatalf("copies %v", copies)
	}
}

// TestSetFault_NotifyOutOfOrder covers the two out-of-order shapes: a
// notification held back until after the merchant saw the outcome by query
// (and overtaken by a later refund's), and a stale duplicate arriving after
// the original was acknowledged.
func TestSetFault_NotifyOutOfOrder(t *testing.T) {
	k := keys(t)
	rc := newReceiver(t, k, nil)
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	const hold = 300 * time.Millisecond
	if err := f.sb.SetFault(Fault{Kind: FaultNotifyLate, OutRefundNo: "R1", Delay: hold}); err != nil {
		t.Fatal(err)
	}
	if err := f.sb.SetFault(Fault{Kind: FaultNotifyDuplicate, OutRefundNo: "R1", Repeat: 1, Delay: hold}); err != nil {
		t.Fatal(err)
	}
	f.m.create("O1", "R1", 10, 1000, rc.url())
	if got := decodeRefund(t, f.m.query("R1")); got.Status != "SUCCESS" {
		t.Fatalf("query status %s", got.Status)
	}
	f.m.create("O1", "R2", 10, 1000, rc.url())
	eventually(t, 5*time.Second, "all notifications", func() bool { return rc.count() == 3 })
	got := rc.all()
	order := []string{got[0].res.OutRefundNo, got[1].res.OutRefundNo, got[2].res.OutRefundNo}
	if strings.Join(order, ",") != "R2,R1,R1" {
		t.Fatalf("arrival order %v, want R2,R1,R1", order)
	}
	if gap := got[2].at.Sub(got[1].at); gap < hold/2 {
		t.Fatalf("stale duplicate came %s after the original", gap)
	}
}

func TestSetFault_NotifyDrop(t *testing.T) {
	k := keys(t)
	rc := newReceiver(t, k, nil)
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	if err := f.sb.SetFault(Fault{Kind: FaultNotifyDrop, OutRefundNo: "R1"}); err != nil {
		t.Fatal(err)
	}
	f.m.create("O1", "R1", 10, 1000, rc.url())
	f.m.create("O1", "R2", 10, 1000, rc.url())
	eventually(t, 5*time.Second, "R2 notified", func() bool { return len(f.sb.Deliveries("R2")) == 1 })
	if d := f.sb.Deliveries("R1"); len(d) != 0 || rc.count() != 1 {
		t.Fatalf("dropped notification was sent: %+v", d)
	}
	if got := decodeRefund(t, f.m.query("R1")); got.Status != "SUCCESS" {
		t.Fatalf("R1 %s", got.Status)
	}
}

func TestSetFault_NotifySignatures(t *testing.T) {
	tests := []struct {
		kind FaultKind
		want error
		sig  string
	}{
		{FaultNotifyProbe, wechatpay.ErrProbe, "probe"},
		{FaultNotifyBadSignature, wechatpay.ErrBadSignature, "bad"},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			k := keys(t)
			rc := newReceiver(t, k, nil)
			f := newFixture(t, func(c *Config) { c.TimeFactor = 0.001 })
			f.order(t, "O1", 1000)
			if err := f.sb.SetFault(Fault{Kind: tt.kind, OutTradeNo: "O1", Count: 1}); err != nil {
				t.Fatal(err)
			}
			f.m.create("O1", "R1", 10, 1000, rc.url())
			eventually(t, 5*time.Second, "acked retry", func() bool {
				d := f.sb.Deliveries("R1")
				return len(d) == 2 && d[1].Acked
			})
			got := rc.all()
			if len(got) != 2 || !errors.Is(got[0].err, tt.want) || got[1].err != nil {
				t.Fatalf("receiver saw %v then %v, want %v then success", got[0].err, got[1].err, tt.want)
			}
			d := f.sb.Deliveries("R1")
			if d[0].Signature != tt.sig || d[0].Acked || d[0].HTTPStatus != 401 || d[1].Signature != "ok" {
				t.Fatalf("deliveries %+v", d)
			}
			// The fault was used up by one refund.
			f.m.create("O1", "R2", 10, 1000, rc.url())
			eventually(t, 5*time.Second, "R2 acked", func() bool { d := f.sb.Deliveries("R2"); return len(d) == 1 && d[0].Acked })
		})
	}
}
