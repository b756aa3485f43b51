package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/refundd/refundd/internal/jsontext"
)

// maxBody caps every request body: refund requests are tiny.
const maxBody = 64 << 10

// decodeStrict reads exactly one JSON object into v: unknown fields, wrong
// types, trailing data and oversized bodies are errors naming the field.
// A small plain body of a request type with a fast path (fastjson.go) is
// decoded without encoding/json; anything else goes to encoding/json as it
// arrives.
func (s *Server) decodeStrict(w http.ResponseWriter, r *http.Request, v any) error {
	ct, err := singleHeader(r, "Content-Type")
	if err != nil {
		return err
	}
	if ct != "" && ct != "application/json" {
		// Media types are case-insensitive; "application/jsonp" is not JSON.
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return badRequest("Content-Type", "must be application/json")
		}
	}
	// The first fastBodyMax bytes are read as they are: they are within
	// maxBody.
	buf := s.getBuf()
	defer s.putBuf(buf)
	b, complete, err := readBody(buf.b, r.Body, fastBodyMax)
	buf.b = b
	if complete && decodeFlat(b, v) {
		return nil
	}
	// encoding/json reads what was read, then the rest of the body capped
	// at what maxBody leaves (or the error that stopped the read): the
	// same bytes and the same end as if it had read the body itself.
	var rest io.Reader
	switch {
	case complete:
		rest = errReader{io.EOF}
	case err != nil:
		rest = errReader{err}
	default:
		rest = http.MaxBytesReader(w, r.Body, maxBody-int64(len(b)))
	}
	return decodeJSON(io.MultiReader(bytes.NewReader(b), rest), v)
}

// decodeJSON is decodeStrict's decoding by encoding/json, which also takes
// a repeated member (the last wins) and a member named in another case
// ("AMOUNT"): a proxy or a check in front of refundd that reads the first,
// or matches names exactly, would see another amount than refundd refunds.
// So both are refused, by exactMembers, once the object has decoded.
func decodeJSON(body io.Reader, v any) error {
	var raw bytes.Buffer
	dec := json.NewDecoder(io.TeeReader(body, &raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return memberError(raw.Bytes(), err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return jsonError(err) // oversized, even if only by trailing space
		}
		return badRequest("body", "unexpected data after the JSON object")
	}
	return exactMembers(raw.Bytes(), v)
}

// exactMembers checks that the JSON object b, which decoded into the
// struct v, names each member once and exactly as v's json tags do, and
// that each value means what it says. encoding/json takes null as if the
// member were absent ("amount":null would refund everything refundable),
// and decodes a lone surrogate escape ("\ud800") or an invalid UTF-8 byte
// as U+FFFD, so the text kept is not the text sent: both are refused in
// every member. The fast path (scanFlat) takes neither.
func exactMembers(b []byte, v any) error {
	t := reflect.TypeOf(v)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	t = t.Elem()
	names := map[string]bool{}
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); tag != "" && tag != "-" {
			names[tag] = false
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return jsonError(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return jsonError(err)
		}
		key, _ := tok.(string)
		seen, known := names[key]
		switch {
		case !known:
			return badRequest(key, "unknown field (names are case-sensitive)")
		case seen:
			return badRequest(key, "given more than once")
		}
		names[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return jsonError(err)
		}
		switch {
		case string(val) == "null":
			return badRequest(key, msgNull)
		case val[0] == '"' && !jsontext.ValidString(val):
			return badRequest(key, msgInvalidText)
		case val[0] == '{':
			if err := objectMembers(key, val); err != nil {
				return err
			}
		}
	}
	return nil
}

// memberError is jsonError, naming the member of a map that has the wrong
// type: encoding/json names only the map ("metadata"), and keeps decoding
// after such an error, so the object is whole in b.
func memberError(b []byte, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && (te.Field == "metadata" || strings.HasPrefix(te.Field, "metadata.")) && te.Type.Kind() != reflect.Map {
		var members map[string]json.RawMessage
		if json.Unmarshal(b, &members) == nil && len(members["metadata"]) > 0 && members["metadata"][0] == '{' {
			if merr := objectMembers("metadata", members["metadata"]); merr != nil {
				return merr
			}
		}
	}
	return jsonError(err)
}

// objectMembers holds the members of an object-valued member (metadata, a
// map of strings) to exactMembers' rules, each named as name["key"]: a key
// given twice (encoding/json keeps the last), null, or text that is not
// what was sent (an invalid byte or lone surrogate, in a key or a value)
// is refused.
func objectMembers(name string, b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil { // {
		return jsonError(err)
	}
	seen := map[string]bool{}
	for dec.More() {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return jsonError(err)
		}
		key, _ := tok.(string)
		field := name + "[" + strconv.Quote(key) + "]"
		// The key as sent: what lies between the previous value and the
		// end of this token, less the comma and white space.
		raw := bytes.Trim(b[start:dec.InputOffset()], ", \t\r\n")
		switch {
		case !jsontext.ValidString(raw):
			return badRequest(name, "keys "+msgInvalidText)
		case seen[key]:
			return badRequest(field, "given more than once")
		}
		seen[key] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return jsonError(err)
		}
		switch {
		case string(val) == "null":
			return badRequest(field, msgNull)
		case val[0] != '"':
			return badRequest(field, "must be a JSON string")
		case !jsontext.ValidString(val):
			return badRequest(field, msgInvalidText)
		}
	}
	return nil
}

const (
	msgNull        = "must not be null: give a value or leave the member out"
	msgInvalidText = `must be valid UTF-8 text: an invalid byte, or a lone surrogate escape such as \ud800, has no character`
)

// isEmptyBody reports whether decodeStrict failed only because there was no
// body at all.
func isEmptyBody(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.field == "body" && ae.msg == msgNoObject
}

const msgNoObject = "a JSON object is required"

func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body" // the body itself is not an object
		}
		return badRequest(field, "must be a JSON "+jsonKind(te.Type.Kind().String()))
	case errors.As(err, &se):
		return badRequest("body", "malformed JSON")
	case errors.As(err, &mb):
		return &apiError{code: codeTooLarge, field: "body", msg: "request body too large"}
	case errors.Is(err, io.EOF):
		return badRequest("body", msgNoObject)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json quotes the name with %q.
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if u, uerr := strconv.Unquote(name); uerr == nil {
			name = u
		}
		if name == "" {
			return badRequest("body", `unknown field ""`)
		}
		return badRequest(name, "unknown field")
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
