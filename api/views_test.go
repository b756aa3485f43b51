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
			std, err := json.Marshal(viewRefund(st, &r, viewAt{}))
			if err != nil {
				t.Fatal(err)
			}
			fast, ok := appendRefund(nil, st, &r, viewAt{})
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
			if got := viewRefund(s, r, viewAt{}).Stuck; got != tc.want {
				t.Fatalf("%s refund flagged stuck: view says stuck=%v, want %v", tc.state, got, tc.want)
			}
			if inIndex := slices.Contains(r.Attention(), reservation.AttentionStuck); inIndex != tc.want {
				t.Fatalf("attention index says stuck=%v for %s, want %v", inIndex, tc.state, tc.want)
			}
		})
	}
}

// next_step is decided under the policy of the reservation's merchant, at
// the server's time, and says in both encoders what happens next.
func TestViewRefund_NextStepUnderTheMerchantsPolicy(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	s := &Server{opts: Options{
		Now: func() time.Time { return at },
		PolicyOf: func(m string) reservation.Policy {
			if m == "strict" {
				return reservation.Policy{MaxAttempts: 2}
			}
			return reservation.Policy{MaxAttempts: 7}
		},
	}}
	retrying := reservation.Refund{No: "R-a-1", State: reservation.Processing, Attempts: 1, Retry: true, Request: []byte("{}"),
		DueAt: at.Add(time.Minute), CreatedAt: at, UpdatedAt: at}
	for _, tc := range []struct {
		merchant string
		want     string
	}{
		{"strict", `"next_step":{"kind":"retry_at","at":"2026-12-01T08:01:00Z","attempts_left":1,"actions":["reconcile"],"why":`},
		{"lenient", `"next_step":{"kind":"retry_at","at":"2026-12-01T08:01:00Z","attempts_left":6,"actions":["reconcile"],"why":`},
	} {
		st := &reservation.State{ID: "a", Merchant: tc.merchant}
		va := s.viewAt(st)
		std, err := json.Marshal(viewRefund(st, &retrying, va))
		if err != nil {
			t.Fatal(err)
		}
		fast, _ := appendRefund(nil, st, &retrying, va)
		for _, got := range []string{string(std), string(fast)} {
			if !strings.Contains(got, tc.want) {
				t.Errorf("%s: %s lacks %s", tc.merchant, got, tc.want)
			}
		}
	}
	// A final refund: nothing scheduled, no actions, an empty list (not null).
	done := reservation.Refund{No: "R-a-2", State: reservation.Succeeded, CreatedAt: at, UpdatedAt: at}
	st := &reservation.State{ID: "a", Merchant: "strict"}
	got, _ := json.Marshal(viewRefund(st, &done, s.viewAt(st)))
	if !strings.Contains(string(got), `"next_step":{"kind":"none","attempts_left":0,"actions":[],"why":"WeChat refunded the money. Nothing more happens to it."}`) {
		t.Errorf("final refund: %s", got)
	}
}
