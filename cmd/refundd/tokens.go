package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/refundd/refundd/internal/auth"
)

// localTokens returns ts unless it is empty. Then it uses local development
// tokens under the data directory (auth.AddLocal) and prints where they
// are, never the tokens.
func (m *Main) localTokens(ts *auth.Tokens) (*auth.Tokens, error) {
	if ts.Len() > 0 {
		return ts, nil
	}
	dir := filepath.Join(m.Config.DataDir, "tokens")
	if err := auth.AddLocal(dir, ts); err != nil {
		return nil, err
	}
	svc := filepath.Join(dir, "service.token")
	fmt.Fprintf(m.Stdout, "no --tokens-file or REFUNDD_TOKENS: local tokens are in %s (service.token, operator.token), readable only by you\n", dir)
	// Quoted to paste into any shell: zsh refuses the URL's '?' bare.
	fmt.Fprintf(m.Stdout, "try: curl -s -H \"Authorization: Bearer $(cat %s)\" %s\n", shellQuote(svc), shellQuote("http://"+m.ln.Addr().String()+"/v1/refunds?state=UNKNOWN"))
	return ts, nil
}

// shellQuote quotes s as one word for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (m *Main) env(k string) string {
	if m.getenv != nil {
		return m.getenv(k)
	}
	return os.Getenv(k)
}
