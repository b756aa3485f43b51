package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/version"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal/journaltest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// scrape fetches the exposition through the handler, as Prometheus would.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// value returns the sample of series (name and labels exactly as exposed),
// or -1 when it is absent.
func value(t *testing.T, text, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func want(t *testing.T, text, series string, v float64) {
	t.Helper()
	if got := value(t, text, series); got != v {
		t.Errorf("%s = %v, want %v", series, got, v)
	}
}

type engineEnv struct {
	m      *metrics.Metrics
	engine *actors.Engine
	store  *eventstore.Store
	close  func() error // Engine.Close may run only once
}

func newEngine(t *testing.T, fault simprovider.Fault) *engineEnv {
	t.Helper()
	return newEngineWith(t, fault, metrics.Options{})
}

// newEngineWith is newEngine with metrics options (NoRuntime and a quiet
// logger added).
func newEngineWith(t *testing.T, fault simprovider.Fault, opts metrics.Options) *engineEnv {
	t.Helper()
	opts.NoRuntime, opts.Logger = true, quiet()
	m := metrics.New(opts)
	store := eventstore.New(journaltest.Open(t))
	engine, err := actors.New(actors.Config{
		Store: m.Store(store), Provider: m.Provider(simprovider.New(simprovider.Options{Fault: fault})), Encode: simprovider.Encode,
		Logger: quiet(), Policy: reservation.Policy{RefundNoPrefix: "T"},
	})
	if err != nil {
		t.Fatal(err)
	}
	closeOnce := sync.OnceValue(func() error { return engine.Close(context.Background()) })
	t.Cleanup(func() { _ = closeOnce() })
	return &engineEnv{m: m, engine: engine, store: store, close: closeOnce}
}

func (e *engineEnv) refund(t *testing.T, id string) string {
	t.Helper()
	return e.refundFor(t, id, "")
}

// refundFor registers id for merchant ("" names none) and requests a
// refund.
func (e *engineEnv) refundFor(t *testing.T, id, merchant string) string {
	t.Helper()
	ctx := t.Context()
	if _, _, err := e.engine.Execute(ctx, id, "test", reservation.Register{ReservationID: id, UserID: "u", OutTradeNo: "o-" + id,
		Amount: 1000, Currency: "CNY", Merchant: merchant}); err != nil {
		t.Fatal(err)
	}
	st, _, err := e.engine.Execute(ctx, id, "test", reservation.RequestRefund{UserID: "u", IdempotencyKey: "k", Amount: new(int64(100))})
	if err != nil {
		t.Fatal(err)
	}
	return st.Refunds[0].No
}

func (e *engineEnv) await(t *testing.T, id, no string, state reservation.RefundState) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := e.engine.Await(ctx, id, func(s *reservation.State) bool { return s.Refund(no).State == state })
	if err != nil || st.Refund(no).State != state {
		t.Fatalf("%s: want %s, got %+v (%v)", no, state, st, err)
	}
}

func TestStore_EventsTransitionsActivations(t *testing.T) {
	e := newEngine(t, nil)
	if err := e.m.Watch(metrics.Sources{Active: e.engine.Active, Attention: e.engine.Attention, DueBefore: e.store.DueBefore}); err != nil {
		t.Fatal(err)
	}
	no := e.refund(t, "r1")
	e.await(t, "r1", no, reservation.Succeeded)
	text := scrape(t, e.m)
	want(t, text, `refundd_refund_transitions_total{from="NEW",merchant="default",to="PROCESSING"}`, 1)
	want(t, text, `refundd_refund_transitions_total{from="PROCESSING",merchant="default",to="SUCCEEDED"}`, 1)
	want(t, text, `refundd_journal_events_total{type="reservation.registered"}`, 1)
	want(t, text, `refundd_journal_events_total{type="refund.requested"}`, 1)
	want(t, text, `refundd_journal_events_total{type="refund.provider_result"}`, 1)
	want(t, text, `refundd_provider_calls_total{merchant="_other",op="submit",outcome="SUCCEEDED"}`, 1)
	want(t, text, `refundd_provider_call_duration_seconds_count{op="submit"}`, 1)
	want(t, text, `refundd_actor_activations_total`, 1)
	want(t, text, `refundd_actors_active`, 1)
	want(t, text, `refundd_actor_passivations_total`, 0)
	want(t, text, `refundd_timers_overdue`, 0)
	if v := value(t, text, `refundd_journal_append_duration_seconds_count{result="ok"}`); v < 3 {
		t.Errorf("appends counted: %v", v)
	}
	for _, kind := range reservation.AttentionKinds {
		want(t, text, `refundd_refunds_attention{kind="`+kind+`"}`, 0)
	}

	// Passivation: after Close every actor has stopped.
	if err := e.close(); err != nil {
		t.Fatal(err)
	}
	text = scrape(t, e.m)
	want(t, text, `refundd_actors_active`, 0)
	want(t, text, `refundd_actor_passivations_total`, 1)
}

