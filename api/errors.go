package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/internal/reservation"
)

// Error codes the API adds to the domain's.
const (
	codeUnavailable   = "unavailable"
	codeTimeout       = "timeout"
	codeInternal      = "internal"
	codeTooLarge      = "body_too_large"
	codeMethod        = "method_not_allowed"
	codeRouteNotFound = "route_not_found"
	// Credential reloads (POST /v1/admin/credentials/reload).
	codeCredentialsInvalid = "credentials_invalid"
	codeRestartRequired    = "restart_required"
	// codeNoEncryption: no WeChat Pay key to encrypt an abnormal refund's
	// bank card for (a provider without the protocol, or no key held).
	codeNoEncryption = "encryption_unavailable"
	// codeTotalsNotKept: the journal's counters do not hold the refund
	// totals for its whole history (eventstore.ErrTotalsNotKept).
	codeTotalsNotKept = "totals_not_kept"
)

// Errors of Options.ReloadCredentials, the reloader's own (one sentinel
// each). Their messages name the file and setting (never a secret) and are
// shown to the operator.
var (
	// ErrCredentialsInvalid: a file or setting is missing or wrong; the
	// running credentials stay.
	ErrCredentialsInvalid = merchant.ErrReloadInvalid
	// ErrRestartRequired: the change is one a reload cannot apply (an
	// account or merchant added or removed, a prefix, mchid, kind or
	// base_url changed); the running credentials stay.
	ErrRestartRequired = merchant.ErrRestartRequired
)

// statusOf is the one table from error codes to HTTP statuses.
var statusOf = map[string]int{
	string(reservation.CodeInvalid):                http.StatusBadRequest,
	string(reservation.CodeNotFound):               http.StatusNotFound,
	string(reservation.CodeConflict):               http.StatusConflict,
	string(reservation.CodeOutTradeNoTaken):        http.StatusConflict,
	string(reservation.CodeIdempotencyKeyReused):   http.StatusUnprocessableEntity,
	string(reservation.CodeInsufficientRefundable): http.StatusConflict,
	string(reservation.CodeCanceled):               http.StatusConflict,
	string(reservation.CodeRefundLimit):            http.StatusConflict,
	string(reservation.CodeInvalidState):           http.StatusConflict,
	string(reservation.CodeOutcomeMismatch):        http.StatusConflict,
	string(reservation.CodeRefundWindowClosed):     http.StatusConflict,
	string(reservation.CodeRefundSettling):         http.StatusConflict,
	string(reservation.CodeReleaseUnconfirmed):     http.StatusConflict,
	string(reservation.CodeProviderHasRefund):      http.StatusConflict,
	string(reservation.CodeMerchantNotConfigured):  http.StatusConflict,
	string(reservation.CodeSelfApproval):           http.StatusForbidden,
	string(reservation.CodeArchived):               http.StatusConflict,
	codeUnavailable:                                http.StatusServiceUnavailable,
	codeTimeout:                                    http.StatusGatewayTimeout,
	codeInternal:                                   http.StatusInternalServerError,
	codeTooLarge:                                   http.StatusRequestEntityTooLarge,
	codeMethod:                                     http.StatusMethodNotAllowed,
	codeRouteNotFound:                              http.StatusNotFound,
	codeCredentialsInvalid:                         http.StatusBadRequest,
	codeRestartRequired:                            http.StatusConflict,
	codeNoEncryption:                               http.StatusServiceUnavailable,
	codeTotalsNotKept:                              http.StatusConflict,
	codeUnauthenticated:                            http.StatusUnauthorized,
	codeForbidden:                                  http.StatusForbidden,
	codeMerchantScope:                              http.StatusForbidden,
	codeRateLimited:                                http.StatusTooManyRequests,
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// classify turns any error into a client-safe code and message. Internal
// errors are logged, never shown.
func classify(err error) errorDetail {
	var de *reservation.Error
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return errorDetail{Code: ae.code, Message: ae.msg, Field: ae.field}
	case errors.As(err, &de):
		return errorDetail{Code: string(de.Code), Message: de.Message, Field: de.Field}
	case errors.Is(err, ErrCredentialsInvalid):
		return errorDetail{Code: codeCredentialsInvalid, Message: err.Error()}
	case errors.Is(err, ErrRestartRequired):
		return errorDetail{Code: codeRestartRequired, Message: err.Error()}
	case errors.Is(err, eventstore.ErrTotalsRange):
		return errorDetail{Code: string(reservation.CodeInvalid), Message: "from and to are whole hours, from before to"}
	case errors.Is(err, eventstore.ErrTotalsNotKept):
		return errorDetail{Code: codeTotalsNotKept, Message: "this journal's counters do not cover its whole history: stop refundd and run refundctl journal stats --build-counters (in cluster mode, a node back-fills them when it starts)"}
	case errors.Is(err, actors.ErrUnavailable), errors.Is(err, actors.ErrClosed):
		return errorDetail{Code: codeUnavailable, Message: "the journal is unavailable; nothing was changed, retry with the same idempotency key"}
	case errors.Is(err, context.DeadlineExceeded):
		return errorDetail{Code: codeTimeout, Message: "timed out; retry with the same idempotency key to learn the outcome"}
	}
	return errorDetail{Code: codeInternal, Message: "internal error"}
}

// apiError is an error found by the HTTP layer itself (bad JSON, headers).
type apiError struct {
	code, field, msg string
}

func (e *apiError) Error() string { return "api: " + e.msg }

func badRequest(field, msg string) error {
	return &apiError{code: string(reservation.CodeInvalid), field: field, msg: msg}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	d := classify(err)
	status, ok := statusOf[d.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status >= 500 {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "code", d.Code, "err", err)
	}
	s.writeErrorBody(w, status, d)
}
