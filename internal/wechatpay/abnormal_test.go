package wechatpay_test

import (
	"context"
	"crypto/rsa"
	"crypto/sha1"
	"encoding/base64"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// abnormalSandbox has refund R1 (600 of order O1, 1000) ABNORMAL at a
// sandbox, as the client's query reports it.
func abnormalSandbox(t *testing.T) (*wechatpay.Client, *sandbox.Server, sandbox.Keys, reservation.Outcome) {
	t.Helper()
	keys, err := sandbox.GenerateKeys("1900000100")
	if err != nil {
		t.Fatal(err)
	}
	cfg := keys.Config()
	cfg.ProcessingDelay = 20 * time.Millisecond
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(sb)
	t.Cleanup(func() { sb.Close(); hs.Close() })
	v, err := keys.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	c, err := wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: hs.URL, Signer: keys.Signer(), Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"O1", "O2"} {
		if err := sb.CreateOrder(o, "", 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := sb.SetFault(sandbox.Fault{Kind: sandbox.FaultOutcome, OutRefundNo: "R1", Outcome: "ABNORMAL"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, r := range []struct{ order, no string }{{"O1", "R1"}, {"O2", "R2"}} {
		b, err := c.RequestBody(reservation.RefundRequest{RefundNo: r.no, OutTradeNo: r.order, Amount: 600, Total: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if o := c.Submit(ctx, r.no, b, 1); o.Kind != reservation.OutcomeProcessing {
			t.Fatalf("submit %s: %+v", r.no, o)
		}
	}
	var q reservation.Outcome
	waitFor(t, "R1 ABNORMAL", func() bool { q = c.Query(ctx, "R1"); return q.Kind == reservation.OutcomeAbnormal })
	return c, sb, keys, q
}

// TestClient_ApplyAbnormal: the payout to a user's card is encrypted as
// WeChat Pay requires (the sandbox decrypts it with the key the serial
// names), answered with the verified refund object (PROCESSING), and the
// refund then succeeds; a repeat, a refund that is not ABNORMAL and a
// wrong serial are refusals, never "not found".
func TestClient_ApplyAbnormal(t *testing.T) {
	c, sb, keys, q := abnormalSandbox(t)
	ctx := context.Background()
	serial, enc, err := c.EncryptSensitive("6222021234567890123", "张三")
	if err != nil {
		t.Fatal(err)
	}
	if serial != keys.Config().PublicKeyID {
		t.Fatalf("encrypted for %q, want the public key id %q", serial, keys.Config().PublicKeyID)
	}
	for _, e := range enc {
		ct, err := base64.StdEncoding.DecodeString(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rsa.DecryptOAEP(sha1.New(), nil, keys.PlatformKey, ct, nil); err != nil {
			t.Fatalf("not RSA-OAEP SHA-1 for the platform key: %v", err)
		}
	}
	app := reservation.AbnormalApplication{RefundID: q.ProviderID, Type: reservation.AbnormalUserBankCard,
		BankType: "ICBC_DEBIT", EncryptedAccount: enc[0], EncryptedName: enc[1], KeySerial: serial}

	bad := app
	bad.KeySerial = "PUB_KEY_ID_0000000000000000000000000000000"
	if o := c.ApplyAbnormal(ctx, "R1", bad); o.Kind != reservation.OutcomeRejected || o.Code != "PARAM_ERROR" {
		t.Fatalf("wrong serial: %+v, want rejected PARAM_ERROR", o)
	}
	o := c.ApplyAbnormal(ctx, "R1", app)
	if o.Kind != reservation.OutcomeProcessing || o.ProviderID != q.ProviderID || o.OutTradeNo != "O1" ||
		o.RefundAmount != 600 || o.TotalAmount != 1000 {
		t.Fatalf("apply: %+v", o)
	}
	if o := c.ApplyAbnormal(ctx, "R1", app); o.Kind != reservation.OutcomeRejected || o.Code != "INVALID_REQUEST" {
		t.Fatalf("repeat: %+v, want rejected INVALID_REQUEST", o)
	}
	waitFor(t, "R1 SUCCESS", func() bool { return c.Query(ctx, "R1").Kind == reservation.OutcomeSucceeded })
	if rec, _ := sb.Refund("R1"); rec.AbnormalType != reservation.AbnormalUserBankCard {
		t.Fatalf("sandbox record %+v", rec)
	}

	q2 := c.Query(ctx, "R2")
	other := reservation.AbnormalApplication{RefundID: q2.ProviderID, Type: reservation.AbnormalMerchantBankCard}
	if o := c.ApplyAbnormal(ctx, "R2", other); o.Kind != reservation.OutcomeRejected {
		t.Fatalf("refund not ABNORMAL: %+v, want rejected", o)
	}
	// Another refund's id under R2's number: refused by WeChat, never
	// applied to R2.
	mixed := reservation.AbnormalApplication{RefundID: q.ProviderID, Type: reservation.AbnormalMerchantBankCard}
	if o := c.ApplyAbnormal(ctx, "R2", mixed); o.Kind == reservation.OutcomeProcessing || o.Kind == reservation.OutcomeSucceeded {
		t.Fatalf("mismatched refund id: %+v", o)
	}
}

// TestClient_ApplyAbnormalMerchantBank pays out to the merchant's bank
// account: no encrypted fields.
func TestClient_ApplyAbnormalMerchantBank(t *testing.T) {
	c, _, _, q := abnormalSandbox(t)
	ctx := context.Background()
	o := c.ApplyAbnormal(ctx, "R1", reservation.AbnormalApplication{RefundID: q.ProviderID, Type: reservation.AbnormalMerchantBankCard})
	if o.Kind != reservation.OutcomeProcessing || o.ProviderID != q.ProviderID {
		t.Fatalf("apply: %+v", o)
	}
	waitFor(t, "R1 SUCCESS", func() bool { return c.Query(ctx, "R1").Kind == reservation.OutcomeSucceeded })
}
