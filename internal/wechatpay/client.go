package wechatpay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/refundd/refundd/internal/reservation"
)

// RefundsPath is the APIv3 domestic refund endpoint: POST creates a refund,
// GET RefundsPath/{out_refund_no} queries one.
const RefundsPath = "/v3/refund/domestic/refunds"

// MaxResponseSize caps how much of a response body the Client reads. A
// refund object is about 1 KiB; anything larger is not WeChat Pay.
const MaxResponseSize = 1 << 20

// DefaultClientTimeout is the timeout of the HTTP client NewClient builds
// when ClientConfig.HTTPClient is nil.
const DefaultClientTimeout = 10 * time.Second

// UserAgent is sent on every request; WeChat Pay rejects requests without
// one.
const UserAgent = "github.com/refundd/refundd/1.0 (wechatpay-apiv3; Go)"

// Field limits of the create-refund request (PROTOCOL.md §1.2, §1.8).
const (
	maxRefundNoLen   = 64
	maxOrderNoLen    = 32 // out_trade_no, transaction_id
	maxReasonBytes   = 80
	maxNotifyURLLen  = 256
	refundCurrency   = "CNY"
	maxLoggedMessage = 200
)

// ClientConfig configures a Client. BaseURL, Signer and Verifier are
// required.
type ClientConfig struct {
	// BaseURL is scheme and host, optionally with a path prefix, e.g.
	// https://api.mch.weixin.qq.com. A trailing slash is dropped. It must
	// not carry user info, a query or a fragment.
	BaseURL string
	// MchID is the merchant id: a direct merchant's mchid or, with
	// Partner, the service provider's sp_mchid. Empty means Signer.MchID;
	// when both are set they must be equal.
	MchID string
	// Partner says the account is a service provider (服务商) refunding for
	// sub-merchants: every request names a sub-merchant (Client.For), is
	// signed with the provider's key and serial (Signer) and its answer is
	// verified with the provider's WeChat Pay keys (Verifier). One Client
	// serves all sub-merchants of the account.
	Partner bool
	// Signer holds the merchant certificate serial and private key. Its
	// MchID may be empty if MchID is set.
	Signer Signer
	// Verifier holds the WeChat Pay public keys and/or platform
	// certificates that responses are verified against. It must hold at
	// least one key; it may be rotated while the Client is in use.
	Verifier *Verifier
	// NotifyURL is sent as notify_url: an absolute http(s) URL without query
	// string or fragment, at most 256 bytes. Empty means the field is
	// omitted and WeChat Pay uses the refund callback configured on the
	// merchant platform. Target.NotifyURL overrides it per merchant.
	NotifyURL string
	// HTTPClient sends the requests. nil means a client with
	// DefaultClientTimeout. The Client uses a copy that does not follow
	// redirects (a redirected POST would be resent without its body).
	HTTPClient *http.Client
	// Now gives the Authorization timestamp. nil means time.Now.
	Now func() time.Time
	// Logger receives debug lines per call and warnings about unverifiable
	// responses. nil means logs are discarded.
	Logger *slog.Logger
}

// checkSigner checks what a Client signs with.
func checkSigner(signer Signer) error {
	if !headerSafe(signer.MchID) {
		return fmt.Errorf("%w: client: merchant id is empty or not header-safe", ErrInvalidArgument)
	}
	if !headerSafe(signer.SerialNo) {
		return fmt.Errorf("%w: client: Signer.SerialNo (merchant certificate serial) is empty or not header-safe", ErrInvalidArgument)
	}
	if signer.Key == nil {
		return fmt.Errorf("%w: client: Signer has no private key", ErrInvalidKey)
	}
	return nil
}

// SetSigner replaces the merchant key and serial requests are signed with
// (the operator replaced the API certificate). A request being signed uses
// the old signer or the new one, never a mix. The mchid cannot change: it
// names the account.
//
// Errors wrap ErrInvalidArgument or ErrInvalidKey; on error nothing changes.
func (c *Client) SetSigner(signer Signer) error {
	if err := checkSigner(signer); err != nil {
		return err
	}
	if old := c.signer.Load(); signer.MchID != old.MchID {
		return fmt.Errorf("%w: client: Signer.MchID %s is not the account's %s", ErrInvalidArgument, signer.MchID, old.MchID)
	}
	c.signer.Store(&signer)
	return nil
}

// SignerSerial is the merchant certificate serial requests are signed
// with now.
func (c *Client) SignerSerial() string { return c.signer.Load().SerialNo }

