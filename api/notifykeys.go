package api

import (
	"slices"
	"sync/atomic"
	"time"
)

// NotifyKeys are one account's notification keys, swapped whole by a
// reload while notifications are handled: each notification loads them
// once. After the APIv3 key changes, the previous key keeps opening
// notifications until its grace ends: WeChat Pay invalidates the old key
// at once, but whether retries of notifications built before the change
// are re-encrypted is unconfirmed (PARTNER.md §3.6).
type NotifyKeys struct {
	// Now returns the current time; nil means time.Now. Set before use.
	Now func() time.Time
	cur atomic.Pointer[notifyKeySet]
}

type notifyKeySet struct {
	apiV3, apiV2 []byte
	prevV3       []byte    // the APIv3 key before the last change; nil: none
	prevUntil    time.Time // prevV3 opens notifications until then
}

// NewNotifyKeys holds an account's APIv3 key and APIv2 key (nil: none).
func NewNotifyKeys(apiV3, apiV2 []byte) *NotifyKeys {
	k := &NotifyKeys{}
	k.cur.Store(&notifyKeySet{apiV3: slices.Clone(apiV3), apiV2: slices.Clone(apiV2)})
	return k
}

// Set replaces the keys. When the APIv3 key changes, the one replaced is
// kept as the previous key for grace (zero or less: not kept); when it
// does not, an earlier previous key keeps its expiry.
func (k *NotifyKeys) Set(apiV3, apiV2 []byte, grace time.Duration) {
	old := k.cur.Load()
	next := &notifyKeySet{apiV3: slices.Clone(apiV3), apiV2: slices.Clone(apiV2), prevV3: old.prevV3, prevUntil: old.prevUntil}
	if !slices.Equal(old.apiV3, apiV3) {
		next.prevV3, next.prevUntil = nil, time.Time{}
		if grace > 0 {
			next.prevV3, next.prevUntil = old.apiV3, k.now().Add(grace)
		}
	}
	k.cur.Store(next)
}

// APIv3Keys are the keys that may open a notification now, the current
// one first.
func (k *NotifyKeys) APIv3Keys() [][]byte {
	s := k.cur.Load()
	if s.prevV3 != nil && k.now().Before(s.prevUntil) {
		return [][]byte{s.apiV3, s.prevV3}
	}
	return [][]byte{s.apiV3}
}

// APIv2Key is the APIv2 key; nil when the account has none.
func (k *NotifyKeys) APIv2Key() []byte { return k.cur.Load().apiV2 }

// PreviousAPIv3Until is when the previous APIv3 key stops being tried;
// zero when there is none.
func (k *NotifyKeys) PreviousAPIv3Until() time.Time {
	s := k.cur.Load()
	if s.prevV3 == nil || !k.now().Before(s.prevUntil) {
		return time.Time{}
	}
	return s.prevUntil
}

func (k *NotifyKeys) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}
