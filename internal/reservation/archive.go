package reservation

import (
	"fmt"
	"time"
)

// DefaultArchiveRetention is how long after payment a finished reservation
// stays in the hot journal by default (docs/AUDIT.md, "Archival").
const DefaultArchiveRetention = 400 * 24 * time.Hour

// ArchiveBlocker says why s may not be archived at now, "" when it may:
// it must be registered and paid, every refund terminal, the refund window
// (refundWindow; zero means the policy's default) closed and the payment
// older than retention (zero means DefaultArchiveRetention), so that
// nothing can ever change it again. The journal's indexes (no due time, no
// attention mark) are the caller's to check.
func (s *State) ArchiveBlocker(now time.Time, refundWindow, retention time.Duration) string {
	if refundWindow <= 0 {
		refundWindow = Policy{}.refundWindow()
	}
	if retention <= 0 {
		retention = DefaultArchiveRetention
	}
	switch {
	case !s.Registered():
		return "not registered"
	case s.PaidAt.IsZero():
		return "payment time unknown: its refund window never closes"
	}
	for _, r := range s.Refunds {
		if !r.State.Terminal() {
			return fmt.Sprintf("refund %s is %s", r.No, r.State)
		}
	}
	if end := s.PaidAt.Add(refundWindow); !now.After(end) {
		return "refund window open until " + end.UTC().Format(time.RFC3339)
	}
	if end := s.PaidAt.Add(retention); !now.After(end) {
		return "retained until " + end.UTC().Format(time.RFC3339)
	}
	return ""
}
