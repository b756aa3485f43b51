// Package auth holds refundd's bearer tokens and roles. Tokens are kept only
// as SHA-256 hashes and compared in constant time; a role grants a fixed set
// of permissions.
package auth

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/refundd/refundd/internal/reservation"
)

// Role is what a token may do.
type Role string

// Roles.
const (
	RoleService  Role = "service"  // the booking/payment system: register, request refunds, read
	RoleReader   Role = "reader"   // read-only, including the event feed
	RoleAuditor  Role = "auditor"  // read-only plus the audit head
	RoleOperator Role = "operator" // read, audit, and operator actions (reconcile, resubmit, abandon, resolve, webhooks, backup)
	RoleApprover Role = "approver" // read, and approve or reject refunds held for four-eyes approval
)

// Permission is one kind of access a route needs.
type Permission string

// Permissions.
const (
	PermRead    Permission = "read"
	PermWrite   Permission = "write"
	PermAudit   Permission = "audit"
	PermOperate Permission = "operate"
	// PermApprove approves or rejects refunds held for approval. Only the
	// approver role has it, and operators whose token line says
	// "approver" (ParseFile): approving is not an operator action.
	PermApprove Permission = "approve"
)

var grants = map[Role][]Permission{
	RoleService:  {PermRead, PermWrite},
	RoleReader:   {PermRead},
	RoleAuditor:  {PermRead, PermAudit},
	RoleOperator: {PermRead, PermAudit, PermOperate},
	RoleApprover: {PermRead, PermApprove},
}

// Roles lists every role.
func Roles() []Role { return []Role{RoleService, RoleReader, RoleAuditor, RoleOperator, RoleApprover} }

// Permissions lists every permission.
func Permissions() []Permission {
	return []Permission{PermRead, PermWrite, PermAudit, PermOperate, PermApprove}
}

// Can reports whether a role has a permission.
func (r Role) Can(p Permission) bool { return slices.Contains(grants[r], p) }

// Principal is who made a request. It is journaled with every command.
type Principal struct {
	Role Role
	Name string
	// Merchants, when not empty, limits the principal to the reservations
	// of these merchants; empty means every merchant (unscoped). It is not
	// journaled: String stays "role:name".
	Merchants []string
	// Approver grants PermApprove beside the role's own permissions (an
	// operator's token line saying "approver").
	Approver bool
}

// Can reports whether the principal has a permission: its role's, and
// PermApprove when its token makes it an approver.
func (p Principal) Can(perm Permission) bool {
	return p.Role.Can(perm) || p.Approver && perm == PermApprove
}

// Scoped reports whether the principal is limited to some merchants.
func (p Principal) Scoped() bool { return len(p.Merchants) > 0 }

// Sees reports whether the principal may know of a reservation of merchant
// m. It is the one rule of tenancy: the API hides what a principal does
// not see exactly as it hides what does not exist.
func (p Principal) Sees(m string) bool { return !p.Scoped() || slices.Contains(p.Merchants, m) }

// String is the form recorded in events: "role:name".
func (p Principal) String() string { return string(p.Role) + ":" + p.Name }

// ErrConfig is returned for a malformed token configuration.
var ErrConfig = errors.New("auth: invalid token configuration")

type entry struct {
	hash      [sha256.Size]byte
	principal Principal
}

// Tokens is the set of accepted tokens.
type Tokens struct {
	entries []entry
}

// Len is the number of configured tokens.
func (t *Tokens) Len() int { return len(t.entries) }

// Add accepts a token (given in clear, hashed here) for a role.
func (t *Tokens) Add(role Role, name, token string) error {
	if _, ok := grants[role]; !ok {
		return fmt.Errorf("%w: unknown role %q", ErrConfig, role)
	}
	if len(token) < 16 {
		return fmt.Errorf("%w: token for %s:%s is shorter than 16 characters", ErrConfig, role, name)
	}
	return t.addHash(Principal{Role: role, Name: name}, sha256.Sum256([]byte(token)))
}

