package reservation

import (
	"errors"
	"fmt"
)

// Code is the closed set of domain outcomes that callers map to responses.
type Code string

// Domain error codes. api/ maps each to one HTTP status.
const (
	CodeInvalid                Code = "invalid_argument"
	CodeNotFound               Code = "not_found"
	CodeConflict               Code = "conflict"
	CodeOutTradeNoTaken        Code = "out_trade_no_taken"
	CodeIdempotencyKeyReused   Code = "idempotency_key_reused"
	CodeInsufficientRefundable Code = "insufficient_refundable"
	CodeCanceled               Code = "reservation_canceled"
	CodeRefundLimit            Code = "refund_limit_reached"
	CodeInvalidState           Code = "invalid_state"
	CodeOutcomeMismatch        Code = "outcome_mismatch"
	CodeRefundWindowClosed     Code = "refund_window_closed"
	CodeRefundSettling         Code = "refund_settling"
	CodeReleaseUnconfirmed     Code = "release_unconfirmed"
	CodeProviderHasRefund      Code = "provider_has_refund"
	CodeMerchantNotConfigured  Code = "merchant_not_configured"
	CodeSelfApproval           Code = "self_approval"
	CodeArchived               Code = "archived"
)

// Error is a domain error: a code, the offending field when there is one, and
// a message safe to show to clients.
type Error struct {
	Code    Code
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("reservation: %s: %s", e.Field, e.Message)
	}
	return "reservation: " + e.Message
}

// Is makes errors.Is(err, ErrX) match on the code alone, so a field-specific
// error still matches its sentinel.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

var (
	// ErrInvalid is returned when a command's input is malformed.
	ErrInvalid = &Error{Code: CodeInvalid, Message: "invalid argument"}
	// ErrNotFound is returned when the reservation or refund does not exist,
	// or the requester is not the reservation's user (the two look the same
	// on purpose).
	ErrNotFound = &Error{Code: CodeNotFound, Message: "not found"}
	// ErrConflict is returned when a reservation is registered again with
	// different details.
	ErrConflict = &Error{Code: CodeConflict, Message: "reservation already registered with different details"}
	// ErrOutTradeNoTaken is returned when another reservation already holds
	// the merchant order number.
	ErrOutTradeNoTaken = &Error{Code: CodeOutTradeNoTaken, Message: "out_trade_no is already used by another reservation"}
	// ErrIdempotencyKeyReused is returned when an idempotency key is used
	// again with a different request.
	ErrIdempotencyKeyReused = &Error{Code: CodeIdempotencyKeyReused, Message: "idempotency key was used with a different request"}
	// ErrInsufficientRefundable is returned when a refund asks for more than
	// is still refundable.
	ErrInsufficientRefundable = &Error{Code: CodeInsufficientRefundable, Message: "amount exceeds what is still refundable"}
	// ErrCanceled is returned when a refund is requested on a reservation
	// that is already fully refunded.
	ErrCanceled = &Error{Code: CodeCanceled, Message: "reservation is canceled (fully refunded)"}
	// ErrRefundLimit is returned when a reservation already has the maximum
	// number of refunds.
	ErrRefundLimit = &Error{Code: CodeRefundLimit, Message: "reservation has the maximum number of refunds"}
	// ErrInvalidState is returned when an operator action does not fit the
	// refund's current state.
	ErrInvalidState = &Error{Code: CodeInvalidState, Message: "refund is not in a state that allows this"}
	// ErrArchived is returned for any change to a reservation that was
	// moved to the journal's archive (refundctl journal archive): it was
	// finished and its refund window closed, so it can never change again.
	ErrArchived = &Error{Code: CodeArchived, Message: "the reservation is archived: it is finished and can no longer change"}
	// ErrRefundWindowClosed is returned when a refund is requested more than
	// the policy's window (a year) after payment.
	ErrRefundWindowClosed = &Error{Code: CodeRefundWindowClosed, Message: "the payment is too old to refund"}
	// ErrRefundSettling is returned when releasing a refund's amount while
	// an attempt with an unknown outcome may still land (younger than the
	// policy's SettleHorizon).
	ErrRefundSettling = &Error{Code: CodeRefundSettling, Message: "an attempt of this refund may still be applied by WeChat Pay; its amount cannot be released yet"}
	// ErrReleaseUnconfirmed is returned when releasing a refund's amount
	// without a fresh provider answer that it has no such refund (the
	// query failed, or none was made).
	ErrReleaseUnconfirmed = &Error{Code: CodeReleaseUnconfirmed, Message: "WeChat Pay did not confirm that it has no such refund; retry later"}
	// ErrProviderHasRefund is returned when releasing a refund's amount that
	// WeChat Pay has: its answer is recorded instead.
	ErrProviderHasRefund = &Error{Code: CodeProviderHasRefund, Message: "WeChat Pay has this refund; its state was recorded"}
	// ErrMerchantNotConfigured is returned when a registration, a new
	// refund or a resubmission names a merchant the deployment no longer
	// (or never) configured: nothing can sign its requests. The
	// reservation's existing refunds are still queried and settle.
	ErrMerchantNotConfigured = &Error{Code: CodeMerchantNotConfigured, Message: "the reservation's merchant is not configured; no new refund can be made for it"}
	// ErrSelfApproval is returned when the requester of a refund approves
	// it: four eyes need a second person.
	ErrSelfApproval = &Error{Code: CodeSelfApproval, Message: "a refund must be approved by someone other than its requester"}
	// ErrOutcomeMismatch is returned when a provider outcome disagrees with
	// local records (order, refund amount, order total). It is not applied.
	ErrOutcomeMismatch = &Error{Code: CodeOutcomeMismatch, Message: "provider outcome does not match local records"}
)

func invalid(field, msg string) error {
	return &Error{Code: CodeInvalid, Field: field, Message: msg}
}

func withMessage(base *Error, msg string) error {
	return &Error{Code: base.Code, Message: msg}
}

// CodeOf returns the domain code carried by err, or "" when err is not a
// domain error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
