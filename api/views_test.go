package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// An operator reading a refund must see that it was recovered after a
// restore (refundd never submitted it) or that WeChat Pay paid it after
// refundd had closed it as FAILED: both read the same otherwise.
func TestViewRefund_SaysRecoveredAndPaidAfterFailed(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		refund reservation.Refund
		want   []string
		absent []string
	}{
		{"plain", reservation.Refund{No: "R-a-1", State: reservation.Succeeded},
			nil, []string{`"recovered"`, `"paid_after_failed"`}},
		{"recovered", reservation.Refund{No: "R-a-1", State: reservation.Succeeded, Recovered: true},
			[]string{`"recovered":true`}, []string{`"paid_after_failed"`}},
		{"paid after failed", reservation.Refund{No: "R-a-1", State: reservation.Succeeded, PaidAfterFailed: true},
			[]string{`"paid_after_failed":true`}, []string{`"recovered"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.refund
			r.CreatedAt, r.UpdatedAt = at, at
			st := &reservation.State{ID: "a", Merchant: reservation.DefaultMerchant}
			std, err := json.Marshal(viewRefund(st, &r))
			if err != nil {
				t.Fatal(err)
			}
			fast, ok := appendRefund(nil, st, &r)
			if !ok {
				t.Fatal("appendRefund refused the refund")
			}
			for _, got := range []string{string(std), string(fast)} {
				for _, w := range tt.want {
					if !strings.Contains(got, w) {
						t.Errorf("%s lacks %s", got, w)
					}
				}
				for _, a := range tt.absent {
					if strings.Contains(got, a) {
						t.Errorf("%s has %s", got, a)
					}
				}
			}
		})
	}
}
