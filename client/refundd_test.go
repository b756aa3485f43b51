package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal"
)

// Tokens of the in-process refundd, one per role.
const (
	serviceToken  = "svc-token-0123456789"
	operatorToken = "ops-token-0123456789"
	readerToken   = "rdr-token-0123456789"
	// approverToken approves as finance; selfApproverToken approves under
	// the service's own name (shop), which four eyes refuse.
	approverToken     = "apr-token-0123456789"
	selfApproverToken = "apr-shop-token-0123456789"
)

// refunddOptions shape an in-process refundd.
type refunddOptions struct {
	// fault replaces the sandbox's answers (simprovider.Fault).
	fault simprovider.Fault
	// delay is the sandbox's time to success; zero succeeds at once.
	delay time.Duration
	// webhookURL and webhookSecret, if set, start a dispatcher with one
	// endpoint "orders" delivering there.
	webhookURL    string
	webhookSecret []byte
	// front, if set, wraps the API handler (fault injection in front of
	// the real server).
	front func(http.Handler) http.Handler
	// policy replaces the engine's (refund numbers "T..." by default).
	policy *reservation.Policy
}

// refundd is the real service in process: a bbolt journal, the actor
// engine over the memory provider, the event feed, webhooks, metrics and
// the API with bearer tokens, wired as cmd/refundd wires them.
type refundd struct {
	URL    string
	srv    *httptest.Server
	engine *actors.Engine
	db     *journal.DB
	stop   func()
}

func startRefundd(dir string, o refunddOptions) (*refundd, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := metrics.New(metrics.Options{Logger: quiet, NoRuntime: true})
	db, err := journal.Open(filepath.Join(dir, "refundd.db"), &journal.Options{Logger: quiet,
		OnCommit: func(ci journal.CommitInfo) { m.ObserveCommit(ci.Batch, ci.Duration, ci.Sync, ci.Err) }})
	if err != nil {
		return nil, err
	}
	var live atomic.Pointer[actors.Engine]
	sim := simprovider.New(simprovider.Options{Delay: o.delay, Fault: o.fault,
		Notify: func(no string, out reservation.Outcome) { notify(live.Load(), no, out) }})
	store := eventstore.New(db)
	policy := reservation.Policy{RefundNoPrefix: "T"}
	if o.policy != nil {
		policy = *o.policy
	}
	engine, err := actors.New(actors.Config{Store: m.Store(store), Provider: m.Provider(sim), Encode: simprovider.Encode,
		Logger: quiet, Policy: policy})
	if err != nil {
		db.Close()
		return nil, err
	}
	live.Store(engine)
	var tokens auth.Tokens
	for _, t := range []struct {
		role        auth.Role
		name, token string
	}{{auth.RoleService, "shop", serviceToken}, {auth.RoleOperator, "ops", operatorToken}, {auth.RoleReader, "dash", readerToken},
		{auth.RoleApprover, "finance", approverToken}, {auth.RoleApprover, "shop", selfApproverToken}} {
		if err := tokens.Add(t.role, t.name, t.token); err != nil {
			return nil, err
		}
	}
	opts := api.Options{Logger: quiet, Auth: &tokens, Metrics: m.Handler(), Observer: m, Timeline: store,
		Search: eventstore.Reader{DB: db}, List: eventstore.Reader{DB: db}, Audit: &api.AuditConfig{Journal: db},
		Credentials: func() api.CredentialsView {
			return api.CredentialsView{Accounts: []api.AccountCredentials{{Account: "default", MchID: "1900000001", APIv3Key: true,
				Keys: []api.CredentialKey{{Serial: "PUB_KEY_ID_01", Kind: api.KeyKindPublicKey, Source: api.KeySourceSandbox}}}}}
		},
		Notify: &api.NotifyConfig{Accounts: []api.NotifyAccount{{Name: "default", MchID: "1900000001"}}},
		Events: &api.EventsConfig{Feed: feed.New(db), MaxWait: 5 * time.Second}}
	hctx, stopHooks := context.WithCancel(context.Background())
	hooksDone := make(chan struct{})
	if o.webhookURL != "" {
		hooks, err := webhook.New(webhook.Config{DB: db, Logger: quiet, BackoffBase: 10 * time.Millisecond, MaxAttempts: 2,
			Endpoints: []webhook.Endpoint{{Name: "orders", URL: o.webhookURL, Secret: o.webhookSecret}}})
		if err != nil {
			stopHooks()
			return nil, err
		}
		opts.Events.Webhooks = hooks
		go func() { defer close(hooksDone); _ = hooks.Run(hctx) }()
	} else {
		close(hooksDone)
	}
	s := api.New(engine, opts)
	if err := m.Watch(metrics.Sources{Active: engine.Active, Attention: engine.Attention, DueBefore: store.DueBefore,
		NotificationsByMerchant: s.NotifyStats().ByMerchant}); err != nil {
		stopHooks()
		return nil, err
	}
	var h http.Handler = s
	if o.front != nil {
		h = o.front(s)
	}
	srv := httptest.NewServer(h)
	r := &refundd{URL: srv.URL, srv: srv, engine: engine, db: db}
	r.stop = func() {
		srv.Close()
		stopHooks()
		<-hooksDone
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = engine.Close(ctx)
		_ = db.Close()
	}
	return r, nil
}

// notify is cmd/refundd's sandbox notification path.
func notify(engine *actors.Engine, no string, o reservation.Outcome) {
	if engine == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := engine.LookupRefund(ctx, no)
	if err != nil {
		return
	}
	_, _, _ = engine.Execute(ctx, id, actors.ProviderPrincipal,
		reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceNotification, Outcome: o})
}

// newRefundd starts one for a test, stopped at its end.
func newRefundd(t testing.TB, o refunddOptions) *refundd {
	t.Helper()
	r, err := startRefundd(t.TempDir(), o)
	if err != nil {
		t.Fatalf("start refundd: %v", err)
	}
	t.Cleanup(r.stop)
	return r
}

// exampleRefundd starts one for an Example, in a temporary directory
// removed by the returned stop.
func exampleRefundd(o refunddOptions) (*refundd, func()) {
	dir, err := os.MkdirTemp("", "refundd-example-")
	if err != nil {
		panic(err)
	}
	r, err := startRefundd(dir, o)
	if err != nil {
		panic(fmt.Sprintf("start refundd: %v", err))
	}
	return r, func() { r.stop(); os.RemoveAll(dir) }
}
