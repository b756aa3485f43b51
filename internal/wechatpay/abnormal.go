package wechatpay

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // WeChat Pay's sensitive-field encryption is OAEP with SHA-1 (PARTNER.md §2.3)
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/refundd/refundd/internal/reservation"
)

// AbnormalRefundSuffix follows RefundsPath/{refund_id}: POST pays out an
// ABNORMAL refund to another account (发起异常退款, PARTNER.md §2).
const AbnormalRefundSuffix = "/apply-abnormal-refund"

// maxSensitivePlain is the most an RSA-2048 OAEP-SHA-1 block carries
// (PARTNER.md §2.3: "加密原串的长度不能超过214字节").
const maxSensitivePlain = 214

// EncryptionKey returns the WeChat Pay key sensitive request fields are
// encrypted for, and its serial for Wechatpay-Serial: the one
// PreferredSerial names (a public key if held, else the valid platform
// certificate expiring last, PARTNER.md §2.3). Errors wrap
// ErrInvalidArgument when the Verifier holds no usable key.
func (v *Verifier) EncryptionKey() (serial string, pub *rsa.PublicKey, err error) {
	serial = v.PreferredSerial()
	k, ok, _ := v.lookup(serial)
	if serial == "" || !ok {
		return "", nil, fmt.Errorf("%w: no WeChat Pay public key or valid platform certificate to encrypt for", ErrInvalidArgument)
	}
	return serial, k.pub, nil
}

// EncryptSensitive encrypts plain as WeChat Pay requires of sensitive
// fields: RSA-OAEP with SHA-1 (hash and MGF1), no label, base64. Errors
// never contain the plaintext.
func EncryptSensitive(pub *rsa.PublicKey, plain string) (string, error) {
	if plain == "" || len(plain) > maxSensitivePlain {
		return "", fmt.Errorf("%w: sensitive field must be 1..%d bytes", ErrInvalidArgument, maxSensitivePlain)
	}
	ct, err := rsa.EncryptOAEP(sha1.New(), rand.Reader, pub, []byte(plain), nil)
	if err != nil {
		return "", fmt.Errorf("%w: encrypt sensitive field: %s", ErrInvalidArgument, redact(err))
	}
	return base64.StdEncoding.EncodeToString(ct), nil
}

// EncryptSensitive encrypts each of plain for the account's WeChat Pay key
// and returns the key's serial with the ciphertexts, in order.
func (c *Client) EncryptSensitive(plain ...string) (serial string, out []string, err error) {
	serial, pub, err := c.verifier.EncryptionKey()
	if err != nil {
		return "", nil, err
	}
	out = make([]string, len(plain))
	for i, p := range plain {
		if out[i], err = EncryptSensitive(pub, p); err != nil {
			return "", nil, err
		}
	}
	return serial, out, nil
}

// AbnormalRefundBody is the apply-abnormal-refund request (PARTNER.md
// §2.2); the bank fields are ciphertext.
type AbnormalRefundBody struct {
	SubMchID    string `json:"sub_mchid,omitempty"`
	OutRefundNo string `json:"out_refund_no"`
	Type        string `json:"type"`
	BankType    string `json:"bank_type,omitempty"`
	BankAccount string `json:"bank_account,omitempty"`
	RealName    string `json:"real_name,omitempty"`
}

// ApplyAbnormal implements actors.AbnormalProvider for a direct merchant.
// On a partner Client nothing is sent (use For).
func (c *Client) ApplyAbnormal(ctx context.Context, refundNo string, app reservation.AbnormalApplication) reservation.Outcome {
	if c.partner {
		return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "CLIENT_NO_SUB_MCHID",
			Message: "a partner account's call needs a sub_mchid; not sent"}
	}
	return c.applyAbnormal(ctx, Target{}, refundNo, app)
}

// ApplyAbnormal is Client.ApplyAbnormal naming m's sub-merchant.
func (m *MerchantClient) ApplyAbnormal(ctx context.Context, refundNo string, app reservation.AbnormalApplication) reservation.Outcome {
	return m.c.applyAbnormal(ctx, m.t, refundNo, app)
}

// EncryptSensitive is Client.EncryptSensitive: in partner mode the key is
// the provider's (PARTNER.md §1.1), which m's Client verifies with.
func (m *MerchantClient) EncryptSensitive(plain ...string) (string, []string, error) {
	return m.c.EncryptSensitive(plain...)
}

// applyAbnormal posts the payout of refund refundNo (WeChat's app.RefundID)
// with Wechatpay-Serial naming the key its fields are encrypted for. The
// answer is verified and mapped like a query's refund object, and must be
// about the same refund id; a business error is OutcomeRejected.
func (c *Client) applyAbnormal(ctx context.Context, t Target, refundNo string, app reservation.AbnormalApplication) reservation.Outcome {
	notSent := func(msg string) reservation.Outcome {
		return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "CLIENT_INVALID_ABNORMAL", Message: msg + "; not sent"}
	}
	switch {
	case !validRefundNo(refundNo):
		return notSent("refund number is not 1..64 allowed bytes")
	case app.RefundID == "" || len(app.RefundID) > maxOrderNoLen || !headerSafe(app.RefundID):
		return notSent("WeChat Pay refund id is missing or malformed")
	case app.Type == reservation.AbnormalUserBankCard && (app.BankType == "" || app.EncryptedAccount == "" || app.EncryptedName == "" || !headerSafe(app.KeySerial)):
		return notSent("USER_BANK_CARD needs bank_type, encrypted bank_account and real_name, and their key serial")
	case app.Type != reservation.AbnormalUserBankCard && app.Type != reservation.AbnormalMerchantBankCard:
		return notSent("type must be USER_BANK_CARD or MERCHANT_BANK_CARD")
	}
	body, err := json.Marshal(AbnormalRefundBody{SubMchID: t.SubMchID, OutRefundNo: refundNo, Type: app.Type,
		BankType: app.BankType, BankAccount: app.EncryptedAccount, RealName: app.EncryptedName})
	if err != nil {
		return notSent("encode body: " + err.Error())
	}
	u := c.base + RefundsPath + "/" + url.PathEscape(app.RefundID) + AbnormalRefundSuffix
	o := c.call(ctx, opAbnormal, http.MethodPost, u, refundNo, body, 1, app.KeySerial)
	if o.ProviderID != "" && o.ProviderID != app.RefundID {
		return unknown("MISMATCHED_RESPONSE", fmt.Sprintf("response is for refund_id %q", limit(o.ProviderID, 32)))
	}
	return o
}
