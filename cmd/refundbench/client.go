package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// client speaks refundd's JSON API and records every request it makes.
type client struct {
	base  string
	token string
	http  *http.Client
	// wire serves plain http:// targets (wire.go); https:// ones go
	// through http.
	wire *wire
	rec  *recorder
}

func newClient(base, token string, timeout time.Duration, conns int, rec *recorder) *client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	c := &client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{Transport: tr, Timeout: timeout}, rec: rec}
	if u, err := url.Parse(c.base); err == nil && u.Scheme == "http" && u.Host != "" && (u.Path == "" || u.Path == "/") {
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
		c.wire = newWire(host, timeout, conns)
	}
	return c
}

func (c *client) close() {
	c.http.CloseIdleConnections()
	if c.wire != nil {
		c.wire.close()
	}
}

// reservationView and refundView are the parts of refundd's JSON shapes the
// bench reads.
type reservationView struct {
	ID         string       `json:"id"`
	Merchant   string       `json:"merchant"`
	Amount     int64        `json:"amount"`
	Status     string       `json:"status"`
	Refunded   int64        `json:"refunded"`
	InFlight   int64        `json:"in_flight"`
	Refundable int64        `json:"refundable"`
	Refunds    []refundView `json:"refunds"`
}

type refundView struct {
	RefundNo         string `json:"refund_no"`
	ReservationID    string `json:"reservation_id"`
	Amount           int64  `json:"amount"`
	State            string `json:"state"`
	ProviderRefundID string `json:"provider_refund_id"`
}

func terminal(state string) bool { return state == "SUCCEEDED" || state == "FAILED" }

// result is one HTTP exchange: the status (0 for a transport failure) and
// the error code of an error body.
type result struct {
	status int
	code   string
	err    error
}

// ok reports a 2xx answer.
func (r result) ok() bool { return r.status >= 200 && r.status < 300 }

// do sends one request and decodes a 2xx JSON body into out. kind names
// the request in the statistics ("" records nothing).
func (c *client) do(ctx context.Context, kind, method, path string, header http.Header, body []byte, out any) result {
	start := time.Now()
	r := c.exchange(ctx, method, path, header, body, out)
	if kind != "" {
		c.rec.request(kind, start, time.Since(start), r)
	}
	return r
}

func (c *client) exchange(ctx context.Context, method, path string, header http.Header, body []byte, out any) result {
	if c.wire != nil {
		status, raw, err := c.wire.roundTrip(ctx, method, path, header, c.token, body)
		if err != nil {
			return result{status: status, err: err}
		}
		return answer(method, path, status, raw, out)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return result{err: err}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return result{status: resp.StatusCode, err: err}
	}
	return answer(method, path, resp.StatusCode, raw, out)
}

// answer reads an answer's body: an error code, or a 2xx body into out
// (JSON, or the bytes themselves for a *[]byte).
func answer(method, path string, status int, raw []byte, out any) result {
	r := result{status: status}
	if !r.ok() {
		r.code = errorCode(raw)
		return r
	}
	if b, ok := out.(*[]byte); ok {
		*b = bytes.Clone(raw)
		return r
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			r.err = fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return r
}

// errorCode reads refundd's {"error":{"code":...}} or WeChat's
// {"code":...} error bodies.
func errorCode(raw []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
		Code string `json:"code"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return "non_json"
	}
	if e.Error.Code != "" {
		return e.Error.Code
	}
	return e.Code
}

// register registers reservation id for merchant ("" names none: the
// target's only merchant).
func (c *client) register(ctx context.Context, id, merchant string, amount int64) result {
	m := map[string]any{"id": id, "user_id": "u-" + id, "out_trade_no": "OT" + id, "amount": amount, "currency": "CNY"}
	if merchant != "" {
		m["merchant"] = merchant
	}
	body, _ := json.Marshal(m)
	return c.do(ctx, "register", http.MethodPost, "/v1/reservations", nil, body, nil)
}

func waitQuery(wait time.Duration) string {
	if wait <= 0 {
		return ""
	}
	return "?wait=" + url.QueryEscape(wait.String())
}

func (c *client) refund(ctx context.Context, id, key string, amount int64, wait time.Duration) (refundView, result) {
	body, _ := json.Marshal(map[string]any{"user_id": "u-" + id, "amount": amount})
	var v refundView
	h := http.Header{"Idempotency-Key": {key}}
	r := c.do(ctx, "refund", http.MethodPost, "/v1/reservations/"+id+"/refunds"+waitQuery(wait), h, body, &v)
	if r.ok() && r.err == nil && (v.RefundNo == "" || v.Amount != amount) {
		r.err = fmt.Errorf("refund of %s answered %d without its number or amount", id, r.status)
	}
	return v, r
}

func (c *client) getRefund(ctx context.Context, kind, id, no string, wait time.Duration) (refundView, result) {
	var v refundView
	r := c.do(ctx, kind, http.MethodGet, "/v1/reservations/"+id+"/refunds/"+no+waitQuery(wait), nil, nil, &v)
	return v, r
}

func (c *client) getReservation(ctx context.Context, kind, id string) (reservationView, result) {
	var v reservationView
	r := c.do(ctx, kind, http.MethodGet, "/v1/reservations/"+id, nil, nil, &v)
	return v, r
}

// errorKey names a failed exchange in the error counts.
func errorKey(kind string, r result) string {
	switch {
	case r.status == 0 && r.err != nil:
		msg := r.err.Error()
		switch {
		case errors.Is(r.err, context.DeadlineExceeded), strings.Contains(msg, "Client.Timeout"), isTimeout(r.err):
			msg = "timeout"
		case strings.Contains(msg, "connection refused"):
			msg = "connection refused"
		case strings.Contains(msg, "connection reset"):
			msg = "connection reset"
		case len(msg) > 60:
			msg = msg[:60]
		}
		return kind + " transport: " + msg
	case r.ok():
		return kind + " " + fmt.Sprint(r.status) + " bad body"
	case r.code != "":
		return fmt.Sprintf("%s %d %s", kind, r.status, r.code)
	}
	return fmt.Sprintf("%s %d", kind, r.status)
}

// isTimeout reports a network timeout (the wire client's deadlines).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
