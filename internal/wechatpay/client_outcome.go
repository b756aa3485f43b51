package wechatpay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// op is which refund call a response answers.
type op uint8

const (
	opSubmit   op = iota + 1 // POST /v3/refund/domestic/refunds
	opQuery                  // GET /v3/refund/domestic/refunds/{out_refund_no}
	opAbnormal               // POST /v3/refund/domestic/refunds/{refund_id}/apply-abnormal-refund
)

func (o op) String() string {
	switch o {
	case opQuery:
		return "query"
	case opAbnormal:
		return "apply_abnormal"
	}
	return "submit"
}

// codeUnverified is the outcome code of a response that would have been a
// definite answer but whose signature did not verify.
const codeUnverified = "UNVERIFIED_RESPONSE"

// codeClass is what a WeChat Pay APIv3 error code says about the request.
type codeClass uint8

const (
	classNone     codeClass = iota // no usable code: cannot decide by code
	classBusiness                  // a definite refusal of this request
	classRetry                     // WeChat Pay did not decide: same number, same bytes, later
	classNotFound                  // no such refund (query); no such order (create)
)

// classifyCode is the table of error codes (PROTOCOL.md §1.5, §1.6, §6). A
// non-empty code not listed is a business code: WeChat Pay documents 4xx
// as business errors, and new codes are added over time.
func classifyCode(code string) codeClass {
	switch code {
	case "":
		return classNone
	// "使用相同参数再次调用" / rate limits / overload: not decided.
	case "SYSTEM_ERROR", "FREQUENCY_LIMITED", "SERVICE_UNAVAILABLE":
		return classRetry
	// Our signature or clock was refused, so WeChat Pay did not look at the
	// refund at all; it is a configuration fault to fix, not a refusal of
	// the refund, and must not close it for good.
	case "SIGN_ERROR":
		return classRetry
	case "RESOURCE_NOT_EXISTS":
		return classNotFound
	case "NOT_ENOUGH", "USER_ACCOUNT_ABNORMAL", "PARAM_ERROR", "INVALID_REQUEST", "MCH_NOT_EXISTS", "NO_AUTH":
		return classBusiness
	}
	return classBusiness
}

// errorKind decides a non-2xx answer. It is the one place that maps HTTP
// status, error code and attempt to an outcome kind; verification is
// applied afterwards (an unverified answer is never more than unknown).
//
//   - 5xx, 429, and anything below 400 that is not 2xx: unknown. WeChat Pay
//     says a 429 on a refund is "受理状态不明" (acceptance unclear).
//   - no code, or a retry code (SYSTEM_ERROR, FREQUENCY_LIMITED, ...) even
//     under another 4xx: unknown.
//   - query: RESOURCE_NOT_EXISTS is not found; any other code is unknown,
//     because a query cannot refuse a refund.
//   - submit: a business code (RESOURCE_NOT_EXISTS included: no such order)
//     is a rejection on the first attempt only. On a resubmission an earlier
//     attempt may have been accepted, and INVALID_REQUEST in particular
//     means the number is already used, so it is unknown and the engine
//     queries.
func errorKind(o op, status int, code string, attempt int) reservation.OutcomeKind {
	if status >= 500 || status == 429 || status < 400 {
		return reservation.OutcomeUnknown
	}
	class := classifyCode(code)
	switch {
	case class == classNone || class == classRetry:
		return reservation.OutcomeUnknown
	case o == opQuery && class == classNotFound:
		return reservation.OutcomeNotFound
	case o == opQuery:
		return reservation.OutcomeUnknown
	case o == opAbnormal:
		// A refusal of the payout, not of the refund: it never says "not
		// found" (which resubmits a refund).
		return reservation.OutcomeRejected
	case attempt == 1:
		return reservation.OutcomeRejected
	}
	return reservation.OutcomeUnknown
}

// statusKind maps a refund object's status.
func statusKind(status string) (reservation.OutcomeKind, bool) {
	switch status {
	case RefundSuccess:
		return reservation.OutcomeSucceeded, true
	case RefundProcessing:
		return reservation.OutcomeProcessing, true
	case RefundClosed:
		return reservation.OutcomeFailed, true
	case RefundAbnormal:
		return reservation.OutcomeAbnormal, true
	}
	return "", false
}

// mapResponse turns one HTTP answer into an outcome. verr is the result of
// verifying its signature over raw.
func (c *Client) mapResponse(o op, status int, raw []byte, verr error, refundNo string, attempt int) reservation.Outcome {
	if status >= 200 && status < 300 {
		// A 2xx without a valid signature may be forged, or a probe on a
		// request that did execute: never "not refunded", never trusted.
		if verr != nil {
			return unverifiedOutcome(status, "", verr)
		}
		if status != 200 {
			// 202: accepted but not processed, repeat with the same
			// parameters; other 2xx carry no refund object.
			return unknown(httpCode(status), fmt.Sprintf("HTTP %d without a refund object", status))
		}
		return refundOutcome(raw, refundNo)
	}

	var e ErrorResponse
	_ = json.Unmarshal(raw, &e) // a body that is not an error object just has no code
	code := cleanCode(e.Code)
	msg := cleanText(e.Message)
	kind := errorKind(o, status, code, attempt)
	outCode := code
	if outCode == "" {
		outCode = httpCode(status)
	}
	if kind == reservation.OutcomeUnknown {
		m := fmt.Sprintf("HTTP %d", status)
		if msg != "" {
			m += ": " + msg
		}
		if class := classifyCode(code); o == opSubmit && attempt != 1 && status >= 400 && status < 500 && status != 429 &&
			(class == classBusiness || class == classNotFound) {
			m += fmt.Sprintf(" (refused resubmission, attempt %d: an earlier attempt may have been accepted; query to resolve)", attempt)
		}
		if verr != nil {
			m += " (unverified)"
		}
		return reservation.Outcome{Kind: kind, Code: outCode, Message: m}
	}
	// Rejected or not found are definite. The official SDKs verify only
	// 2xx answers and it is not confirmed that WeChat signs its errors, so
	// an error with no signature at all is taken at its word (a rejection
	// only holds the amount until an operator acts; a wrong "not found"
	// only resends the same bytes under the same number). An error whose
	// signature is present but wrong is not trusted.
	if verr != nil && !errors.Is(verr, ErrMissingHeader) {
		return unverifiedOutcome(status, code, verr)
	}
	return reservation.Outcome{Kind: kind, Code: outCode, Message: msg}
}

