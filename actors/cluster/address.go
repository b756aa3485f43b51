package cluster

import (
	"fmt"
	"net"
	"strconv"
)

// SplitAddress splits host:port into Config's Host and Port; port 0
// (pick one) is allowed.
func SplitAddress(addr string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", addr)
	}
	return host, port, nil
}
