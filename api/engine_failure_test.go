package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/reservation"
)

// brokenEngine fails every call the same way; it stands in for engine
// failures a real engine cannot be made to produce on demand.
type brokenEngine struct {
	err   error
	panic bool
	block bool // wait for the request's deadline
}

func (b brokenEngine) fail(ctx context.Context) error {
	if b.panic {
		panic("boom: /var/lib/refundd/secret")
	}
	if b.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return b.err
}

func (b brokenEngine) Execute(ctx context.Context, _, _ string, _ reservation.Command) (*reservation.State, []reservation.Event, error) {
	return nil, nil, b.fail(ctx)
}

func (b brokenEngine) Get(ctx context.Context, _ string) (*reservation.State, error) {
	return nil, b.fail(ctx)
}

func (b brokenEngine) Await(ctx context.Context, _ string, _ func(*reservation.State) bool) (*reservation.State, error) {
	return nil, b.fail(ctx)
}

func (b brokenEngine) Abandon(ctx context.Context, _, _ string, _ reservation.Abandon) (*reservation.State, []reservation.Event, error) {
	return nil, nil, b.fail(ctx)
}

func (b brokenEngine) RecordNotification(ctx context.Context, _ string, _ reservation.Notification) ([]reservation.Event, error) {
	return nil, b.fail(ctx)
}

func (b brokenEngine) Attention(ctx context.Context, _, _ string, _ int) ([]reservation.RefundRef, error) {
	return nil, b.fail(ctx)
}

// Active has no error to give: the engine counts its actors in memory.
func (b brokenEngine) Active() int { return 0 }

func TestServeHTTP_EngineFailures(t *testing.T) {
	secret := errors.New("bbolt: /var/lib/refundd/secret: input/output error")
	for _, c := range []struct {
		name   string
		engine brokenEngine
		status int
		code   string
	}{
		{"internal error is not leaked", brokenEngine{err: secret}, 500, "internal"},
		{"journal unavailable", brokenEngine{err: fmt.Errorf("%w: %v", actors.ErrUnavailable, secret)}, 503, "unavailable"},
		{"engine closed", brokenEngine{err: actors.ErrClosed}, 503, "unavailable"},
		{"request timeout", brokenEngine{block: true}, 504, "timeout"},
		{"panic", brokenEngine{panic: true}, 500, "internal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &testEnv{handler: api.New(c.engine, api.Options{RequestTimeout: 20 * time.Millisecond, Logger: quietLogger()})}
			for _, req := range []struct{ method, path, key, body string }{
				{http.MethodPost, "/v1/reservations", "", registerBody("r1", 100)},
				{http.MethodGet, "/v1/reservations/r1", "", ""},
				{http.MethodPost, "/v1/reservations/r1/refunds", "k1", `{"user_id":"u"}`},
				{http.MethodGet, "/v1/reservations/r1/refunds/T-r1-1", "", ""},
				{http.MethodPost, "/v1/reservations/r1/refunds/T-r1-1/abandon", "", ""},
			} {
				r := e.post(req.path, req.key, []byte(req.body))
				if req.method == http.MethodGet {
					r = e.getRaw(req.path)
				}
				wantError(t, r, c.status, c.code, "")
				if strings.Contains(string(r.body), "secret") || strings.Contains(string(r.body), "bbolt") {
					t.Fatalf("%s %s leaks the internal error: %s", req.method, req.path, r.body)
				}
			}
		})
	}
}
