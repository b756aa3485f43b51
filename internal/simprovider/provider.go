// Package simprovider is an in-process stand-in for WeChat Pay's refund API:
// it keeps its own refunds by refund number, enforces the provider's
// idempotency rule (same number + same body = same refund, a different body
// is refused) and refunds <= order total, accepts a refund as PROCESSING and
// completes it after a delay, telling the merchant through a notification
// callback as WeChat does. With no delay it succeeds at once, which keeps
// tests deterministic. Faults can be injected per call.
package simprovider

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// Fault lets a test replace the answer to one call. op is "submit" or
// "query". Returning ok=false processes the call normally. Setting
// Apply=true processes the call and then answers with Outcome anyway (the
// refund happened but the response was lost).
type Fault func(op, refundNo string, attempt int) (f Injected, ok bool)

// Injected is an injected answer.
type Injected struct {
	Outcome reservation.Outcome
	Apply   bool
}

// Options configure a Provider.
type Options struct {
	// Delay from acceptance to success; zero succeeds during Submit.
	Delay time.Duration
	// Notify, if set, is called (on its own goroutine) when a refund
	// completes after a delay, like WeChat's refund notification.
	Notify func(refundNo string, o reservation.Outcome)
	// Fault, if set, may replace answers.
	Fault Fault
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Provider implements actors.Provider in memory.
type Provider struct {
	opts Options

	mu          sync.Mutex
	refunds     map[string]*refund
	refunded    map[string]int64 // out_trade_no -> held by refunds not closed
	submissions int
}

type refund struct {
	body     []byte
	req      body
	status   reservation.OutcomeKind
	id       string
	acceptAt time.Time
}

// body is the request wire format, a subset of WeChat's. body.go encodes
// and decodes it as encoding/json does.
type body struct {
	OutTradeNo    string `json:"out_trade_no,omitempty"`
	TransactionID string `json:"transaction_id,omitempty"`
	OutRefundNo   string `json:"out_refund_no"`
	Reason        string `json:"reason,omitempty"`
	Amount        struct {
		Refund   int64  `json:"refund"`
		Total    int64  `json:"total"`
		Currency string `json:"currency"`
	} `json:"amount"`
}

// New returns an empty provider.
func New(opts Options) *Provider {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Provider{opts: opts, refunds: map[string]*refund{}, refunded: map[string]int64{}}
}

// RequestBody is the provider's encoder (actors.Config.Encode, pure): Encode.
func (p *Provider) RequestBody(r reservation.RefundRequest) ([]byte, error) { return Encode(r) }

// Encode returns the submission bytes for r; it depends on nothing but r,
// so it serves any Provider (actors.Config.Encode).
func Encode(r reservation.RefundRequest) ([]byte, error) {
	var b body
	b.OutTradeNo, b.OutRefundNo, b.Reason = r.OutTradeNo, r.RefundNo, r.Reason
	b.Amount.Refund, b.Amount.Total, b.Amount.Currency = r.Amount, r.Total, r.Currency
	return appendBody(make([]byte, 0, bodySize(&b)), &b), nil
}

// Submit implements actors.Provider.
func (p *Provider) Submit(ctx context.Context, refundNo string, raw []byte, attempt int) reservation.Outcome {
	if err := ctx.Err(); err != nil {
		return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "TIMEOUT", Message: err.Error()}
	}
	inj, faulty := p.fault("submit", refundNo, attempt)
	if faulty && !inj.Apply {
		return inj.Outcome
	}
	o := p.submit(refundNo, raw)
	if faulty {
		return inj.Outcome
	}
	return o
}

