package devetcd_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/refundd/refundd/internal/devetcd"
	"github.com/refundd/refundd/internal/freeport"
)

// A server started without addresses listens below the kernel's
// ephemeral range, where no outgoing connection can take its port between
// the pick and the bind; and it serves there.
func TestStart_PortBelowEphemeralRange(t *testing.T) {
	var ports freeport.Picker
	s, err := devetcd.Start(devetcd.Options{Dir: t.TempDir(), NoFsync: true, Ports: &ports})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, p, err := net.SplitHostPort(s.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	if port < freeport.Min || port >= freeport.EphemeralLow() {
		t.Fatalf("client port %d, want one in [%d, %d)", port, freeport.Min, freeport.EphemeralLow())
	}
	c, err := net.Dial("tcp", s.Endpoint())
	if err != nil {
		t.Fatalf("nothing serves at %s: %v", s.Endpoint(), err)
	}
	c.Close()
}
