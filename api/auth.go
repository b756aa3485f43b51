package api

import (
	"net/http"
	"strings"

	"github.com/refundd/refundd/internal/auth"
)

// Error codes of authentication.
const (
	codeUnauthenticated = "unauthenticated"
	codeForbidden       = "forbidden"
)

// routePerms is the one table of who may call what, keyed by method and
// route template. A route missing here is refused to everyone (deny by
// default), so a new route cannot be exposed by forgetting it.
var routePerms = map[string]auth.Permission{
	"POST /v1/reservations":                                    auth.PermWrite,
	"GET /v1/reservations/{id}":                                auth.PermRead,
	"POST /v1/reservations/{id}/refunds":                       auth.PermWrite,
	"GET /v1/reservations/{id}/refunds/{refund_no}":            auth.PermRead,
	"POST /v1/reservations/{id}/refunds/{refund_no}/resubmit":  auth.PermOperate,
	"POST /v1/reservations/{id}/refunds/{refund_no}/abandon":   auth.PermOperate,
	"POST /v1/reservations/{id}/refunds/{refund_no}/reconcile": auth.PermOperate,
	"POST /v1/reservations/{id}/refunds/{refund_no}/resolve":   auth.PermOperate,
	"GET /v1/refunds":                                       auth.PermRead,
	"GET /v1/events":                                        auth.PermRead,
	"GET /v1/webhooks":                                      auth.PermRead,
	"GET /v1/webhooks/{endpoint}/parked":                    auth.PermRead,
	"POST /v1/webhooks/{endpoint}/parked/replay":            auth.PermOperate,
	"POST /v1/webhooks/{endpoint}/parked/{event_id}/replay": auth.PermOperate,
	"GET /v1/notify/stats":                                  auth.PermRead,
	"GET /v1/notify/quarantine":                             auth.PermOperate,
	"GET /v1/audit/head":                                    auth.PermAudit,
	"GET /v1/admin/backup":                                  auth.PermOperate,
	"GET /v1/summary":                                       auth.PermRead,
	"GET /v1/reservations/{id}/events":                      auth.PermRead,
	"GET /metrics":                                          auth.PermRead, // open with Options.PublicRoutes (--metrics-public)
}

// publicRoutes need no token: health for load balancers, and WeChat Pay's
// notifications, which are authenticated by signature and decryption.
var publicRoutes = map[string]bool{
	"GET /healthz":                        true,
	"GET /readyz":                         true,
	"POST /v1/notify/wechatpay/refund":    true,
	"POST /v1/notify/wechatpay/v2/refund": true,
	// The API description and the console's static files hold no data;
	// everything the console shows comes through the routes above.
	"GET /v1/openapi.json": true,
	"GET /console":         true,
	"GET /console/":        true,
	"HEAD /console/":       true,
}

// authorize authenticates the bearer token, checks the permission of the
// route (key is "METHOD /template") and records the principal in the
// request's state. It answers a refused request itself and returns false.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, st *reqState, key string) bool {
	if s.opts.Auth == nil {
		st.principal, st.hasPrincipal = auth.Principal{Role: auth.RoleOperator, Name: s.opts.Principal}, true
		return true
	}
	if publicRoutes[key] || s.opts.PublicRoutes[key] {
		return true
	}
	header, err := singleHeader(r, "Authorization")
	if err != nil {
		s.writeError(w, r, err)
		return false
	}
	token, ok := strings.CutPrefix(header, "Bearer ")
	p, valid := s.opts.Auth.Authenticate(strings.TrimSpace(token))
	if !ok || !valid {
		w.Header().Set("WWW-Authenticate", `Bearer realm="refundd"`)
		s.writeError(w, r, &apiError{code: codeUnauthenticated, msg: "a valid bearer token is required"})
		return false
	}
	perm, known := routePerms[key]
	if extra, ok := s.opts.RoutePerms[key]; ok {
		perm, known = extra, true
	}
	if !known {
		s.log.ErrorContext(r.Context(), "route missing from the permission table; refused", "route", key)
		s.writeError(w, r, &apiError{code: codeForbidden, msg: "no role may do this"})
		return false
	}
	if !p.Role.Can(perm) {
		s.writeError(w, r, &apiError{code: codeForbidden, msg: "role " + string(p.Role) + " may not do this"})
		return false
	}
	st.principal, st.hasPrincipal = p, true
	return true
}

// principal is who the request acts for, recorded with its events.
func (s *Server) principal(r *http.Request) string {
	if st := stateOf(r); st != nil && st.hasPrincipal && s.opts.Auth != nil {
		return st.principal.String()
	}
	return s.opts.Principal
}
