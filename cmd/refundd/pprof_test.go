package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestParseFlags_PprofLoopbackOnly(t *testing.T) {
	cases := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:6060", true},
		{"127.0.0.1:0", true},
		{"[::1]:6060", true},
		{"localhost:6060", true},
		{"0.0.0.0:6060", false},
		{":6060", false},
		{"10.0.0.1:6060", false},
		{"example.com:6060", false},
		{"127.0.0.1", false},
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			m := NewMain()
			m.Stdout, m.Stderr = io.Discard, io.Discard
			err := m.ParseFlags([]string{"--pprof", tc.addr}, testEnv)
			if (err == nil) != tc.ok {
				t.Fatalf("--pprof %s: err = %v, want ok = %v", tc.addr, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "--pprof") {
				t.Fatalf("error %q does not name the flag", err)
			}
		})
	}
}

func TestMain_PprofOffByDefaultAndServedWhenAsked(t *testing.T) {
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--provider", "memory"}, testEnv); err != nil {
		t.Fatal(err)
	}
	if m.Config.Pprof != "" {
		t.Fatalf("pprof on by default: %q", m.Config.Pprof)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Not on the API's address.
	resp, err := http.Get("http://" + m.Addr() + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatal("the API serves /debug/pprof/")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t) // for --pprof
	m = NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--provider", "memory", "--pprof", addr}, testEnv); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pprof: %d", resp.StatusCode)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/debug/pprof/cmdline"); err == nil {
		t.Fatal("pprof still served after Close")
	}
}
