package pgjournal

import (
	"fmt"
	"math"
	"strings"
	"time"

	"refundd/journal"
)

// The bbolt journal's request limits (journal/record.go), so a request valid
// for one backend is valid for the other.
const (
	maxStreamLen    = 128
	maxTypeLen      = 64
	maxNamespaceLen = 64
	maxKeyLen       = 1024
	maxDataLen      = 16 << 20
	maxKVValueLen   = 1 << 20
)

func checkStream(s string) error {
	if len(s) == 0 || len(s) > maxStreamLen {
		return fmt.Errorf("%w: stream name must be 1..%d bytes, got %d", journal.ErrInvalid, maxStreamLen, len(s))
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: stream name %q contains NUL", journal.ErrInvalid, s)
	}
	return nil
}

func checkClaim(c journal.Claim) error {
	if len(c.Namespace) == 0 || len(c.Namespace) > maxNamespaceLen || strings.IndexByte(c.Namespace, 0) >= 0 {
		return fmt.Errorf("%w: claim namespace must be 1..%d bytes without NUL", journal.ErrInvalid, maxNamespaceLen)
	}
	if len(c.Key) == 0 || len(c.Key) > maxKeyLen {
		return fmt.Errorf("%w: claim key must be 1..%d bytes, got %d", journal.ErrInvalid, maxKeyLen, len(c.Key))
	}
	return nil
}

func checkKVKey(k string) error {
	if len(k) == 0 || len(k) > maxKeyLen {
		return fmt.Errorf("%w: kv key must be 1..%d bytes, got %d", journal.ErrInvalid, maxKeyLen, len(k))
	}
	return nil
}

// dueNanos converts t to the due index's clock, nanoseconds since 1970;
// like the bbolt journal, only 1970..2262 is representable.
func dueNanos(t time.Time) (int64, bool) {
	if t.Before(time.Unix(0, 0)) || t.After(time.Unix(0, math.MaxInt64)) {
		return 0, false
	}
	return t.UnixNano(), true
}

// validate checks everything that does not depend on stored state, and
// fills Due.Stream defaults (req is Append's own copy, but its Dues slice is
// the caller's, so it is copied before being changed).
func validate(req *journal.AppendRequest) error {
	if err := checkStream(req.Stream); err != nil {
		return err
	}
	if len(req.Events) == 0 {
		return fmt.Errorf("%w: no events", journal.ErrInvalid)
	}
	if req.Expected+uint64(len(req.Events)) < req.Expected {
		return fmt.Errorf("%w: sequence overflow", journal.ErrInvalid)
	}
	for i, e := range req.Events {
		if len(e.Type) == 0 || len(e.Type) > maxTypeLen {
			return fmt.Errorf("%w: event %d: type must be 1..%d bytes, got %d", journal.ErrInvalid, i, maxTypeLen, len(e.Type))
		}
		if e.Version == 0 {
			return fmt.Errorf("%w: event %d (%s): version must be >= 1", journal.ErrInvalid, i, e.Type)
		}
		if len(e.Data) > maxDataLen {
			return fmt.Errorf("%w: event %d (%s): data is %d bytes, limit %d", journal.ErrInvalid, i, e.Type, len(e.Data), maxDataLen)
		}
	}
	for i, c := range req.Claims {
		if err := checkClaim(c); err != nil {
			return fmt.Errorf("claim %d: %w", i, err)
		}
	}
	for i, m := range req.Marks {
		if len(m.Key) == 0 || len(m.Key) > maxKeyLen {
			return fmt.Errorf("%w: mark %d: key must be 1..%d bytes, got %d", journal.ErrInvalid, i, maxKeyLen, len(m.Key))
		}
	}
	if len(req.Dues) > 0 {
		req.Dues = append([]journal.Due(nil), req.Dues...)
	}
	for i := range req.Dues {
		d := &req.Dues[i]
		if d.Stream == "" {
			d.Stream = req.Stream
		}
		if err := checkStream(d.Stream); err != nil {
			return fmt.Errorf("due %d: %w", i, err)
		}
		if len(d.Key) > maxKeyLen {
			return fmt.Errorf("%w: due %d: key must be 0..%d bytes, got %d", journal.ErrInvalid, i, maxKeyLen, len(d.Key))
		}
		if _, ok := dueNanos(d.At); !ok {
			return fmt.Errorf("%w: due %d: time %s outside 1970..2262", journal.ErrInvalid, i, d.At.UTC().Format(time.RFC3339))
		}
	}
	return nil
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
