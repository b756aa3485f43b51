// Package devetcd runs a single-member etcd server inside the process, for
// tests and the local cluster demo: cluster mode keeps its membership in
// etcd, and this spares a developer from installing one. Production uses
// a real etcd cluster (docs/CLUSTER.md).
package devetcd

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/refundd/refundd/internal/freeport"
)

// Options configure a Server.
type Options struct {
	// Dir holds etcd's data; required.
	Dir string
	// ClientAddr is the host:port clients connect to; empty means a free
	// port on 127.0.0.1.
	ClientAddr string
	// PeerAddr is the host:port of the (unused) peer listener; empty means
	// a free port on 127.0.0.1.
	PeerAddr string
	// StartTimeout bounds waiting for the server to be ready; zero means 30s.
	StartTimeout time.Duration
	// Ports gives the free ports for an empty ClientAddr or PeerAddr; nil
	// means a picker of this call. Tests that start other servers pass
	// theirs, so no two of them are given the same port.
	Ports *freeport.Picker
	// NoFsync skips fsyncing etcd's log, for a throwaway server in tests.
	// etcd renews leases only while its raft loop runs, and that loop waits
	// for each fsync: on a disk shared with fsync-heavy tests a stall of
	// most of a second makes the nodes fence themselves (rightly: their
	// etcd cannot confirm their lease), which is not what the tests test.
	// A production etcd needs a disk with fast fsync for the same reason.
	NoFsync bool
}

// Server is a running embedded etcd.
type Server struct {
	etcd     *embed.Etcd
	endpoint string
}

// ErrNotReady is returned when the server did not become ready in time.
var ErrNotReady = errors.New("devetcd: server not ready in time")

// Start starts a server and returns once it serves clients.
func Start(opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("devetcd: Options.Dir is required")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.Ports == nil {
		opts.Ports = &freeport.Picker{}
	}
	// Ports from below the ephemeral range (freeport): one the kernel
	// gave to Listen(":0") can be taken by any outgoing connection before
	// etcd binds it.
	var err error
	if opts.ClientAddr == "" {
		if opts.ClientAddr, err = opts.Ports.Addr(); err != nil {
			return nil, fmt.Errorf("devetcd: client address: %w", err)
		}
	}
	if opts.PeerAddr == "" {
		if opts.PeerAddr, err = opts.Ports.Addr(); err != nil {
			return nil, fmt.Errorf("devetcd: peer address: %w", err)
		}
	}
	cu := url.URL{Scheme: "http", Host: opts.ClientAddr}
	pu := url.URL{Scheme: "http", Host: opts.PeerAddr}
	cfg := embed.NewConfig()
	cfg.Dir = opts.Dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"stderr"}
	cfg.UnsafeNoFsync = opts.NoFsync
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("devetcd: start: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("devetcd: start: %w", err)
	case <-time.After(opts.StartTimeout):
		e.Close()
		return nil, ErrNotReady
	}
	return &Server{etcd: e, endpoint: cu.Host}, nil
}

// Endpoint is the host:port clients connect to.
func (s *Server) Endpoint() string { return s.endpoint }

// Close stops the server.
func (s *Server) Close() { s.etcd.Close() }
