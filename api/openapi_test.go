package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal"
)

// fullServer has every optional route family switched on, so the walk sees
// every route the API can have.
func fullServer(t *testing.T) *Server {
	t.Helper()
	return New(nopEngine{}, Options{
		Notify:   &NotifyConfig{Accounts: []NotifyAccount{{Name: "default", APIv2Key: []byte("k")}}},
		Events:   &EventsConfig{Feed: nopFeed{}, Webhooks: nopWebhooks{}},
		Metrics:  http.NotFoundHandler(),
		Timeline: nopTimeline{},
		Search:   nopFinder{},
		List:     nopLister{},
		Audit:    &AuditConfig{Journal: nopAudit{}},
		Totals:   nopTotals{},
	})
}

type nopTotals struct{}

func (nopTotals) Between(context.Context, time.Time, time.Time) (map[string]map[reservation.RefundState]eventstore.Total, error) {
	return nil, nil
}

type nopAudit struct{}

func (nopAudit) ChainHead(context.Context) (journal.Checkpoint, error) {
	return journal.Checkpoint{}, nil
}
func (nopAudit) LastCheckpoint(context.Context) (journal.Checkpoint, bool, error) {
	return journal.Checkpoint{}, false, nil
}
func (nopAudit) Epoch(context.Context) (uint64, error) { return 0, nil }
func (nopAudit) ReconcileRequired(context.Context) (*journal.RestoreInfo, error) {
	return nil, nil
}
func (nopAudit) Snapshot(context.Context) (*journal.Snapshot, error) { return nil, errors.New("none") }

type nopEngine struct{}

func (nopEngine) Execute(context.Context, string, string, reservation.Command) (*reservation.State, []reservation.Event, error) {
	return nil, nil, reservation.ErrNotFound
}
func (nopEngine) Get(context.Context, string) (*reservation.State, error) {
	return nil, reservation.ErrNotFound
}
func (nopEngine) Await(context.Context, string, func(*reservation.State) bool) (*reservation.State, error) {
	return nil, reservation.ErrNotFound
}
func (nopEngine) Abandon(context.Context, string, string, reservation.Abandon) (*reservation.State, []reservation.Event, error) {
	return nil, nil, reservation.ErrNotFound
}
func (nopEngine) RecordNotification(context.Context, string, reservation.Notification) ([]reservation.Event, error) {
	return nil, reservation.ErrNotFound
}
func (nopEngine) Attention(context.Context, string, string, int) ([]reservation.RefundRef, error) {
	return nil, nil
}
func (nopEngine) Active() int { return 0 }

type nopFeed struct{}

func (nopFeed) Read(context.Context, uint64, int, []string) ([]feed.Event, uint64, error) {
	return nil, 0, nil
}
func (nopFeed) Wait(context.Context, uint64) error   { return nil }
func (nopFeed) Last(context.Context) (uint64, error) { return 0, nil }

type nopWebhooks struct{}

func (nopWebhooks) Lag(context.Context) ([]webhook.EndpointLag, error) { return nil, nil }
func (nopWebhooks) Parked(context.Context, string) ([]webhook.ParkedEvent, error) {
	return nil, nil
}
func (nopWebhooks) Replay(context.Context, string, string) error   { return nil }
func (nopWebhooks) ReplayAll(context.Context, string) (int, error) { return 0, nil }
func (nopTimeline) Load(context.Context, string) ([]reservation.Event, uint64, error) {
	return nil, 0, nil
}

type nopTimeline struct{}

type nopFinder struct{}

type nopLister struct{}

func (nopLister) List(context.Context, reservation.ListFilter, reservation.ListOptions) (reservation.ListPage, error) {
	return reservation.ListPage{}, nil
}

func (nopFinder) Find(context.Context, []string, string, int) ([]reservation.Found, error) {
	return nil, nil
}

// openAPIDoc is the part of the document the tests read.
type openAPIDoc struct {
	OpenAPI    string                                 `json:"openapi"`
	Paths      map[string]map[string]openAPIOperation `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Enum []string `json:"enum"`
		} `json:"schemas"`
	} `json:"components"`
}

type openAPIOperation struct {
	OperationID string            `json:"operationId"`
	Security    *[]map[string]any `json:"security"`
	Permission  string            `json:"x-permission"`
	Responses   map[string]any    `json:"responses"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	return doc
}

