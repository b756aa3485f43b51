package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// maxBody caps every request body: refund requests are tiny.
const maxBody = 64 << 10

// decodeStrict reads exactly one JSON object into v: unknown fields, wrong
// types, trailing data and oversized bodies are errors naming the field.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return badRequest("Content-Type", "must be application/json")
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("body", "unexpected data after the JSON object")
	}
	return nil
}

func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &te):
		return badRequest(te.Field, "must be a JSON "+jsonKind(te.Type.Kind().String()))
	case errors.As(err, &se):
		return badRequest("body", "malformed JSON")
	case errors.As(err, &mb):
		return &apiError{code: codeTooLarge, field: "body", msg: "request body too large"}
	case errors.Is(err, io.EOF):
		return badRequest("body", "a JSON object is required")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "unknown field")
	}
	return badRequest("body", "malformed JSON")
}

func jsonKind(k string) string {
	switch k {
	case "int64", "int", "int32":
		return "integer"
	case "struct", "map":
		return "object"
	}
	return k
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
