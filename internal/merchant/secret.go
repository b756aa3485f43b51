package merchant

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Secret says where a secret is read from; the secret itself never appears
// in the configuration, so a merchants file can be reviewed, committed and
// logged. Exactly one of Env and File is set, or neither (no secret).
type Secret struct {
	// Env names an environment variable holding the secret.
	Env string
	// File is a file holding it (surrounding whitespace is dropped for
	// keys; a PEM file is used as is).
	File string
	// ifSet makes an unset or empty variable mean "no secret" rather than
	// an error: how today's REFUNDD_WECHATPAY_APIV2_KEY behaves. Only the
	// default merchant's settings use it; a file cannot ask for it.
	ifSet bool
}

// IsZero reports whether no source is named.
func (s Secret) IsZero() bool { return s.Env == "" && s.File == "" }

// String gives the reference as written in a file: env:NAME or file:PATH,
// "" for none. It never contains the secret.
func (s Secret) String() string {
	switch {
	case s.Env != "":
		return "env:" + s.Env
	case s.File != "":
		return "file:" + s.File
	}
	return ""
}

// ParseSecret reads a reference, env:NAME or file:PATH. Anything else is
// taken to be the secret itself and refused with ErrInlineSecret; the error
// does not repeat the value.
//
// NAME is an environment variable in the portable form, upper case:
// [A-Z_][A-Z0-9_]*. Requiring upper case also catches most APIv3 keys
// pasted after "env:" by mistake (they are mixed case).
func ParseSecret(ref string) (Secret, error) {
	src, rest, ok := strings.Cut(ref, ":")
	switch {
	case ok && src == "env":
		if !envName(rest) {
			return Secret{}, fmt.Errorf("%w: env: wants an upper-case variable name, [A-Z_][A-Z0-9_]*", ErrInvalid)
		}
		return Secret{Env: rest}, nil
	case ok && src == "file":
		if rest == "" {
			return Secret{}, fmt.Errorf("%w: file: wants a path", ErrInvalid)
		}
		if strings.ContainsAny(rest, "\n\r") || strings.Contains(rest, "-----BEGIN") {
			return Secret{}, fmt.Errorf("%w: file: holds key material, not a path", ErrInlineSecret)
		}
		return Secret{File: rest}, nil
	}
	return Secret{}, fmt.Errorf("%w: secrets are never written in the file; write env:NAME or file:PATH", ErrInlineSecret)
}

func envName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// resolve makes a relative file reference relative to dir.
func (s Secret) resolve(dir string) Secret {
	s.File = resolvePath(dir, s.File)
	return s
}

func resolvePath(dir, p string) string {
	if p == "" || dir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
