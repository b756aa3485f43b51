package cluster

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
)

// Membership says how the nodes of a cluster find each other: Automanaged
// (nodes poll each other over HTTP; for trying things on one machine) or
// Etcd (a lease per node; production). ParseMembership reads the URL form.
type Membership interface {
	// String describes the membership for logs.
	String() string
	// open prepares what lives as long as the node (an etcd client).
	open(n *Node) (membership, error)
}

// membership is an opened Membership.
type membership interface {
	// provider returns a fresh provider for one incarnation of the node;
	// onLost is called (once, from any goroutine) when the incarnation can
	// no longer prove it is a member.
	provider(onLost func(reason string)) pcluster.ClusterProvider
	close() error
}

// Automanaged is protoactor-go's automanaged provider: every node serves
// its identity over HTTP on Port and polls all Hosts every Refresh. It
// needs no other service, which suits a local trial, but it has no lease:
// a node cut off from the others keeps its reservations, and nothing
// fences it but the journal (docs/CLUSTER.md).
type Automanaged struct {
	// Hosts are the host:port of every node's automanaged endpoint, this
	// node's included; required.
	Hosts []string
	// Port is this node's automanaged endpoint. protoactor-go binds it on
	// all interfaces. Required.
	Port int
	// Refresh is how often the nodes are polled; zero means 1s.
	Refresh time.Duration
}

func (a Automanaged) String() string {
	return "automanaged://" + strings.Join(a.Hosts, ",") + "?port=" + strconv.Itoa(a.Port)
}

func (a Automanaged) open(*Node) (membership, error) {
	if len(a.Hosts) == 0 || a.Port <= 0 || a.Port > 65535 {
		return nil, fmt.Errorf("%w: automanaged needs the hosts and this node's port", ErrMembership)
	}
	if a.Refresh <= 0 {
		a.Refresh = time.Second
	}
	return openedAutomanaged(a), nil
}

type openedAutomanaged Automanaged

func (a openedAutomanaged) provider(func(string)) pcluster.ClusterProvider {
	return automanaged.NewWithConfig(a.Refresh, a.Port, a.Hosts...)
}

func (openedAutomanaged) close() error { return nil }

// ParseMembership reads a membership URL:
//
//	etcd://HOST:PORT[,HOST:PORT...][/PREFIX][?ttl=5s]
//	automanaged://HOST:PORT[,HOST:PORT...]?port=PORT[&refresh=1s]
//
// For etcd the hosts are the etcd client endpoints; for automanaged they
// are every node's automanaged endpoint and port is this node's.
func ParseMembership(s string) (Membership, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMembership, err)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: credentials in the URL are not supported", ErrMembership)
	}
	var hosts []string
	for _, h := range strings.Split(u.Host, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			return nil, fmt.Errorf("%w: %q is not HOST:PORT", ErrMembership, h)
		}
		hosts = append(hosts, h)
	}
	q := u.Query()
	dur := func(name string) (time.Duration, error) {
		v := q.Get(name)
		if v == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%w: %s=%q is not a positive duration", ErrMembership, name, v)
		}
		return d, nil
	}
	switch u.Scheme {
	case "etcd":
		ttl, err := dur("ttl")
		if err != nil {
			return nil, err
		}
		e := Etcd{Endpoints: hosts, Prefix: strings.TrimRight(u.Path, "/"), TTL: ttl}
		return e, e.validate()
	case "automanaged":
		refresh, err := dur("refresh")
		if err != nil {
			return nil, err
		}
		port, err := strconv.Atoi(q.Get("port"))
		if err != nil {
			return nil, fmt.Errorf("%w: automanaged needs ?port=THIS_NODES_PORT", ErrMembership)
		}
		a := Automanaged{Hosts: hosts, Port: port, Refresh: refresh}
		if _, err := a.open(nil); err != nil {
			return nil, err
		}
		return a, nil
	}
	return nil, fmt.Errorf("%w: scheme %q (want etcd:// or automanaged://)", ErrMembership, u.Scheme)
}
