package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWire_Exchanges checks what the hand-written client sends and how it
// reads answers net/http's server writes in different framings.
func TestWire_Exchanges(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/echo":
			w.Header().Set("X-Method", r.Method)
			w.Header().Set("X-Auth", r.Header.Get("Authorization"))
			w.Header().Set("X-Key", r.Header.Get("Idempotency-Key"))
			w.Header().Set("X-Type", r.Header.Get("Content-Type"))
			w.Header().Set("X-Query", r.URL.RawQuery)
			_, _ = w.Write(body)
		case "/chunked": // no Content-Length: several flushes
			for i := range 3 {
				_, _ = io.WriteString(w, strings.Repeat("x", 5000+i))
				w.(http.Flusher).Flush()
			}
		case "/close":
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"code":"conflict"}}`)
		}
	}))
	defer srv.Close()
	w := newWire(strings.TrimPrefix(srv.URL, "http://"), 5*time.Second, 4)
	defer w.close()
	ctx := context.Background()

	h := http.Header{"Idempotency-Key": {"k-1"}}
	for range 3 { // the same connection, kept alive
		status, raw, err := w.roundTrip(ctx, http.MethodPost, "/echo?wait=5s", h, "tok", []byte(`{"a":1}`))
		if err != nil || status != 200 || string(raw) != `{"a":1}` {
			t.Fatalf("echo: %d %q %v", status, raw, err)
		}
	}
	if n := len(w.idle); n != 1 {
		t.Fatalf("%d idle connections after three sequential requests, want 1", n)
	}

	// The headers as the server saw them, through the client's own API.
	c := newClient(srv.URL, "tok", 5*time.Second, 4, nil)
	defer c.close()
	if c.wire == nil {
		t.Fatal("an http:// target must use the wire client")
	}
	status, raw, err := c.wire.roundTrip(ctx, http.MethodGet, "/chunked", nil, "", nil)
	if err != nil || status != 200 || len(raw) != 15003 {
		t.Fatalf("chunked: %d, %d bytes, %v", status, len(raw), err)
	}
	status, raw, err = w.roundTrip(ctx, http.MethodPost, "/close", nil, "", []byte(`{}`))
	if err != nil || status != http.StatusConflict || errorCode(raw) != "conflict" {
		t.Fatalf("close: %d %q %v", status, raw, err)
	}
}

func TestWire_SendsHeaders(t *testing.T) {
	var got http.Header
	var method, query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, method, query = r.Header.Clone(), r.Method, r.URL.RawQuery
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	w := newWire(strings.TrimPrefix(srv.URL, "http://"), 5*time.Second, 1)
	defer w.close()
	status, _, err := w.roundTrip(context.Background(), http.MethodPost, "/v1/x?wait=1s",
		http.Header{"Idempotency-Key": {"k-9"}}, "secret", []byte(`{"b":2}`))
	if err != nil || status != http.StatusCreated {
		t.Fatalf("%d %v", status, err)
	}
	if method != http.MethodPost || query != "wait=1s" || got.Get("Authorization") != "Bearer secret" ||
		got.Get("Idempotency-Key") != "k-9" || got.Get("Content-Type") != "application/json" || got.Get("Content-Length") != "7" {
		t.Fatalf("server saw %s ?%s %v", method, query, got)
	}
}

// TestWire_RetriesOnceOnAStaleConnection: the server closes a kept-alive
// connection while it is idle; the next request goes out again on a new
// one instead of failing.
func TestWire_RetriesOnceOnAStaleConnection(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Start()
	defer srv.Close()
	w := newWire(strings.TrimPrefix(srv.URL, "http://"), 5*time.Second, 2)
	defer w.close()
	ctx := context.Background()
	if _, _, err := w.roundTrip(ctx, http.MethodGet, "/", nil, "", nil); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections() // the idle connection is now closed server side
	status, raw, err := w.roundTrip(ctx, http.MethodGet, "/", nil, "", nil)
	if err != nil || status != 200 || string(raw) != "ok" {
		t.Fatalf("after the server closed the idle connection: %d %q %v", status, raw, err)
	}
	if served.Load() != 2 {
		t.Fatalf("served %d requests, want 2", served.Load())
	}
}

func TestWire_CancelEndsARequestInFlight(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	w := newWire(strings.TrimPrefix(srv.URL, "http://"), time.Minute, 1)
	defer w.close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, _, err := w.roundTrip(ctx, http.MethodGet, "/", nil, "", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(w.idle) != 0 {
		t.Fatal("a connection with a request cut short went back to the idle pool")
	}
}
