package merchant

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"

	"github.com/refundd/refundd/internal/reservation"
)

// ErrUnroutable is returned when a refund number belongs to no configured
// merchant: its prefix is none of theirs, in any epoch.
var ErrUnroutable = errors.New("merchant: refund number belongs to no configured merchant")

// CodeUnroutable is the Code of the OutcomeUnknown a Router answers for a
// refund number it cannot route: nothing was sent, and the refund stays in
// flight (never "not refunded") until a merchant with its prefix is
// configured again.
const CodeUnroutable = "MERCHANT_NOT_CONFIGURED"

// Provider is one merchant's refund IO and encoder: a
// *wechatpay.MerchantClient, or a stand-in serving every merchant.
type Provider interface {
	RequestBody(reservation.RefundRequest) ([]byte, error)
	Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome
	Query(ctx context.Context, refundNo string) reservation.Outcome
}

// Router sends each refund to its merchant's Provider by the refund
// number's prefix: the engine's one Provider and Encode (actors.Provider,
// actors.Config.Encode) for a deployment of many merchants. Safe for
// concurrent use; routes are only ever added (Extend), never changed or
// removed, so a refund reaches the same merchant for its whole life.
type Router struct {
	routes atomic.Pointer[map[string]route] // by refund-number prefix, every epoch's
}

type route struct {
	merchant string
	p        Provider
}

// Router returns the router of the registry's merchants to providers (by
// merchant name; every merchant needs one). prefixes returns the prefixes
// a merchant's base prefix has had in every epoch of the journal so far
// (audit.EpochPrefixes): a restored journal numbers new refunds under a
// new prefix, and refunds numbered in earlier epochs are still queried and
// must reach the same merchant.
func (r *Registry) Router(providers map[string]Provider, prefixes func(base string) ([]string, error)) (*Router, error) {
	rt := &Router{}
	empty := map[string]route{}
	rt.routes.Store(&empty)
	commit, err := rt.Extend(r.merchants, providers, prefixes)
	if err != nil {
		return nil, err
	}
	commit()
	return rt, nil
}

// Extend checks routes for merchants not routed yet (a merchant added by a
// reload), by the same rules as Registry.Router, and returns the commit
// that adds them; nothing changes until commit is called. Calls of Extend
// and their commits must not interleave (the Reloader runs one at a time).
func (rt *Router) Extend(merchants []*Merchant, providers map[string]Provider, prefixes func(base string) ([]string, error)) (commit func(), err error) {
	next := maps.Clone(*rt.routes.Load())
	for _, m := range merchants {
		p, ok := providers[m.Name]
		if !ok || p == nil {
			return nil, fmt.Errorf("merchant: no provider for merchant %q", m.Name)
		}
		ps, err := prefixes(m.RefundNoPrefix)
		if err != nil {
			return nil, fmt.Errorf("merchant %q: %w", m.Name, err)
		}
		for _, prefix := range ps {
			if other, taken := next[prefix]; taken {
				// The registry keeps prefixes apart; epochs ("R" -> "RE1")
				// could only clash with a prefix that starts another.
				return nil, fmt.Errorf("%w: refund-number prefix %q of merchant %q is also merchant %q's", ErrConflict, prefix, m.Name, other.merchant)
			}
			next[prefix] = route{merchant: m.Name, p: p}
		}
	}
	return func() { rt.routes.Store(&next) }, nil
}

// Merchant returns the name of the merchant a refund number routes to.
func (rt *Router) Merchant(refundNo string) (string, bool) {
	r, ok := rt.route(refundNo)
	return r.merchant, ok
}

func (rt *Router) route(no string) (route, bool) {
	prefix, _, _, ok := reservation.ParseRefundNo(no)
	if !ok {
		return route{}, false
	}
	r, ok := (*rt.routes.Load())[prefix]
	return r, ok
}

// RequestBody encodes a submission with its merchant's encoder (sub_mchid
// and notify_url are the merchant's). An unroutable number fails with
// ErrUnroutable: the refund is not journaled.
func (rt *Router) RequestBody(req reservation.RefundRequest) ([]byte, error) {
	r, ok := rt.route(req.RefundNo)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnroutable, req.RefundNo)
	}
	return r.p.RequestBody(req)
}

