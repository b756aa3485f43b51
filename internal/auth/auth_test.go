package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestTokens_AuthenticateAndRoles(t *testing.T) {
	var ts Tokens
	if err := ParseEnv("service:svc-token-0123456789,operator:op-token-0123456789", &ts); err != nil {
		t.Fatal(err)
	}
	file := "# comment\n\nreader " + HashHex("reader-token-0123456789") + " ledger\n"
	if err := ParseFile(strings.NewReader(file), &ts); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		token string
		ok    bool
		want  Principal
	}{
		{"svc-token-0123456789", true, Principal{RoleService, "service-1"}},
		{"op-token-0123456789", true, Principal{RoleOperator, "operator-2"}},
		{"reader-token-0123456789", true, Principal{RoleReader, "ledger"}},
		{"svc-token-012345678", false, Principal{}},
		{"", false, Principal{}},
	}
	for _, tc := range cases {
		p, ok := ts.Authenticate(tc.token)
		if ok != tc.ok || p != tc.want {
			t.Errorf("Authenticate(%q) = %v %v, want %v %v", tc.token, p, ok, tc.want, tc.ok)
		}
	}
	perms := map[Role][]Permission{
		RoleService: {PermRead, PermWrite}, RoleReader: {PermRead},
		RoleAuditor: {PermRead, PermAudit}, RoleOperator: {PermRead, PermAudit, PermOperate},
	}
	for _, r := range Roles() {
		for _, p := range []Permission{PermRead, PermWrite, PermAudit, PermOperate} {
			want := false
			for _, q := range perms[r] {
				want = want || q == p
			}
			if r.Can(p) != want {
				t.Errorf("%s.Can(%s) = %v", r, p, !want)
			}
		}
	}
	if got := (Principal{RoleService, "booking"}).String(); got != "service:booking" {
		t.Fatalf("String = %q", got)
	}
}

func TestParse_Errors(t *testing.T) {
	for _, v := range []string{"nobody:0123456789abcdefgh", "service", "service:short", "service:0123456789abcdefgh,reader:0123456789abcdefgh"} {
		var ts Tokens
		if err := ParseEnv(v, &ts); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseEnv(%q) = %v", v, err)
		}
	}
	for _, f := range []string{"service abc x", "service " + HashHex("t") + "", "root " + HashHex("t") + " x", "service " + HashHex("t") + " bad/name"} {
		var ts Tokens
		err := ParseFile(strings.NewReader(f), &ts)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ParseFile(%q) = %v", f, err)
		}
	}
}