func (t *Tokens) addHash(p Principal, h [sha256.Size]byte) error {
	role, name := p.Role, p.Name
	if !validName(name) {
		return fmt.Errorf("%w: name %q must be 1..64 of [0-9A-Za-z_.-]", ErrConfig, name)
	}
	for _, e := range t.entries {
		if e.hash == h {
			return fmt.Errorf("%w: the same token is configured twice (%s and %s:%s)", ErrConfig, e.principal, role, name)
		}
	}
	t.entries = append(t.entries, entry{hash: h, principal: p})
	return nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Authenticate returns the principal of a token. Every configured hash is
// compared, in constant time, so timing says nothing about which matched.
func (t *Tokens) Authenticate(token string) (Principal, bool) {
	h := sha256.Sum256([]byte(token))
	var found Principal
	ok := 0
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1 {
			found, ok = e.principal, 1
		}
	}
	return found, ok == 1 && token != ""
}

// Merchants lists the merchants that scoped tokens name, each once, so the
// wiring can check them against the configured ones.
func (t *Tokens) Merchants() []string {
	var out []string
	for _, e := range t.entries {
		for _, m := range e.principal.Merchants {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// ParseFile reads lines "role sha256-hex-of-token name [merchants=a,b]
// [approver]"; blank lines and lines starting with # are ignored. The
// optional merchants= field limits the token to those merchants'
// reservations; without it the token sees every merchant. The optional word
// approver lets an operator's token also approve and reject refunds held for
// approval (the approver role always may; other roles may not be given it).
// Errors name the line, never a token.
func ParseFile(r io.Reader, into *Tokens) error {
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || len(f) > 5 {
			return fmt.Errorf("%w: line %d: want \"role sha256-hex name [merchants=a,b] [approver]\"", ErrConfig, n)
		}
		raw, err := hex.DecodeString(f[1])
		if err != nil || len(raw) != sha256.Size {
			return fmt.Errorf("%w: line %d: the hash must be 64 hex digits (sha256 of the token)", ErrConfig, n)
		}
		role := Role(f[0])
		if _, ok := grants[role]; !ok {
			return fmt.Errorf("%w: line %d: unknown role %q", ErrConfig, n, f[0])
		}
		p := Principal{Role: role, Name: f[2]}
		for _, opt := range f[3:] {
			switch {
			case opt == "approver":
				if p.Approver {
					return fmt.Errorf("%w: line %d: approver is given twice", ErrConfig, n)
				}
				if role != RoleOperator {
					return fmt.Errorf("%w: line %d: only an operator's token may add approver (role %s)", ErrConfig, n, role)
				}
				p.Approver = true
			case p.Merchants != nil:
				return fmt.Errorf("%w: line %d: merchants= is given twice, or %q is not merchants= or approver", ErrConfig, n, limitField(opt))
			default:
				if p.Merchants, err = parseMerchants(opt); err != nil {
					return fmt.Errorf("%w: line %d: %w", ErrConfig, n, err)
				}
			}
		}
		var h [sha256.Size]byte
		copy(h[:], raw)
		if err := into.addHash(p, h); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return sc.Err()
}

// limitField cuts an unexpected field short for an error message (a
// misplaced token must not be echoed whole).
func limitField(s string) string {
	if len(s) > 12 {
		return s[:12] + "..."
	}
	return s
}

// parseMerchants reads "merchants=a,b": distinct merchant names, at least
// one.
func parseMerchants(field string) ([]string, error) {
	list, ok := strings.CutPrefix(field, "merchants=")
	if !ok || list == "" {
		return nil, errors.New("an optional field must be merchants=NAME[,NAME...] or approver")
	}
	var out []string
	for m := range strings.SplitSeq(list, ",") {
		switch {
		case !reservation.ValidMerchant(m):
			return nil, fmt.Errorf("merchant %q is not a valid merchant name", m)
		case slices.Contains(out, m):
			return nil, fmt.Errorf("merchant %q is named twice", m)
		}
		out = append(out, m)
	}
	return out, nil
}

// ParseEnv reads "role:token,role:token" (development and tests); each
// token is named after its role and position.
func ParseEnv(v string, into *Tokens) error {
	for i, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		role, token, ok := strings.Cut(part, ":")
		if !ok {
			return fmt.Errorf("%w: entry %d: want role:token", ErrConfig, i+1)
		}
		if err := into.Add(Role(role), fmt.Sprintf("%s-%d", role, i+1), token); err != nil {
			return err
		}
	}
	return nil
}

// NewToken returns a fresh random token.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// HashHex is the sha256 hex of a token, the form a tokens file holds.
func HashHex(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}
