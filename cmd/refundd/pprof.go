package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/refundd/refundd/internal/profiler"
)

// startPprof serves the profiler on its own listener, so its routes never
// appear on the API's address.
func (m *Main) startPprof(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof: listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: profiler.Handler(), ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)}
	m.pprof = srv
	m.serveBG("pprof server", func() error { return srv.Serve(ln) })
	m.log.Warn("profiler listening; turn --pprof off when done", "pprof", "http://"+ln.Addr().String()+"/debug/pprof/")
	return nil
}
