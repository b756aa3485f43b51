// Package logs sets up refundd's structured logs on log/slog: JSON unless
// the output is a terminal, the id of the request being served on every
// line logged with that request's context, values of secret-looking
// attributes masked as a last line of defence (secrets are never passed to
// a logger on purpose), durations as Go duration strings, and each key once
// per line.
package logs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
)

// Output formats for New.
const (
	FormatAuto = "auto" // JSON, or text when the output is a terminal
	FormatJSON = "json"
	FormatText = "text"
)

// RequestIDKey is the attribute that carries the request id.
const RequestIDKey = "request_id"

// Masked replaces the value of a secret-looking attribute.
const Masked = "[masked]"

type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the request it serves.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id carried by ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// New returns a logger writing to w in format (FormatAuto, FormatJSON or
// FormatText) at level ("debug", "info", "warn", "error"), wrapped by
// NewHandler.
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("logs: level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case FormatAuto, "":
		if IsTerminal(w) {
			format = FormatText
		} else {
			format = FormatJSON
		}
	case FormatJSON, FormatText:
	default:
		return nil, fmt.Errorf("logs: format %q: want auto, json or text", format)
	}
	var h slog.Handler
	if format == FormatJSON {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(NewHandler(h)), nil
}

// IsTerminal reports whether w is a character device (a terminal), without
// any dependency beyond the standard library.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// Handler adds the request id from a record's context, masks
// secret-looking attributes, writes durations as Go duration strings
// ("1.5s"; slog's JSON handler would write integer nanoseconds) and keeps
// every key once per line: the first value given for a key wins, so two
// layers that each name a component, or a record repeating a key its
// logger carries, never make a line with a key twice (which JSON readers
// resolve differently).
type Handler struct {
	next slog.Handler
	// keys are those already on every line at the current group level:
	// the handler's own (time, level, msg) at the top, then those of With. Shared between handlers, so only ever appended to after
	// slices.Clip.
	keys []string
}

// builtinKeys are written by slog's handlers themselves, at the top level
// (source too, with HandlerOptions.AddSource, which New does not set).
var builtinKeys = []string{slog.TimeKey, slog.LevelKey, slog.MessageKey}

// NewHandler wraps next. Wrapping a *Handler again returns it unchanged, so
// layers that each make sure of the request id do not repeat it.
func NewHandler(next slog.Handler) slog.Handler {
	if h, ok := next.(*Handler); ok {
		return h
	}
	return &Handler{next: next, keys: slices.Clip(builtinKeys)}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler. It builds a new record rather than adding
// to r, whose attribute storage may be shared with the caller's copy.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	var room [24]string
	keys := append(room[:0], h.keys...)
	r.Attrs(func(a slog.Attr) bool {
		a.Value = a.Value.Resolve()
		if a.Key == "" && a.Value.Kind() == slog.KindGroup {
			// Rare: the general path, whose recursion costs allocations.
			var attrs []slog.Attr
			attrs, keys = appendAttr(attrs, slices.Clone(keys), a)
			out.AddAttrs(attrs...)
			return true
		}
		var ok bool
		if keys, ok = admit(keys, a); ok {
			out.AddAttrs(clean(a))
		}
		return true
	})
	if id := RequestID(ctx); id != "" && !slices.Contains(keys, RequestIDKey) {
		out.AddAttrs(slog.String(RequestIDKey, id))
	}
	return h.next.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	keys := slices.Clip(h.keys)
	var kept []slog.Attr
	for _, a := range attrs {
		kept, keys = appendAttr(kept, keys, a)
	}
	return &Handler{next: h.next.WithAttrs(kept), keys: slices.Clip(keys)}
}

// WithGroup implements slog.Handler. Inside the group, names start afresh.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &Handler{next: h.next.WithGroup(name)}
}

// appendAttr appends a, cleaned, to attrs unless keys (those already on
// the line at this level) hold its key, and returns both lists grown. The
// members of an inline group (empty key) are taken one by one, since slog
// writes them at this level.
func appendAttr(attrs []slog.Attr, keys []string, a slog.Attr) ([]slog.Attr, []string) {
	a.Value = a.Value.Resolve()
	if a.Key == "" && a.Value.Kind() == slog.KindGroup {
		for _, m := range a.Value.Group() {
			attrs, keys = appendAttr(attrs, keys, m)
		}
		return attrs, keys
	}
	keys, ok := admit(keys, a)
	if ok {
		attrs = append(attrs, clean(a))
	}
	return attrs, keys
}

// admit reports whether a (resolved, not an inline group) goes on the
// line, and returns keys with its key if so: not when keys hold its key
// already, nor when it is an empty group (which slog leaves out). It does
// not recurse, so that escape analysis can keep Handle's keys on the stack.
func admit(keys []string, a slog.Attr) ([]string, bool) {
	if a.Key != "" && slices.Contains(keys, a.Key) {
		return keys, false
	}
	if a.Value.Kind() == slog.KindGroup && len(a.Value.Group()) == 0 {
		return keys, false
	}
	if a.Key != "" {
		keys = append(keys, a.Key)
	}
	return keys, true
}

// clean masks a secret-looking attribute, writes a duration as a string,
// and cleans a group's members (each key once).
func clean(a slog.Attr) slog.Attr {
	if SecretKey(a.Key) {
		return slog.String(a.Key, Masked)
	}
	switch a.Value.Kind() {
	case slog.KindDuration:
		return slog.String(a.Key, a.Value.Duration().String())
	case slog.KindGroup:
		var members []slog.Attr
		var keys []string
		for _, m := range a.Value.Group() {
			members, keys = appendAttr(members, keys, m)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(members...)}
	}
	return a
}

// SecretKey reports whether an attribute or setting name looks like it
// holds a secret: it mentions a password, secret, token or API key and is
// not the name of a file holding one.
func SecretKey(name string) bool {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, "file") || strings.HasSuffix(n, "_path") || strings.HasSuffix(n, "-path") {
		return false
	}
	for _, s := range []string{"password", "passwd", "secret", "token", "authorization", "apikey", "api_key", "api-key",
		"apiv3key", "apiv3_key", "apiv3-key", "apiv2key", "apiv2_key", "apiv2-key", "private_key", "privatekey"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}
