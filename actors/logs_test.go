package actors_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/logs"
	"github.com/refundd/refundd/internal/logs/logstest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

const testMerchant = "1900000109"

// answering is a harness logging to a recorder whose provider answers
// every call with o (the refund is not made), or only submissions when
// submitOnly; refunds are stuck after an hour.
func answering(t *testing.T, o reservation.Outcome, submitOnly bool) (*harness, *logstest.Recorder) {
	t.Helper()
	log, rec := logstest.New(t)
	h := newHarness(t, harnessOpts{log: log, merchant: testMerchant,
		policy: &reservation.Policy{RefundNoPrefix: "T", RecheckAfter: time.Minute, MaxAttempts: 1, StuckAfter: time.Hour},
		sim: simprovider.Options{Fault: func(op, _ string, _ int) (simprovider.Injected, bool) {
			return simprovider.Injected{Outcome: o}, op == "submit" || !submitOnly
		}},
	})
	return h, rec
}

// wantLine checks that rec holds exactly one line at level with msg and
// the fields want.
func wantLine(t *testing.T, rec *logstest.Recorder, level, msg string, want map[string]string) {
	t.Helper()
	var lines []logstest.Line
	for _, l := range rec.Match(t, level, msg) {
		if l.Str("attention") == want["attention"] {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d %s %q lines with attention %q, want 1: %v\nall: %s", len(lines), level, msg, want["attention"], lines, rec.String())
	}
	for k, v := range want {
		if got := lines[0].Str(k); got != v {
			t.Errorf("%s = %q, want %q: %v", k, got, v, lines[0])
		}
	}
}

func TestEngine_LogsARefundThatNeedsAttention(t *testing.T) {
	for _, tc := range []struct {
		name      string
		outcome   reservation.Outcome
		state     reservation.RefundState
		attention string // "": the state's list
		principal string
	}{
		{name: "unknown", outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "TIMEOUT"}, state: reservation.Unknown},
		{name: "rejected", outcome: reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "PARAM_ERROR"}, state: reservation.Rejected},
		{name: "abnormal", outcome: reservation.Outcome{Kind: reservation.OutcomeAbnormal, Code: "ABNORMAL"}, state: reservation.Abnormal},
		{name: "stuck", outcome: reservation.Outcome{Kind: reservation.OutcomeProcessing}, state: reservation.Processing,
			attention: reservation.AttentionStuck, principal: actors.EnginePrincipal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, rec := answering(t, tc.outcome, false)
			h.register("r1", 10000)
			st, _, err := h.refund("r1", "k1", 0)
			if err != nil {
				t.Fatal(err)
			}
			no := st.RefundByKey("k1").No
			// The line is written by the actor before it handles the Get
			// that sees the state.
			waitFor(t, string(tc.state), func() bool { return h.refundState("r1", no) == tc.state })
			want := map[string]string{"reservation": "r1", "refund_no": no, "merchant": reservation.DefaultMerchant, "mchid": testMerchant,
				"principal": actors.ProviderPrincipal, "attention": string(tc.state), "state": string(tc.state), "code": tc.outcome.Code,
				"source": string(reservation.SourceResponse)}
			if tc.attention != "" {
				// The due timer past the limit flags it.
				h.clock.Advance(2 * time.Hour)
				if _, err := h.engine.FireDue(context.Background(), h.clock.Now(), 100); err != nil {
					t.Fatal(err)
				}
				waitFor(t, tc.attention, func() bool {
					st, _ := h.engine.Get(context.Background(), "r1")
					return slices.Contains(st.Refund(no).Attention(), tc.attention)
				})
				want["attention"], want["principal"] = tc.attention, tc.principal
				delete(want, "code")
				delete(want, "source")
			}
			wantLine(t, rec, "WARN", "refund needs attention", want)
		})
	}
}

func TestEngine_LogsOperatorActions(t *testing.T) {
	h, rec := answering(t, reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "PARAM_ERROR"}, true)
	ctx := context.Background()
	h.register("r1", 10000)
	st, _, err := h.refund("r1", "k1", 0)
	if err != nil {
		t.Fatal(err)
	}
	no := st.RefundByKey("k1").No
	waitFor(t, "REJECTED", func() bool { return h.refundState("r1", no) == reservation.Rejected })
	if _, _, err := h.engine.Abandon(logs.WithRequestID(ctx, "req-abandon-1"), "r1", "operator:alice", reservation.Abandon{RefundNo: no, Reason: "customer paid in cash"}); err != nil {
		t.Fatalf("abandon: %v", err)
	}
	h.refundState("r1", no) // the actor logs after replying: this Get comes after
	wantLine(t, rec, "INFO", "operator action", map[string]string{
		"attention": "", "action": "abandon", "reservation": "r1", "refund_no": no, "merchant": reservation.DefaultMerchant, "mchid": testMerchant,
		"principal": "operator:alice", "state": string(reservation.Failed), "request_id": "req-abandon-1",
	})
}

// An abnormal payout is logged as an operator action: its type and the
// refund, never the bank fields (only their ciphertext is journaled).
func TestEngine_LogsAbnormalPayout(t *testing.T) {
	h, rec := answering(t, reservation.Outcome{Kind: reservation.OutcomeAbnormal, Code: "USER_ACCOUNT_ABNORMAL", ProviderID: "50300000012026120400000001"}, true)
	h.register("r1", 10000)
	st, _, err := h.refund("r1", "k1", 0)
	if err != nil {
		t.Fatal(err)
	}
	no := st.RefundByKey("k1").No
	waitFor(t, "ABNORMAL", func() bool { return h.refundState("r1", no) == reservation.Abnormal })
	cmd := reservation.ApplyAbnormal{RefundNo: no, Type: reservation.AbnormalUserBankCard, BankType: "ICBC_DEBIT",
		EncryptedAccount: "Q0lQSEVSLUNBUkQ=", EncryptedName: "Q0lQSEVSLU5BTUU=", KeySerial: "PUB_KEY_ID_1"}
	if _, _, err := h.engine.Execute(logs.WithRequestID(context.Background(), "req-payout-1"), "r1", "operator:alice", cmd); err != nil {
		t.Fatalf("apply-abnormal: %v", err)
	}
	h.refundState("r1", no) // the actor logs after replying: this Get comes after
	wantLine(t, rec, "INFO", "operator action", map[string]string{
		"attention": "", "action": "apply-abnormal", "reservation": "r1", "refund_no": no, "merchant": reservation.DefaultMerchant,
		"mchid": testMerchant, "principal": "operator:alice", "request_id": "req-payout-1",
	})
}
