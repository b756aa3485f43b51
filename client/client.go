package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Options configure a Client.
type Options struct {
	// Token is the bearer token sent on every request; empty sends none
	// (a server without --tokens-file, or only the public routes).
	Token string
	// HTTPClient sends the requests; nil means a client with no overall
	// timeout (each call is bounded by its context and, for ?wait=, by the
	// wait plus RequestTimeout).
	HTTPClient *http.Client
	// RequestTimeout bounds one attempt beyond any ?wait= it asks for;
	// zero means 30s.
	RequestTimeout time.Duration
	// MaxAttempts bounds the attempts of a call that is safe to retry;
	// zero means 4, one means no retries.
	MaxAttempts int
	// BaseDelay and MaxDelay shape the exponential backoff (with full
	// jitter) between attempts; zero means 100ms and 5s. A Retry-After
	// header of the answer, when longer, is waited instead (up to MaxDelay).
	BaseDelay, MaxDelay time.Duration
	// UserAgent is sent as User-Agent; empty means "refundd-go-client".
	UserAgent string
}

// Client calls one refundd. It is safe for concurrent use.
type Client struct {
	base *url.URL
	opts Options
	hc   *http.Client
}

// New returns a client of the refundd at baseURL (such as
// "http://127.0.0.1:8080").
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http(s)://host[:port]", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 30 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 4
	}
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = 100 * time.Millisecond
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 5 * time.Second
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "refundd-go-client"
	}
	return &Client{base: u, opts: opts, hc: opts.HTTPClient}, nil
}

// NewIdempotencyKey returns a fresh random key (32 hex digits), valid for
// the Idempotency-Key header.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported systems
	return hex.EncodeToString(b[:])
}

// retry says whether a call may be sent again after a failure that left
// its outcome unknown.
type retry bool

const (
	// retrySafe: a read, or a write the server recognises when it comes
	// again (the same reservation id and body, or the same idempotency
	// key), so a repeat answers the first outcome.
	retrySafe retry = true
	// retryNever: a write whose repeat would be a second decision
	// (operator actions, replays).
	retryNever retry = false
)

// call is one logical API call, sent one or more times by do.
type call struct {
	method, path string
	query        url.Values
	body         any         // JSON-encoded once; nil sends no body
	header       http.Header // fixed for every attempt (the idempotency key)
	wait         time.Duration
	retry        retry
	// ok lists the statuses that are answers; out receives the JSON body
	// of one (nil: the body is discarded).
	ok  []int
	out any
	// raw, if set, is given the body of an answer instead of decoding it;
	// the caller then owns resp.Body.
	raw func(*http.Response) error
}

// do sends c, retrying it when c.retry allows, and returns the status of
// the answer.
func (cl *Client) do(ctx context.Context, c call) (int, error) {
	var body []byte
	if c.body != nil {
		var err error
		if body, err = json.Marshal(c.body); err != nil {
			return 0, fmt.Errorf("client: encode %s %s: %w", c.method, c.path, err)
		}
	}
	attempts := 1
	if c.retry {
		attempts = cl.opts.MaxAttempts
	}
	var last error
	for attempt := 1; ; attempt++ {
		status, after, err := cl.once(ctx, c, body)
		if err == nil {
			return status, nil
		}
		last = err
		if attempt >= attempts || !transient(err) || ctx.Err() != nil {
			return status, last
		}
		if err := cl.sleep(ctx, cl.backoff(attempt, after)); err != nil {
			return status, fmt.Errorf("%w (last attempt: %w)", err, last)
		}
	}
}

// once sends one attempt. after is the answer's Retry-After, if any.
func (cl *Client) once(ctx context.Context, c call, body []byte) (status int, after time.Duration, err error) {
	actx, cancel := context.WithTimeout(ctx, c.wait+cl.opts.RequestTimeout)
	u := *cl.base
	// c.path is escaped (seg); Path and RawPath together keep an escaped
	// "/" inside a segment as it is.
	u.RawPath = cl.base.EscapedPath() + c.path
	u.Path, _ = url.PathUnescape(u.RawPath)
	if len(c.query) > 0 {
		u.RawQuery = c.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, c.method, u.String(), rd)
	if err != nil {
		cancel()
		return 0, 0, fmt.Errorf("client: %s %s: %w", c.method, c.path, err)
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", cl.opts.UserAgent)
	if cl.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.opts.Token)
	}
	resp, err := cl.hc.Do(req)
	if err != nil {
		cancel()
		return 0, 0, &netError{err: err}
	}
	if !contains(c.ok, resp.StatusCode) {
		defer cancel()
		defer resp.Body.Close()
		return resp.StatusCode, retryAfter(resp.Header.Get("Retry-After")), apiError(resp)
	}
	if c.raw != nil {
		// The caller reads the body after do returns: the attempt's
		// context must outlive this function, and ends with the body.
		resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		return resp.StatusCode, 0, c.raw(resp)
	}
	defer cancel()
	defer resp.Body.Close()
	if c.out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, 0, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(c.out); err != nil {
		// The answer was sent and not read: its outcome is known to the
		// server, not to us, so this is reported like a network error.
		return resp.StatusCode, 0, &netError{err: fmt.Errorf("decode %s %s answer: %w", c.method, c.path, err)}
	}
	return resp.StatusCode, 0, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// netError is a failure with no answer from the API: the request may or
// may not have been acted on.
type netError struct{ err error }

func (e *netError) Error() string { return "client: " + e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

// transient reports whether a failure may pass on its own: no answer, too
// many requests, or a server-side failure (5xx), which the API documents
// as "nothing was changed, or retry with the same key to learn the
// outcome".
func transient(err error) bool {
	var ne *netError
	if errors.As(err, &ne) {
		return true
	}
	var e *Error
	return errors.As(err, &e) && (e.Status == http.StatusTooManyRequests || e.Status >= 500)
}

// apiError reads an error answer.
func apiError(resp *http.Response) error {
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var body struct {
		Error struct {
			Code    Code   `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.Field = body.Error.Code, body.Error.Message, body.Error.Field
		return e
	}
	// Not the API's error shape (a proxy in front of refundd): keep what
	// the answer said.
	e.Code = CodeInternal
	if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusBadGateway {
		e.Code = CodeUnavailable
	}
	e.Message = strings.TrimSpace(string(b))
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

func (cl *Client) backoff(attempt int, after time.Duration) time.Duration {
	d := cl.opts.BaseDelay << min(attempt-1, 20)
	if d > cl.opts.MaxDelay || d <= 0 {
		d = cl.opts.MaxDelay
	}
	d = mrand.N(d) + 1 // full jitter: retries of many clients spread out
	if after > d {
		d = min(after, cl.opts.MaxDelay)
	}
	return d
}

func (cl *Client) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }
