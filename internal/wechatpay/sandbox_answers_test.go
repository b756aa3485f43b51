package wechatpay_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// TestClient_SandboxRefusals pins what the client makes of the sandbox's
// refusals (PARTNER.md §4-5): both FREQUENCY_LIMITED answers leave the
// refund unknown (WeChat Pay may have accepted it; retry with the same
// bytes), an over-refund and a short merchant balance reject a first
// attempt, and neither rejects a resubmission.
func TestClient_SandboxRefusals(t *testing.T) {
	keys, err := sandbox.GenerateKeys("1900000100")
	if err != nil {
		t.Fatal(err)
	}
	cfg := keys.Config()
	cfg.MinRefundSpacing = time.Hour
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(sb)
	t.Cleanup(func() { sb.Close(); hs.Close() })
	v, err := keys.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	c, err := wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: hs.URL, Signer: keys.Signer(), Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"O1", "O2", "O3", "O4"} {
		if err := sb.CreateOrder(o, "", 1000); err != nil {
			t.Fatal(err)
		}
	}
	body := func(order, no string, amount int64) []byte {
		b, err := c.RequestBody(reservation.RefundRequest{RefundNo: no, OutTradeNo: order, Amount: amount, Total: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctx := context.Background()
	if o := c.Submit(ctx, "R1", body("O1", "R1", 100), 1); o.Kind != reservation.OutcomeProcessing {
		t.Fatalf("first refund: %+v", o)
	}
	if err := sb.SetFault(sandbox.Fault{Kind: sandbox.FaultFrequencyLimited, OutRefundNo: "F1", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if err := sb.SetFault(sandbox.Fault{Kind: sandbox.FaultNotEnough, OutRefundNo: "B1", Count: 2}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		no       string
		body     []byte
		attempt  int
		kind     reservation.OutcomeKind
		wantCode string
	}{
		{"spacing refusal", "R2", body("O1", "R2", 100), 1, reservation.OutcomeUnknown, "FREQUENCY_LIMITED"},
		{"frequency_limited fault", "F1", body("O2", "F1", 100), 1, reservation.OutcomeUnknown, "FREQUENCY_LIMITED"},
		{"over-refund, first attempt", "X1", body("O3", "X1", 1000), 1, reservation.OutcomeProcessing, ""},
		{"over-refund of the remainder", "X2", body("O3", "X2", 1), 1, reservation.OutcomeRejected, "INVALID_REQUEST"},
		{"over-refund resubmitted", "X3", body("O3", "X3", 1), 2, reservation.OutcomeUnknown, "INVALID_REQUEST"},
		{"balance short, first attempt", "B1", body("O4", "B1", 100), 1, reservation.OutcomeRejected, "NOT_ENOUGH"},
		{"balance short, resubmitted", "B1", body("O4", "B1", 100), 2, reservation.OutcomeUnknown, "NOT_ENOUGH"},
	}
	for _, tt := range tests {
		o := c.Submit(ctx, tt.no, tt.body, tt.attempt)
		if o.Kind != tt.kind || o.Code != tt.wantCode {
			t.Errorf("%s: %s %s (%s), want %s %s", tt.name, o.Kind, o.Code, o.Message, tt.kind, tt.wantCode)
		}
	}
}
