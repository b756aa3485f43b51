package main

import (
	"strconv"
	"strings"
	"testing"
)

// Two daemons of one test given the same port fail to start: the webhook
// failover test lost a run to it (automanaged://A:45991,A:45991). A port
// from the ephemeral range can be taken by any outgoing connection before
// refundd binds it: a crash test lost a run to that.
func TestFreeAddr_NeverTwice(t *testing.T) {
	seen := map[string]int{}
	for i := range 2000 {
		a := freeAddr(t)
		_, port, _ := strings.Cut(a, "127.0.0.1:")
		if n, err := strconv.Atoi(port); err != nil || n < fixedPortMin || n >= ephemeralLow() {
			t.Fatalf("freeAddr handed out %s, outside [%d, %d): an outgoing connection may take it", a, fixedPortMin, ephemeralLow())
		}
		if j, ok := seen[a]; ok {
			t.Fatalf("freeAddr handed out %s twice: calls %d and %d", a, j, i)
		}
		seen[a] = i
	}
}
