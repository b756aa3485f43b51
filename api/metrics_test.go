package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/quarantine"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/tally"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal/journaltest"
)

// opsEnv is a real engine (journal in t.TempDir, eventstore, simulated
// provider, all behind the metrics decorators) behind the real handler with
// metrics, the timeline and, optionally, tokens.
type opsEnv struct {
	*testEnv
	m    *metrics.Metrics
	logs *syncBuffer
}

type opsOptions struct {
	fault  simprovider.Fault
	policy reservation.Policy
	tokens string // REFUNDD_TOKENS syntax; empty: no authentication
	// merchants configured (api.Options.Merchants); empty: the default one.
	merchants []string
	// webhookURL, if set, serves the event feed and a webhook dispatcher
	// with one endpoint "crm" posting there (two attempts, then parked).
	webhookURL string
	// quarantine, if set, serves the notification routes with no account
	// and this quarantine.
	quarantine *quarantine.Store
	// audit serves the audit head of the env's journal.
	audit bool
	// credentials, if set, answers GET /v1/admin/credentials.
	credentials func() api.CredentialsView
	// counters keeps the durable counters (internal/tally) in the env's
	// journal, counts provider calls and deliveries in them, and serves
	// GET /v1/totals, as refundd does.
	counters bool
}

// syncBuffer is a log sink that tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newOpsEnv(t *testing.T, o opsOptions) *opsEnv {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	m := metrics.New(metrics.Options{NoRuntime: true, Logger: log})
	db := journaltest.Open(t)
	store := eventstore.New(db)
	if o.policy.RefundNoPrefix == "" {
		o.policy.RefundNoPrefix = "T"
	}
	sim := simprovider.New(simprovider.Options{Fault: o.fault})
	var counted *tally.Store
	var provider actors.Provider = m.Provider(sim)
	if o.counters {
		var err error
		if counted, err = tally.Open(context.Background(), db, "test", nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = counted.Close() })
		provider = tally.CountProvider(provider, counted)
	}
	engine, err := actors.New(actors.Config{Store: m.Store(store), Provider: provider, Encode: simprovider.Encode, Logger: quietLogger(), Policy: o.policy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := engine.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	opts := api.Options{Logger: log, Metrics: m.Handler(), Observer: m, Timeline: store, Search: eventstore.Reader{DB: db}, List: eventstore.Reader{DB: db}, Merchants: o.merchants,
		Credentials: o.credentials}
	if counted != nil {
		opts.Tally, opts.Totals = counted, eventstore.Totals{DB: db}
	}
	if o.webhookURL != "" {
		var hooks webhook.Tally
		if counted != nil {
			hooks = counted
		}
		d, err := webhook.New(webhook.Config{DB: db, Logger: quietLogger(), MaxAttempts: 2, Tally: hooks,
			BackoffBase: time.Millisecond, BackoffMax: time.Millisecond,
			Endpoints: []webhook.Endpoint{{Name: "crm", URL: o.webhookURL, Secret: []byte("0123456789abcdef")}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- d.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-ran })
		opts.Events = &api.EventsConfig{Feed: feed.New(db), Webhooks: d, MaxWait: 5 * time.Second}
	}
	if o.quarantine != nil {
		opts.Notify = &api.NotifyConfig{Quarantine: o.quarantine}
	}
	if o.audit {
		opts.Audit = &api.AuditConfig{Journal: db}
	}
	if o.tokens != "" {
		var ts auth.Tokens
		if err := auth.ParseEnv(o.tokens, &ts); err != nil {
			t.Fatal(err)
		}
		opts.Auth = &ts
	}
	srv := api.New(engine, opts)
	if err := m.Watch(metrics.Sources{Active: engine.Active, Attention: engine.Attention, DueBefore: store.DueBefore}); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{handler: srv, engine: engine, sim: sim}
	e.srv = httptest.NewServer(e.handler)
	t.Cleanup(e.srv.Close)
	return &opsEnv{testEnv: e, m: m, logs: logs}
}

// metric returns one sample from GET /metrics (hdr as for do), or -1.
func (e *opsEnv) metric(t *testing.T, series string, hdr ...string) float64 {
	t.Helper()
	r := e.do(t, http.MethodGet, "/metrics", "", hdr...)
	if r.status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", r.status, r.body)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindSubmatch(r.body)
	if m == nil {
		return -1
	}
	var v float64
	if err := json.Unmarshal(m[1], &v); err != nil {
		t.Fatalf("%s: %q", series, m[1])
	}
	return v
}

func TestInstrument_RequestID(t *testing.T) {
	e := newOpsEnv(t, opsOptions{})
	generated := e.do(t, http.MethodGet, "/healthz", "").header.Get(api.HeaderRequestID)
	if !regexp.MustCompile(`^[0-9a-f]{24}$`).MatchString(generated) {
		t.Fatalf("generated request id %q", generated)
	}
	if other := e.do(t, http.MethodGet, "/healthz", "").header.Get(api.HeaderRequestID); other == generated {
		t.Fatal("request ids repeat")
	}
	for _, tc := range []struct{ sent, want string }{
		{"gw-7f3c2a1b-0001", "gw-7f3c2a1b-0001"},
		{"short", ""},                      // too short: replaced
		{"bad id\" level=ERROR msg=x", ""}, // could forge log fields: replaced
		{strings.Repeat("a", 129), ""},     // too long: replaced
		{"trace:00-4bf92f3577b34da6a3ce929d0e0e4736", "trace:00-4bf92f3577b34da6a3ce929d0e0e4736"},
	} {
		got := e.do(t, http.MethodGet, "/v1/nowhere", "", api.HeaderRequestID, tc.sent).header.Get(api.HeaderRequestID)
		if tc.want != "" && got != tc.want || tc.want == "" && (got == tc.sent || got == "") {
			t.Errorf("sent %q, answered %q", tc.sent, got)
		}
	}
}

// Every log line of a request carries its id, whatever path logged it.
func TestInstrument_RequestIDOnLogLines(t *testing.T) {
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	for _, tc := range []struct {
		name   string
		engine api.Engine
		msg    string
	}{
		{"error answer", brokenEngine{err: context.Canceled}, "request failed"},
		{"panic", brokenEngine{panic: true}, "panic serving request"},
	} {
		srv := httptest.NewServer(api.New(tc.engine, api.Options{Logger: log}))
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/reservations/r1", nil)
		id := "test-" + strings.ReplaceAll(tc.name, " ", "-")
		req.Header.Set(api.HeaderRequestID, id)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		srv.Close()
		if res.StatusCode != http.StatusInternalServerError {
			t.Fatalf("%s: status %d", tc.name, res.StatusCode)
		}
		found := false
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(line, `"msg":"`+tc.msg+`"`) && strings.Contains(line, `"request_id":"`+id+`"`) {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: no %q line with request_id %s in:\n%s", tc.name, tc.msg, id, logs.String())
		}
	}
}

func TestInstrument_MetricsByRouteAndCode(t *testing.T) {
	e := newOpsEnv(t, opsOptions{tokens: "service:" + tokService + ",operator:" + tokOperator})
	svc := bearer(tokService)
	if r := e.do(t, http.MethodPost, "/v1/reservations", registerBody("m1", 1000), svc...); r.status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	e.do(t, http.MethodGet, "/v1/reservations/m1", "", svc...)
	e.do(t, http.MethodGet, "/v1/reservations/m2", "", svc...)
	e.do(t, http.MethodGet, "/v1/reservations/m1", "") // no token
	e.do(t, http.MethodGet, "/no/such/path", "")
	e.do(t, http.MethodDelete, "/v1/reservations/m1", "", svc...)
	// /metrics itself needs a token unless --metrics-public.
	if r := e.do(t, http.MethodGet, "/metrics", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token: %d", r.status)
	}
	e.do(t, http.MethodGet, "/metrics", "", svc...) // the first scrape: it is measured after answering
	for series, want := range map[string]float64{
		`refundd_http_request_duration_seconds_count{code="201",method="POST",route="/v1/reservations"}`:     1,
		`refundd_http_request_duration_seconds_count{code="200",method="GET",route="/v1/reservations/{id}"}`: 1,
		`refundd_http_request_duration_seconds_count{code="404",method="GET",route="/v1/reservations/{id}"}`: 1,
		`refundd_http_request_duration_seconds_count{code="401",method="GET",route="/v1/reservations/{id}"}`: 1,
		`refundd_http_request_duration_seconds_count{code="404",method="GET",route="unmatched"}`:             1,
		`refundd_http_request_duration_seconds_count{code="405",method="DELETE",route="unmatched"}`:          1,
		`refundd_http_request_duration_seconds_count{code="401",method="GET",route="/metrics"}`:              1,
		`refundd_journal_events_total{type="reservation.registered"}`:                                        1,
		`refundd_actor_activations_total`:           2, // m1, and m2 which has no events
		`refundd_refunds_attention{kind="UNKNOWN"}`: 0,
	} {
		if got := e.metric(t, series, svc...); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}
