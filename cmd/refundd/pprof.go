package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// loopbackAddr accepts host:port only when host is a loopback IP or
// "localhost": profiles show memory and the profiler can burn CPU, so it is
// never exposed beyond the machine.
func loopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT)", addr)
}

// startPprof serves net/http/pprof on its own listener and mux, so the
// profiler's routes never appear on the API's address.
func (m *Main) startPprof(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	m.pprof = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)}
	srv := m.pprof
	m.serveBG("pprof server", func() error { return srv.Serve(ln) })
	m.log.Warn("profiler listening; turn --pprof off when done", "pprof", "http://"+ln.Addr().String()+"/debug/pprof/")
	return nil
}
