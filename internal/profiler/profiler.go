// Package profiler serves Go's profiler (net/http/pprof) on a mux of its
// own, for an address that is never the API's: profiles show memory and
// the profiler can burn CPU.
package profiler

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
)

// ErrNotLoopback is returned by CheckLoopback for an address other
// machines could reach.
var ErrNotLoopback = errors.New("not a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT)")

// CheckLoopback accepts host:port only when host is a loopback IP or
// "localhost", so the profiler is never exposed beyond the machine.
func CheckLoopback(addr string) error {
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
	return fmt.Errorf("%q is %w", addr, ErrNotLoopback)
}

// Handler serves the profiler under /debug/pprof/ and nothing else.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
