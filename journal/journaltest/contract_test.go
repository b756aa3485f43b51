package journaltest

import "testing"

// The contract suite against the bbolt journal (the PostgreSQL run is in
// journal/pgjournal).
func TestContract_Bolt(t *testing.T) {
	RunContract(t, func(t *testing.T) Journal { return Open(t) })
}
