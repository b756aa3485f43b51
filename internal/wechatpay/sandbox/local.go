package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Local is a sandbox serving on a free loopback port, its keys and books
// kept in one directory: what refundd's --provider sandbox runs in-process.
type Local struct {
	*Server
	Keys Keys
	URL  string // http://127.0.0.1:PORT

	http *http.Server
}

// StartLocal serves a sandbox on 127.0.0.1 with the keys in dir, generating
// and writing them for mchID the first time, and its state in
// dir/state.json. configure, if set, adjusts the Config built from the
// keys before the sandbox is created.
func StartLocal(dir, mchID string, configure func(*Config)) (*Local, error) {
	keys, err := LoadKeys(dir)
	if errors.Is(err, os.ErrNotExist) {
		if keys, err = GenerateKeys(mchID); err == nil {
			_, err = keys.WriteDir(dir, "")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox keys in %s: %w", dir, err)
	}
	cfg := keys.Config()
	cfg.StateFile = filepath.Join(dir, "state.json")
	if configure != nil {
		configure(&cfg)
	}
	sb, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sb.Close()
		return nil, fmt.Errorf("sandbox listener: %w", err)
	}
	l := &Local{Server: sb, Keys: keys, URL: "http://" + ln.Addr().String(),
		http: &http.Server{Handler: sb, ReadHeaderTimeout: 5 * time.Second}}
	go func() { _ = l.http.Serve(ln) }()
	return l, nil
}

// Close stops the sandbox, then its HTTP server (handlers a delay fault
// holds are released by the first).
func (l *Local) Close() {
	l.Server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.http.Shutdown(ctx)
}
