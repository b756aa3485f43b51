package wechatpay

import (
	"context"
	"fmt"

	"github.com/refundd/refundd/internal/reservation"
)

// maxSubMchIDLen is sub_mchid's limit, string(32) (PARTNER.md §1.3).
const maxSubMchIDLen = 32

// Target is the merchant of one refund on a Client's account: a per-call
// parameter, so one Client (one set of credentials) serves every merchant
// of its account.
type Target struct {
	// SubMchID is the sub-merchant of a partner account; it must be empty
	// on a direct account and set on a partner one.
	SubMchID string
	// NotifyURL overrides ClientConfig.NotifyURL for this merchant. Same
	// rules; empty means the Client's.
	NotifyURL string
}

// MerchantClient is a Client bound to one Target: the engine's provider
// for one merchant. Every request it sends names exactly its sub-merchant.
// It is safe for concurrent use.
type MerchantClient struct {
	c *Client
	t Target
}

// For returns the provider of merchant t on c's account.
//
// Errors wrap ErrInvalidArgument: a partner Client without a sub_mchid (or
// one that is not 1..32 header-safe bytes, or is the provider's own mchid,
// which WeChat Pay refuses: "子商户mchid不能与自身mchid相同"), a direct
// Client with one (WeChat Pay: "普通商户不允许传sub_mch_id"), or a bad
// NotifyURL.
func (c *Client) For(t Target) (*MerchantClient, error) {
	switch {
	case c.partner && t.SubMchID == "":
		return nil, fmt.Errorf("%w: client: partner account %s needs a sub_mchid", ErrInvalidArgument, c.signer.Load().MchID)
	case !c.partner && t.SubMchID != "":
		return nil, fmt.Errorf("%w: client: direct merchant %s takes no sub_mchid", ErrInvalidArgument, c.signer.Load().MchID)
	case t.SubMchID != "" && (!headerSafe(t.SubMchID) || len(t.SubMchID) > maxSubMchIDLen):
		return nil, fmt.Errorf("%w: client: sub_mchid must be 1..%d header-safe bytes", ErrInvalidArgument, maxSubMchIDLen)
	case t.SubMchID == c.signer.Load().MchID:
		return nil, fmt.Errorf("%w: client: sub_mchid is the provider's own mchid", ErrInvalidArgument)
	}
	if err := checkNotifyURL(t.NotifyURL); err != nil {
		return nil, err
	}
	return &MerchantClient{c: c, t: t}, nil
}

// Target is the merchant m serves.
func (m *MerchantClient) Target() Target { return m.t }

// Merchant is how WeChat Pay's notifications name m's merchant, for
// CheckMerchant.
func (m *MerchantClient) Merchant() Merchant {
	return Merchant{MchID: m.c.signer.Load().MchID, SubMchID: m.t.SubMchID}
}

// RequestBody is Client.RequestBody for m's merchant: sub_mchid first when
// set, then the direct fields in their fixed order; notify_url is m's.
func (m *MerchantClient) RequestBody(r reservation.RefundRequest) ([]byte, error) {
	return m.c.requestBody(m.t, r)
}

// Submit is Client.Submit, refusing (not sending) a body whose sub_mchid
// is not m's.
func (m *MerchantClient) Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome {
	return m.c.submit(ctx, &m.t, refundNo, body, attempt)
}

// Query is Client.Query with ?sub_mchid= for a sub-merchant.
func (m *MerchantClient) Query(ctx context.Context, refundNo string) reservation.Outcome {
	return m.c.query(ctx, m.t, refundNo)
}
