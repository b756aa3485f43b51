package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/reservation"
)

// seenEngine records the reservation ids and principals the handlers pass.
type seenEngine struct {
	stubEngine
	mu   sync.Mutex
	seen []string
}

func (e *seenEngine) Get(_ context.Context, id string) (*reservation.State, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, "get "+id)
	return nil, reservation.ErrNotFound
}

func (e *seenEngine) Execute(ctx context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error) {
	e.mu.Lock()
	e.seen = append(e.seen, "execute "+id+" by "+by)
	e.mu.Unlock()
	return e.stubEngine.Execute(ctx, id, by, cmd)
}

func (e *seenEngine) last() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) == 0 {
		return ""
	}
	return e.seen[len(e.seen)-1]
}

type routeRecorder struct {
	mu     sync.Mutex
	routes []string
}

func (o *routeRecorder) ObserveRequest(method, route string, status int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.routes = append(o.routes, method+" "+route)
}

// The server routes by itself until Router() hands the router out, then
// through mux: either way handlers get their path variables and principal,
// the observer the route template, and what is added through Router() sees
// mux.Vars and mux.CurrentRoute.
func TestServer_RoutesBeforeAndAfterRouter(t *testing.T) {
	var ts auth.Tokens
	if err := ts.Add(auth.RoleService, "shop", "shop-token-0123456789"); err != nil {
		t.Fatal(err)
	}
	for _, exposed := range []bool{false, true} {
		eng := &seenEngine{}
		obs := &routeRecorder{}
		s := api.New(eng, api.Options{Logger: quietLogger(), Auth: &ts, Observer: obs,
			RoutePerms: map[string]auth.Permission{"GET /x/{name}": auth.PermRead}})
		var addedSaw, middlewareSaw string
		if exposed {
			r := s.Router()
			r.HandleFunc("/x/{name}", func(w http.ResponseWriter, req *http.Request) {
				tpl, _ := mux.CurrentRoute(req).GetPathTemplate()
				addedSaw = tpl + " " + mux.Vars(req)["name"]
				w.WriteHeader(http.StatusNoContent)
			}).Methods(http.MethodGet)
			r.Use(func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					if cur := mux.CurrentRoute(req); cur != nil {
						middlewareSaw, _ = cur.GetPathTemplate()
					}
					next.ServeHTTP(w, req)
				})
			})
		}
		do := func(method, path, body string) int {
			req := httptest.NewRequest(method, path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer shop-token-0123456789")
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Header().Get(api.HeaderRequestID) == "" {
				t.Errorf("%s %s: no request id", method, path)
			}
			return rec.Code
		}
		if got := do(http.MethodGet, "/v1/reservations/r-7", ""); got != http.StatusNotFound || eng.last() != "get r-7" {
			t.Errorf("exposed %v: GET answered %d, engine saw %q", exposed, got, eng.last())
		}
		if got := do(http.MethodPost, "/v1/reservations", `{"id":"r8","user_id":"u-r8","out_trade_no":"OTr8","amount":10000,"currency":"CNY"}`); got != http.StatusCreated || eng.last() != "execute r8 by service:shop" {
			t.Errorf("exposed %v: POST answered %d, engine saw %q", exposed, got, eng.last())
		}
		if got := do(http.MethodDelete, "/v1/reservations/r-7", ""); got != http.StatusMethodNotAllowed {
			t.Errorf("exposed %v: DELETE answered %d", exposed, got)
		}
		if exposed {
			if got := do(http.MethodGet, "/x/y", ""); got != http.StatusNoContent || addedSaw != "/x/{name} y" {
				t.Errorf("added route answered %d and saw %q", got, addedSaw)
			}
			if middlewareSaw != "/x/{name}" {
				t.Errorf("added middleware saw route %q", middlewareSaw)
			}
		}
		obs.mu.Lock()
		got := strings.Join(obs.routes, ", ")
		obs.mu.Unlock()
		want := "GET /v1/reservations/{id}, POST /v1/reservations, DELETE "
		if exposed {
			want += ", GET /x/{name}"
		}
		if got != want {
			t.Errorf("exposed %v: observed %q, want %q", exposed, got, want)
		}
	}
}
