package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/refundd/refundd/internal/auth"
)

// loadTokens builds the accepted tokens from --tokens-file and
// REFUNDD_TOKENS. With neither, it makes local development tokens (one
// service, one operator) in 0600 files under the data directory, reusing
// them on the next start, and prints where they are — never the tokens, and
// never a built-in shared secret.
func (m *Main) loadTokens() (*auth.Tokens, error) {
	c := m.Config
	ts := &auth.Tokens{}
	if c.TokensFile != "" {
		f, err := os.Open(c.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("--tokens-file: %w", err)
		}
		err = auth.ParseFile(f, ts)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("--tokens-file %s: %w", c.TokensFile, err)
		}
	}
	if v := m.env("REFUNDD_TOKENS"); v != "" {
		if err := auth.ParseEnv(v, ts); err != nil {
			return nil, fmt.Errorf("REFUNDD_TOKENS: %w", err)
		}
	}
	if ts.Len() > 0 {
		return ts, nil
	}
	dir := filepath.Join(c.DataDir, "tokens")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local tokens: %w", err)
	}
	for _, role := range []auth.Role{auth.RoleService, auth.RoleOperator} {
		path := filepath.Join(dir, string(role)+".token")
		tok, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			var t string
			if t, err = auth.NewToken(); err == nil {
				tok = []byte(t)
				err = os.WriteFile(path, tok, 0o600)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("local tokens: %w", err)
		}
		if err := ts.Add(role, "local-"+string(role), strings.TrimSpace(string(tok))); err != nil {
			return nil, fmt.Errorf("local tokens %s: %w", path, err)
		}
	}
	svc := filepath.Join(dir, "service.token")
	fmt.Fprintf(m.Stdout, "no --tokens-file or REFUNDD_TOKENS: local tokens are in %s (service.token, operator.token), readable only by you\n", dir)
	fmt.Fprintf(m.Stdout, "try: curl -s -H \"Authorization: Bearer $(cat %s)\" http://%s/v1/refunds?state=UNKNOWN\n", svc, m.ln.Addr())
	return ts, nil
}

func (m *Main) env(k string) string {
	if m.getenv != nil {
		return m.getenv(k)
	}
	return os.Getenv(k)
}
