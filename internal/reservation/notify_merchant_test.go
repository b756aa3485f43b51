package reservation

import (
	"testing"
	"time"
)

// A notification changes only its own merchant's refunds: one verified for
// another merchant (another account's keys, another sub-merchant) is a
// mismatch whatever it reports, and a hint from it asks nothing. An
// operator's reconcile names no merchant and is not checked.
func TestNotification_OtherMerchantIsAMismatch(t *testing.T) {
	tests := []struct {
		name        string
		reservation string // the registration's merchant
		notified    string // the notification's
		hint        bool
		mismatch    bool
	}{
		{"default, unnamed", "", "", false, false},
		{"default by name", "", DefaultMerchant, false, false},
		{"own merchant", "hotel-sh", "hotel-sh", false, false},
		{"another merchant", "hotel-sh", "hotel-bj", false, true},
		{"unnamed for a merchant's refund", "hotel-sh", "", false, true},
		{"a merchant's for the default's refund", "", "hotel-sh", false, true},
		{"hint, own merchant", "hotel-sh", "hotel-sh", true, false},
		{"hint, another merchant", "hotel-sh", "hotel-bj", true, true},
		{"hint, unnamed for a merchant's refund", "hotel-sh", "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := registeredFor(tt.reservation)(t)
			no := newRefund(t, s, "key-1", ptr(4000))
			n := Notification{RefundNo: no, Merchant: tt.notified, Hint: tt.hint, Outcome: Outcome{Kind: OutcomeSucceeded,
				ProviderID: "50300001", OutTradeNo: s.OutTradeNo, RefundAmount: 4000, TotalAmount: s.Amount}}
			env := testEnv(t0.Add(time.Hour), "wechatpay:notification")
			if tt.mismatch {
				mustFail(t, s, n.Command(), env, ErrOutcomeMismatch)
				return
			}
			ev := run(t, s, n.Command(), env)
			want := TypeProviderResult
			if tt.hint {
				want = TypeQueryStarted
			}
			assertTypes(t, ev, want)
		})
	}
	// An operator's reconcile is not a notification.
	s := registeredFor("hotel-sh")(t)
	no := newRefund(t, s, "key-1", ptr(4000))
	assertTypes(t, run(t, s, CheckProvider{RefundNo: no, Operator: true}, testEnv(t0.Add(time.Hour), "operator:alice")), TypeQueryStarted)
	// An unknown refund stays unknown, whoever's the notification.
	mustFail(t, s, Notification{RefundNo: no + "9", Merchant: "hotel-bj"}.Command(), testEnv(t0.Add(time.Hour), "wechatpay:notification"), ErrNotFound)
}
