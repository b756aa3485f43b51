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

// routeRule is what a route needs: a permission of the token's role, and
// how it treats a token limited to some merchants (scope.go).
type routeRule struct {
	perm  auth.Permission
	scope scopeRule
}

// routePerms is the one table of who may call what, keyed by method and
// route template. A route missing here is refused to everyone (deny by
// default), so a new route cannot be exposed by forgetting it. The scope
// says what a token limited to some merchants gets: scopeReservation and
// scopeRegister answer other merchants' ids as unknown ones, scopeFiltered
// leaves them out of lists and counts, scopeRefused answers 403 (routes
// about every merchant at once; also every route added through
// Options.RoutePerms).
var routePerms = map[string]routeRule{
	"POST /v1/reservations":                                         {auth.PermWrite, scopeRegister},
	"GET /v1/reservations":                                          {auth.PermRead, scopeFiltered},
	"GET /v1/reservations/{id}":                                     {auth.PermRead, scopeReservation},
	"POST /v1/reservations/{id}/refunds":                            {auth.PermWrite, scopeReservation},
	"GET /v1/reservations/{id}/refunds/{refund_no}":                 {auth.PermRead, scopeReservation},
	"POST /v1/reservations/{id}/refunds/{refund_no}/resubmit":       {auth.PermOperate, scopeReservation},
	"POST /v1/reservations/{id}/refunds/{refund_no}/abandon":        {auth.PermOperate, scopeReservation},
	"POST /v1/reservations/{id}/refunds/{refund_no}/reconcile":      {auth.PermOperate, scopeReservation},
	"POST /v1/reservations/{id}/refunds/{refund_no}/resolve":        {auth.PermOperate, scopeReservation},
	"POST /v1/reservations/{id}/refunds/{refund_no}/apply-abnormal": {auth.PermOperate, scopeReservation},
	"POST /v1/reservations/{id}/refunds/{refund_no}/approve":        {auth.PermApprove, scopeReservation},
	"POST /v1/reservations/{id}/refunds/{refund_no}/reject":         {auth.PermApprove, scopeReservation},
	"GET /v1/refunds":                                       {auth.PermRead, scopeFiltered},
	"GET /v1/events":                                        {auth.PermRead, scopeFiltered},
	"GET /v1/webhooks":                                      {auth.PermRead, scopeRefused},
	"GET /v1/webhooks/{endpoint}/parked":                    {auth.PermRead, scopeFiltered},
	"POST /v1/webhooks/{endpoint}/parked/replay":            {auth.PermOperate, scopeRefused},
	"POST /v1/webhooks/{endpoint}/parked/{event_id}/replay": {auth.PermOperate, scopeReservation},
	"GET /v1/notify/stats":                                  {auth.PermRead, scopeRefused},
	"GET /v1/notify/quarantine":                             {auth.PermOperate, scopeRefused},
	"GET /v1/audit/head":                                    {auth.PermAudit, scopeRefused},
	"GET /v1/admin/backup":                                  {auth.PermOperate, scopeRefused},
	"GET /v1/admin/archive/{file}":                          {auth.PermOperate, scopeRefused},
	"GET /v1/admin/credentials":                             {auth.PermOperate, scopeRefused},
	"POST /v1/admin/credentials/reload":                     {auth.PermOperate, scopeRefused},
	"GET /v1/summary":                                       {auth.PermRead, scopeFiltered},
	"GET /v1/totals":                                        {auth.PermRead, scopeFiltered},
	"GET /v1/whoami":                                        {auth.PermRead, scopeFiltered},
	"GET /v1/reservations/{id}/events":                      {auth.PermRead, scopeReservation},
	"GET /v1/search":                                        {auth.PermRead, scopeFiltered},
	"GET /metrics":                                          {auth.PermRead, scopeRefused}, // open with Options.PublicRoutes (--metrics-public)
}

// publicRoutes need no token: health for load balancers, and WeChat Pay's
// notifications, which are authenticated by signature and decryption.
var publicRoutes = map[string]bool{
	"GET /healthz":                                           true,
	"GET /readyz":                                            true,
	"POST /v1/notify/wechatpay/refund":                       true,
	"POST /v1/notify/wechatpay/v2/refund":                    true,
	"POST /v1/notify/wechatpay/accounts/{account}/refund":    true,
	"POST /v1/notify/wechatpay/accounts/{account}/v2/refund": true,
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
	rule, known := routePerms[key]
	if extra, ok := s.opts.RoutePerms[key]; ok {
		rule.perm, known = extra, true
	}
	if !known {
		s.log.ErrorContext(r.Context(), "route missing from the permission table; refused", "route", key)
		s.writeError(w, r, &apiError{code: codeForbidden, msg: "no role may do this"})
		return false
	}
	if !p.Can(rule.perm) {
		s.writeError(w, r, &apiError{code: codeForbidden, msg: "role " + string(p.Role) + " may not do this"})
		return false
	}
	if p.Scoped() && rule.scope == scopeRefused {
		s.writeError(w, r, errMerchantScope)
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
