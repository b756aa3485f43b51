package auth

import (
	"os"
	"path/filepath"
	"testing"
)

// Local tokens are made once, readable only by their owner, and reused.
func TestAddLocal_MakesThenReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tokens")
	var first Tokens
	if err := AddLocal(dir, &first); err != nil {
		t.Fatal(err)
	}
	for _, role := range LocalRoles {
		path := filepath.Join(dir, string(role)+".token")
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", path, fi.Mode().Perm())
		}
		tok, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var again Tokens
		if err := AddLocal(dir, &again); err != nil {
			t.Fatal(err)
		}
		for name, ts := range map[string]*Tokens{"first": &first, "again": &again} {
			if p, ok := ts.Authenticate(string(tok)); !ok || p.Role != role || p.Name != "local-"+string(role) {
				t.Errorf("%s start: %s.token authenticates as %+v, %v", name, role, p, ok)
			}
		}
	}
}
