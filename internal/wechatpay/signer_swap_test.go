package wechatpay_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// TestClient_SetSigner: a bad signer is refused and the running one keeps
// signing; a good one signs the next request, which WeChat Pay (the
// sandbox) accepts once it knows the new API certificate.
func TestClient_SetSigner(t *testing.T) {
	keys, err := sandbox.GenerateKeys("1900000100")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(keys.Config())
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
	for _, o := range []string{"O1", "O2", "O3", "O4"} {
		if err := sb.CreateOrder(o, "", 1000); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	submit := func(order, no string) reservation.Outcome {
		b, err := c.RequestBody(reservation.RefundRequest{RefundNo: no, OutTradeNo: order, Amount: 100, Total: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return c.Submit(ctx, no, b, 1)
	}
	newKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const newSerial = "7A2B3C4D5E6F708192A3B4C5D6E7F8091A2B3C4D"
	for _, bad := range []wechatpay.Signer{
		{MchID: keys.MchID, SerialNo: newSerial},                  // no key
		{MchID: keys.MchID, SerialNo: "", Key: newKey},            // no serial
		{MchID: "1900000999", SerialNo: newSerial, Key: newKey},   // another account
		{MchID: keys.MchID, SerialNo: "bad\nserial", Key: newKey}, // not header-safe
	} {
		if err := c.SetSigner(bad); err == nil {
			t.Fatalf("SetSigner(%s %q) accepted", bad.MchID, bad.SerialNo)
		}
	}
	if o := submit("O1", "R1"); o.Kind != reservation.OutcomeProcessing || c.SignerSerial() != keys.MerchantSerial {
		t.Fatalf("after refused swaps: %+v, serial %s", o, c.SignerSerial())
	}
	if err := c.SetSigner(wechatpay.Signer{MchID: keys.MchID, SerialNo: newSerial, Key: newKey}); err != nil {
		t.Fatal(err)
	}
	// The next request is signed with the new key: WeChat Pay refuses it
	// until the certificate is registered, then accepts it.
	if o := submit("O2", "R2"); o.Kind != reservation.OutcomeUnknown || o.Code != "SIGN_ERROR" {
		t.Fatalf("new key before WeChat Pay knows it: %+v", o)
	}
	if err := sb.AddMerchantKey(newSerial, &newKey.PublicKey); err != nil {
		t.Fatal(err)
	}
	if o := submit("O3", "R3"); o.Kind != reservation.OutcomeProcessing {
		t.Fatalf("new key: %+v", o)
	}
	if err := sb.AddMerchantKey("", &newKey.PublicKey); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("AddMerchantKey without serial: %v", err)
	}
	// The old certificate revoked, its signatures are refused; the last
	// one cannot be.
	if err := sb.RevokeMerchantKey(keys.MerchantSerial); err != nil {
		t.Fatal(err)
	}
	if err := c.SetSigner(keys.Signer()); err != nil {
		t.Fatal(err)
	}
	if o := submit("O4", "R4"); o.Kind != reservation.OutcomeUnknown || o.Code != "SIGN_ERROR" {
		t.Fatalf("revoked key: %+v", o)
	}
	if err := sb.RevokeMerchantKey(newSerial); !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Fatalf("revoking the last key: %v", err)
	}
}
