package tally

import (
	"context"
	"strings"

	"github.com/refundd/refundd/internal/reservation"
)

// The counters' keys. Every part is from a closed set or configured (an
// outcome name, a merchant or endpoint name from the configuration), never
// from what a sender wrote, so the set of keys stays bounded.
const (
	// KeyNotify + outcome: notifications by outcome (api's names:
	// applied, duplicate, hint, probe, rejected, unknown_refund, mismatch,
	// error).
	KeyNotify = "notify/"
	// KeyNotifyMerchant + merchant + "/" + outcome: the same by merchant
	// (a configured one, or "(unattributed)").
	KeyNotifyMerchant = "notify_merchant/"
	// KeyQuarantined: refused notifications kept in the quarantine.
	KeyQuarantined = "notify_quarantined"
	// KeyProvider + op + "/" + outcome kind: provider calls (op submit,
	// query, apply_abnormal) by the answer's outcome kind.
	KeyProvider = "provider/"
	// KeyProviderCode + op + "/" + code class (CodeClass): the same by the
	// class of the answer's code.
	KeyProviderCode = "provider_code/"
	// KeyWebhook + endpoint + "/" + delivered, failed (a POST that failed)
	// or parked (an event parked after its last attempt).
	KeyWebhook = "webhook/"
)

// Code classes of a provider answer (CodeClass).
const (
	CodeNone     = "none"     // no code: a plain answer
	CodeHTTP     = "http"     // only an HTTP status (HTTP_503, ...): transport or gateway
	CodeClient   = "client"   // refused here before sending (CLIENT_...)
	CodeProvider = "provider" // a code WeChat Pay named
)

// CodeClass sorts an outcome's code into a class: the codes themselves are
// WeChat Pay's and unbounded.
func CodeClass(code string) string {
	switch {
	case code == "":
		return CodeNone
	case strings.HasPrefix(code, "HTTP_"):
		return CodeHTTP
	case strings.HasPrefix(code, "CLIENT_"):
		return CodeClient
	}
	return CodeProvider
}

// outcomeName keeps the outcome kinds a closed set.
func outcomeName(k reservation.OutcomeKind) string {
	switch k {
	case reservation.OutcomeSucceeded, reservation.OutcomeProcessing, reservation.OutcomeFailed, reservation.OutcomeAbnormal,
		reservation.OutcomeRejected, reservation.OutcomeUnknown, reservation.OutcomeNotFound:
		return string(k)
	}
	return "OTHER"
}

// ProviderCall is the counter changes of one provider call of op answered
// with o.
func ProviderCall(op string, o reservation.Outcome) map[string]int64 {
	return map[string]int64{KeyProvider + op + "/" + outcomeName(o.Kind): 1, KeyProviderCode + op + "/" + CodeClass(o.Code): 1}
}

// Provider is the engine's provider (actors.Provider), declared here so
// that the decorator need not import the driver.
type Provider interface {
	Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome
	Query(ctx context.Context, refundNo string) reservation.Outcome
}

// CountProvider wraps next to count its calls' answers in s (Note: the
// answer goes on to its actor without waiting for the write). A wrapped
// provider that pays abnormal refunds out keeps doing so, counted as
// apply_abnormal; any other extra method of next is not forwarded.
func CountProvider(next Provider, s *Store) Provider {
	p := &provider{next: next, s: s}
	if a, ok := next.(abnormalPayer); ok {
		return &abnormalProvider{provider: p, a: a}
	}
	return p
}

type provider struct {
	next Provider
	s    *Store
}

func (p *provider) Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome {
	o := p.next.Submit(ctx, refundNo, body, attempt)
	p.s.Note(ProviderCall("submit", o))
	return o
}

func (p *provider) Query(ctx context.Context, refundNo string) reservation.Outcome {
	o := p.next.Query(ctx, refundNo)
	p.s.Note(ProviderCall("query", o))
	return o
}

type abnormalPayer interface {
	ApplyAbnormal(ctx context.Context, refundNo string, app reservation.AbnormalApplication) reservation.Outcome
}

type abnormalProvider struct {
	*provider
	a abnormalPayer
}

func (p *abnormalProvider) ApplyAbnormal(ctx context.Context, refundNo string, app reservation.AbnormalApplication) reservation.Outcome {
	o := p.a.ApplyAbnormal(ctx, refundNo, app)
	p.s.Note(ProviderCall("apply_abnormal", o))
	return o
}
