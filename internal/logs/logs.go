// Package logs sets up refundd's structured logs on log/slog: JSON unless
// the output is a terminal, the id of the request being served on every
// line logged with that request's context, and values of secret-looking
// attributes masked as a last line of defence (secrets are never passed to
// a logger on purpose).
package logs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
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

// Handler adds the request id from a record's context and masks
// secret-looking attributes before passing records on.
type Handler struct {
	next slog.Handler
}

// NewHandler wraps next. Wrapping a *Handler again returns it unchanged, so
// layers that each make sure of the request id do not repeat it.
func NewHandler(next slog.Handler) slog.Handler {
	if h, ok := next.(*Handler); ok {
		return h
	}
	return &Handler{next: next}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler. It builds a new record rather than adding
// to r, whose attribute storage may be shared with the caller's copy.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(mask(a))
		return true
	})
	if id := RequestID(ctx); id != "" {
		out.AddAttrs(slog.String(RequestIDKey, id))
	}
	return h.next.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = mask(a)
	}
	return &Handler{next: h.next.WithAttrs(masked)}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name)}
}

// mask replaces the value of a secret-looking attribute, in groups too.
func mask(a slog.Attr) slog.Attr {
	if SecretKey(a.Key) {
		return slog.String(a.Key, Masked)
	}
	if a.Value.Kind() == slog.KindGroup {
		attrs := a.Value.Group()
		masked := make([]any, len(attrs))
		for i, g := range attrs {
			masked[i] = mask(g)
		}
		return slog.Group(a.Key, masked...)
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
