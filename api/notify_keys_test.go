package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// TestNotifyV3_APIv3KeyGrace: after the APIv3 key changes, a notification
// encrypted with the old key is applied while the grace lasts and refused
// (non-2xx, so WeChat Pay retries) after it; one encrypted with the new key
// is applied at once. A change without grace refuses the old key at once.
func TestNotifyV3_APIv3KeyGrace(t *testing.T) {
	e := newNtEnv(t)
	oldKey, newKey := e.v3Key, []byte("fedcba9876543210fedcba9876543210")
	post := func(id string, key []byte) int {
		t.Helper()
		no := e.refund(id)
		e.v3Key = key
		code, body := e.postV3(ntNotice{no: no, outTradeNo: "ORD-" + id, status: "SUCCESS", refund: 4000, total: 10000})
		applied := e.state(id, no).State == reservation.Succeeded
		if applied != (code == http.StatusNoContent) {
			t.Fatalf("%s: answered %d %s, applied %v", id, code, body, applied)
		}
		return code
	}
	e.keys.Set(newKey, e.v2Key, time.Hour)
	if got := e.keys.PreviousAPIv3Until(); !got.Equal(time.Unix(0, e.keysNow.Load()).Add(time.Hour)) {
		t.Fatalf("previous key until %v", got)
	}
	tests := []struct {
		name    string
		advance time.Duration // on the keys' clock, before the notification
		key     []byte
		want    int
	}{
		{"old key within the grace", 0, oldKey, http.StatusNoContent},
		{"new key", 0, newKey, http.StatusNoContent},
		{"old key at the grace's last minute", 59 * time.Minute, oldKey, http.StatusNoContent},
		{"old key after the grace", time.Minute, oldKey, http.StatusBadRequest},
		{"new key after the grace", 0, newKey, http.StatusNoContent},
	}
	for i, tt := range tests {
		e.keysNow.Add(int64(tt.advance))
		if got := post("g"+string(rune('a'+i)), tt.key); got != tt.want {
			t.Errorf("%s: answered %d, want %d", tt.name, got, tt.want)
		}
	}
	// Setting the same key again keeps no previous key; a change without
	// grace refuses the old key at once.
	e.keys.Set(newKey, e.v2Key, time.Hour)
	if !e.keys.PreviousAPIv3Until().IsZero() {
		t.Fatal("an unchanged key revived a previous key")
	}
	e.keys.Set(oldKey, e.v2Key, 0)
	if got := post("nograce", newKey); got != http.StatusBadRequest {
		t.Fatalf("replaced key without grace: %d", got)
	}
}