// Client is WeChat Pay's APIv3 domestic refund API as the engine's provider:
// it creates and queries refunds and maps every answer to a
// reservation.Outcome. Anything that is not a verified, definite answer
// becomes OutcomeUnknown, so the engine queries or retries with the same
// refund number and the same journaled bytes instead of concluding that no
// money moved.
//
// A Client is safe for concurrent use.
type Client struct {
	base string
	// signer is swapped whole by SetSigner (a reload) while requests
	// sign: each request loads it once.
	signer    atomic.Pointer[Signer]
	verifier  *Verifier
	notifyURL string
	partner   bool
	http      *http.Client
	now       func() time.Time
	log       *slog.Logger

	probes     atomic.Int64
	unverified atomic.Int64
}

// ClientStats counts responses that failed verification since NewClient.
type ClientStats struct {
	// Probes counts WECHATPAY/SIGNTEST/ probe signatures: expected traffic,
	// not to be alerted on.
	Probes int64
	// Unverified counts every other response whose signature could not be
	// verified (missing, bad, stale, unknown serial).
	Unverified int64
}

// NewClient validates cfg and returns a Client.
//
// Errors wrap ErrInvalidKey (the Signer has no private key) or
// ErrInvalidArgument (any other missing or malformed field); they name the
// field and never contain key material.
func NewClient(cfg ClientConfig) (*Client, error) {
	base, err := checkBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	signer := cfg.Signer
	switch {
	case signer.MchID == "":
		signer.MchID = cfg.MchID
	case cfg.MchID != "" && cfg.MchID != signer.MchID:
		return nil, fmt.Errorf("%w: client: MchID and Signer.MchID differ", ErrInvalidArgument)
	}
	if err := checkSigner(signer); err != nil {
		return nil, err
	}
	if cfg.Verifier == nil {
		return nil, fmt.Errorf("%w: client: Verifier is required", ErrInvalidArgument)
	}
	// Without a key every response would be unverifiable, so every refund
	// would stay unknown: a configuration error, caught at startup.
	if len(cfg.Verifier.Serials()) == 0 {
		return nil, fmt.Errorf("%w: client: Verifier holds no WeChat Pay public key or platform certificate", ErrInvalidArgument)
	}
	if err := checkNotifyURL(cfg.NotifyURL); err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: DefaultClientTimeout}
	if cfg.HTTPClient != nil {
		cp := *cfg.HTTPClient
		hc = &cp
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{
		base: base, verifier: cfg.Verifier, notifyURL: cfg.NotifyURL, partner: cfg.Partner,
		http: hc, now: cfg.Now, log: cfg.Logger,
	}
	c.signer.Store(&signer)
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

func checkBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return "", fmt.Errorf("%w: client: BaseURL is not a URL", ErrInvalidArgument)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return "", fmt.Errorf("%w: client: BaseURL scheme must be https or http", ErrInvalidArgument)
	case u.Host == "":
		return "", fmt.Errorf("%w: client: BaseURL has no host", ErrInvalidArgument)
	case u.User != nil:
		return "", fmt.Errorf("%w: client: BaseURL must not carry user info", ErrInvalidArgument)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(raw, "?#"):
		return "", fmt.Errorf("%w: client: BaseURL must not have a query or fragment", ErrInvalidArgument)
	}
	return strings.TrimRight(raw, "/"), nil
}

// checkNotifyURL enforces WeChat Pay's rules for notify_url: absolute, no
// query parameters, at most 256 bytes. Empty is allowed (field omitted).
func checkNotifyURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%w: client: NotifyURL is not a URL", ErrInvalidArgument)
	case len(raw) > maxNotifyURLLen:
		return fmt.Errorf("%w: client: NotifyURL is %d bytes, max %d", ErrInvalidArgument, len(raw), maxNotifyURLLen)
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%w: client: NotifyURL must be an absolute https or http URL", ErrInvalidArgument)
	case u.Host == "":
		return fmt.Errorf("%w: client: NotifyURL has no host", ErrInvalidArgument)
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "?"):
		return fmt.Errorf("%w: client: NotifyURL must not have a query string (WeChat Pay rejects it)", ErrInvalidArgument)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("%w: client: NotifyURL must not have a fragment", ErrInvalidArgument)
	case u.User != nil:
		return fmt.Errorf("%w: client: NotifyURL must not carry user info", ErrInvalidArgument)
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%w: client: NotifyURL must be escaped ASCII", ErrInvalidArgument)
		}
	}
	return nil
}

