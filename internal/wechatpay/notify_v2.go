package wechatpay

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"strings"
	"unicode/utf8"
)

// APIv2 refund statuses (V2RefundInfo.RefundStatus).
const (
	V2RefundSuccess = "SUCCESS"     // refund succeeded
	V2RefundChange  = "CHANGE"      // refund abnormal; handle manually
	V2RefundClose   = "REFUNDCLOSE" // refund closed
)

// V2Envelope is the XML body of an APIv2 refund notification. It has no
// sign field: authenticity rests on req_info decrypting with the APIv2 key.
type V2Envelope struct {
	XMLName    xml.Name `xml:"xml"`
	ReturnCode string   `xml:"return_code"` // SUCCESS or FAIL: transport status, not the refund result
	ReturnMsg  string   `xml:"return_msg,omitempty"`
	AppID      string   `xml:"appid,omitempty"`
	MchID      string   `xml:"mch_id,omitempty"`
	SubAppID   string   `xml:"sub_appid,omitempty"`  // partner mode
	SubMchID   string   `xml:"sub_mch_id,omitempty"` // partner mode
	NonceStr   string   `xml:"nonce_str,omitempty"`
	ReqInfo    string   `xml:"req_info,omitempty"` // base64 AES-256-ECB ciphertext of a V2RefundInfo
}

// V2RefundInfo is the decrypted req_info (root element <root>). Fees are
// fen; optional ones are zero when absent. Statuses are plain strings:
// SUCCESS, CHANGE or REFUNDCLOSE.
type V2RefundInfo struct {
	XMLName             xml.Name `xml:"root"`
	TransactionID       string   `xml:"transaction_id"`
	OutTradeNo          string   `xml:"out_trade_no"`
	RefundID            string   `xml:"refund_id"`
	OutRefundNo         string   `xml:"out_refund_no"`
	TotalFee            int64    `xml:"total_fee"`
	SettlementTotalFee  int64    `xml:"settlement_total_fee,omitempty"`
	RefundFee           int64    `xml:"refund_fee"`
	SettlementRefundFee int64    `xml:"settlement_refund_fee"`
	CashRefundFee       int64    `xml:"cash_refund_fee,omitempty"`
	RefundStatus        string   `xml:"refund_status"`
	SuccessTime         string   `xml:"success_time,omitempty"` // "2006-01-02 15:04:05", Beijing time, no zone
	RefundRecvAccount   string   `xml:"refund_recv_accout"`     // sic: WeChat Pay's tag is misspelled
	RefundAccount       string   `xml:"refund_account"`         // REFUND_SOURCE_RECHARGE_FUNDS or REFUND_SOURCE_UNSETTLED_FUNDS
	RefundRequestSource string   `xml:"refund_request_source"`  // API or VENDOR_PLATFORM
}

// ParseRefundNotificationV2 decodes an APIv2 refund notification: body size,
// <xml> envelope, return_code SUCCESS, req_info base64, AES-256-ECB with the
// lower-case hex MD5 of apiV2Key, strict PKCS#7, <root> XML, out_refund_no
// present, fees non-negative, and every field WeChat Pay always sends
// present: mch_id, out_trade_no, refund_id, refund_status, total_fee,
// refund_fee, settlement_refund_fee.
//
// ECB has no integrity: blocks of genuine notifications could be spliced.
// Callers must compare mch_id, appid, out_refund_no and amounts with their
// records, and confirm money-moving results with the refund query API.
//
// Errors wrap ErrTooLarge, ErrInvalidKey (empty apiV2Key), ErrMalformed,
// ErrReturnFail (the envelope is returned for logging), ErrDecrypt (req_info
// not base64), ErrBadPadding or ErrIncomplete (a field above is absent:
// refuse it like a mismatch). Once the envelope has parsed it is returned
// even on error.
func ParseRefundNotificationV2(apiV2Key []byte, body []byte) (V2Envelope, V2RefundInfo, error) {
	if len(body) > MaxNotificationSize {
		return V2Envelope{}, V2RefundInfo{}, fmt.Errorf("%w: body is %d bytes, max %d", ErrTooLarge, len(body), MaxNotificationSize)
	}
	if len(apiV2Key) == 0 {
		return V2Envelope{}, V2RefundInfo{}, fmt.Errorf("%w: empty APIv2 key", ErrInvalidKey)
	}
	var env V2Envelope
	if err := xml.Unmarshal(body, &env); err != nil {
		return V2Envelope{}, V2RefundInfo{}, fmt.Errorf("%w: v2 envelope XML", ErrMalformed)
	}
	if env.ReturnCode != "SUCCESS" {
		return env, V2RefundInfo{}, fmt.Errorf("%w: return_code %q", ErrReturnFail, limit(env.ReturnCode, 16))
	}
	if env.ReqInfo == "" {
		// A payment notification posted to the refund endpoint looks like this.
		return env, V2RefundInfo{}, fmt.Errorf("%w: v2 notification has no req_info", ErrMalformed)
	}
	pt, err := DecryptReqInfo(apiV2Key, env.ReqInfo)
	if err != nil {
		return env, V2RefundInfo{}, err
	}
	var info V2RefundInfo
	if err := xml.Unmarshal(pt, &info); err != nil {
		return env, V2RefundInfo{}, fmt.Errorf("%w: req_info XML (wrong APIv2 key?)", ErrMalformed)
	}
	if info.OutRefundNo == "" {
		return env, V2RefundInfo{}, fmt.Errorf("%w: req_info has no out_refund_no", ErrMalformed)
	}
	if info.TotalFee < 0 || info.SettlementTotalFee < 0 || info.RefundFee < 0 || info.SettlementRefundFee < 0 || info.CashRefundFee < 0 {
		return env, V2RefundInfo{}, fmt.Errorf("%w: req_info has a negative fee", ErrMalformed)
	}
	if err := checkV2Complete(env, pt, info); err != nil {
		return env, V2RefundInfo{}, err
	}
	return env, info, nil
}

