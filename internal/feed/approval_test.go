package feed_test

import (
	"slices"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal/journaltest"
)

// TestRead_Approval: four-eyes approval reaches consumers as
// refund.approval_requested, refund.approved and refund.rejected, with who
// asked and who decided; an expiry as refund.failed with APPROVAL_EXPIRED.
func TestRead_Approval(t *testing.T) {
	db := journaltest.Open(t)
	store := eventstore.New(db)
	st := &reservation.State{}
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	policy := reservation.Policy{ApproveAll: true, ApprovalTimeout: time.Hour}
	do := func(cmd reservation.Command, by string) {
		t.Helper()
		now = now.Add(time.Minute)
		env := reservation.Env{Now: now, By: by, Policy: policy, Encode: func(r reservation.RefundRequest) ([]byte, error) {
			return []byte(r.RefundNo), nil
		}}
		events, err := reservation.Decide(st, cmd, env)
		if err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		if err := store.Append(bg, "r1", st, events); err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			reservation.Apply(st, e)
		}
	}
	do(reservation.Register{ReservationID: "r1", UserID: "u1", OutTradeNo: "O1", Amount: 1000, Currency: "CNY"}, "service:booking")
	for _, k := range []string{"a", "b", "c"} {
		do(reservation.RequestRefund{UserID: "u1", IdempotencyKey: k, Amount: ptr(100), Reason: "why " + k}, "operator:alice")
	}
	do(reservation.Approve{RefundNo: st.Refunds[0].No}, "approver:carol")
	do(reservation.Reject{RefundNo: st.Refunds[1].No, Reason: "not justified"}, "approver:carol")
	now = st.Refunds[2].DueAt
	do(reservation.FireTimer{RefundNo: st.Refunds[2].No, DueAt: st.Refunds[2].DueAt}, "engine")

	got := readAll(t, db, 0, 0, nil)
	var types []string
	for _, e := range got {
		types = append(types, e.Type)
	}
	want := []string{"refund.requested", "refund.approval_requested", "refund.requested", "refund.approval_requested",
		"refund.requested", "refund.approval_requested", "refund.approved", "refund.rejected", "refund.failed"}
	if !slices.Equal(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
	if e := got[1]; e.State != "PENDING_APPROVAL" || e.Data.RequestedBy != "operator:alice" || e.Data.ApprovalRule != "all" ||
		e.Data.ExpiresAt.IsZero() || e.Data.Reason != "why a" {
		t.Errorf("approval_requested: %+v", e)
	}
	if e := got[6]; e.Data.RequestedBy != "operator:alice" || e.Data.DecidedBy != "approver:carol" {
		t.Errorf("approved: %+v", e)
	}
	if e := got[7]; e.State != "FAILED" || e.Data.DecidedBy != "approver:carol" || e.Data.Reason != "not justified" ||
		e.Data.Code != "APPROVAL_REJECTED" {
		t.Errorf("rejected: %+v", e)
	}
	if e := got[8]; e.State != "FAILED" || e.Data.Code != "APPROVAL_EXPIRED" || e.RefundNo != st.Refunds[2].No {
		t.Errorf("expired: %+v", e)
	}
	// Consumers may ask for the new types alone.
	if only := readAll(t, db, 0, 0, []string{"refund.approved"}); len(only) != 1 || only[0].RefundNo != st.Refunds[0].No {
		t.Errorf("filtered: %+v", only)
	}
}

func ptr(n int64) *int64 { return &n }

// TestRead_AbnormalApplied: an operator's payout of an ABNORMAL refund
// reaches consumers as refund.abnormal_applied with its destination and
// operator (never the bank fields, which are ciphertext in the journal),
// and its outcome follows as refund.succeeded.
func TestRead_AbnormalApplied(t *testing.T) {
	db := journaltest.Open(t)
	store := eventstore.New(db)
	st := &reservation.State{}
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	do := func(cmd reservation.Command, by string) {
		t.Helper()
		now = now.Add(time.Minute)
		env := reservation.Env{Now: now, By: by, Encode: func(r reservation.RefundRequest) ([]byte, error) { return []byte(r.RefundNo), nil }}
		events, err := reservation.Decide(st, cmd, env)
		if err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
		if err := store.Append(bg, "r1", st, events); err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			reservation.Apply(st, e)
		}
	}
	do(reservation.Register{ReservationID: "r1", UserID: "u1", OutTradeNo: "O1", Amount: 1000, Currency: "CNY"}, "service:booking")
	do(reservation.RequestRefund{UserID: "u1", IdempotencyKey: "k", Amount: ptr(300)}, "service:booking")
	no := st.Refunds[0].No
	outcome := func(kind reservation.OutcomeKind) reservation.RecordOutcome {
		return reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceQuery, Outcome: reservation.Outcome{Kind: kind,
			ProviderID: "503000", RefundAmount: 300, TotalAmount: 1000, OutTradeNo: "O1"}}
	}
	do(outcome(reservation.OutcomeAbnormal), "provider")
	do(reservation.ApplyAbnormal{RefundNo: no, Type: reservation.AbnormalUserBankCard, BankType: "ICBC_DEBIT",
		EncryptedAccount: "Q0lQSEVSMQ==", EncryptedName: "Q0lQSEVSMg==", KeySerial: "PUB_KEY_ID_1"}, "operator:alice")
	do(outcome(reservation.OutcomeSucceeded), "provider")

	got := readAll(t, db, 0, 0, nil)
	var types []string
	for _, e := range got {
		types = append(types, e.Type)
	}
	want := []string{"refund.requested", "refund.abnormal", "refund.abnormal_applied", "refund.succeeded"}
	if !slices.Equal(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
	if e := got[2]; e.State != "PROCESSING" || e.Data.AbnormalType != reservation.AbnormalUserBankCard || e.Data.DecidedBy != "operator:alice" ||
		e.Data.Source != "operator" || e.Amount != 300 || e.Refunded != 0 {
		t.Errorf("abnormal_applied: %+v", e)
	}
	if e := got[3]; e.State != "SUCCEEDED" || e.Refunded != 300 {
		t.Errorf("succeeded after the payout: %+v", e)
	}
}
