package api

import (
	"encoding/json"
	"slices"
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

// A refund flagged stuck keeps the flag in its state after it settles
// (the attention index drops it then): the view says stuck only while the
// refund is not final, as the index does.
func TestViewRefund_StuckOnlyWhileUnresolved(t *testing.T) {
	tests := []struct {
		state reservation.RefundState
		want  bool
	}{
		{reservation.Unknown, true},
		{reservation.Processing, true},
		{reservation.Abnormal, true},
		{reservation.Succeeded, false},
		{reservation.Failed, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.state), func(t *testing.T) {
			r := &reservation.Refund{No: "R1", Amount: 100, State: tc.state, Stuck: true}
			s := &reservation.State{ID: "res-1", Refunds: []*reservation.Refund{r}}
			if got := viewRefund(s, r).Stuck; got != tc.want {
				t.Fatalf("%s refund flagged stuck: view says stuck=%v, want %v", tc.state, got, tc.want)
			}
			if inIndex := slices.Contains(r.Attention(), reservation.AttentionStuck); inIndex != tc.want {
				t.Fatalf("attention index says stuck=%v for %s, want %v", inIndex, tc.state, tc.want)
			}
		})
	}
}
