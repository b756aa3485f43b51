package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Every port is below the ephemeral range, at or above Min, bindable, and
// never handed out twice by one Picker.
func TestPicker_NeverTwiceBelowEphemeral(t *testing.T) {
	var p Picker
	seen := map[int]int{}
	lo := EphemeralLow()
	for i := range 2000 {
		port, err := p.Port()
		if err != nil {
			t.Fatal(err)
		}
		if port < Min || port >= lo {
			t.Fatalf("Port() = %d, outside [%d, %d): an outgoing connection may take it", port, Min, lo)
		}
		if j, ok := seen[port]; ok {
			t.Fatalf("Port() handed out %d twice: calls %d and %d", port, j, i)
		}
		seen[port] = i
	}
	a, err := p.Addr()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("Addr() = %s, not bindable: %v", a, err)
	}
	ln.Close()
}

// A port someone listens on is not handed out.
func TestPicker_SkipsPortsInUse(t *testing.T) {
	var p Picker
	var held []net.Listener
	t.Cleanup(func() {
		for _, ln := range held {
			ln.Close()
		}
	})
	busy := map[int]bool{}
	for range 50 {
		port, err := p.Port()
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ln)
		busy[port] = true
	}
	// A fresh Picker knows nothing of the first one's ports.
	var q Picker
	for range 500 {
		port, err := q.Port()
		if err != nil {
			t.Fatal(err)
		}
		if busy[port] {
			t.Fatalf("Port() = %d, which a listener holds", port)
		}
	}
}