func TestStore_AttentionGauge(t *testing.T) {
	reject := func(op, _ string, _ int) (simprovider.Injected, bool) {
		if op == "submit" {
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "NOT_ENOUGH"}}, true
		}
		return simprovider.Injected{}, false
	}
	e := newEngine(t, reject)
	if err := e.m.Watch(metrics.Sources{Attention: e.engine.Attention}); err != nil {
		t.Fatal(err)
	}
	var nos []string
	for _, id := range []string{"a1", "a2", "a3"} {
		no := e.refund(t, id)
		e.await(t, id, no, reservation.Rejected)
		nos = append(nos, no)
	}
	text := scrape(t, e.m)
	want(t, text, `refundd_refunds_attention{kind="REJECTED"}`, 3)
	want(t, text, `refundd_refund_transitions_total{from="PROCESSING",merchant="default",to="REJECTED"}`, 3)
	want(t, text, `refundd_provider_calls_total{merchant="_other",op="submit",outcome="REJECTED"}`, 3)
	if _, _, err := e.engine.Abandon(t.Context(), "a2", "op", reservation.Abandon{RefundNo: nos[1], Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	text = scrape(t, e.m)
	want(t, text, `refundd_refunds_attention{kind="REJECTED"}`, 2)
	want(t, text, `refundd_refund_transitions_total{from="REJECTED",merchant="default",to="FAILED"}`, 1)
}

// countAttention pages through the index and stops at the cap.
func TestWatch_AttentionPagingAndCap(t *testing.T) {
	const total = 2500
	list := func(_ context.Context, kind, after string, limit int) ([]reservation.RefundRef, error) {
		if kind != "stuck" {
			return nil, nil
		}
		start := 0
		if after != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(after, "r/"))
			if err != nil {
				return nil, err
			}
			start = n + 1
		}
		var out []reservation.RefundRef
		for i := start; i < total && len(out) < limit; i++ {
			out = append(out, reservation.RefundRef{ReservationID: "r", RefundNo: strconv.Itoa(i)})
		}
		return out, nil
	}
	for _, tc := range []struct {
		cap  int
		want float64
	}{{0, total}, {1000, 1000}, {1200, 1200}, {5000, total}} {
		m := metrics.New(metrics.Options{NoRuntime: true, AttentionCap: tc.cap})
		if err := m.Watch(metrics.Sources{Attention: list}); err != nil {
			t.Fatal(err)
		}
		want(t, scrape(t, m), `refundd_refunds_attention{kind="stuck"}`, tc.want)
	}
}

func TestWatch_NotificationsWebhooksAndFailures(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true, Logger: quiet()})
	var failHooks bool
	err := m.Watch(metrics.Sources{
		NotificationsByMerchant: func() map[string]map[string]int64 {
			return map[string]map[string]int64{"": {"applied": 3, "probe": 1}}
		},
		Webhooks: func(context.Context) ([]webhook.EndpointLag, error) {
			if failHooks {
				return nil, errors.New("journal closed")
			}
			return []webhook.EndpointLag{{Name: "ledger", EventsBehind: 7, Parked: 2, OldestUndeliveredAge: 90 * time.Second, Delivered: 40, FailedAttempts: 5}}, nil
		},
		DueBefore: func(context.Context, time.Time, int) ([]reservation.Timer, error) {
			return []reservation.Timer{{ReservationID: "r", RefundNo: "n"}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(metrics.Sources{}); !errors.Is(err, metrics.ErrWatched) {
		t.Fatalf("second Watch: %v", err)
	}
	text := scrape(t, m)
	want(t, text, `refundd_notifications_total{merchant="_none",outcome="applied"}`, 3)
	want(t, text, `refundd_notifications_total{merchant="_none",outcome="probe"}`, 1)
	want(t, text, `refundd_webhook_events_behind{endpoint="ledger"}`, 7)
	want(t, text, `refundd_webhook_parked{endpoint="ledger"}`, 2)
	want(t, text, `refundd_webhook_oldest_undelivered_age_seconds{endpoint="ledger"}`, 90)
	want(t, text, `refundd_webhook_delivered_total{endpoint="ledger"}`, 40)
	want(t, text, `refundd_webhook_failed_attempts_total{endpoint="ledger"}`, 5)
	want(t, text, `refundd_timers_overdue`, 1)
	// A failing source leaves its metrics out; the rest is still served.
	failHooks = true
	text = scrape(t, m)
	want(t, text, `refundd_webhook_events_behind{endpoint="ledger"}`, -1)
	want(t, text, `refundd_notifications_total{merchant="_none",outcome="applied"}`, 3)
}

func TestObserveRequest_Labels(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	m.ObserveRequest("GET", "/v1/reservations/{id}", 200, 3*time.Millisecond)
	m.ObserveRequest("BREW", "", 404, time.Millisecond)
	text := scrape(t, m)
	want(t, text, `refundd_http_request_duration_seconds_count{code="200",method="GET",route="/v1/reservations/{id}"}`, 1)
	want(t, text, `refundd_http_request_duration_seconds_bucket{code="200",method="GET",route="/v1/reservations/{id}",le="0.0025"}`, 0)
	want(t, text, `refundd_http_request_duration_seconds_bucket{code="200",method="GET",route="/v1/reservations/{id}",le="0.005"}`, 1)
	want(t, text, `refundd_http_request_duration_seconds_count{code="404",method="OTHER",route="unmatched"}`, 1)
}

// Series are cached after their first observation: every observation
// still counts, from many goroutines at once.
func TestObserveRequest_Repeated(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				m.ObserveRequest("POST", "/v1/reservations", 201, time.Millisecond)
				m.ObserveRequest("POST", "/v1/reservations", 200+i%2, time.Second)
			}
		}()
	}
	wg.Wait()
	text := scrape(t, m)
	want(t, text, `refundd_http_request_duration_seconds_count{code="201",method="POST",route="/v1/reservations"}`, 300)
	want(t, text, `refundd_http_request_duration_seconds_count{code="200",method="POST",route="/v1/reservations"}`, 100)
	want(t, text, `refundd_http_request_duration_seconds_bucket{code="200",method="POST",route="/v1/reservations",le="0.5"}`, 0)
	want(t, text, `refundd_http_request_duration_seconds_bucket{code="201",method="POST",route="/v1/reservations",le="0.0025"}`, 200)
}