// refundOutcome maps a verified 200 refund object.
func refundOutcome(raw []byte, refundNo string) reservation.Outcome {
	var r RefundResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return unknown("MALFORMED_RESPONSE", "refund object: "+jsonErr(err))
	}
	if r.OutRefundNo != refundNo {
		return unknown("MISMATCHED_RESPONSE", fmt.Sprintf("response is for out_refund_no %q", limit(r.OutRefundNo, 64)))
	}
	if r.Amount.Refund < 0 || r.Amount.Total < 0 {
		return unknown("MALFORMED_RESPONSE", "refund object has a negative amount")
	}
	out, ok := refundObject(r.Status, r.RefundID, r.OutTradeNo, r.Amount.Refund, r.Amount.Total, r.SuccessTime)
	if !ok {
		return unknown("UNKNOWN_STATUS", fmt.Sprintf("refund status %q", limit(r.Status, 32)))
	}
	// An answer without its id, order or amounts is no answer: nothing is
	// applied, and the engine asks again.
	if err := checkResponseComplete(raw, r); err != nil {
		return unknown("INCOMPLETE_RESPONSE", err.Error())
	}
	return out
}

// refundObject maps a refund object, a query's answer or a notification's
// resource alike, to an outcome. ok is false for a status with no outcome
// kind; the outcome then carries what the object reports, without a kind.
func refundObject(status, refundID, outTradeNo string, refund, total int64, successTime string) (reservation.Outcome, bool) {
	out := reservation.Outcome{ProviderID: refundID, OutTradeNo: outTradeNo, RefundAmount: refund, TotalAmount: total}
	kind, ok := statusKind(status)
	if !ok {
		return out, false
	}
	out.Kind = kind
	if kind == reservation.OutcomeSucceeded && successTime != "" {
		// The money moved either way; a malformed time only loses the time.
		if t, err := time.Parse(time.RFC3339, successTime); err == nil {
			out.SuccessTime = t.UTC()
		}
	}
	return out, true
}

// Notification is what a verified refund notification tells the engine: its
// outcome, or a hint to query when its status has no outcome kind (a status
// we cannot read is asked about, not guessed).
func (r RefundResource) Notification() reservation.Notification {
	o, ok := refundObject(r.RefundStatus, r.RefundID, r.OutTradeNo, r.Amount.Refund, r.Amount.Total, r.SuccessTime)
	m := r.Merchant()
	o.MchID, o.SubMchID = m.MchID, m.SubMchID
	return reservation.Notification{RefundNo: r.OutRefundNo, Outcome: o, Hint: !ok}
}

// Notification is what an APIv2 notification tells the engine: a hint,
// whatever its status. It carries no signature and its req_info is
// malleable, so only a query's answer is applied; the order and amounts it
// reports must match our records before it costs one. The merchant is in
// the envelope, not in req_info: see NotificationV2.
func (i V2RefundInfo) Notification() reservation.Notification {
	return reservation.Notification{RefundNo: i.OutRefundNo, Hint: true, Outcome: reservation.Outcome{
		ProviderID: i.RefundID, OutTradeNo: i.OutTradeNo, RefundAmount: i.RefundFee, TotalAmount: i.TotalFee}}
}

// NotificationV2 is info.Notification with the merchant the envelope names
// (mch_id, and sub_mch_id in partner mode).
func NotificationV2(env V2Envelope, info V2RefundInfo) reservation.Notification {
	n := info.Notification()
	n.Outcome.MchID, n.Outcome.SubMchID = env.MchID, env.SubMchID
	return n
}

func unknown(code, msg string) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: code, Message: msg}
}

func unverifiedOutcome(status int, claimed string, verr error) reservation.Outcome {
	m := fmt.Sprintf("HTTP %d", status)
	if claimed != "" {
		m += " " + claimed
	}
	reason := verr.Error()
	if isProbe(verr) {
		reason = "signature probe (" + reason + ")"
	}
	return unknown(codeUnverified, m+" not trusted: "+limit(reason, maxLoggedMessage))
}

func isProbe(err error) bool { return errors.Is(err, ErrProbe) }

func httpCode(status int) string { return "HTTP_" + strconv.Itoa(status) }

// transportCode names a failure to get an answer at all.
func transportCode(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "TIMEOUT"
	case errors.Is(err, context.Canceled), errors.Is(ctx.Err(), context.Canceled):
		return "CANCELED"
	case errors.As(err, &ne) && ne.Timeout():
		return "TIMEOUT"
	}
	return "NETWORK_ERROR"
}

// cleanCode keeps a code only if it looks like one (upper-case letters,
// digits, underscores, at most 64): the body is outside input and the code
// ends up in the journal.
func cleanCode(s string) string {
	if s == "" || len(s) > 64 {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return ""
		}
	}
	return s
}

// cleanText bounds an error message from the body: valid UTF-8, no control
// characters, at most 256 bytes.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 256 {
		s = s[:256]
		s = strings.ToValidUTF8(s, "")
	}
	return s
}
