package lint

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/refundd/refundd"

// rule limits the non-test imports of the module's packages under one
// path. Only the imports of non-test files count ("go list" Imports, not
// TestImports or XTestImports): a test may build whatever it needs (an
// internal/audit test may run a whole actors.Engine), while the code that
// ships keeps the layering.
type rule struct {
	name string
	// under: the packages the rule covers (this path and the packages
	// below it), relative to the module.
	under string
	// exempt: covered packages the rule leaves alone, each with its reason.
	exempt map[string]string
	// allowed reports whether a covered package may import path (a full
	// import path).
	allowed func(path string) bool
}

// std reports whether path is in the standard library: its first element
// has no dot (every module path outside it does).
func std(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func project(rel string) string { return module + "/" + rel }

// within reports whether path is rel or a package below it.
func within(path, rel string) bool {
	p := project(rel)
	return path == p || strings.HasPrefix(path, p+"/")
}

var rules = []rule{
	{
		// The pure core: no IO, no driver, no third-party code. jsontext is
		// a pure helper (string escaping) the codec shares with the API.
		name:  "the core imports only the standard library and pure helpers",
		under: "internal/reservation",
		allowed: func(path string) bool {
			return std(path) || within(path, "internal/reservation") || path == project("internal/jsontext")
		},
	},
	{
		// The journal knows bytes and streams, not reservations: of the
		// project it may use only its own packages and the broadcast helper
		// that wakes its readers.
		name:  "the journal imports no project package but its own helpers",
		under: "journal",
		allowed: func(path string) bool {
			return !strings.HasPrefix(path, module+"/") || within(path, "journal") || path == project("internal/broadcast")
		},
	},
	{
		// Adapters and tools under internal/ talk in the core's types; the
		// driver (actors) sits above them and imports them, not the other
		// way round.
		name:  "packages under internal/ do not import the driver",
		under: "internal",
		exempt: map[string]string{
			// A test-support package: it builds a whole engine with its
			// journal and provider for the audit tests, as a test may.
			project("internal/audit/audittest"): "test support that runs an actors.Engine",
		},
		allowed: func(path string) bool { return !within(path, "actors") },
	},
}

// TestImportRules checks every rule against the module's packages, with
// and without the crashpoints build tag (which adds files).
func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	for _, tags := range []string{"", "crashpoints"} {
		imports := listImports(t, tags)
		for _, r := range rules {
			var bad []string
			for pkg, deps := range imports {
				if !within(pkg, r.under) || r.exempt[pkg] != "" {
					continue
				}
				for _, d := range deps {
					if !r.allowed(d) {
						bad = append(bad, strings.TrimPrefix(pkg, module+"/")+" imports "+d)
					}
				}
			}
			sort.Strings(bad)
			if len(bad) > 0 {
				t.Errorf("tags %q: %s; broken by:\n\t%s", tags, r.name, strings.Join(bad, "\n\t"))
			}
		}
	}
}

// listImports returns the non-test imports of every package of the module.
func listImports(t *testing.T, tags string) map[string][]string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", "list", "-tags="+tags, "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(imports) == 0 || imports[project("internal/reservation")] == nil {
		t.Fatalf("go list found no packages of the module (%d lines)", len(imports))
	}
	return imports
}

// TestRulesRefuse shows each rule refusing what it is for, so that a rule
// that allows everything cannot pass TestImportRules unnoticed.
func TestRulesRefuse(t *testing.T) {
	tests := []struct {
		rule    int
		path    string
		allowed bool
	}{
		{0, "time", true},
		{0, project("internal/jsontext"), true},
		{0, project("journal"), false},
		{0, project("internal/broadcast"), false},
		{0, "go.etcd.io/bbolt", false},
		{1, "go.etcd.io/bbolt", true},
		{1, project("journal/pgjournal"), true},
		{1, project("journal/internal/groupcommit"), true}, // the loop both journals share
		{1, project("internal/broadcast"), true},
		{1, project("internal/reservation"), false},
		{2, project("internal/reservation"), true},
		{2, project("actors"), false},
		{2, project("actors/cluster"), false},
		{2, project("actorsx"), true},
	}
	for _, tt := range tests {
		if got := rules[tt.rule].allowed(tt.path); got != tt.allowed {
			t.Errorf("rule %q allows %s = %v, want %v", rules[tt.rule].name, tt.path, got, tt.allowed)
		}
	}
}