func TestObserveRateLimited(t *testing.T) {
	m := metrics.New(metrics.Options{Logger: quiet(), NoRuntime: true})
	m.ObserveRateLimited("token", "reader")
	m.ObserveRateLimited("token", "reader")
	m.ObserveRateLimited("notify", "")
	text := scrape(t, m)
	want(t, text, `refundd_http_requests_rate_limited_total{class="token",role="reader"}`, 2)
	want(t, text, `refundd_http_requests_rate_limited_total{class="notify",role=""}`, 1)
}

func TestObservePacing(t *testing.T) {
	m := metrics.New(metrics.Options{Logger: quiet(), NoRuntime: true})
	m.ObservePacing("sp", "create", 30*time.Millisecond, false)
	m.ObservePacing("sp", "create", 0, false)
	m.ObservePacing("sp", "query", 0, true)
	text := scrape(t, m)
	want(t, text, `refundd_provider_pacing_wait_seconds_count{account="sp",op="create"}`, 2)
	want(t, text, `refundd_provider_pacing_wait_seconds_bucket{account="sp",op="create",le="0.01"}`, 1)
	want(t, text, `refundd_provider_pacing_deferred_total{account="sp",op="query"}`, 1)
}

func TestObserveCommit(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	m.ObserveCommit(8, 4*time.Millisecond, 3*time.Millisecond, nil)
	m.ObserveCommit(1, time.Millisecond, 0, errors.New("disk full"))
	text := scrape(t, m)
	want(t, text, `refundd_journal_commit_batch_size_bucket{le="8"}`, 1)
	want(t, text, `refundd_journal_commit_batch_size_bucket{le="4"}`, 0)
	want(t, text, `refundd_journal_commit_duration_seconds_sum`, 0.004)
	want(t, text, `refundd_journal_sync_duration_seconds_sum`, 0.003)
	want(t, text, `refundd_journal_commit_errors_total`, 1)
}

// TestNew_BuildInfo: one refundd_build_info series, value 1, naming the
// build (the usual Prometheus pattern: join on it to label other series).
func TestNew_BuildInfo(t *testing.T) {
	v := version.Get()
	text := scrape(t, metrics.New(metrics.Options{NoRuntime: true}))
	want(t, text, fmt.Sprintf(`refundd_build_info{goversion=%q,revision=%q,version=%q}`, v.GoVersion, v.Revision, v.Version), 1)
}

func TestNew_RuntimeCollectors(t *testing.T) {
	text := scrape(t, metrics.New(metrics.Options{}))
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if !strings.Contains(text, "\n"+name+" ") {
			t.Errorf("%s missing", name)
		}
	}
}

func TestGauge_ReadAtScrapeAndRegisteredOnce(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true, Logger: quiet()})
	v := 3.0
	if err := m.Gauge("members", "Members.", func() float64 { return v }); err != nil {
		t.Fatal(err)
	}
	v = 5
	if out := scrape(t, m); !strings.Contains(out, "\nrefundd_members 5\n") {
		t.Errorf("scrape lacks refundd_members 5:\n%s", out)
	}
	if err := m.Gauge("members", "Members.", func() float64 { return 0 }); err == nil || !strings.Contains(err.Error(), "members gauge") {
		t.Errorf("registering refundd_members again: %v; want an error naming the gauge", err)
	}
}

func TestObserveReload(t *testing.T) {
	m := metrics.New(metrics.Options{Logger: quiet(), NoRuntime: true})
	text := scrape(t, m)
	want(t, text, `refundd_credentials_reload_total{result="invalid"}`, 0)
	m.ObserveReload("invalid")
	m.ObserveReload("ok")
	m.ObserveReload("ok")
	text = scrape(t, m)
	want(t, text, `refundd_credentials_reload_total{result="invalid"}`, 1)
	want(t, text, `refundd_credentials_reload_total{result="ok"}`, 2)
	want(t, text, `refundd_credentials_reload_total{result="restart_required"}`, 0)
}
