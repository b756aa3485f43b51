package reservation

import (
	"errors"
	"testing"
	"time"
)

// Paying out an ABNORMAL refund (ApplyAbnormal): only from ABNORMAL, the
// ciphertext journaled as given, the refund PROCESSING again with the same
// amount held (never counted twice), a due time to query it, and WeChat's
// answers moving it like any other refund.

func userCard() ApplyAbnormal {
	return ApplyAbnormal{Type: AbnormalUserBankCard, BankType: "ICBC_DEBIT",
		EncryptedAccount: "QUJDRA==", EncryptedName: "RUZHSA==", KeySerial: "PUB_KEY_ID_0123"}
}

func TestApplyAbnormal_States(t *testing.T) {
	for _, from := range allFromStates {
		t.Run(string(from), func(t *testing.T) {
			s, no := refundIn(t, from)
			env := Env{Now: t0.Add(3 * time.Hour), By: "operator:alice"}
			cmd := userCard()
			cmd.RefundNo = no
			if from != Abnormal {
				mustFail(t, s, cmd, env, ErrInvalidState)
				return
			}
			r0 := *s.Refund(no)
			held := s.Refunded() + s.InFlight()
			ev := run(t, s, cmd, env)
			assertTypes(t, ev, TypeAbnormalApplied)
			want := AbnormalApplied{RefundNo: no, Type: cmd.Type, BankType: cmd.BankType, EncryptedAccount: cmd.EncryptedAccount,
				EncryptedName: cmd.EncryptedName, KeySerial: cmd.KeySerial, DueAt: env.Now.Add(env.Policy.recheckAfter())}
			if ev[0].Data != want {
				t.Fatalf("event %+v, want %+v", ev[0].Data, want)
			}
			r := s.Refund(no)
			if r.State != Processing || r.AbnormalType != AbnormalUserBankCard || !r.DueAt.Equal(want.DueAt) || r.Retry ||
				r.ProviderID != r0.ProviderID || r.Attempts != r0.Attempts || r.Amount != r0.Amount {
				t.Fatalf("refund %+v", *r)
			}
			if got := s.Refunded() + s.InFlight(); got != held || got > s.Amount {
				t.Fatalf("refunded+in flight %d, was %d (paid %d)", got, held, s.Amount)
			}
			// A duplicate answers the current state.
			mustNoop(t, s, cmd, env)
			// WeChat's answer (PROCESSING) changes nothing; its SUCCESS
			// settles it, counted once.
			mustNoop(t, s, outcome(no, SourceQuery, OutcomeProcessing), providerEnv)
			assertTypes(t, run(t, s, outcome(no, SourceNotification, OutcomeSucceeded), providerEnv), TypeProviderResult)
			if r := s.Refund(no); r.State != Succeeded || s.Refunded() != r.Amount || s.InFlight() != 0 {
				t.Fatalf("after SUCCESS: %s", dump(s))
			}
			mustNoop(t, s, cmd, env)
		})
	}
}

// TestApplyAbnormal_AbnormalAgain: WeChat reports ABNORMAL again (the
// payout failed too): the refund is back for an operator, who may apply
// again; a due query in between asks WeChat.
func TestApplyAbnormal_AbnormalAgain(t *testing.T) {
	s, no := refundIn(t, Abnormal)
	env := Env{Now: t0.Add(3 * time.Hour), By: "operator:alice"}
	cmd := ApplyAbnormal{RefundNo: no, Type: AbnormalMerchantBankCard}
	run(t, s, cmd, env)
	due := s.Refund(no).DueAt
	assertTypes(t, run(t, s, FireTimer{RefundNo: no, DueAt: due}, testEnv(due, "engine")), TypeQueryStarted)
	assertTypes(t, run(t, s, outcome(no, SourceQuery, OutcomeAbnormal), testEnv(due, "provider:wechatpay")), TypeProviderResult)
	if r := s.Refund(no); r.State != Abnormal {
		t.Fatalf("refund %+v", *r)
	}
	assertTypes(t, run(t, s, cmd, env), TypeAbnormalApplied)
	if s.Refunded()+s.InFlight() != 4000 {
		t.Fatalf("state %s", dump(s))
	}
}

func TestApplyAbnormal_Validation(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*ApplyAbnormal)
		field string
	}{
		{"no type", func(c *ApplyAbnormal) { c.Type = "" }, "type"},
		{"other type", func(c *ApplyAbnormal) { c.Type = "ORIGINAL" }, "type"},
		{"bank type", func(c *ApplyAbnormal) { c.BankType = "VISA_CREDIT" }, "bank_type"},
		{"no account", func(c *ApplyAbnormal) { c.EncryptedAccount = "" }, "bank_account"},
		{"clear account", func(c *ApplyAbnormal) { c.EncryptedAccount = "6222 0212 3456" }, "bank_account"},
		{"no name", func(c *ApplyAbnormal) { c.EncryptedName = "" }, "real_name"},
		{"clear name", func(c *ApplyAbnormal) { c.EncryptedName = "张三" }, "real_name"},
		{"no serial", func(c *ApplyAbnormal) { c.KeySerial = "" }, "key_serial"},
		{"merchant card with fields", func(c *ApplyAbnormal) { c.Type = AbnormalMerchantBankCard }, "type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, no := refundIn(t, Abnormal)
			cmd := userCard()
			cmd.RefundNo = no
			tc.edit(&cmd)
			err := mustFail(t, s, cmd, testEnv(t0.Add(time.Hour), "operator:alice"), ErrInvalid)
			var de *Error
			if !errors.As(err, &de) || de.Field != tc.field {
				t.Fatalf("error %v, want field %s", err, tc.field)
			}
		})
	}
}

func TestApplyAbnormal_Codec(t *testing.T) {
	e := Event{At: t0, By: "operator:alice", Data: AbnormalApplied{RefundNo: "R-1-1", Type: AbnormalUserBankCard, BankType: "ICBC_DEBIT",
		EncryptedAccount: "QUJDRA==", EncryptedName: "RUZHSA==", KeySerial: "PUB_KEY_ID_1", DueAt: t0.Add(time.Minute)}}
	typ, v, b, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(typ, v, b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Data != e.Data || !got.At.Equal(e.At) || got.By != e.By {
		t.Fatalf("decoded %+v from %s", got, b)
	}
	if no, at, ok := DueOf(e.Data); !ok || no != "R-1-1" || !at.Equal(t0.Add(time.Minute)) {
		t.Fatal("DueOf does not list the due time")
	}
}
