package api

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"github.com/refundd/refundd/api/console"
	"github.com/refundd/refundd/internal/logs"
)

// RequestObserver is told about every answered request; metrics.Metrics
// implements it. Calls come from many goroutines at once.
type RequestObserver interface {
	// ObserveRequest records one request: its method, the route template
	// that matched ("" when none did), the status sent and how long it
	// took.
	ObserveRequest(method, route string, status int, d time.Duration)
}

// HeaderRequestID carries the request id: taken from the request when it
// is sane (a gateway's), generated otherwise, and always sent back.
const HeaderRequestID = "X-Request-Id"

// operability registers the operator routes (metrics, the OpenAPI
// document, the console and its data) and returns the server's outer
// handler: request id and measurement around panic recovery and the
// router. New calls it once, before the notifier copies the logger.
func (s *Server) operability() http.Handler {
	s.log = slog.New(logs.NewHandler(s.log.Handler())) // request_id on every line of a request
	r := s.router
	if s.opts.Metrics != nil {
		r.Handle("/metrics", s.opts.Metrics).Methods(http.MethodGet)
	}
	r.HandleFunc("/v1/openapi.json", s.openAPI).Methods(http.MethodGet)
	r.HandleFunc("/v1/summary", s.summary).Methods(http.MethodGet)
	r.HandleFunc("/v1/whoami", s.whoami).Methods(http.MethodGet)
	if s.opts.Timeline != nil {
		r.HandleFunc("/v1/reservations/{id}/events", s.timeline).Methods(http.MethodGet)
	}
	if s.opts.Search != nil {
		r.HandleFunc("/v1/search", s.search).Methods(http.MethodGet)
	}
	if s.opts.Totals != nil {
		r.HandleFunc("/v1/totals", s.totals).Methods(http.MethodGet)
	}
	r.Handle("/console", http.RedirectHandler("/console/", http.StatusMovedPermanently)).Methods(http.MethodGet)
	r.PathPrefix("/console/").Handler(http.StripPrefix("/console", console.Handler())).Methods(http.MethodGet, http.MethodHead)
	return s.instrument(http.HandlerFunc(s.serve))
}

// instrument gives the request its id (header, context for logs), reports
// the route, status and duration to the observer and logs the request.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(HeaderRequestID)
		if !validRequestID(id) {
			id = newRequestID()
		}
		r, st := withState(r, id)
		// The value slice lives in the request's state: Header.Set would
		// allocate one.
		w.Header()[HeaderRequestID] = st.idHeader[:]
		obs := s.opts.Observer
		if obs == nil && s.opts.NoAccessLog {
			next.ServeHTTP(w, r)
			return
		}
		st.rec.ResponseWriter = w
		defer func() {
			status := st.rec.status
			if status == 0 {
				status = http.StatusOK // nothing written: net/http sends 200
			}
			d := time.Since(start)
			// st.route is the template of the route that matched (a
			// bounded label, unlike the path), set by dispatch; unknown
			// paths and methods keep "".
			if obs != nil {
				obs.ObserveRequest(r.Method, st.route, status, d)
			}
			if !s.opts.NoAccessLog {
				s.logRequest(r, st, status, d)
			}
		}()
		next.ServeHTTP(&st.rec, r)
	})
}

// logRequest writes the access log line of one answered request. The
// request id comes from the context (logs.Handler). Only what identifies
// the request goes in: never a body, a header value or a path (which
// holds ids the route template keeps out), and of the credentials only the
// principal they name.
func (s *Server) logRequest(r *http.Request, st *reqState, status int, d time.Duration) {
	ctx := r.Context()
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	var room [6]slog.Attr
	attrs := append(room[:0], slog.String("method", r.Method), slog.String("route", st.route),
		slog.Int("status", status), slog.Duration("duration", d))
	if st.hasPrincipal {
		attrs = append(attrs, slog.String("principal", s.principal(r)))
	}
	if s.merchant != "" {
		attrs = append(attrs, slog.String("mchid", s.merchant))
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
}

// validRequestID accepts ids a gateway might send (UUIDs, hex, base64url)
// and nothing that could forge log lines.
func validRequestID(id string) bool {
	if len(id) < 8 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported systems
	var h [24]byte
	hex.Encode(h[:], b[:])
	return string(h[:])
}

// statusWriter remembers the status a handler sent.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes flushes through for handlers that stream.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
