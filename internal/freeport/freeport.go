// Package freeport picks loopback ports for servers that must be given
// their address before they bind it: test daemons that restart on the same
// address (so WeChat's notify_url stays valid) and cluster nodes whose
// peers are told each other's ports up front.
//
// A port from the kernel's ephemeral range is a poor pick: between the
// pick and the bind, any outgoing connection on the machine may be given
// it as its own port. A crash test failed CI with "bind: address already
// in use" that way, so ports come from below the range.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Min is the lowest port handed out: above the well-known and most
// registered services' ports.
const Min = 10000

// ErrNone is returned when no free port was found below the ephemeral
// range after many tries.
var ErrNone = errors.New("freeport: no free port below the ephemeral range")

// Picker hands out loopback ports in [Min, EphemeralLow()), each one at
// most once: two servers of one test given the same port fail to start
// (the webhook failover test lost a run to that). Its zero value is ready.
type Picker struct {
	mu    sync.Mutex
	given map[int]bool
}

// Port returns a port that was free on 127.0.0.1 a moment ago and that
// p has not handed out before.
func (p *Picker) Port() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.given == nil {
		p.given = map[int]bool{}
	}
	lo := EphemeralLow()
	for range 1000 {
		port := Min + rand.IntN(lo-Min)
		if p.given[port] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // someone listens there
		}
		ln.Close()
		p.given[port] = true
		return port, nil
	}
	return 0, ErrNone
}

// Addr is Port as "127.0.0.1:port".
func (p *Picker) Addr() (string, error) {
	port, err := p.Port()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", port), nil
}

// EphemeralLow is the first port of the kernel's ephemeral range (Linux's
// /proc setting). Where it cannot be read, or leaves too few ports below
// it, 32768: Linux's default, and below other systems' ranges.
func EphemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo < Min+1000 {
		return 32768
	}
	return lo
}