func (p *Provider) submit(refundNo string, raw []byte) reservation.Outcome {
	var b body
	if err := parseBody(raw, &b); err != nil || b.OutRefundNo != refundNo {
		return reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "PARAM_ERROR", Message: "malformed request"}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.submissions++
	if r, ok := p.refunds[refundNo]; ok {
		if !bytes.Equal(r.body, raw) {
			return reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "INVALID_REQUEST", Message: "out_refund_no reused with a different request"}
		}
		return p.outcomeLocked(refundNo, r)
	}
	if b.Amount.Refund <= 0 || b.Amount.Total <= 0 {
		return reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "PARAM_ERROR", Message: "amounts must be positive"}
	}
	if p.refunded[b.OutTradeNo]+b.Amount.Refund > b.Amount.Total {
		// As the WeChat Pay sandbox answers it (PARTNER.md §5): a refusal
		// of this request by a business rule. NOT_ENOUGH is WeChat Pay's
		// code for the merchant's balance being short, a fault tests inject.
		return reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "INVALID_REQUEST", Message: "refund exceeds the order's refundable amount"}
	}
	r := &refund{body: append([]byte(nil), raw...), req: b, status: reservation.OutcomeProcessing,
		id: RefundID(refundNo), acceptAt: p.opts.Now()}
	p.refunds[refundNo] = r
	p.refunded[b.OutTradeNo] += b.Amount.Refund
	if p.opts.Delay <= 0 {
		r.status = reservation.OutcomeSucceeded
	} else if p.opts.Notify != nil {
		time.AfterFunc(p.opts.Delay, func() {
			p.mu.Lock()
			o := p.outcomeLocked(refundNo, r)
			p.mu.Unlock()
			p.opts.Notify(refundNo, o)
		})
	}
	return p.outcomeLocked(refundNo, r)
}

// Query implements actors.Provider.
func (p *Provider) Query(ctx context.Context, refundNo string) reservation.Outcome {
	if err := ctx.Err(); err != nil {
		return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "TIMEOUT", Message: err.Error()}
	}
	if inj, ok := p.fault("query", refundNo, 0); ok && !inj.Apply {
		return inj.Outcome
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.refunds[refundNo]
	if !ok {
		return reservation.Outcome{Kind: reservation.OutcomeNotFound, Code: "RESOURCE_NOT_EXISTS"}
	}
	return p.outcomeLocked(refundNo, r)
}

// outcomeLocked reports a refund, completing it once its delay has passed.
func (p *Provider) outcomeLocked(refundNo string, r *refund) reservation.Outcome {
	if r.status == reservation.OutcomeProcessing && !p.opts.Now().Before(r.acceptAt.Add(p.opts.Delay)) {
		r.status = reservation.OutcomeSucceeded
	}
	o := reservation.Outcome{Kind: r.status, ProviderID: r.id, OutTradeNo: r.req.OutTradeNo,
		RefundAmount: r.req.Amount.Refund, TotalAmount: r.req.Amount.Total}
	if r.status == reservation.OutcomeSucceeded {
		o.SuccessTime = r.acceptAt.Add(p.opts.Delay).UTC()
	}
	return o
}

func (p *Provider) fault(op, refundNo string, attempt int) (Injected, bool) {
	if p.opts.Fault == nil {
		return Injected{}, false
	}
	return p.opts.Fault(op, refundNo, attempt)
}

// Submissions counts submit calls that reached the provider's books.
func (p *Provider) Submissions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.submissions
}

// Refunded returns what the provider holds as refunded or refunding for an
// order, from its own books.
func (p *Provider) Refunded(outTradeNo string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refunded[outTradeNo]
}

// Known reports whether the provider has a refund under this number.
func (p *Provider) Known(refundNo string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.refunds[refundNo]
	return ok
}

// RefundID is the id the provider gives refund number no (WeChat Pay's
// refund_id). It is made from the number, so a test can name it before
// the provider's answer is recorded, with the reservation id first: WeChat
// Pay's ids follow one sequence for all of an account's merchants, and
// ids keyed by a merchant's refund-number prefix would give each merchant
// its own tail in the search index (docs/BENCHMARKS.md, "Many merchants").
func RefundID(no string) string {
	if prefix, id, n, ok := reservation.ParseRefundNo(no); ok {
		return "sim" + id + "-" + strconv.Itoa(n) + "-" + prefix
	}
	return "sim" + no
}
