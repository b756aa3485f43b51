package simprovider

import (
	"context"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/reservation"
)

// TestSubmit_Bodies submits one body per fresh provider: the hand codec's
// bytes, other spellings encoding/json reads, and bodies it refuses.
func TestSubmit_Bodies(t *testing.T) {
	req := reservation.RefundRequest{RefundNo: "R-resv-1-1", OutTradeNo: "ORD-1", Amount: 3000, Total: 10000,
		Currency: "CNY", Reason: "改期 <soon> & \"then\""}
	canon, err := New(Options{}).RequestBody(req)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		raw      string
		kind     reservation.OutcomeKind
		code     string
		refunded int64
	}{
		{"canonical", string(canon), reservation.OutcomeSucceeded, "", 3000},
		{"whitespace and order", ` { "amount" : { "total" : 10000 , "refund" : 3000 } , "out_refund_no" : "R-resv-1-1" , "out_trade_no" : "ORD-1" } `,
			reservation.OutcomeSucceeded, "", 3000},
		{"escaped refund number", `{"out_trade_no":"ORD-1","out_refund_no":"R\u002dresv-1-1","amount":{"refund":5,"total":10000,"currency":"CNY"}}`,
			reservation.OutcomeSucceeded, "", 5},
		{"unknown member", `{"out_trade_no":"ORD-1","out_refund_no":"R-resv-1-1","notify_url":"x","amount":{"refund":5,"total":10000}}`,
			reservation.OutcomeSucceeded, "", 5},
		{"not JSON", `{"out_refund_no":"R-resv-1-1"`, reservation.OutcomeRejected, "PARAM_ERROR", 0},
		{"other refund number", strings.Replace(string(canon), "R-resv-1-1", "R-resv-1-2", 1), reservation.OutcomeRejected, "PARAM_ERROR", 0},
		{"amount overflows", strings.Replace(string(canon), `"refund":3000`, `"refund":9223372036854775808`, 1), reservation.OutcomeRejected, "PARAM_ERROR", 0},
		{"amount is a fraction", strings.Replace(string(canon), `"refund":3000`, `"refund":3000.5`, 1), reservation.OutcomeRejected, "PARAM_ERROR", 0},
		{"more than the total", strings.Replace(string(canon), `"refund":3000`, `"refund":10001`, 1), reservation.OutcomeRejected, "INVALID_REQUEST", 0},
		{"negative", strings.Replace(string(canon), `"refund":3000`, `"refund":-1`, 1), reservation.OutcomeRejected, "PARAM_ERROR", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(Options{})
			o := p.Submit(context.Background(), req.RefundNo, []byte(tt.raw), 1)
			if o.Kind != tt.kind || o.Code != tt.code {
				t.Fatalf("Submit(%s) = %s %s, want %s %s", tt.raw, o.Kind, o.Code, tt.kind, tt.code)
			}
			if got := p.Refunded("ORD-1"); got != tt.refunded {
				t.Errorf("Refunded = %d, want %d", got, tt.refunded)
			}
		})
	}
}

// TestSubmit_IdempotentByBytes checks the provider's rule on the codec's
// bytes: the same bytes again are the same refund, other bytes under the
// same number are refused even when they mean the same.
func TestSubmit_IdempotentByBytes(t *testing.T) {
	p := New(Options{})
	req := reservation.RefundRequest{RefundNo: "R-resv-2-1", OutTradeNo: "ORD-2", Amount: 100, Total: 100, Currency: "CNY"}
	raw, err := p.RequestBody(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := p.Submit(ctx, req.RefundNo, raw, 1)
	again := p.Submit(ctx, req.RefundNo, append([]byte(nil), raw...), 2)
	if first.Kind != reservation.OutcomeSucceeded || again != first {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	spaced := p.Submit(ctx, req.RefundNo, append([]byte(" "), raw...), 3)
	if spaced.Kind != reservation.OutcomeRejected || spaced.Code != "INVALID_REQUEST" {
		t.Fatalf("same meaning, other bytes: %+v", spaced)
	}
	if got := p.Refunded("ORD-2"); got != 100 {
		t.Errorf("Refunded = %d, want 100", got)
	}
	if got := p.Submissions(); got != 3 {
		t.Errorf("Submissions = %d, want 3", got)
	}
}
