package pgjournal

import (
	"math"
	"time"

	"github.com/refundd/refundd/journal"
)

// The request checks are the bbolt journal's own (journal.Validate*), so a
// request valid for one backend is valid for the other.

const maxKVValueLen = journal.MaxKVValue

func checkStream(s string) error                { return journal.ValidateStream(s) }
func checkClaim(c journal.Claim) error          { return journal.ValidateClaim(c) }
func checkKVKey(k string) error                 { return journal.ValidateKVKey(k) }
func validate(req *journal.AppendRequest) error { return journal.ValidateRequest(req) }

// dueNanos converts t to the due index's clock, nanoseconds since 1970;
// like the bbolt journal, only 1970..2262 is representable (ValidateRequest
// refuses the rest).
func dueNanos(t time.Time) (int64, bool) {
	if t.Before(time.Unix(0, 0)) || t.After(time.Unix(0, math.MaxInt64)) {
		return 0, false
	}
	return t.UnixNano(), true
}

// b converts a string to bytes for a bytea parameter: never nil, since pgx
// sends a nil slice as NULL.
func b(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}

// nonNil returns v, or an empty slice for nil (NULL to pgx).
func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

// prefixEnd returns the smallest key greater than every key starting with
// prefix, or nil if there is none (prefix is empty or all 0xff).
func prefixEnd(prefix string) []byte {
	e := []byte(prefix)
	for i := len(e) - 1; i >= 0; i-- {
		if e[i] < 0xff {
			e[i]++
			return e[:i+1]
		}
	}
	return nil
}
