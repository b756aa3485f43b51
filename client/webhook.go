package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Headers of every webhook delivery.
const (
	HeaderEventID   = "Refundd-Event-Id"
	HeaderEventType = "Refundd-Event-Type"
	HeaderTimestamp = "Refundd-Timestamp"
	HeaderSignature = "Refundd-Signature"
)

// DefaultMaxSkew is how far a delivery's timestamp may be from now when
// VerifyWebhook is given maxSkew <= 0.
const DefaultMaxSkew = 5 * time.Minute

// maxWebhookBody bounds what ReadWebhook reads; an event is a few hundred
// bytes.
const maxWebhookBody = 1 << 20

// VerifyWebhook checks a delivery's signature as refundd makes it:
// Refundd-Signature holds "v1=" and the hex HMAC-SHA256, under the
// endpoint's secret, of the Refundd-Timestamp value, ".", and the raw body.
// The timestamp must be within maxSkew of now, which bounds replays of a
// captured delivery. Several comma-separated signatures may be sent while
// a secret is rotated; one valid v1 entry is enough.
//
// Errors: ErrBadTimestamp, ErrBadSignature.
func VerifyWebhook(secret []byte, header http.Header, body []byte, maxSkew time.Duration, now time.Time) error {
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	ts := header.Get(HeaderTimestamp)
	if ts == "" || len(ts) > 19 || strings.TrimLeft(ts, "0123456789") != "" {
		return fmt.Errorf("%w: %q is not unix seconds", ErrBadTimestamp, ts)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not unix seconds", ErrBadTimestamp, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > maxSkew || d < -maxSkew {
		return fmt.Errorf("%w: %s from now, allowed %s", ErrBadTimestamp, d.Round(time.Second), maxSkew)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	want := m.Sum(nil)
	for part := range strings.SplitSeq(header.Get(HeaderSignature), ",") {
		v, ok := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !ok {
			continue
		}
		if got, err := hex.DecodeString(v); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrBadSignature
}

// ReadWebhook reads and verifies a delivery in an http.Handler and returns
// its event. Answer 2xx only once the event is handled (or durably queued):
// refundd retries anything else, with the same event id.
func ReadWebhook(r *http.Request, secret []byte, maxSkew time.Duration) (*Event, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
	if err != nil {
		return nil, fmt.Errorf("client: read webhook body: %w", err)
	}
	if len(body) > maxWebhookBody {
		return nil, fmt.Errorf("client: webhook body over %d bytes", maxWebhookBody)
	}
	if err := VerifyWebhook(secret, r.Header, body, maxSkew, time.Now()); err != nil {
		return nil, err
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("client: webhook body: %w", err)
	}
	if id := r.Header.Get(HeaderEventID); id != ev.ID {
		return nil, fmt.Errorf("%w: %s %q names another event than the body's %q", ErrBadSignature, HeaderEventID, id, ev.ID)
	}
	return &ev, nil
}
