package cluster

import "testing"

func TestSplitAddress(t *testing.T) {
	for _, tc := range []struct {
		addr string
		host string
		port int
		ok   bool
	}{
		{"127.0.0.1:0", "127.0.0.1", 0, true},
		{"node1.internal:7946", "node1.internal", 7946, true},
		{"[::1]:65535", "::1", 65535, true},
		{":7000", "", 7000, true},
		{"127.0.0.1:65536", "", 0, false},
		{"127.0.0.1:-1", "", 0, false},
		{"127.0.0.1:http", "", 0, false},
		{"127.0.0.1", "", 0, false},
	} {
		host, port, err := SplitAddress(tc.addr)
		if (err == nil) != tc.ok || host != tc.host || port != tc.port {
			t.Errorf("SplitAddress(%q) = %q, %d, %v; want %q, %d, ok %v", tc.addr, host, port, err, tc.host, tc.port, tc.ok)
		}
	}
}
