package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument describes every route of the HTTP API (OpenAPI 3.0);
// TestOpenAPI_* keep it and the router in step.
//
//go:embed openapi.json
var openAPIDocument []byte

// openAPI serves GET /v1/openapi.json.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPIDocument)
}
