package main

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// GET /readyz needs no token, and its probe is an fsynced write to the
// journal's database: many requests share one write per interval, so that
// anyone reaching the port cannot make refundd write to disk at will.
func TestReadyz_ProbeWritesAreShared(t *testing.T) {
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	m.readyEvery = time.Hour // the interval does not pass during the test
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--provider", "memory"}, testEnv); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	ready := func() {
		t.Helper()
		resp, err := http.Get("http://" + m.Addr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/readyz: %d", resp.StatusCode)
		}
	}
	ready()
	// The probe writes the time of the write: it stays the first one's.
	first, err := m.db.Get(context.Background(), "health/ready-probe")
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		ready()
	}
	last, err := m.db.Get(context.Background(), "health/ready-probe")
	if err != nil {
		t.Fatal(err)
	}
	if string(last) != string(first) {
		t.Fatalf("201 readiness checks wrote the probe more than once: first %s, last %s", first, last)
	}
}
