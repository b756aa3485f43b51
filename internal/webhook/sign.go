package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of every delivery.
const (
	HeaderEventID   = "Refundd-Event-Id"
	HeaderEventType = "Refundd-Event-Type"
	HeaderTimestamp = "Refundd-Timestamp"
	HeaderSignature = "Refundd-Signature"
)

// DefaultMaxSkew is Verify's window when given maxSkew <= 0.
const DefaultMaxSkew = 5 * time.Minute

// Sign returns the Refundd-Signature value for body sent at timestamp (unix
// seconds): "v1=" and the hex HMAC-SHA256 of "<timestamp>.<body>".
func Sign(secret []byte, timestamp int64, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(secret, strconv.FormatInt(timestamp, 10), body))
}

func mac(secret []byte, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a delivery as a consumer receives it: timestamp and header
// are the Refundd-Timestamp and Refundd-Signature values, body the raw
// request body (before any JSON decoding). The timestamp must be within
// maxSkew of now (DefaultMaxSkew when maxSkew <= 0), which bounds how long
// a captured delivery can be replayed. header may hold several
// comma-separated signatures (a secret being rotated); one valid "v1=" entry
// is enough, and other schemes are ignored.
//
// Errors: ErrBadTimestamp, ErrBadSignature.
func Verify(secret []byte, timestamp string, body []byte, header string, maxSkew time.Duration, now time.Time) error {
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	if timestamp == "" || len(timestamp) > 19 || strings.TrimLeft(timestamp, "0123456789") != "" {
		return fmt.Errorf("%w: %q is not unix seconds", ErrBadTimestamp, timestamp)
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not unix seconds", ErrBadTimestamp, timestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > maxSkew || d < -maxSkew {
		return fmt.Errorf("%w: %s from now, allowed %s", ErrBadTimestamp, d.Round(time.Second), maxSkew)
	}
	want := mac(secret, timestamp, body)
	seen := false
	for part := range strings.SplitSeq(header, ",") {
		v, ok := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !ok {
			continue
		}
		seen = true
		got, err := hex.DecodeString(v)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	if !seen {
		return fmt.Errorf("%w: no v1 signature in %s", ErrBadSignature, HeaderSignature)
	}
	return fmt.Errorf("%w: no v1 signature matches", ErrBadSignature)
}