// routes walks the router: "METHOD /template" for every route.
func routes(t *testing.T, s *Server) []string {
	t.Helper()
	var out []string
	err := s.Router().Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return nil
		}
		methods, err := route.GetMethods()
		if err != nil {
			t.Errorf("route %s has no methods: every route must name its methods", tpl)
			return nil
		}
		for _, m := range methods {
			out = append(out, m+" "+tpl)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func described(doc openAPIDoc) []string {
	var out []string
	for path, ops := range doc.Paths {
		for method := range ops {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

// notOperations are routes that are not operations of the API: the
// console's static files (a UI for people, which reads the API itself).
var notOperations = map[string]bool{
	"GET /console":   true,
	"GET /console/":  true,
	"HEAD /console/": true,
}

func TestOpenAPI_EveryRouteIsDescribed(t *testing.T) {
	doc := loadOpenAPI(t)
	have := described(doc)
	for _, r := range routes(t, fullServer(t)) {
		if slices.Contains(have, r) == notOperations[r] {
			if notOperations[r] {
				t.Errorf("route %s is not an API operation, but api/openapi.json describes it", r)
			} else {
				t.Errorf("route %s is not in api/openapi.json", r)
			}
		}
	}
}

// Every operation says what it does, how it fails (a 4XX answer) and
// shows an example of every body it takes or answers. Redocly's lint
// (redocly.yaml, run by scripts/test) checks the same and more; this runs
// without Node.js.
func TestOpenAPI_EveryOperationIsDocumented(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Description string `json:"description"`
			RequestBody *struct {
				Content map[string]map[string]any `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Ref     string                    `json:"$ref"`
				Content map[string]map[string]any `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	example := func(mt map[string]any) bool { return mt["example"] != nil || mt["examples"] != nil }
	for path, ops := range doc.Paths {
		for method, op := range ops {
			key := strings.ToUpper(method) + " " + path
			if strings.TrimSpace(op.Description) == "" {
				t.Errorf("%s has no description", key)
			}
			has4xx := false
			for code, r := range op.Responses {
				has4xx = has4xx || strings.HasPrefix(code, "4")
				for name, mt := range r.Content {
					if !example(mt) {
						t.Errorf("%s: answer %s (%s) has no example", key, code, name)
					}
				}
			}
			if !has4xx {
				t.Errorf("%s has no 4XX answer", key)
			}
			if op.RequestBody != nil {
				for name, mt := range op.RequestBody.Content {
					if !example(mt) {
						t.Errorf("%s: request body (%s) has no example", key, name)
					}
				}
			}
		}
	}
}

func TestOpenAPI_EveryDescribedRouteExists(t *testing.T) {
	doc := loadOpenAPI(t)
	have := routes(t, fullServer(t))
	for _, d := range described(doc) {
		if !slices.Contains(have, d) {
			t.Errorf("api/openapi.json describes %s, which the router does not have", d)
		}
	}
}

// The document's security agrees with the one permission table: public
// routes say security: [], the others name the permission auth.go checks.
func TestOpenAPI_PermissionsMatchTheAuthTable(t *testing.T) {
	doc := loadOpenAPI(t)
	s := fullServer(t)
	for path, ops := range doc.Paths {
		for method, op := range ops {
			key := strings.ToUpper(method) + " " + path
			public := op.Security != nil && len(*op.Security) == 0
			isPublic := publicRoutes[key] || s.opts.PublicRoutes[key]
			perm, ok := s.opts.RoutePerms[key] // route families may add their own (authorize reads both)
			if !ok {
				perm = routePerms[key].perm
			}
			if public != isPublic {
				t.Errorf("%s: public in the document %v, in auth.go %v", key, public, isPublic)
			}
			if !public && op.Permission != string(perm) {
				t.Errorf("%s: x-permission %q, auth.go %q", key, op.Permission, perm)
			}
			if op.OperationID == "" || len(op.Responses) == 0 {
				t.Errorf("%s: needs an operationId and responses", key)
			}
		}
	}
}

// The error codes the document lists are exactly the ones the API maps to
// a status.
func TestOpenAPI_ErrorCodes(t *testing.T) {
	doc := loadOpenAPI(t)
	enum := slices.Clone(doc.Components.Schemas["ErrorCode"].Enum)
	var codes []string
	for c := range statusOf {
		codes = append(codes, c)
	}
	sort.Strings(enum)
	sort.Strings(codes)
	if !slices.Equal(enum, codes) {
		t.Fatalf("ErrorCode enum %v\nstatusOf        %v", enum, codes)
	}
}

// Every $ref points at something that exists.
func TestOpenAPI_RefsResolve(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				var node any = doc
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := node.(map[string]any)
					node = m[part]
				}
				if node == nil {
					t.Errorf("dangling $ref %s", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}

func TestOpenAPI_Served(t *testing.T) {
	rec := httptest.NewRecorder()
	fullServer(t).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != string(openAPIDocument) {
		t.Fatalf("GET /v1/openapi.json: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
}
