package api_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/reservation"
)

// BenchmarkLifecycleHandler is the API's own cost of one lifecycle,
// without a network and without the engine: POST /v1/reservations, then
// POST .../refunds?wait=5s answered SUCCEEDED, with bearer tokens and
// request metrics on as in refundd. The engine is a stub that decides
// nothing (the engine's cost is actors' BenchmarkEngineRefund). Run:
//
//	go test -run='^$' -bench=LifecycleHandler -benchmem ./api/
func BenchmarkLifecycleHandler(b *testing.B) {
	var ts auth.Tokens
	if err := ts.Add(auth.RoleService, "bench", "bench-token-0123456789"); err != nil {
		b.Fatal(err)
	}
	m := metrics.New(metrics.Options{NoRuntime: true, Logger: quietLogger()})
	h := api.New(stubEngine{}, api.Options{Logger: quietLogger(), Auth: &ts, Observer: m, Metrics: m.Handler()})
	var seq atomic.Int64
	do := func(b *testing.B, method, path, key string, body []byte, want int) {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer bench-token-0123456789")
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := "hb" + strconv.FormatInt(seq.Add(1), 36)
			do(b, http.MethodPost, "/v1/reservations", "",
				[]byte(`{"id":"`+id+`","user_id":"u-`+id+`","out_trade_no":"OT`+id+`","amount":10000,"currency":"CNY"}`), http.StatusCreated)
			do(b, http.MethodPost, "/v1/reservations/"+id+"/refunds?wait=5s", "k1",
				[]byte(`{"user_id":"u-`+id+`","amount":2500}`), http.StatusOK)
		}
	})
}

// stubEngine answers a registration and a refund the way the engine does,
// with the state its pure core gives, deciding nothing else.
type stubEngine struct{}

var stubNow = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func (stubEngine) Execute(_ context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error) {
	st := &reservation.State{}
	env := reservation.Env{Now: stubNow, By: by, Policy: reservation.Policy{RefundNoPrefix: "B"}}
	reg := reservation.Register{ReservationID: id, UserID: "u-" + id, OutTradeNo: "OT" + id, Amount: 10000, Currency: "CNY"}
	cmds := []reservation.Command{reg, cmd}
	if _, ok := cmd.(reservation.Register); ok {
		cmds = cmds[1:]
	}
	var out []reservation.Event
	for _, c := range cmds {
		events, err := reservation.Decide(st, c, env)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range events {
			reservation.Apply(st, e)
		}
		out = events
	}
	return st, out, nil
}

func (stubEngine) Get(context.Context, string) (*reservation.State, error) {
	return nil, reservation.ErrNotFound
}

func (stubEngine) Abandon(context.Context, string, string, reservation.Abandon) (*reservation.State, []reservation.Event, error) {
	return nil, nil, reservation.ErrNotFound
}

func (stubEngine) RecordNotification(context.Context, string, reservation.Notification) ([]reservation.Event, error) {
	return nil, reservation.ErrNotFound
}

func (stubEngine) Attention(context.Context, string, string, int) ([]reservation.RefundRef, error) {
	return nil, nil
}

func (stubEngine) Active() int { return 0 }

// Await answers the refund as succeeded, as the engine does once the
// provider's answer is journaled.
func (stubEngine) Await(_ context.Context, id string, _ func(*reservation.State) bool) (*reservation.State, error) {
	amount := int64(2500)
	st, _, err := stubEngine{}.Execute(context.Background(), id, "bench", reservation.RequestRefund{UserID: "u-" + id, IdempotencyKey: "k1", Amount: &amount})
	if err != nil {
		return nil, err
	}
	no := st.Refunds[0].No
	for _, c := range []reservation.Command{
		reservation.StartSubmission{RefundNo: no, Request: []byte(`{}`)},
		reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse, Attempt: 1, Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded}},
	} {
		events, err := reservation.Decide(st, c, reservation.Env{Now: stubNow, By: "bench", Policy: reservation.Policy{RefundNoPrefix: "B"}})
		if err != nil {
			return nil, err
		}
		for _, e := range events {
			reservation.Apply(st, e)
		}
	}
	return st, nil
}
