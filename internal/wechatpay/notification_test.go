package wechatpay

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// TestRefundResource_Notification: a verified notification's resource and a
// query's refund object with the same status map to the same outcome (one
// mapping of WeChat statuses); a status with no outcome kind is a hint that
// carries what the resource reports.
func TestRefundResource_Notification(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	reported := reservation.Outcome{ProviderID: "50300001", OutTradeNo: "order-1", RefundAmount: 300, TotalAmount: 1000}
	with := func(k reservation.OutcomeKind, success time.Time) reservation.Outcome {
		o := reported
		o.Kind, o.SuccessTime = k, success
		return o
	}
	for _, tc := range []struct {
		status, successTime string
		want                reservation.Outcome
		hint                bool
	}{
		{RefundSuccess, "2026-03-01T20:00:00+08:00", with(reservation.OutcomeSucceeded, at), false},
		{RefundSuccess, "yesterday", with(reservation.OutcomeSucceeded, time.Time{}), false}, // the money moved; the time is lost
		{RefundClosed, "", with(reservation.OutcomeFailed, time.Time{}), false},
		{RefundAbnormal, "", with(reservation.OutcomeAbnormal, time.Time{}), false},
		{RefundProcessing, "", with(reservation.OutcomeProcessing, time.Time{}), false},
		{"REFUNDED_SOMEHOW", "", reported, true},
		{"", "", reported, true},
	} {
		res := RefundResource{OutRefundNo: "T-r1-1", RefundID: reported.ProviderID, OutTradeNo: reported.OutTradeNo,
			RefundStatus: tc.status, SuccessTime: tc.successTime, Amount: RefundAmount{Refund: 300, Total: 1000}}
		want := reservation.Notification{RefundNo: "T-r1-1", Outcome: tc.want, Hint: tc.hint}
		if got := res.Notification(); !reflect.DeepEqual(got, want) {
			t.Fatalf("status %q: Notification() = %+v, want %+v", tc.status, got, want)
		}
		if tc.hint {
			continue
		}
		raw, err := json.Marshal(map[string]any{"refund_id": res.RefundID, "out_refund_no": res.OutRefundNo,
			"out_trade_no": res.OutTradeNo, "status": tc.status, "success_time": tc.successTime,
			"amount": map[string]int64{"refund": 300, "total": 1000, "payer_refund": 300, "payer_total": 1000}})
		if err != nil {
			t.Fatal(err)
		}
		if got := refundOutcome(raw, res.OutRefundNo); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("status %q: a query's answer maps to %+v, the notification to %+v", tc.status, got, tc.want)
		}
	}
}

// TestV2RefundInfo_Notification: an APIv2 notification is a hint whatever
// its status, carrying its order and amounts for the core to match.
func TestV2RefundInfo_Notification(t *testing.T) {
	for _, status := range []string{V2RefundSuccess, V2RefundChange, V2RefundClose} {
		info := V2RefundInfo{OutRefundNo: "T-r1-1", RefundID: "50300001", OutTradeNo: "order-1", RefundFee: 300, TotalFee: 1000,
			SettlementRefundFee: 300, RefundStatus: status}
		want := reservation.Notification{RefundNo: "T-r1-1", Hint: true, Outcome: reservation.Outcome{
			ProviderID: "50300001", OutTradeNo: "order-1", RefundAmount: 300, TotalAmount: 1000}}
		if got := info.Notification(); !reflect.DeepEqual(got, want) {
			t.Fatalf("status %s: Notification() = %+v, want %+v", status, got, want)
		}
	}
}
