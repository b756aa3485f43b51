package main

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// startFast runs refundd in-process against its built-in WeChat Pay sandbox,
// with every schedule shrunk so faults resolve in a second or two.
func startFast(t *testing.T, extra ...string) (*Main, client) {
	t.Helper()
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	args := append([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--provider", "sandbox",
		"--sandbox-delay", "50ms", "--sandbox-time-factor", "0.002", "--refund-spacing", "0",
		"--reconcile-after", "300ms", "--reconcile-schedule", "200ms", "--retry-backoff", "30ms",
		"--retry-backoff-max", "100ms", "--scheduler-interval", "20ms"}, extra...)
	if err := m.ParseFlags(args, testEnv); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, client{t: t, base: "http://" + m.Addr()}
}

// sandboxState maps the sandbox's refund status to the refund state refundd
// must end in.
var sandboxState = map[string]string{"SUCCESS": "SUCCEEDED", "CLOSED": "FAILED", "ABNORMAL": "ABNORMAL"}

func TestEndToEnd_EveryFaultEndsInTheSandboxState(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	m, c := startFast(t)
	sb := m.provider.sandbox
	if sb == nil {
		t.Fatal("no in-process sandbox")
	}
	cases := []struct {
		name  string
		fault sandbox.Fault
		want  string
	}{
		{"no fault", sandbox.Fault{}, "SUCCEEDED"},
		{"gateway 500", sandbox.Fault{Kind: sandbox.FaultHTTP500, Op: sandbox.OpCreate, Count: 2}, "SUCCEEDED"},
		{"SYSTEM_ERROR", sandbox.Fault{Kind: sandbox.FaultSystemError, Op: sandbox.OpCreate, Count: 1}, "SUCCEEDED"},
		{"FREQUENCY_LIMITED", sandbox.Fault{Kind: sandbox.FaultFrequencyLimited, Op: sandbox.OpCreate, Count: 1}, "SUCCEEDED"},
		{"202 accepted", sandbox.Fault{Kind: sandbox.FaultAccepted, Op: sandbox.OpCreate, Count: 1}, "SUCCEEDED"},
		{"refunded but response lost", sandbox.Fault{Kind: sandbox.FaultResponseLost, Op: sandbox.OpCreate, Count: 1}, "SUCCEEDED"},
		{"response timeout", sandbox.Fault{Kind: sandbox.FaultResponseLost, Op: sandbox.OpCreate, Count: 1, Delay: 200 * time.Millisecond}, "SUCCEEDED"},
		{"bad response signature", sandbox.Fault{Kind: sandbox.FaultBadSignature, Op: sandbox.OpCreate, Count: 1}, "SUCCEEDED"},
		{"probe response signature", sandbox.Fault{Kind: sandbox.FaultProbeSignature, Op: sandbox.OpCreate, Count: 1}, "SUCCEEDED"},
		{"query fails too", sandbox.Fault{Kind: sandbox.FaultSystemError, Count: 3}, "SUCCEEDED"},
		{"closed by WeChat", sandbox.Fault{Kind: sandbox.FaultOutcome, Outcome: "CLOSED"}, "FAILED"},
		{"abnormal", sandbox.Fault{Kind: sandbox.FaultOutcome, Outcome: "ABNORMAL"}, "ABNORMAL"},
		{"notification dropped", sandbox.Fault{Kind: sandbox.FaultNotifyDrop}, "SUCCEEDED"},
		{"notification duplicated", sandbox.Fault{Kind: sandbox.FaultNotifyDuplicate, Repeat: 3}, "SUCCEEDED"},
		{"notification late", sandbox.Fault{Kind: sandbox.FaultNotifyLate, Delay: 300 * time.Millisecond}, "SUCCEEDED"},
		{"notification probe", sandbox.Fault{Kind: sandbox.FaultNotifyProbe}, "SUCCEEDED"},
		{"notification bad signature", sandbox.Fault{Kind: sandbox.FaultNotifyBadSignature}, "SUCCEEDED"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, order := fmt.Sprintf("e2e-%d", i), fmt.Sprintf("E2E-%d", i)
			if tc.fault.Kind != "" {
				f := tc.fault
				f.OutTradeNo = order
				if err := sb.SetFault(f); err != nil {
					t.Fatal(err)
				}
			}
			if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
				"id": id, "user_id": "u", "out_trade_no": order, "amount": 10000, "currency": "CNY",
			}); code != 201 {
				t.Fatalf("register: %d %v", code, body)
			}
			code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", "k", map[string]any{"user_id": "u", "amount": 6000})
			if code != 202 && code != 200 {
				t.Fatalf("refund: %d %v", code, body)
			}
			no := body["refund_no"].(string)
			deadline := time.Now().Add(15 * time.Second)
			for {
				_, r := c.do("GET", "/v1/reservations/"+id+"/refunds/"+no+"?wait=1s", "", nil)
				rec, ok := sb.Refund(no)
				if ok && r["state"] == tc.want && sandboxState[rec.Status] == tc.want {
					if len(rec.BodyHashes) != 1 {
						t.Fatalf("refund number %s was submitted with %d different bodies", no, len(rec.BodyHashes))
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("refund %s: refundd says %v, sandbox says %+v (found %v); want %s", no, r["state"], rec, ok, tc.want)
				}
			}
			if got := sb.Refunded(order); got > 10000 {
				t.Fatalf("sandbox refunded %d of a 10000 order", got)
			}
			_, res := c.do("GET", "/v1/reservations/"+id, "", nil)
			if res["refunded"].(float64)+res["in_flight"].(float64) > 10000 {
				t.Fatalf("refunded + in flight > paid: %v", res)
			}
		})
	}
	// The ABNORMAL refund is listed for operators.
	if code, list := c.do("GET", "/v1/refunds?state=ABNORMAL", "", nil); code != 200 || len(list["refunds"].([]any)) != 1 {
		t.Fatalf("attention list: %d %v", code, list)
	}
	_, stats := c.do("GET", "/v1/notify/stats", "", nil)
	counts := stats["notifications"].(map[string]any)
	if counts["probe"].(float64) < 1 || counts["rejected"].(float64) < 1 || counts["duplicate"].(float64) < 1 {
		t.Fatalf("notification counts %v: the probe, bad signature and duplicate cases were not seen", counts)
	}
}