// DecryptReqInfo decrypts an APIv2 req_info: standard base64, then
// AES-256-ECB keyed with the lower-case hex MD5 of apiV2Key, then strict
// PKCS#7 unpadding. It returns the <root> XML.
//
// Errors wrap ErrInvalidKey (empty key), ErrDecrypt (not base64) or
// ErrBadPadding (length not a positive multiple of 16, or bad padding: most
// often the wrong APIv2 key).
func DecryptReqInfo(apiV2Key []byte, reqInfoB64 string) ([]byte, error) {
	if len(apiV2Key) == 0 {
		return nil, fmt.Errorf("%w: empty APIv2 key", ErrInvalidKey)
	}
	ct, err := base64.StdEncoding.DecodeString(strings.TrimSpace(reqInfoB64))
	if err != nil {
		return nil, fmt.Errorf("%w: req_info is not base64", ErrDecrypt)
	}
	return ecbDecrypt(v2ReqInfoKey(apiV2Key), ct)
}

// EncryptReqInfo is DecryptReqInfo's inverse, for sandboxes and tests.
//
// Errors wrap ErrInvalidKey (empty key).
func EncryptReqInfo(apiV2Key []byte, plaintext []byte) (string, error) {
	if len(apiV2Key) == 0 {
		return "", fmt.Errorf("%w: empty APIv2 key", ErrInvalidKey)
	}
	ct, err := ecbEncrypt(v2ReqInfoKey(apiV2Key), plaintext)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(ct), nil
}

// BuildRefundNotificationV2 encrypts info into env.ReqInfo and returns the
// XML body, for sandboxes and tests. An empty env.ReturnCode becomes SUCCESS.
//
// Errors wrap ErrInvalidKey (empty key) or ErrInvalidArgument (no
// out_refund_no).
func BuildRefundNotificationV2(apiV2Key []byte, env V2Envelope, info V2RefundInfo) ([]byte, error) {
	if info.OutRefundNo == "" {
		return nil, fmt.Errorf("%w: req_info needs out_refund_no", ErrInvalidArgument)
	}
	pt, err := xml.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("%w: marshal req_info: %s", ErrInvalidArgument, err)
	}
	if env.ReqInfo, err = EncryptReqInfo(apiV2Key, pt); err != nil {
		return nil, err
	}
	if env.ReturnCode == "" {
		env.ReturnCode = "SUCCESS"
	}
	body, err := xml.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("%w: marshal envelope: %s", ErrInvalidArgument, err)
	}
	return body, nil
}

// V2Ack returns the compact one-line XML reply to an APIv2 notification:
//
//	<xml><return_code><![CDATA[SUCCESS]]></return_code><return_msg><![CDATA[OK]]></return_msg></xml>
//
// for ok, or return_code FAIL otherwise. An empty msg becomes "OK" or
// "FAIL". msg is made safe for CDATA (characters invalid in XML become '?',
// "]]>" is split) and cut to 128 bytes.
func V2Ack(ok bool, msg string) []byte {
	code := "FAIL"
	if ok {
		code = "SUCCESS"
	}
	if msg == "" {
		msg = "OK"
		if !ok {
			msg = "FAIL"
		}
	}
	var b bytes.Buffer
	b.WriteString("<xml><return_code><![CDATA[")
	b.WriteString(code)
	b.WriteString("]]></return_code><return_msg><![CDATA[")
	b.WriteString(strings.ReplaceAll(cdataSafe(msg, 128), "]]>", "]]]]><![CDATA[>"))
	b.WriteString("]]></return_msg></xml>")
	return b.Bytes()
}

// cdataSafe replaces characters XML 1.0 forbids (and invalid UTF-8) with
// '?' and truncates to at most maxBytes bytes on a rune boundary.
func cdataSafe(s string, maxBytes int) string {
	var b strings.Builder
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			r = '?'
		} else if !(r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r <= 0xD7FF) ||
			(r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)) {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) > maxBytes {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
