package auth

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestTokens_AuthenticateAndRoles(t *testing.T) {
	var ts Tokens
	if err := ParseEnv("service:svc-token-0123456789,operator:op-token-0123456789", &ts); err != nil {
		t.Fatal(err)
	}
	file := "# comment\n\nreader " + HashHex("reader-token-0123456789") + " ledger\n" +
		"service " + HashHex("scoped-token-0123456789") + " hotels merchants=hotel-sh,hotel-bj\n"
	if err := ParseFile(strings.NewReader(file), &ts); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		token string
		ok    bool
		want  Principal
	}{
		{"svc-token-0123456789", true, Principal{Role: RoleService, Name: "service-1"}},
		{"op-token-0123456789", true, Principal{Role: RoleOperator, Name: "operator-2"}},
		{"reader-token-0123456789", true, Principal{Role: RoleReader, Name: "ledger"}},
		{"scoped-token-0123456789", true, Principal{Role: RoleService, Name: "hotels", Merchants: []string{"hotel-sh", "hotel-bj"}}},
		{"svc-token-012345678", false, Principal{}},
		{"", false, Principal{}},
	}
	for _, tc := range cases {
		p, ok := ts.Authenticate(tc.token)
		if ok != tc.ok || !reflect.DeepEqual(p, tc.want) {
			t.Errorf("Authenticate(%q) = %v %v, want %v %v", tc.token, p, ok, tc.want, tc.ok)
		}
	}
	perms := map[Role][]Permission{
		RoleService: {PermRead, PermWrite}, RoleReader: {PermRead},
		RoleAuditor: {PermRead, PermAudit}, RoleOperator: {PermRead, PermAudit, PermOperate},
		RoleApprover: {PermRead, PermApprove},
	}
	for _, r := range Roles() {
		for _, p := range Permissions() {
			want := false
			for _, q := range perms[r] {
				want = want || q == p
			}
			if r.Can(p) != want {
				t.Errorf("%s.Can(%s) = %v", r, p, !want)
			}
		}
	}
	if got := (Principal{Role: RoleService, Name: "booking", Merchants: []string{"a"}}).String(); got != "service:booking" {
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
	h := HashHex("t")
	for _, f := range []string{"service abc x", "service " + h + "", "root " + h + " x", "service " + h + " bad/name",
		"service " + h + " x merchants=", "service " + h + " x shops=a", "service " + h + " x merchants=a,a",
		"service " + h + " x merchants=a,,b", "service " + h + " x merchants=a/b", "service " + h + " x merchants=a extra",
		"reader " + h + " x approver", "service " + h + " x approver", "operator " + h + " x approver approver",
		"operator " + h + " x approver merchants=a merchants=b", "operator " + h + " x approver merchants=a extra"} {
		var ts Tokens
		err := ParseFile(strings.NewReader(f), &ts)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ParseFile(%q) = %v", f, err)
		}
	}
}

// TestPrincipal_Sees: an unscoped principal sees every merchant, a scoped
// one only its own.
func TestPrincipal_Sees(t *testing.T) {
	cases := []struct {
		p        Principal
		merchant string
		want     bool
	}{
		{Principal{Role: RoleReader, Name: "all"}, "hotel-sh", true},
		{Principal{Role: RoleReader, Name: "all"}, "default", true},
		{Principal{Role: RoleReader, Name: "sh", Merchants: []string{"hotel-sh"}}, "hotel-sh", true},
		{Principal{Role: RoleReader, Name: "sh", Merchants: []string{"hotel-sh"}}, "hotel-bj", false},
		{Principal{Role: RoleReader, Name: "sh", Merchants: []string{"hotel-sh"}}, "", false},
	}
	for _, tc := range cases {
		if got := tc.p.Sees(tc.merchant); got != tc.want {
			t.Errorf("%v (merchants %v).Sees(%q) = %v, want %v", tc.p, tc.p.Merchants, tc.merchant, got, tc.want)
		}
	}
	var ts Tokens
	file := "reader " + HashHex("a") + " a merchants=m1,m2\nreader " + HashHex("b") + " b merchants=m2,m3\nreader " + HashHex("c") + " c\n"
	if err := ParseFile(strings.NewReader(file), &ts); err != nil {
		t.Fatal(err)
	}
	if got := ts.Merchants(); !reflect.DeepEqual(got, []string{"m1", "m2", "m3"}) {
		t.Errorf("Merchants() = %v", got)
	}
}

// TestParseFile_Approver: an operator is an approver only when its token
// line says so; the approver role always is.
func TestParseFile_Approver(t *testing.T) {
	file := "operator " + HashHex("op-plain-0123456789") + " olga\n" +
		"operator " + HashHex("op-approver-0123456789") + " oscar approver\n" +
		"operator " + HashHex("op-scoped-0123456789") + " otto merchants=m1 approver\n" +
		"approver " + HashHex("approver-0123456789") + " carol\n"
	var ts Tokens
	if err := ParseFile(strings.NewReader(file), &ts); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token   string
		approve bool
		operate bool
	}{
		{"op-plain-0123456789", false, true},
		{"op-approver-0123456789", true, true},
		{"op-scoped-0123456789", true, true},
		{"approver-0123456789", true, false},
	} {
		p, ok := ts.Authenticate(tc.token)
		if !ok || p.Can(PermApprove) != tc.approve || p.Can(PermOperate) != tc.operate || p.Can(PermWrite) {
			t.Errorf("%s: %+v approve %v operate %v", tc.token, p, p.Can(PermApprove), p.Can(PermOperate))
		}
	}
	if p, _ := ts.Authenticate("op-scoped-0123456789"); !reflect.DeepEqual(p.Merchants, []string{"m1"}) || p.String() != "operator:otto" {
		t.Errorf("scoped approver %+v", p)
	}
}

// FuzzParseFile: the tokens file is outside input. ParseFile must not
// panic, every error wraps ErrConfig, and what it accepts has only valid
// roles and names, approver only on operators.
func FuzzParseFile(f *testing.F) {
	h := HashHex("t")
	for _, s := range []string{"", "# c\n", "operator " + h + " a approver\n", "service " + h + " s merchants=a,b\n",
		"approver " + h + " c\nreader " + HashHex("u") + " r merchants=x approver\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var ts Tokens
		if err := ParseFile(strings.NewReader(s), &ts); err != nil {
			if !errors.Is(err, ErrConfig) && !strings.Contains(err.Error(), "token too long") {
				t.Fatalf("error %v wraps no ErrConfig", err)
			}
			return
		}
		for _, e := range ts.entries {
			p := e.principal
			if _, ok := grants[p.Role]; !ok || !validName(p.Name) || p.Approver && p.Role != RoleOperator {
				t.Fatalf("accepted %+v", p)
			}
		}
	})
}