// CreateRefundBody is the JSON body of POST /v3/refund/domestic/refunds
// (PROTOCOL.md §1.2). SubMchID is set in partner mode only (PARTNER.md
// §1.3: the provider's own id travels in the Authorization header, not in
// the body). Absent optional fields are omitted: APIv3 forbids null.
type CreateRefundBody struct {
	SubMchID      string          `json:"sub_mchid,omitempty"`
	TransactionID string          `json:"transaction_id,omitempty"`
	OutTradeNo    string          `json:"out_trade_no,omitempty"`
	OutRefundNo   string          `json:"out_refund_no"`
	Reason        string          `json:"reason,omitempty"`
	NotifyURL     string          `json:"notify_url,omitempty"`
	Amount        RefundAmountReq `json:"amount"`
}

// RefundAmountReq is the amount object of a create-refund request, in fen.
type RefundAmountReq struct {
	Refund   int64  `json:"refund"`
	Total    int64  `json:"total"`
	Currency string `json:"currency"`
}

// RefundResponse is the refund object returned by create and query
// (PROTOCOL.md §1.3), reduced to what refundd uses. Unknown fields are
// ignored. The status field is "status" (notifications say refund_status).
type RefundResponse struct {
	RefundID      string               `json:"refund_id"`
	OutRefundNo   string               `json:"out_refund_no"`
	TransactionID string               `json:"transaction_id,omitempty"`
	OutTradeNo    string               `json:"out_trade_no,omitempty"`
	Status        string               `json:"status"`
	SuccessTime   string               `json:"success_time,omitempty"` // RFC 3339, only on SUCCESS
	CreateTime    string               `json:"create_time,omitempty"`
	Amount        RefundResponseAmount `json:"amount"`
}

// RefundResponseAmount holds a refund object's amounts in fen.
type RefundResponseAmount struct {
	Total    int64  `json:"total"`
	Refund   int64  `json:"refund"`
	Currency string `json:"currency,omitempty"`
}

// ErrorResponse is the body of a non-2xx APIv3 answer. Detail is kept raw:
// its shape varies (PROTOCOL.md §1.5).
type ErrorResponse struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

// RequestBody is the provider's encoder (actors.Config.Encode, pure): the
// create-refund JSON for r,
// with fields in a fixed order (transaction_id, out_trade_no, out_refund_no,
// reason, notify_url, amount{refund,total,currency}), so the same request
// always gives the same bytes. out_trade_no is preferred; transaction_id is
// sent only when there is no out_trade_no (WeChat Pay wants one of the two).
// An empty Currency means CNY, the only currency the API takes.
//
// Errors wrap ErrInvalidArgument: a refund number outside WeChat Pay's
// 1..64 of [0-9A-Za-z_-|*@], neither order number or one longer than 32
// bytes, a non-positive amount or total, an amount above the total, another
// currency, or a reason that is not valid UTF-8, has control characters or
// exceeds 80 bytes.
//
// On a partner Client it fails (ErrInvalidArgument): a partner body needs
// a sub-merchant; use For.
func (c *Client) RequestBody(r reservation.RefundRequest) ([]byte, error) {
	if c.partner {
		return nil, fmt.Errorf("%w: client: a partner account's refund needs a sub_mchid (use For)", ErrInvalidArgument)
	}
	return c.requestBody(Target{}, r)
}

