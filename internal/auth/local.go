package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LocalRoles are the roles AddLocal makes tokens for.
var LocalRoles = []Role{RoleService, RoleOperator}

// AddLocal adds local development tokens (one per LocalRoles role, named
// "local-ROLE") to into, from ROLE.token files in dir that only their owner
// may read. Missing files are made with new random tokens, so the next
// start reuses them; there is never a built-in shared secret.
func AddLocal(dir string, into *Tokens) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("local tokens: %w", err)
	}
	for _, role := range LocalRoles {
		path := filepath.Join(dir, string(role)+".token")
		tok, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			var t string
			if t, err = NewToken(); err == nil {
				tok = []byte(t)
				err = os.WriteFile(path, tok, 0o600)
			}
		}
		if err != nil {
			return fmt.Errorf("local tokens: %w", err)
		}
		if err := into.Add(role, "local-"+string(role), strings.TrimSpace(string(tok))); err != nil {
			return fmt.Errorf("local tokens %s: %w", path, err)
		}
	}
	return nil
}
