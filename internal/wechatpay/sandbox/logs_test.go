package sandbox

import (
	"testing"

	"github.com/refundd/refundd/internal/logs/logstest"
)

// TestServer_LogLinesHaveEachKeyOnce wires the sandbox's logger the way
// cmd/refundd does (its own logger, already naming the component) and
// parses every line it writes: the sandbox names itself too, which wrote
// "component" twice.
func TestServer_LogLinesHaveEachKeyOnce(t *testing.T) {
	log, rec := logstest.New(t)
	f := newFixture(t, func(c *Config) { c.Logger = log.With("component", "sandbox") })
	f.order(t, "O1", 1000)
	decodeRefund(t, f.m.create("O1", "R1", 250, 1000, ""))
	f.m.query("R1")
	lines := rec.Lines(t) // fails on a duplicate key
	if len(lines) == 0 {
		t.Fatal("the sandbox logged nothing")
	}
	for _, l := range lines {
		if l.Str("component") != "sandbox" {
			t.Errorf("component %q, want the wiring's \"sandbox\": %v", l.Str("component"), l)
		}
	}
}
