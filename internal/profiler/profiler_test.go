package profiler

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCheckLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		ok      bool
		notLoop bool // the error is ErrNotLoopback (else: not host:port)
	}{
		{"127.0.0.1:6060", true, false},
		{"127.0.0.2:0", true, false},
		{"[::1]:6060", true, false},
		{"localhost:6060", true, false},
		{"0.0.0.0:6060", false, true},
		{":6060", false, true},
		{"10.0.0.1:6060", false, true},
		{"example.com:6060", false, true},
		{"127.0.0.1", false, false},
	} {
		err := CheckLoopback(tc.addr)
		if (err == nil) != tc.ok || errors.Is(err, ErrNotLoopback) != tc.notLoop {
			t.Errorf("CheckLoopback(%q) = %v; want ok %v, ErrNotLoopback %v", tc.addr, err, tc.ok, tc.notLoop)
		}
	}
}

func TestHandler_ServesOnlyTheProfiler(t *testing.T) {
	h := Handler()
	for path, want := range map[string]int{"/debug/pprof/": 200, "/debug/pprof/cmdline": 200, "/": 404, "/v1/refunds": 404} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d; want %d", path, rec.Code, want)
		}
	}
}
