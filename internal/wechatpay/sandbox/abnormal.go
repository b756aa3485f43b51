package sandbox

import (
	"bytes"
	"crypto/rsa"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"unicode/utf8"

	"github.com/refundd/refundd/internal/wechatpay"
)

// Values of channel and user_received_account (PROTOCOL.md §1.3).
const (
	channelOriginal       = "ORIGINAL"
	channelOtherBankcard  = "OTHER_BANKCARD"
	accountUserBalance    = "支付用户零钱"
	accountMerchantBank   = "商户结算银行账户"
	abnormalUserBankCard  = "USER_BANK_CARD"     // 退款到用户银行卡
	abnormalMerchantBank  = "MERCHANT_BANK_CARD" // 退款至交易商户银行账户
	maxBankTypeLen        = 16
	maxSensitiveFieldLen  = 1024
	sensitiveSerialHeader = "Wechatpay-Serial"
)

// refundIDRE is what a refund_id path segment may be: string(32).
var refundIDRE = regexp.MustCompile(`^[0-9A-Za-z]{1,32}$`)

// abnormalRequest is the body of POST
// /v3/refund/domestic/refunds/{refund_id}/apply-abnormal-refund (merchant
// doc "发起异常退款", pay.weixin.qq.com/docs/merchant/apis/refund/refunds/
// create-abnormal-refund.html). Unknown fields are tolerated.
type abnormalRequest struct {
	SubMchID    string `json:"sub_mchid"`
	OutRefundNo string `json:"out_refund_no"`
	Type        string `json:"type"`
	BankType    string `json:"bank_type"`
	BankAccount string `json:"bank_account"` // encrypted
	RealName    string `json:"real_name"`    // encrypted
}

// parseAbnormal checks an apply-abnormal-refund body. For USER_BANK_CARD
// the bank card and name must be encrypted for the platform key named by
// the Wechatpay-Serial header, as WeChat Pay requires of sensitive fields;
// it returns the decrypted card number.
func (s *Server) parseAbnormal(h http.Header, body []byte) (abnormalRequest, string, *apiError) {
	var req abnormalRequest
	var raw any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if len(bytes.TrimSpace(body)) == 0 {
		return req, "", paramError("", "请求体为空")
	}
	if err := dec.Decode(&raw); err != nil || dec.More() {
		return req, "", paramError("", "请求体不是合法的JSON")
	}
	if _, ok := raw.(map[string]any); !ok {
		return req, "", paramError("", "请求体须为JSON对象")
	}
	if p, found := findNull(raw, ""); found {
		return req, "", paramError(p, "不允许使用null")
	}
	if err := json.Unmarshal(body, &req); err != nil {
		field := ""
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			field = "/" + te.Field
		}
		return req, "", paramError(field, "字段类型错误")
	}
	if e := checkSubMchID(s.cfg.SubMchID, req.SubMchID, "body"); e != nil {
		return req, "", e
	}
	switch {
	case !outRefundNoRE.MatchString(req.OutRefundNo):
		return req, "", paramError("/out_refund_no", "须为1至64位数字、大小写字母或_-|*@")
	case req.Type != abnormalUserBankCard && req.Type != abnormalMerchantBank:
		return req, "", paramError("/type", "须为USER_BANK_CARD或MERCHANT_BANK_CARD")
	case len(req.BankType) > maxBankTypeLen:
		return req, "", paramError("/bank_type", "长度超过16")
	case len(req.BankAccount) > maxSensitiveFieldLen:
		return req, "", paramError("/bank_account", "长度超过1024")
	case len(req.RealName) > maxSensitiveFieldLen:
		return req, "", paramError("/real_name", "长度超过1024")
	}
	if req.Type != abnormalUserBankCard {
		return req, "", nil
	}
	switch {
	case req.BankType == "":
		return req, "", paramError("/bank_type", "退款至用户银行卡时必填")
	case req.BankAccount == "":
		return req, "", paramError("/bank_account", "退款至用户银行卡时必填")
	case req.RealName == "":
		return req, "", paramError("/real_name", "退款至用户银行卡时必填")
	}
	key := s.keys.decryptionKey(h.Get(sensitiveSerialHeader))
	if key == nil {
		// WeChat's answer to a serial that names none of its keys
		// (PARTNER.md §2.3).
		e := paramError(sensitiveSerialHeader, "平台证书序列号Wechatpay-Serial错误")
		e.Detail.Location = "header"
		return req, "", e
	}
	card, ok := decryptSensitive(key, req.BankAccount)
	if !ok {
		return req, "", paramError("/bank_account", "敏感字段解密失败")
	}
	if _, ok := decryptSensitive(key, req.RealName); !ok {
		return req, "", paramError("/real_name", "敏感字段解密失败")
	}
	return req, card, nil
}

