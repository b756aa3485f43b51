package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
)

// stubTotals answers Between with err, or with one merchant's refunds,
// and records the range it was asked.
type stubTotals struct {
	err      error
	from, to time.Time
}

func (s *stubTotals) Between(_ context.Context, from, to time.Time) (map[string]map[reservation.RefundState]eventstore.Total, error) {
	s.from, s.to = from, to
	if s.err != nil {
		return nil, s.err
	}
	return map[string]map[reservation.RefundState]eventstore.Total{
		"default": {reservation.Processing: {Refunds: 1, Amount: 100}, reservation.Unknown: {Refunds: 2, Amount: 50},
			reservation.Succeeded: {Refunds: 3, Amount: 700}, reservation.Failed: {Refunds: 1, Amount: 9}},
	}, nil
}

func TestTotals_Route(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		err         error
		status      int
		want        []string
	}{
		{"open range", "", nil, http.StatusOK, []string{`"from":null,"to":null`,
			`"in_flight":{"refunds":3,"amount":150},"refunded":{"refunds":3,"amount":700},"released":{"refunds":1,"amount":9}`}},
		{"Beijing day", "?from=2026-12-01T00:00:00%2B08:00&to=2026-12-02T00:00:00%2B08:00", nil, http.StatusOK,
			[]string{`"from":"2026-11-30T16:00:00Z","to":"2026-12-01T16:00:00Z"`}},
		{"not on the hour", "?from=2026-12-01T00:30:00Z", nil, http.StatusBadRequest, []string{`"field":"from"`}},
		{"half-hour offset", "?to=2026-12-01T00:00:00%2B05:30", nil, http.StatusBadRequest, []string{`"field":"to"`}},
		{"not a time", "?from=yesterday", nil, http.StatusBadRequest, []string{`"field":"from"`}},
		{"backwards", "?from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", nil, http.StatusBadRequest, []string{`"field":"to"`}},
		{"unknown merchant", "?merchant=nobody", nil, http.StatusBadRequest, []string{`"field":"merchant"`}},
		{"not kept", "", fmt.Errorf("wrapped: %w", eventstore.ErrTotalsNotKept), http.StatusConflict, []string{`"code":"totals_not_kept"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &stubTotals{err: tc.err}
			srv := New(nopEngine{}, Options{Totals: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), NoAccessLog: true})
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/totals"+tc.query, nil))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			for _, w := range tc.want {
				if !strings.Contains(rec.Body.String(), w) {
					t.Errorf("body %s; want %s", rec.Body, w)
				}
			}
		})
	}
}
