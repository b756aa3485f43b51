package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/logs"
)

// reqState is what the server's layers learn about one request: its id,
// the route that matched, the route's variables and the principal. It is
// made once by instrument and carried in one context value. Each layer
// adding its own value would copy the request (r.WithContext) and allocate
// a context node; that was most of the API's cost per request.
type reqState struct {
	// rec (the measured writer when there is an Observer), idHeader (the
	// X-Request-Id value sent back) and match (the router's answer) live
	// here to share this allocation.
	rec      statusWriter
	idHeader [1]string
	match    mux.RouteMatch
	// route is the template of the matched route, "" until dispatch
	// matched one.
	route string
	// vars are the matched route's variables (mux.Vars without the copy).
	vars map[string]string
	// principal is who the request acts for; hasPrincipal is false until
	// authorize set it, and stays false on public routes.
	principal    auth.Principal
	hasPrincipal bool
}

type stateKey struct{}

// stateOf returns the request's state, or nil for a request that did not
// come through ServeHTTP.
func stateOf(r *http.Request) *reqState {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	return st
}

// pathVars returns the matched route's variables.
func pathVars(r *http.Request) map[string]string {
	if st := stateOf(r); st != nil && st.vars != nil {
		return st.vars
	}
	return mux.Vars(r)
}

// routeInfo is what authorize needs to know about one route, worked out
// once in New rather than for every request.
type routeInfo struct {
	tpl string
	// keys are "METHOD /template" for each method the route accepts, the
	// keys of the permission tables.
	keys []string
}

// indexRoutes records the template and permission keys of every route
// registered so far. New calls it last.
func (s *Server) indexRoutes() {
	s.routes = map[*mux.Route]*routeInfo{}
	_ = s.router.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return nil
		}
		info := &routeInfo{tpl: tpl}
		if methods, err := route.GetMethods(); err == nil {
			for _, m := range methods {
				info.keys = append(info.keys, m+" "+tpl)
			}
		}
		s.routes[route] = info
		return nil
	})
}

// routeOf returns the template of a matched route and the permission key
// for the request's method on it.
func (s *Server) routeOf(route *mux.Route, method string) (tpl, key string) {
	if info := s.routes[route]; info != nil {
		for _, k := range info.keys {
			if len(k) > len(method) && k[len(method)] == ' ' && strings.HasPrefix(k, method) {
				return info.tpl, k
			}
		}
		return info.tpl, method + " " + info.tpl
	}
	tpl, _ = route.GetPathTemplate()
	return tpl, method + " " + tpl
}

// dispatch routes the request. The router only matches: the route label,
// authorization and the refund pause run here in the order the router's
// middlewares did, and the matched handler is called with the request as
// it is, its variables and principal in the request state. Once Router()
// has handed the router out, anything may have been added to it that reads
// mux.Vars or mux.CurrentRoute, so from then on mux serves the request
// itself (matching it a second time).
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	st := stateOf(r)
	if st == nil || !s.router.Match(r, &st.match) {
		s.router.ServeHTTP(w, r)
		return
	}
	m := &st.match
	if m.MatchErr != nil {
		// No route, or not this method: the router's own answers, which
		// mux gives no middleware either.
		m.Handler.ServeHTTP(w, r)
		return
	}
	tpl, key := s.routeOf(m.Route, r.Method)
	st.route = tpl
	st.vars = m.Vars
	if !s.authorize(w, r, st, key) || s.rateLimited(w, r, st, key) || s.refundsPaused(w, r, tpl) {
		return
	}
	if s.exposed.Load() {
		s.router.ServeHTTP(w, r)
		return
	}
	m.Handler.ServeHTTP(w, r)
}

// withState starts the request's state: its id in the context for the
// logs, and the state itself.
func withState(r *http.Request, id string) (*http.Request, *reqState) {
	st := &reqState{}
	st.idHeader[0] = id
	ctx := context.WithValue(logs.WithRequestID(r.Context(), id), stateKey{}, st)
	return r.WithContext(ctx), st
}

// singleHeader returns the value of the header name (canonical), which has
// one meaning. Given twice it is refused: Header.Get reads the first line,
// while a proxy, gateway or log in front of refundd may read the last or
// join them, and would see another key, token or type than refundd acts on.
func singleHeader(r *http.Request, name string) (string, error) {
	switch vs := r.Header[name]; len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", badRequest(name, "header given more than once")
}