func (c *Client) requestBody(t Target, r reservation.RefundRequest) ([]byte, error) {
	notifyURL := t.NotifyURL
	if notifyURL == "" {
		notifyURL = c.notifyURL
	}
	b := CreateRefundBody{SubMchID: t.SubMchID, OutRefundNo: r.RefundNo, Reason: r.Reason, NotifyURL: notifyURL,
		Amount: RefundAmountReq{Refund: r.Amount, Total: r.Total, Currency: r.Currency}}
	if r.OutTradeNo != "" {
		b.OutTradeNo = r.OutTradeNo
	} else {
		b.TransactionID = r.TransactionID
	}
	if b.Amount.Currency == "" {
		b.Amount.Currency = refundCurrency
	}
	if err := checkCreateRefundBody(b); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the reason is shown to the user; keep it readable
	if err := enc.Encode(b); err != nil {
		return nil, fmt.Errorf("%w: client: encode request: %s", ErrInvalidArgument, jsonErr(err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func checkCreateRefundBody(b CreateRefundBody) error {
	switch {
	case !validRefundNo(b.OutRefundNo):
		return fmt.Errorf("%w: client: refund number must be 1..64 of [0-9A-Za-z_-|*@]", ErrInvalidArgument)
	case b.OutTradeNo == "" && b.TransactionID == "":
		return fmt.Errorf("%w: client: refund %s has neither out_trade_no nor transaction_id", ErrInvalidArgument, b.OutRefundNo)
	case !validOrderNo(b.OutTradeNo) || !validOrderNo(b.TransactionID):
		return fmt.Errorf("%w: client: refund %s: order number must be at most 32 printable ASCII bytes", ErrInvalidArgument, b.OutRefundNo)
	case b.Amount.Refund <= 0 || b.Amount.Total <= 0:
		return fmt.Errorf("%w: client: refund %s: amount and total must be positive", ErrInvalidArgument, b.OutRefundNo)
	case b.Amount.Refund > b.Amount.Total:
		return fmt.Errorf("%w: client: refund %s: amount %d exceeds total %d", ErrInvalidArgument, b.OutRefundNo, b.Amount.Refund, b.Amount.Total)
	case b.Amount.Currency != refundCurrency:
		return fmt.Errorf("%w: client: refund %s: currency must be %s", ErrInvalidArgument, b.OutRefundNo, refundCurrency)
	case !validReason(b.Reason):
		return fmt.Errorf("%w: client: refund %s: reason must be valid UTF-8 without control characters, at most %d bytes", ErrInvalidArgument, b.OutRefundNo, maxReasonBytes)
	}
	return nil
}

// validRefundNo follows WeChat Pay's out_refund_no rule.
func validRefundNo(s string) bool {
	if s == "" || len(s) > maxRefundNoLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.IndexByte("_-|*@", c) >= 0) {
			return false
		}
	}
	return true
}

// validOrderNo accepts "" (absent) or up to 32 printable ASCII bytes.
func validOrderNo(s string) bool {
	if len(s) > maxOrderNoLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

func validReason(s string) bool {
	if len(s) > maxReasonBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// Submit implements actors.Provider's Submit: POST RefundsPath with exactly body
// (the journaled bytes), signed. attempt is 1 for the first submission of
// refundNo; a business rejection of a later attempt is reported as
// OutcomeUnknown, because an earlier attempt may have reached WeChat Pay
// (INVALID_REQUEST then means "this number is taken", not "no refund").
//
// body must be a create-refund body for refundNo; otherwise nothing is sent
// and the outcome is OutcomeRejected with code CLIENT_INVALID_BODY on the
// first attempt, OutcomeUnknown on later ones.
//
// On a partner Client the body must name a sub-merchant (its sub_mchid);
// on a direct one it must not.
func (c *Client) Submit(ctx context.Context, refundNo string, body []byte, attempt int) reservation.Outcome {
	return c.submit(ctx, nil, refundNo, body, attempt)
}

// submit sends body; t, when set, is the merchant the body must be for.
func (c *Client) submit(ctx context.Context, t *Target, refundNo string, body []byte, attempt int) reservation.Outcome {
	var b CreateRefundBody
	err := json.Unmarshal(body, &b)
	// A body for another sub-merchant, or one whose sub_mchid does not fit
	// the account's mode, is never sent: it would be refused, or worse,
	// refund another merchant's order.
	sameMerchant := (b.SubMchID != "") == c.partner && (t == nil || b.SubMchID == t.SubMchID)
	if err != nil || b.OutRefundNo != refundNo || !validRefundNo(refundNo) || !sameMerchant {
		kind := reservation.OutcomeUnknown
		if attempt == 1 {
			kind = reservation.OutcomeRejected
		}
		o := reservation.Outcome{Kind: kind, Code: "CLIENT_INVALID_BODY",
			Message: "request body is not a create-refund body for this refund number and merchant; not sent"}
		c.log.Error("wechatpay: refund body does not match its number; not sent",
			"out_refund_no", refundNo, "attempt", attempt, "outcome", o.Kind)
		return o
	}
	return c.call(ctx, opSubmit, http.MethodPost, c.base+RefundsPath, refundNo, body, attempt, "")
}

// Query implements actors.Provider's Query: GET RefundsPath/{refundNo}, the number
// path-escaped, signed over an empty body. OutcomeNotFound is returned only
// for a verified RESOURCE_NOT_EXISTS.
//
// On a partner Client nothing is sent (OutcomeUnknown, code
// CLIENT_NO_SUB_MCHID): the query needs a sub-merchant; use For.
func (c *Client) Query(ctx context.Context, refundNo string) reservation.Outcome {
	if c.partner {
		return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "CLIENT_NO_SUB_MCHID",
			Message: "a partner account's query needs a sub_mchid; not sent"}
	}
	return c.query(ctx, Target{}, refundNo)
}

func (c *Client) query(ctx context.Context, t Target, refundNo string) reservation.Outcome {
	if refundNo == "" || len(refundNo) > maxRefundNoLen {
		return reservation.Outcome{Kind: reservation.OutcomeUnknown, Code: "CLIENT_INVALID_REFUND_NO",
			Message: "refund number is empty or longer than 64 bytes; not sent"}
	}
	u := c.base + RefundsPath + "/" + url.PathEscape(refundNo)
	if t.SubMchID != "" {
		// Part of the signed target (PARTNER.md §1.4).
		u += "?" + url.Values{"sub_mchid": {t.SubMchID}}.Encode()
	}
	return c.call(ctx, opQuery, http.MethodGet, u, refundNo, nil, 0, "")
}

// Stats returns the verification failure counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{Probes: c.probes.Load(), Unverified: c.unverified.Load()}
}

// call sends one signed request and maps the answer. It never returns an
// error: every failure is an outcome.
//
// serial, when set, is sent as Wechatpay-Serial: the key a request's
// encrypted fields are for, which WeChat Pay requires to be named
// (PARTNER.md §2.3); otherwise the Verifier's preferred serial is.
func (c *Client) call(ctx context.Context, op op, method, rawURL, refundNo string, body []byte, attempt int, serial string) reservation.Outcome {
	start := time.Now()
	o, requestID, status := c.roundTrip(ctx, op, method, rawURL, refundNo, body, attempt, serial)
	c.log.Debug("wechatpay: refund call", "op", op.String(), "out_refund_no", refundNo, "attempt", attempt,
		"http_status", status, "request_id", requestID, "outcome", o.Kind, "code", o.Code,
		"elapsed", time.Since(start))
	return o
}

func (c *Client) roundTrip(ctx context.Context, op op, method, rawURL, refundNo string, body []byte, attempt int, serial string) (o reservation.Outcome, requestID string, status int) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return unknown("CLIENT_ERROR", "build request: "+limit(err.Error(), maxLoggedMessage)), "", 0
	}
	// Sign exactly the target the transport will write on the request line.
	auth, err := c.signer.Load().Authorization(method, req.URL.RequestURI(), body, c.now().Unix(), NewNonce())
	if err != nil {
		// Nothing was sent; the error names fields, never key bytes.
		return unknown("CLIENT_ERROR", "sign request: "+limit(err.Error(), maxLoggedMessage)), "", 0
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if serial == "" {
		serial = c.verifier.PreferredSerial()
	}
	if serial != "" {
		req.Header.Set(HeaderSerial, serial)
	}

	resp, err := c.http.Do(req)
	if err != nil {
		return unknown(transportCode(ctx, err), limit(err.Error(), maxLoggedMessage)), "", 0
	}
	defer resp.Body.Close()
	requestID = limit(resp.Header.Get(HeaderRequestID), 128)
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize+1))
	if err != nil {
		code := transportCode(ctx, err)
		if code == "NETWORK_ERROR" {
			code = "READ_ERROR"
		}
		return unknown(code, "read response: "+limit(err.Error(), maxLoggedMessage)), requestID, resp.StatusCode
	}
	if len(raw) > MaxResponseSize {
		return unknown("RESPONSE_TOO_LARGE", fmt.Sprintf("HTTP %d body over %d bytes", resp.StatusCode, MaxResponseSize)), requestID, resp.StatusCode
	}
	verr := c.verifier.Verify(HeadersFrom(resp.Header), raw)
	o = c.mapResponse(op, resp.StatusCode, raw, verr, refundNo, attempt)
	if verr != nil && o.Code == codeUnverified {
		c.noteUnverified(op, refundNo, requestID, resp.StatusCode, verr)
	}
	return o, requestID, resp.StatusCode
}

// noteUnverified counts and logs a response that could have been a definite
// answer but failed verification. Probes are expected: info, not warn.
func (c *Client) noteUnverified(op op, refundNo, requestID string, status int, verr error) {
	if isProbe(verr) {
		c.probes.Add(1)
		c.log.Info("wechatpay: signature probe on a refund response; treated as unknown",
			"op", op.String(), "out_refund_no", refundNo, "request_id", requestID, "http_status", status)
		return
	}
	c.unverified.Add(1)
	c.log.Warn("wechatpay: refund response failed verification; treated as unknown",
		"op", op.String(), "out_refund_no", refundNo, "request_id", requestID, "http_status", status,
		"error", verr.Error())
}
