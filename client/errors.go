package client

import (
	"errors"
	"fmt"
)

// Code is an error code of the API (the ErrorCode schema of the OpenAPI
// document).
type Code string

// The API's error codes.
const (
	CodeInvalid                = Code("invalid_argument")
	CodeNotFound               = Code("not_found")
	CodeConflict               = Code("conflict")
	CodeOutTradeNoTaken        = Code("out_trade_no_taken")
	CodeIdempotencyKeyReused   = Code("idempotency_key_reused")
	CodeInsufficientRefundable = Code("insufficient_refundable")
	CodeCanceled               = Code("reservation_canceled")
	CodeRefundLimit            = Code("refund_limit_reached")
	CodeInvalidState           = Code("invalid_state")
	CodeOutcomeMismatch        = Code("outcome_mismatch")
	CodeRefundWindowClosed     = Code("refund_window_closed")
	// CodeArchived: the reservation was archived (finished, its refund
	// window closed): it can be read, never changed.
	CodeArchived           = Code("archived")
	CodeRefundSettling     = Code("refund_settling")
	CodeReleaseUnconfirmed = Code("release_unconfirmed")
	CodeProviderHasRefund  = Code("provider_has_refund")
	CodeUnavailable        = Code("unavailable")
	CodeTimeout            = Code("timeout")
	CodeInternal           = Code("internal")
	CodeTooLarge           = Code("body_too_large")
	CodeMethodNotAllowed   = Code("method_not_allowed")
	CodeRouteNotFound      = Code("route_not_found")
	CodeUnauthenticated    = Code("unauthenticated")
	CodeForbidden          = Code("forbidden")
	// CodeMerchantScope: the token is limited to some merchants and the
	// route answers about every merchant.
	CodeMerchantScope = Code("merchant_scope")
	// CodeSelfApproval: the requester of a refund tried to approve it;
	// four eyes need another person.
	CodeSelfApproval = Code("self_approval")
	// CodeCredentialsInvalid: a credential reload found a bad file or
	// setting; the running credentials stay.
	CodeCredentialsInvalid = Code("credentials_invalid")
	// CodeRestartRequired: a credential reload was refused because the
	// change needs a restart; the running credentials stay.
	CodeRestartRequired = Code("restart_required")
	// CodeMerchantNotConfigured: the reservation's merchant is no longer
	// configured; its refunds settle, but no new one can be made.
	CodeMerchantNotConfigured = Code("merchant_not_configured")
	// CodeRateLimited: the token (or, for notifications, the address) is
	// over its rate; nothing was changed. Calls that may be repeated are
	// retried after the answer's Retry-After.
	CodeRateLimited = Code("rate_limited")
	// CodeEncryptionUnavailable: the server holds no WeChat Pay key to
	// encrypt an abnormal refund's bank details for; nothing was changed.
	CodeEncryptionUnavailable = Code("encryption_unavailable")
	// CodeTotalsNotKept: the server's journal does not keep refund totals
	// for its whole history (Totals); an operator rebuilds its counters.
	CodeTotalsNotKept = Code("totals_not_kept")
)

// codes lists every Code; the tests compare it with the document's enum.
var codes = []Code{CodeInvalid, CodeNotFound, CodeConflict, CodeOutTradeNoTaken, CodeIdempotencyKeyReused,
	CodeInsufficientRefundable, CodeCanceled, CodeRefundLimit, CodeInvalidState, CodeOutcomeMismatch,
	CodeRefundWindowClosed, CodeRefundSettling, CodeReleaseUnconfirmed, CodeProviderHasRefund, CodeUnavailable,
	CodeTimeout, CodeInternal, CodeTooLarge, CodeMethodNotAllowed, CodeRouteNotFound, CodeUnauthenticated, CodeForbidden,
	CodeMerchantScope, CodeSelfApproval, CodeMerchantNotConfigured, CodeRateLimited, CodeCredentialsInvalid, CodeRestartRequired, CodeEncryptionUnavailable, CodeTotalsNotKept, CodeArchived}

// Error is a failure the API answered: its HTTP status, code, message, the
// field it concerns (when one does) and the request id to quote to the
// service's operators.
type Error struct {
	Status    int
	Code      Code
	Message   string
	Field     string
	RequestID string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("refundd: %d %s: %s", e.Status, e.Code, e.Message)
	if e.Field != "" {
		s += " (" + e.Field + ")"
	}
	return s
}

// Is makes errors.Is(err, &Error{Code: c}) match any *Error with code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Status == 0 || t.Status == e.Status)
}

// ErrorCode returns the API's code in err, or "" when err is not an answer
// of the API (a network error, a canceled context).
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// ErrBadSignature and ErrBadTimestamp are VerifyWebhook's failures.
var (
	ErrBadSignature = errors.New("client: webhook signature does not verify")
	ErrBadTimestamp = errors.New("client: webhook timestamp missing or outside the allowed window")
)
