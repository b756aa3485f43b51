package webhook_test

import (
	"errors"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/webhook"
)

// The vector was computed outside Go:
//
//	printf '%s' '1767225600.{"id":"evt_00000000000000000001","type":"refund.succeeded"}' |
//	  openssl dgst -sha256 -hmac 'whsec_0123456789abcdef'
const (
	vecSecret = "whsec_0123456789abcdef"
	vecTS     = 1767225600
	vecBody   = `{"id":"evt_00000000000000000001","type":"refund.succeeded"}`
	vecSig    = "v1=3ea0be028c6782da1ab65eec19ddff4e7472b611dad157b1eab41bb334cb2afa"
)

func TestSign_KnownVector(t *testing.T) {
	if got := webhook.Sign([]byte(vecSecret), vecTS, []byte(vecBody)); got != vecSig {
		t.Fatalf("Sign = %s, want %s", got, vecSig)
	}
}

func TestVerify_Cases(t *testing.T) {
	at := time.Unix(vecTS, 0)
	tests := []struct {
		name    string
		secret  string
		ts      string
		body    string
		header  string
		skew    time.Duration
		now     time.Time
		wantErr error
	}{
		{"valid", vecSecret, "1767225600", vecBody, vecSig, time.Minute, at, nil},
		{"valid within skew", vecSecret, "1767225600", vecBody, vecSig, time.Minute, at.Add(59 * time.Second), nil},
		{"valid with clock behind", vecSecret, "1767225600", vecBody, vecSig, time.Minute, at.Add(-59 * time.Second), nil},
		{"default skew is five minutes", vecSecret, "1767225600", vecBody, vecSig, 0, at.Add(4 * time.Minute), nil},
		{"rotation: second signature matches", vecSecret, "1767225600", vecBody, "v1=00ff, " + vecSig, time.Minute, at, nil},
		{"other schemes ignored", vecSecret, "1767225600", vecBody, "v0=abc," + vecSig, time.Minute, at, nil},

		{"tampered body", vecSecret, "1767225600", `{"id":"evt_00000000000000000001","type":"refund.failed"}`, vecSig, time.Minute, at, webhook.ErrBadSignature},
		{"body with extra space", vecSecret, "1767225600", vecBody + " ", vecSig, time.Minute, at, webhook.ErrBadSignature},
		{"wrong secret", "whsec_0123456789abcdeF", "1767225600", vecBody, vecSig, time.Minute, at, webhook.ErrBadSignature},
		{"timestamp changed", vecSecret, "1767225601", vecBody, vecSig, time.Minute, at, webhook.ErrBadSignature},
		{"stale timestamp", vecSecret, "1767225600", vecBody, vecSig, time.Minute, at.Add(61 * time.Second), webhook.ErrBadTimestamp},
		{"stale past default skew", vecSecret, "1767225600", vecBody, vecSig, 0, at.Add(6 * time.Minute), webhook.ErrBadTimestamp},
		{"timestamp from the future", vecSecret, "1767225600", vecBody, vecSig, time.Minute, at.Add(-2 * time.Minute), webhook.ErrBadTimestamp},
		{"missing timestamp", vecSecret, "", vecBody, vecSig, time.Minute, at, webhook.ErrBadTimestamp},
		{"signed timestamp", vecSecret, "+1767225600", vecBody, vecSig, time.Minute, at, webhook.ErrBadTimestamp},
		{"timestamp in millis", vecSecret, "1767225600000", vecBody, vecSig, time.Minute, at, webhook.ErrBadTimestamp},
		{"huge timestamp", vecSecret, "99999999999999999999", vecBody, vecSig, time.Minute, at, webhook.ErrBadTimestamp},
		{"missing signature", vecSecret, "1767225600", vecBody, "", time.Minute, at, webhook.ErrBadSignature},
		{"no v1 entry", vecSecret, "1767225600", vecBody, "v2=" + vecSig[3:], time.Minute, at, webhook.ErrBadSignature},
		{"not hex", vecSecret, "1767225600", vecBody, "v1=zz", time.Minute, at, webhook.ErrBadSignature},
		{"truncated", vecSecret, "1767225600", vecBody, vecSig[:len(vecSig)-2], time.Minute, at, webhook.ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := webhook.Verify([]byte(tt.secret), tt.ts, []byte(tt.body), tt.header, tt.skew, tt.now)
			if tt.wantErr == nil && err != nil {
				t.Fatalf("Verify: %v, want nil", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Verify: %v, want %v", err, tt.wantErr)
			}
		})
	}
}
