package webhook_test

// verifyRefundd is the standalone consumer check shown in docs/WEBHOOKS.md,
// kept here so the documented code is compiled and tested. Keep the two in
// step.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/webhook"
)

// --- begin docs/WEBHOOKS.md snippet ---

// verifyRefundd checks a refundd webhook delivery. body is the raw request
// body, read before any JSON decoding.
func verifyRefundd(secret []byte, r *http.Request, body []byte, now time.Time) bool {
	ts := r.Header.Get("Refundd-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return false // stale, or from the future: possibly a replayed capture
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, part := range strings.Split(r.Header.Get("Refundd-Signature"), ",") {
		sig, ok := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !ok {
			continue
		}
		if got, err := hex.DecodeString(sig); err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// --- end docs/WEBHOOKS.md snippet ---

func TestVerifyRefundd_DocsSnippet(t *testing.T) {
	secret := []byte("whsec_0123456789abcdef")
	body := []byte(`{"id":"evt_00000000000000000001","type":"refund.succeeded"}`)
	now := time.Unix(1767225600, 0)
	req := func(ts int64, sig string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/hook", nil)
		r.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
		r.Header.Set(webhook.HeaderSignature, sig)
		return r
	}
	good := webhook.Sign(secret, now.Unix(), body)
	tests := []struct {
		name string
		r    *http.Request
		body []byte
		want bool
	}{
		{"valid", req(now.Unix(), good), body, true},
		{"known vector", req(now.Unix(), vecSig), body, true},
		{"tampered body", req(now.Unix(), good), append([]byte(nil), append(body, ' ')...), false},
		{"stale", req(now.Unix()-301, webhook.Sign(secret, now.Unix()-301, body)), body, false},
		{"other secret", req(now.Unix(), webhook.Sign([]byte("another-secret-0123"), now.Unix(), body)), body, false},
	}
	for _, tt := range tests {
		if got := verifyRefundd(secret, tt.r, tt.body, now); got != tt.want {
			t.Errorf("%s: verifyRefundd = %v, want %v", tt.name, got, tt.want)
		}
	}
}
