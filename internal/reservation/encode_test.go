package reservation

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestRequestRefund_Encode checks that with Env.Encode one RequestRefund
// decides the refund and its first submission, with the encoder's bytes,
// exactly as RequestRefund then StartSubmission decide them step by step.
func TestRequestRefund_Encode(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		at     time.Time // of the second refund; the first is submitted at t0
		want   []string
	}{
		{"started", Policy{}, t0.Add(10 * time.Second), []string{TypeRefundRequested, TypeSubmissionStarted}},
		{"started after the spacing", spacedPolicy, t0.Add(time.Minute), []string{TypeRefundRequested, TypeSubmissionStarted}},
		{"scheduled within the spacing", spacedPolicy, t0.Add(10 * time.Second), []string{TypeRefundRequested, TypeSubmissionWaits}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := RequestRefund{UserID: testUser, IdempotencyKey: "key-2", Amount: ptr(1000), Reason: "broken"}
			var got []RefundRequest
			env := Env{Now: tt.at, By: "user:" + testUser, Policy: tt.policy, Jitter: 0.5,
				Encode: func(r RefundRequest) ([]byte, error) { got = append(got, r); return body(r.RefundNo), nil }}

			one := registered(t)
			newRefund(t, one, "key-1", ptr(4000))
			events := run(t, one, cmd, env)
			assertTypes(t, events, tt.want...)
			no := events[0].Data.(RefundRequested).RefundNo
			wantReq := RefundRequest{RefundNo: no, OutTradeNo: testOTN, TransactionID: validRegister().TransactionID,
				Amount: 1000, Total: testPaid, Currency: "CNY", Reason: "broken"}
			if len(got) != 1 || got[0] != wantReq {
				t.Fatalf("encoder got %+v, want one %+v", got, wantReq)
			}

			steps := registered(t)
			newRefund(t, steps, "key-1", ptr(4000))
			stepEnv := env
			stepEnv.Encode = nil
			stepEvents := run(t, steps, cmd, stepEnv)
			stepEvents = append(stepEvents, run(t, steps, StartSubmission{RefundNo: no, Request: body(no)}, stepEnv)...)
			if !reflect.DeepEqual(events, stepEvents) {
				t.Fatalf("one decision gave %+v, step by step %+v", events, stepEvents)
			}
			if !reflect.DeepEqual(one, steps) {
				t.Fatalf("states differ:\none decision %+v\nstep by step %+v", *one, *steps)
			}

			// The replayed request changes nothing and encodes nothing.
			mustNoop(t, one, cmd, env)
			if len(got) != 1 {
				t.Fatalf("encoder called %d times, want 1", len(got))
			}
		})
	}
}

// TestRequestRefund_EncodeRefused checks that a request the encoder cannot
// build journals nothing: no refund is decided without its bytes.
func TestRequestRefund_EncodeRefused(t *testing.T) {
	errBad := errors.New("bad request")
	tests := []struct {
		name   string
		encode func(RefundRequest) ([]byte, error)
		check  func(t *testing.T, err error)
	}{
		{"encoder error", func(RefundRequest) ([]byte, error) { return nil, errBad }, func(t *testing.T, err error) {
			if !errors.Is(err, errBad) || CodeOf(err) != "" {
				t.Fatalf("err = %v (code %q), want errBad without a domain code", err, CodeOf(err))
			}
		}},
		{"no bytes", func(RefundRequest) ([]byte, error) { return nil, nil }, func(t *testing.T, err error) {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := registered(t)
			before := s.Clone()
			env := Env{Now: t0, By: "user:" + testUser, Encode: tt.encode}
			events, err := Decide(s, RequestRefund{UserID: testUser, IdempotencyKey: "k"}, env)
			if events != nil {
				t.Fatalf("events %v with error %v", types(events), err)
			}
			tt.check(t, err)
			assertSameState(t, before, s)
		})
	}
}