// Submit sends the submission through its merchant's provider. An
// unroutable number sends nothing and answers OutcomeUnknown
// (CodeUnroutable), never a definite answer.
func (rt *Router) Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome {
	r, ok := rt.route(refundNo)
	if !ok {
		return unroutable(refundNo)
	}
	return r.p.Submit(ctx, refundNo, body, attempt)
}

// Query asks the refund's merchant's provider. An unroutable number asks
// nothing and answers OutcomeUnknown (CodeUnroutable), never "not found".
func (rt *Router) Query(ctx context.Context, refundNo string) reservation.Outcome {
	r, ok := rt.route(refundNo)
	if !ok {
		return unroutable(refundNo)
	}
	return r.p.Query(ctx, refundNo)
}

func unroutable(no string) reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: CodeUnroutable,
		Message: "refund number " + no + " belongs to no configured merchant; nothing was sent"}
}

// Policies returns each merchant's policy (Merchant.Policy over base) by
// name, for actors.Config.Policies, with the refund-number prefix of the
// current epoch (prefix maps a base prefix to it: audit.EpochPrefix).
func (r *Registry) Policies(base reservation.Policy, prefix func(base string) (string, error)) (map[string]reservation.Policy, error) {
	out := make(map[string]reservation.Policy, len(r.merchants))
	for _, m := range r.merchants {
		p, err := m.EpochPolicy(base, prefix)
		if err != nil {
			return nil, err
		}
		out[m.Name] = p
	}
	return out, nil
}

// EpochPolicy is the merchant's policy (Policy over base) with the
// refund-number prefix of the current epoch (prefix maps a base prefix
// to it: audit.EpochPrefix), checked.
func (m *Merchant) EpochPolicy(base reservation.Policy, prefix func(base string) (string, error)) (reservation.Policy, error) {
	p := m.Policy(base)
	var err error
	if p.RefundNoPrefix, err = prefix(m.RefundNoPrefix); err != nil {
		return p, fmt.Errorf("merchant %q: %w", m.Name, err)
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("merchant %q: %w", m.Name, err)
	}
	return p, nil
}

// sensitiveEncrypter is a Provider that can encrypt sensitive request
// fields for its account's WeChat Pay key (*wechatpay.MerchantClient).
type sensitiveEncrypter interface {
	EncryptSensitive(plain ...string) (serial string, ciphertext []string, err error)
}

// abnormalPayer is a Provider that can pay an ABNORMAL refund out to
// another account (actors.AbnormalProvider).
type abnormalPayer interface {
	ApplyAbnormal(ctx context.Context, refundNo string, app reservation.AbnormalApplication) reservation.Outcome
}

// ErrNoEncryption: the refund's merchant's provider cannot encrypt
// sensitive fields (a stand-in without the WeChat Pay protocol).
var ErrNoEncryption = errors.New("merchant: the provider of this refund cannot encrypt sensitive fields for WeChat Pay")

// EncryptSensitive encrypts plain for the WeChat Pay key of refundNo's
// merchant (in partner mode the service provider's) and names that key.
// Errors never contain the plaintext.
func (rt *Router) EncryptSensitive(refundNo string, plain ...string) (string, []string, error) {
	r, ok := rt.route(refundNo)
	if !ok {
		return "", nil, fmt.Errorf("%w: %s", ErrUnroutable, refundNo)
	}
	e, ok := r.p.(sensitiveEncrypter)
	if !ok {
		return "", nil, ErrNoEncryption
	}
	return e.EncryptSensitive(plain...)
}

// ApplyAbnormal asks the refund's merchant's provider to pay it out
// (actors.AbnormalProvider). An unroutable number, or a provider without
// the call, sends nothing and answers OutcomeUnknown: the refund is
// queried, never taken as refused.
func (rt *Router) ApplyAbnormal(ctx context.Context, refundNo string, app reservation.AbnormalApplication) reservation.Outcome {
	r, ok := rt.route(refundNo)
	if !ok {
		return unroutable(refundNo)
	}
	p, ok := r.p.(abnormalPayer)
	if !ok {
		return noAbnormalPayout()
	}
	return p.ApplyAbnormal(ctx, refundNo, app)
}

// noAbnormalPayout is the answer of a provider without the payout call:
// nothing was sent, so UNKNOWN (the refund is queried), never a refusal.
func noAbnormalPayout() reservation.Outcome {
	return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "PROVIDER_NO_ABNORMAL",
		Message: "the provider of this refund cannot pay abnormal refunds out; nothing was sent"}
}
