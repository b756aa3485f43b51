package main

import "testing"

// Two daemons of one test given the same port fail to start: the webhook
// failover test lost a run to it (automanaged://A:45991,A:45991).
func TestFreeAddr_NeverTwice(t *testing.T) {
	seen := map[string]int{}
	for i := range 2000 {
		a := freeAddr(t)
		if j, ok := seen[a]; ok {
			t.Fatalf("freeAddr handed out %s twice: calls %d and %d", a, j, i)
		}
		seen[a] = i
	}
}
