package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/tally"
)

// maxDrain is how much of a response body is read (and discarded) so the
// connection can be reused; the body itself means nothing to refundd.
const maxDrain = 64 << 10

// deliver POSTs ev until the endpoint accepts it or MaxAttempts are spent,
// waiting a backoff between attempts. It returns the attempts made, the
// last error's text, and whether ev was delivered. When ctx ends it stops
// at once, undelivered.
func (ep *endpoint) deliver(ctx context.Context, ev feed.Event) (attempts int, lastErr string, ok bool) {
	body, err := json.Marshal(ev)
	if err != nil { // a feed.Event always marshals; be loud if not
		return 0, err.Error(), false
	}
	limit := ep.d.cfg.MaxAttempts
	for attempt := 1; attempt <= limit; attempt++ {
		retryAfter, err := ep.post(ctx, ev, body, attempt)
		if err == nil {
			ep.stats.delivered.Add(1)
			ep.note("delivered")
			return attempt, "", true
		}
		ep.stats.failures.Add(1)
		ep.note("failed")
		lastErr = err.Error()
		if ctx.Err() != nil {
			return attempt, lastErr, false
		}
		if attempt == limit {
			return attempt, lastErr, false
		}
		wait := ep.d.backoff(attempt)
		ep.log.Warn("webhook delivery failed; will retry", "event", ev.ID, "type", ev.Type,
			"attempt", attempt, "of", limit, "retry_in", wait.Round(time.Millisecond), "err", lastErr)
		if !ep.sleep(ctx, wait, retryAfter) {
			return attempt, lastErr, false
		}
	}
	return limit, lastErr, false
}

// note counts one delivery outcome (delivered, failed, parked) in the
// durable tally, if there is one.
func (ep *endpoint) note(what string) {
	if t := ep.d.cfg.Tally; t != nil {
		t.Note(map[string]int64{tally.KeyWebhook + ep.cfg.Name + "/" + what: 1})
	}
}

// post sends one attempt. It returns nil for a 2xx answer; otherwise the
// error and any Retry-After the endpoint asked for.
func (ep *endpoint) post(ctx context.Context, ev feed.Event, body []byte, attempt int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, ep.d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("webhook: build request: %w", redact(err))
	}
	ts := ep.d.cfg.Now().Unix()
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "refundd-webhook/1")
	h.Set(HeaderEventID, ev.ID)
	h.Set(HeaderEventType, ev.Type)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Sign(ep.cfg.Secret, ts, body))
	h.Set("Refundd-Attempt", strconv.Itoa(attempt))
	resp, err := ep.d.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("webhook: post: %w", redact(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return 0, nil
	}
	var retryAfter time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			retryAfter = time.Duration(s) * time.Second
		}
	}
	return retryAfter, fmt.Errorf("webhook: endpoint answered %d", resp.StatusCode)
}

// redact drops the URL from a client error: it may carry credentials.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// backoff is the wait after the n-th failure (n >= 1): BackoffBase doubled
// n-1 times, capped at BackoffMax, with "equal jitter": a uniformly random
// point between half of it and all of it, so endpoints that failed together
// spread out but never retry sooner than half the step.
func (d *Dispatcher) backoff(n int) time.Duration {
	b := d.cfg.BackoffBase
	for i := 1; i < n && b < d.cfg.BackoffMax; i++ {
		b *= 2
	}
	b = min(b, d.cfg.BackoffMax)
	half := b / 2
	return half + rand.N(b-half+1)
}

// sleep waits for max(wait, retryAfter) capped at BackoffMax, and reports
// false if ctx ended first.
func (ep *endpoint) sleep(ctx context.Context, wait, retryAfter time.Duration) bool {
	wait = min(max(wait, retryAfter), ep.d.cfg.BackoffMax)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
