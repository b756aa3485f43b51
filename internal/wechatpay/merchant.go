package wechatpay

import "fmt"

// Merchant names a merchant the way WeChat Pay's messages do. MchID is the
// account: a direct merchant's mchid, or a service provider's sp_mchid (the
// one that signs requests and whose keys verify answers and notifications).
// SubMchID is the sub-merchant (特约商户) in partner mode and empty for a
// direct merchant (PARTNER.md §1.1).
type Merchant struct {
	MchID    string
	SubMchID string
}

// Partner reports whether m is a sub-merchant of a service provider.
func (m Merchant) Partner() bool { return m.SubMchID != "" }

func (m Merchant) String() string {
	if m.SubMchID == "" {
		return "mchid " + m.MchID
	}
	return "sp_mchid " + m.MchID + " sub_mchid " + m.SubMchID
}

// Merchant is the merchant a decoded resource names: sp_mchid (or mchid,
// which some partner samples send instead, PARTNER.md §1.5) and sub_mchid.
func (r RefundResource) Merchant() Merchant {
	id := r.SpMchID
	if id == "" {
		id = r.MchID
	}
	return Merchant{MchID: id, SubMchID: r.SubMchID}
}

// Merchant is the merchant an APIv2 envelope names: mch_id (the provider's
// in partner mode) and sub_mch_id.
func (e V2Envelope) Merchant() Merchant {
	return Merchant{MchID: e.MchID, SubMchID: e.SubMchID}
}

// CheckMerchant compares the merchant a verified message names (got) with
// the one the refund belongs to (want), strictly:
//
//   - want is a sub-merchant and got names none: ErrIncomplete. WeChat Pay
//     always sends sub_mchid with a partner refund; a message without it
//     cannot be attributed, so it is refused, never matched by the
//     provider id alone.
//   - any other difference: ErrMerchantMismatch. A message naming a
//     sub_mchid for a direct merchant's refund is one: direct merchants
//     never receive sub_mchid, so it was meant for a partner refund.
//
// An empty want.MchID is a caller error (ErrInvalidArgument): there is
// nothing to compare with, and skipping the check would accept anything.
func CheckMerchant(want, got Merchant) error {
	switch {
	case want.MchID == "":
		return fmt.Errorf("%w: expected merchant has no mchid", ErrInvalidArgument)
	case want.SubMchID != "" && got.SubMchID == "":
		return fmt.Errorf("%w: message for %s names no sub_mchid", ErrIncomplete, want)
	case got != want:
		return fmt.Errorf("%w: message names %s, refund belongs to %s", ErrMerchantMismatch, got, want)
	}
	return nil
}
