package wechatpay

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"
)

// WeChat Pay always sends the merchant, out_trade_no, refund id, status and
// amount.{total, refund, payer_total, payer_refund} with a refund, in a v3
// notification resource and in a create or query answer (PROTOCOL.md §1.3,
// §3.4), and the matching fields in a v2 req_info (§4.3). A message without
// one of them is refused (ErrIncomplete) rather than matched with empty
// values: every check against local records would skip what is not there.

// amountsSent records which amounts a JSON refund object carried. Refund and
// total are at least 1 fen; the payer's share can genuinely be 0 (a coupon
// paid it all), so for those only absence is refused.
type amountsSent struct {
	Total       *int64 `json:"total"`
	Refund      *int64 `json:"refund"`
	PayerTotal  *int64 `json:"payer_total"`
	PayerRefund *int64 `json:"payer_refund"`
}

func (a *amountsSent) missing(out []string) []string {
	if a == nil {
		return append(out, "amount")
	}
	if a.Total == nil || *a.Total < 1 {
		out = append(out, "amount.total")
	}
	if a.Refund == nil || *a.Refund < 1 {
		out = append(out, "amount.refund")
	}
	if a.PayerTotal == nil {
		out = append(out, "amount.payer_total")
	}
	if a.PayerRefund == nil {
		out = append(out, "amount.payer_refund")
	}
	return out
}

// sentAmounts decodes which amounts raw (already decoded once, so
// well-formed) carried.
func sentAmounts(raw []byte) (*amountsSent, error) {
	var sent struct {
		Amount *amountsSent `json:"amount"`
	}
	if err := json.Unmarshal(raw, &sent); err != nil {
		return nil, fmt.Errorf("%w: refund amounts JSON: %s", ErrMalformed, jsonErr(err))
	}
	return sent.Amount, nil
}

func incomplete(what string, missing []string) error {
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s lacks %s", ErrIncomplete, what, strings.Join(missing, ", "))
}

// checkResourceComplete refuses a decoded v3 notification resource that
// lacks a field WeChat Pay always sends. Partner resources name the
// merchant by sp_mchid and sub_mchid instead of mchid: one with sp_mchid
// must carry sub_mchid, and one with sub_mchid must name its provider (by
// sp_mchid, or by mchid as some partner samples do). A resource naming two
// different accounts (mchid and sp_mchid) is malformed.
func checkResourceComplete(plaintext []byte, r RefundResource) error {
	amounts, err := sentAmounts(plaintext)
	if err != nil {
		return err
	}
	if r.MchID != "" && r.SpMchID != "" && r.MchID != r.SpMchID {
		return fmt.Errorf("%w: refund resource names mchid and another sp_mchid", ErrMalformed)
	}
	var missing []string
	switch {
	case r.SpMchID != "" && r.SubMchID == "":
		missing = append(missing, "sub_mchid")
	case r.SubMchID != "" && r.SpMchID == "" && r.MchID == "":
		missing = append(missing, "sp_mchid")
	case r.MchID == "" && r.SpMchID == "":
		missing = append(missing, "mchid")
	}
	if r.OutTradeNo == "" {
		missing = append(missing, "out_trade_no")
	}
	if r.RefundID == "" {
		missing = append(missing, "refund_id")
	}
	if r.RefundStatus == "" {
		missing = append(missing, "refund_status")
	}
	return incomplete("refund resource", amounts.missing(missing))
}

// checkResponseComplete refuses a decoded create or query answer that lacks
// a field WeChat Pay always sends; out_refund_no and status are checked by
// the caller.
func checkResponseComplete(raw []byte, r RefundResponse) error {
	amounts, err := sentAmounts(raw)
	if err != nil {
		return err
	}
	var missing []string
	if r.RefundID == "" {
		missing = append(missing, "refund_id")
	}
	if r.OutTradeNo == "" {
		missing = append(missing, "out_trade_no")
	}
	return incomplete("refund object", amounts.missing(missing))
}

// v2FeesSent records which fees a req_info carried.
type v2FeesSent struct {
	XMLName             xml.Name `xml:"root"`
	TotalFee            *string  `xml:"total_fee"`
	RefundFee           *string  `xml:"refund_fee"`
	SettlementRefundFee *string  `xml:"settlement_refund_fee"`
}

// checkV2Complete refuses a decoded v2 notification whose envelope has no
// mch_id or whose req_info lacks a field WeChat Pay always sends.
// settlement_refund_fee can genuinely be 0.
func checkV2Complete(env V2Envelope, plaintext []byte, info V2RefundInfo) error {
	var sent v2FeesSent
	if err := xml.Unmarshal(plaintext, &sent); err != nil {
		return fmt.Errorf("%w: req_info XML", ErrMalformed)
	}
	var missing []string
	if env.MchID == "" {
		missing = append(missing, "mch_id")
	}
	if info.OutTradeNo == "" {
		missing = append(missing, "out_trade_no")
	}
	if info.RefundID == "" {
		missing = append(missing, "refund_id")
	}
	if info.RefundStatus == "" {
		missing = append(missing, "refund_status")
	}
	if sent.TotalFee == nil || info.TotalFee < 1 {
		missing = append(missing, "total_fee")
	}
	if sent.RefundFee == nil || info.RefundFee < 1 {
		missing = append(missing, "refund_fee")
	}
	if sent.SettlementRefundFee == nil {
		missing = append(missing, "settlement_refund_fee")
	}
	return incomplete("v2 notification", missing)
}