// decryptSensitive undoes WeChat Pay's sensitive-field encryption:
// base64 of RSA-OAEP (SHA-1, MGF1 SHA-1) with the WeChat Pay public key or
// platform certificate the request named.
func decryptSensitive(key *rsa.PrivateKey, b64 string) (string, bool) {
	ct, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", false
	}
	pt, err := rsa.DecryptOAEP(sha1.New(), nil, key, ct, nil)
	if err != nil || len(pt) == 0 || !utf8.Valid(pt) {
		return "", false
	}
	return string(pt), true
}

// handleAbnormal serves POST .../{refund_id}/apply-abnormal-refund.
func (s *Server) handleAbnormal(w http.ResponseWriter, r *http.Request, refundID string) {
	body, ok := s.readBody(w, r)
	if !ok || !s.authenticate(w, r, body, true) {
		return
	}
	if !refundIDRE.MatchString(refundID) {
		e := paramError("refund_id", "须为1至32位数字或字母")
		e.Detail.Location = "uri_template"
		s.writeError(w, e, sigOK)
		return
	}
	req, card, perr := s.parseAbnormal(r.Header, body)
	if perr != nil {
		s.writeError(w, perr, sigOK)
		return
	}
	s.mu.Lock()
	tradeNo := ""
	if rf := s.byRefundID[refundID]; rf != nil {
		tradeNo = rf.order.outTradeNo
	}
	s.mu.Unlock()
	f := s.takeAPIFault(OpAbnormalRefund, tradeNo, req.OutRefundNo)
	mode, done := s.applyFaultBefore(w, f)
	if done {
		return
	}
	resp, aerr := s.applyAbnormal(refundID, req, card)
	serr := s.syncAll()
	if f != nil && f.Kind == FaultResponseLost {
		s.loseResponse(w, f.Delay)
		return
	}
	if serr != nil {
		s.log.Error("save state before answering apply-abnormal-refund", "refund_id", refundID, "err", serr)
		s.writeError(w, errSystem(), mode)
		return
	}
	if aerr != nil {
		s.writeError(w, aerr, mode)
		return
	}
	s.writeJSON(w, http.StatusOK, resp, mode)
}

// applyAbnormal accepts an abnormal refund's new destination: the refund
// becomes PROCESSING again and reaches SUCCESS after the processing delay,
// then is notified. Only an ABNORMAL refund can be resolved this way, so a
// repeated call (for example after a lost response) is INVALID_REQUEST and
// the merchant learns the state by querying.
func (s *Server) applyAbnormal(refundID string, req abnormalRequest, card string) (refundResponse, *apiError) {
	s.mu.Lock()
	r := s.byRefundID[refundID]
	switch {
	case r == nil:
		s.mu.Unlock()
		return refundResponse{}, newError(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "退款单不存在")
	case r.outRefundNo != req.OutRefundNo:
		s.mu.Unlock()
		return refundResponse{}, newError(http.StatusBadRequest, "INVALID_REQUEST", "商户退款单号与微信支付退款单号不匹配")
	case r.status != wechatpay.RefundAbnormal:
		s.mu.Unlock()
		return refundResponse{}, newError(http.StatusBadRequest, "INVALID_REQUEST", "退款单状态不是退款异常(ABNORMAL),不可发起异常退款")
	}
	r.status, r.outcome = wechatpay.RefundProcessing, wechatpay.RefundSuccess
	r.processingSince = s.cfg.Now()
	r.abnormalType, r.channel = req.Type, channelOtherBankcard
	r.receivedAccount = accountMerchantBank
	if req.Type == abnormalUserBankCard {
		// {银行名称}{卡类型}{卡尾号}, as the refund object shows a card.
		r.receivedAccount = req.BankType + "借记卡" + lastDigits(card, 4)
	}
	s.markLocked()
	resp := s.responseLocked(r)
	s.log.Debug("abnormal refund applied", "out_refund_no", r.outRefundNo, "type", req.Type)
	s.processLocked(r) // unlocks
	return resp, nil
}

// lastDigits returns the last n characters of s, or all of it when shorter.
func lastDigits(s string, n int) string {
	r := []rune(s)
	return string(r[max(len(r)-n, 0):])
}
