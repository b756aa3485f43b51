package simprovider

import (
	"encoding/json"
	"testing"

	"github.com/refundd/refundd/internal/reservation"
)

// benchRequest is a refund as the benchmarks of bench/ send it.
var benchRequest = reservation.RefundRequest{RefundNo: "R-resv-000123-1", OutTradeNo: "ORD-000123",
	Amount: 3000, Total: 10000, Currency: "CNY", Reason: "change of plans"}

// BenchmarkRequestBody compares the hand encoder with the json.Marshal it
// replaced, in one run.
func BenchmarkRequestBody(b *testing.B) {
	r := benchRequest
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v body
			v.OutTradeNo, v.OutRefundNo, v.Reason = r.OutTradeNo, r.RefundNo, r.Reason
			v.Amount.Refund, v.Amount.Total, v.Amount.Currency = r.Amount, r.Total, r.Currency
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hand", func(b *testing.B) {
		p := New(Options{})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.RequestBody(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSubmitParse compares reading a submission's body by hand with
// the json.Unmarshal it replaced, in one run.
func BenchmarkSubmitParse(b *testing.B) {
	raw, err := New(Options{}).RequestBody(benchRequest)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v body
			if err := json.Unmarshal(raw, &v); err != nil || v.OutRefundNo != benchRequest.RefundNo {
				b.Fatal(err)
			}
		}
	})
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v body
			if err := parseBody(raw, &v); err != nil || v.OutRefundNo != benchRequest.RefundNo {
				b.Fatal(err)
			}
		}
	})
}
