package merchant

import (
	"github.com/refundd/refundd/internal/reservation"

	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// base is a valid file: a direct account and merchant, a service provider
// with two sub-merchants. Cases edit it.
const base = `[[accounts]]
name = "shop"
kind = "direct"
mchid = "1900000101"
serial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
private_key = "file:keys/shop.pem"
apiv3_key = "env:SHOP_APIV3_KEY"
public_key_id = "PUB_KEY_ID_0100000000000001"
public_key_file = "keys/shop_pub.pem"

[[accounts]]
name = "sp"
kind = "service_provider"
mchid = "1900000200"
base_url = "http://127.0.0.1:9000/wx"
serial = "7132d72a03e93cddf8c03bbd1f37eedf6ebde3c3"
private_key = "env:SP_PRIVATE_KEY"
apiv3_key = "file:/secrets/sp_v3"
apiv2_key = "env:SP_APIV2_KEY"
platform_cert_files = ["/certs/a.pem", "certs/b.pem"]

[[merchants]]
name = "shop"
kind = "direct"
account = "shop"
refund_prefix = "SH"
notify_url = "https://refundd.example.com/v1/notify/wechatpay/refund"

[[merchants]]
name = "inn-1"
kind = "sub_merchant"
account = "sp"
sub_mchid = "1900000201"
refund_prefix = "IA"

[[merchants]]
name = "inn-2"
kind = "sub_merchant"
account = "sp"
sub_mchid = "1900000202"
sub_appid = "wx8888888888888888"
refund_prefix = "IB"
[merchants.policy]
refund_spacing = "0s"
refund_window = "720h"
retry_max_attempts = 3
retry_backoff = "2s"
retry_backoff_max = "2m"
approve_above = 50000
approve_above_percent = 50
approve_non_service = true
approval_timeout = "4h"
`

func TestParse_Valid(t *testing.T) {
	r, err := Parse([]byte(base), "/etc/refundd")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(r.Accounts()); got != 2 {
		t.Fatalf("accounts: %d, want 2", got)
	}
	shop, _ := r.Account("shop")
	sp, _ := r.Account("sp")
	if shop.Kind != AccountDirect || shop.MchID != "1900000101" || shop.BaseURL != DefaultBaseURL {
		t.Errorf("shop account: %+v", shop)
	}
	if shop.PrivateKey != (Secret{File: "/etc/refundd/keys/shop.pem"}) || shop.APIv3Key != (Secret{Env: "SHOP_APIV3_KEY"}) || !shop.APIv2Key.IsZero() {
		t.Errorf("shop secrets: %v %v %v (relative paths are relative to the file's directory)", shop.PrivateKey, shop.APIv3Key, shop.APIv2Key)
	}
	if shop.PublicKeyFile != "/etc/refundd/keys/shop_pub.pem" || shop.PublicKeyID != "PUB_KEY_ID_0100000000000001" {
		t.Errorf("shop public key: %q %q", shop.PublicKeyID, shop.PublicKeyFile)
	}
	if sp.Kind != AccountServiceProvider || sp.BaseURL != "http://127.0.0.1:9000/wx" || sp.APIv2Key.String() != "env:SP_APIV2_KEY" {
		t.Errorf("sp account: %+v", sp)
	}
	if got := strings.Join(sp.PlatformCertFiles, ","); got != "/certs/a.pem,/etc/refundd/certs/b.pem" {
		t.Errorf("sp certificates: %s", got)
	}
	var names []string
	for _, m := range r.Merchants() {
		names = append(names, m.Name)
	}
	if got := strings.Join(names, ","); got != "shop,inn-1,inn-2" {
		t.Errorf("merchants in file order: %s", got)
	}
	inn2, _ := r.ByName("inn-2")
	if inn2.Kind != MerchantSub || inn2.Account != sp || inn2.SubMchID != "1900000202" || inn2.SubAppID != "wx8888888888888888" || inn2.RefundNoPrefix != "IB" {
		t.Errorf("inn-2: %+v", inn2)
	}
	o := inn2.Overrides
	if o.RefundSpacing == nil || *o.RefundSpacing != 0 || *o.RefundWindow != 720*time.Hour || *o.RetryMaxAttempts != 3 ||
		*o.RetryBackoff != 2*time.Second || *o.RetryBackoffMax != 2*time.Minute {
		t.Errorf("inn-2 overrides: %+v", o)
	}
	if *o.ApproveAbove != 50000 || *o.ApproveAbovePercent != 50 || !*o.ApproveNonService || *o.ApprovalTimeout != 4*time.Hour || o.ApproveAll != nil {
		t.Errorf("inn-2 approval overrides: %+v", o)
	}
	// Engine-wide approval settings the file does not name stay.
	p := inn2.Policy(reservation.Policy{ApproveAll: true, ApproveAbove: 1})
	if !p.ApproveAll || p.ApproveAbove != 50000 || p.ApproveAbovePercent != 50 || !p.ApproveNonService || p.ApprovalTimeout != 4*time.Hour {
		t.Errorf("inn-2 policy: %+v", p)
	}
	if inn1, _ := r.ByName("inn-1"); !inn1.Overrides.IsZero() || inn1.NotifyURL != "" {
		t.Errorf("inn-1 has no policy table and no notify_url: %+v", inn1)
	}
}

func TestParse_NoDirKeepsRelativePaths(t *testing.T) {
	r, err := Parse([]byte(base), "")
	if err != nil {
		t.Fatal(err)
	}
	shop, _ := r.Account("shop")
	if shop.PrivateKey.File != "keys/shop.pem" {
		t.Errorf("private key %q, want it as written", shop.PrivateKey.File)
	}
}

// edit replaces old with new in base, and fails the test if old is absent,
// so a case cannot silently test the valid file.
type edit struct{ old, new string }

type want struct {
	path     string
	line     int // 0: not checked
	sentinel error
	text     string
}

func TestParse_Errors(t *testing.T) {
	const shopPrefix = `refund_prefix = "SH"`
	cases := []struct {
		name  string
		doc   string // used as is when set
		edits []edit
		want  []want
	}{
		{name: "syntax", doc: "[[accounts]\nname = \"a\"\n",
			want: []want{{line: 1, sentinel: ErrSyntax, text: "expected ']]'"}}},
		{name: "wrong type", edits: []edit{{`mchid = "1900000101"`, `mchid = 1900000101`}},
			want: []want{{path: "accounts[0].mchid", line: 4, sentinel: ErrSyntax, text: "a TOML integer where a string belongs"}}},
		{name: "unknown top-level key", edits: []edit{{"[[accounts]]\nname = \"shop\"", "version = 2\n[[accounts]]\nname = \"shop\""}},
			want: []want{{path: "version", line: 1, sentinel: ErrUnknownKey}}},
		{name: "unknown keys are all reported, with lines and hints, and the rest is checked too",
			edits: []edit{
				{`private_key = "file:keys/shop.pem"`, `private_key_file = "keys/shop.pem"`},
				{`retry_backoff = "2s"`, `retry_backof = "2s"`},
			},
			want: []want{
				{path: "accounts[0].private_key_file", line: 6, sentinel: ErrUnknownKey, text: `write private_key = "file:PATH"`},
				{path: "merchants[2].policy.retry_backof", line: 47, sentinel: ErrUnknownKey},
				{path: "accounts[0].private_key", sentinel: ErrMissing},
			}},
		{name: "unknown key in the second entry", edits: []edit{{`base_url = "http://127.0.0.1:9000/wx"`, `base_uri = "http://127.0.0.1:9000/wx"`}},
			want: []want{{path: "accounts[1].base_uri", line: 15, sentinel: ErrUnknownKey}}},
		// The decoder names a key inside an inline table without its
		// table; the line still finds it.
		{name: "unknown key in an inline array", doc: "accounts = [{name = \"a\", knd = \"direct\"}]\n",
			want: []want{{path: "knd", line: 1, sentinel: ErrUnknownKey}, {path: "merchants", sentinel: ErrMissing},
				{path: "accounts[0].private_key"}, {path: "accounts[0].apiv3_key"}, {path: "accounts[0].kind"},
				{path: "accounts[0].mchid"}, {path: "accounts[0].serial"}, {path: "accounts[0].public_key_file"}, {path: "accounts[0].name"}}},
		{name: "unknown table", edits: []edit{{"[merchants.policy]", "[merchants.polcy]"}},
			want: []want{{path: "merchants[2].polcy", line: 43, sentinel: ErrUnknownKey}}},
		{name: "inline APIv3 key", edits: []edit{{`apiv3_key = "env:SHOP_APIV3_KEY"`, `apiv3_key = "0123456789abcdefghijABCDEFGHIJ01"`}},
			want: []want{{path: "accounts[0].apiv3_key", sentinel: ErrInlineSecret, text: "write env:NAME or file:PATH"}}},
		{name: "inline private key", edits: []edit{{`private_key = "env:SP_PRIVATE_KEY"`, `private_key = """-----BEGIN PRIVATE KEY-----
MIIB
-----END PRIVATE KEY-----"""`}},
			want: []want{{path: "accounts[1].private_key", sentinel: ErrInlineSecret}}},
		{name: "key material after file:", edits: []edit{{`apiv3_key = "file:/secrets/sp_v3"`, `apiv3_key = "file:-----BEGIN PRIVATE KEY-----"`}},
			want: []want{{path: "accounts[1].apiv3_key", sentinel: ErrInlineSecret}}},
		{name: "inline APIv2 key", edits: []edit{{`apiv2_key = "env:SP_APIV2_KEY"`, `apiv2_key = "secret"`}},
			want: []want{{path: "accounts[1].apiv2_key", sentinel: ErrInlineSecret}}},
		{name: "env name not upper case (a pasted key)", edits: []edit{{`"env:SHOP_APIV3_KEY"`, `"env:abcDEF0123456789abcDEF0123456789"`}},
			want: []want{{path: "accounts[0].apiv3_key", sentinel: ErrInvalid, text: "upper-case variable name"}}},
		{name: "empty env and file references", edits: []edit{{`"env:SHOP_APIV3_KEY"`, `"env:"`}, {`"file:keys/shop.pem"`, `"file:"`}},
			want: []want{{path: "accounts[0].private_key", sentinel: ErrInvalid}, {path: "accounts[0].apiv3_key", sentinel: ErrInvalid}}},
		{name: "secrets missing", edits: []edit{{`private_key = "file:keys/shop.pem"`, ``}, {`apiv3_key = "env:SHOP_APIV3_KEY"`, ``}},
			want: []want{{path: "accounts[0].private_key", sentinel: ErrMissing}, {path: "accounts[0].apiv3_key", sentinel: ErrMissing}}},
		{name: "account kind missing", edits: []edit{{`kind = "service_provider"`, ``}},
			want: []want{{path: "accounts[1].kind", sentinel: ErrMissing}}},
		{name: "account kind unknown", edits: []edit{{`kind = "service_provider"`, `kind = "partner"`}},
			want: []want{{path: "accounts[1].kind", sentinel: ErrInvalid, text: `"partner"`}}},
		{name: "mchid missing", edits: []edit{{`mchid = "1900000101"`, ``}},
			want: []want{{path: "accounts[0].mchid", sentinel: ErrMissing}}},
		{name: "mchid not digits", edits: []edit{{`mchid = "1900000101"`, `mchid = "19000001O1"`}},
			want: []want{{path: "accounts[0].mchid", sentinel: ErrInvalid}}},
		{name: "mchid too long", edits: []edit{{`mchid = "1900000101"`, `mchid = "` + strings.Repeat("1", 33) + `"`}},
			want: []want{{path: "accounts[0].mchid", sentinel: ErrInvalid}}},
		{name: "serial missing", edits: []edit{{`serial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"`, ``}},
			want: []want{{path: "accounts[0].serial", sentinel: ErrMissing}}},
		{name: "serial not hex", edits: []edit{{`5157F09EFDC096DE15EBE81A47057A7232F1B8E1`, `5157F09EFDC096DE15EBE81A47057A7232F1B8EZ`}},
			want: []want{{path: "accounts[0].serial", sentinel: ErrInvalid}}},
		{name: "base_url with a query", edits: []edit{{`base_url = "http://127.0.0.1:9000/wx"`, `base_url = "http://127.0.0.1:9000/wx?a=1"`}},
			want: []want{{path: "accounts[1].base_url", sentinel: ErrInvalid, text: "query"}}},
		{name: "base_url not http", edits: []edit{{`base_url = "http://127.0.0.1:9000/wx"`, `base_url = "ftp://x"`}},
			want: []want{{path: "accounts[1].base_url", sentinel: ErrInvalid}}},
		{name: "public key id without file", edits: []edit{{`public_key_file = "keys/shop_pub.pem"`, ``}},
			want: []want{{path: "accounts[0].public_key_file", sentinel: ErrMissing, text: "needs the key's file"},
				{path: "accounts[0].public_key_file", sentinel: ErrMissing, text: "cannot be verified"}}},
		{name: "public key file without id", edits: []edit{{`public_key_id = "PUB_KEY_ID_0100000000000001"`, ``}},
			want: []want{{path: "accounts[0].public_key_id", sentinel: ErrMissing}}},
		{name: "public key id malformed", edits: []edit{{`"PUB_KEY_ID_0100000000000001"`, `"0100000000000001"`}},
			want: []want{{path: "accounts[0].public_key_id", sentinel: ErrInvalid}}},
		{name: "no verification key", edits: []edit{{`platform_cert_files = ["/certs/a.pem", "certs/b.pem"]`, ``}},
			want: []want{{path: "accounts[1].public_key_file", sentinel: ErrMissing, text: "platform_cert_files"}}},
		{name: "certificate listed twice and empty", edits: []edit{{`["/certs/a.pem", "certs/b.pem"]`, `["/certs/a.pem", "", "/certs/a.pem"]`}},
			want: []want{{path: "accounts[1].platform_cert_files[1]", sentinel: ErrMissing},
				{path: "accounts[1].platform_cert_files[2]", sentinel: ErrConflict}}},
		{name: "public key and certificate as references or PEM", edits: []edit{
			{`public_key_file = "keys/shop_pub.pem"`, `public_key_file = "file:keys/shop_pub.pem"`},
			{`["/certs/a.pem", "certs/b.pem"]`, `["/certs/a.pem", """-----BEGIN CERTIFICATE-----
MIIB
-----END CERTIFICATE-----"""]`}},
			want: []want{{path: "accounts[0].public_key_file", sentinel: ErrInvalid, text: "plain path"},
				{path: "accounts[1].platform_cert_files[1]", sentinel: ErrInvalid, text: "holds a PEM"}}},
		{name: "account name not lower case", edits: []edit{{"name = \"sp\"\nkind", "name = \"SP\"\nkind"}, {`account = "sp"`, `account = "SP"`}, {`account = "sp"`, `account = "SP"`}},
			want: []want{{path: "accounts[1].name", sentinel: ErrInvalid, text: "[a-z0-9_-]"}}},
		{name: "account name missing", edits: []edit{{"name = \"sp\"\nkind", "kind"}},
			want: []want{{path: "accounts[1].name", sentinel: ErrMissing},
				{path: "merchants[1].account", sentinel: ErrInvalid, text: `no account is named "sp"`},
				{path: "merchants[2].account", sentinel: ErrInvalid}}},
		{name: "account name twice", edits: []edit{{"name = \"sp\"\nkind", "name = \"shop\"\nkind"}, {`account = "sp"`, `account = "shop"`}, {`account = "sp"`, `account = "shop"`}},
			want: []want{
				// The merchants meet the first account of the name: a direct one.
				{path: "merchants[1].account", sentinel: ErrInvalid, text: "needs a service_provider account"},
				{path: "merchants[2].account", sentinel: ErrInvalid},
				{path: "accounts[1].name", sentinel: ErrConflict, text: "accounts[0]"},
				{path: "accounts[1].name", sentinel: ErrInvalid, text: "used by no merchant"},
			}},
		{name: "mchid twice", edits: []edit{{`mchid = "1900000200"`, `mchid = "1900000101"`}},
			want: []want{{path: "accounts[1].mchid", sentinel: ErrConflict, text: "accounts[0]"}}},
		{name: "account used by no merchant", edits: []edit{{`account = "shop"`, `account = "sp"`}, {`kind = "direct"
account = "sp"`, `kind = "sub_merchant"
sub_mchid = "1900000203"
account = "sp"`}},
			want: []want{{path: "accounts[0].name", sentinel: ErrInvalid, text: "used by no merchant"}}},
		{name: "no merchants", doc: strings.Split(base, "[[merchants]]")[0],
			want: []want{{path: "merchants", sentinel: ErrMissing},
				{path: "accounts[0].name", sentinel: ErrInvalid}, {path: "accounts[1].name", sentinel: ErrInvalid}}},
		{name: "empty file", doc: "",
			want: []want{{path: "merchants", sentinel: ErrMissing}}},
		{name: "merchant name missing", edits: []edit{{"name = \"inn-1\"\n", ""}},
			want: []want{{path: "merchants[1].name", sentinel: ErrMissing}}},
		{name: "merchant name invalid", edits: []edit{{`name = "inn-1"`, `name = "-inn"`}},
			want: []want{{path: "merchants[1].name", sentinel: ErrInvalid}}},
		{name: "merchant name twice", edits: []edit{{`name = "inn-2"`, `name = "inn-1"`}},
			want: []want{{path: "merchants[2].name", sentinel: ErrConflict, text: "merchants[1]"}}},
		{name: "merchant kind missing", edits: []edit{{"kind = \"direct\"\naccount = \"shop\"", "account = \"shop\""}},
			want: []want{{path: "merchants[0].kind", sentinel: ErrMissing}}},
		{name: "merchant kind unknown", edits: []edit{{"kind = \"direct\"\naccount = \"shop\"", "kind = \"partner\"\naccount = \"shop\""}},
			want: []want{{path: "merchants[0].kind", sentinel: ErrInvalid}}},
		{name: "direct merchant with sub ids", edits: []edit{{shopPrefix, shopPrefix + "\nsub_mchid = \"1900000301\"\nsub_appid = \"wx1\""}},
			want: []want{{path: "merchants[0].sub_mchid", sentinel: ErrInvalid}, {path: "merchants[0].sub_appid", sentinel: ErrInvalid}}},
		{name: "sub-merchant without sub_mchid", edits: []edit{{`sub_mchid = "1900000201"`, ``}},
			want: []want{{path: "merchants[1].sub_mchid", sentinel: ErrMissing}}},
		{name: "sub_mchid not digits", edits: []edit{{`sub_mchid = "1900000201"`, `sub_mchid = "inn"`}},
			want: []want{{path: "merchants[1].sub_mchid", sentinel: ErrInvalid}}},
		{name: "sub_mchid is the provider's own", edits: []edit{{`sub_mchid = "1900000201"`, `sub_mchid = "1900000200"`}},
			want: []want{{path: "merchants[1].sub_mchid", sentinel: ErrInvalid, text: "provider's own mchid"}}},
		{name: "sub_mchid twice under one provider", edits: []edit{{`sub_mchid = "1900000202"`, `sub_mchid = "1900000201"`}},
			want: []want{{path: "merchants[2].sub_mchid", sentinel: ErrConflict, text: "merchants[1] already refunds for sub_mchid 1900000201"}}},
		{name: "sub_appid malformed", edits: []edit{{`sub_appid = "wx8888888888888888"`, `sub_appid = "wx 88"`}},
			want: []want{{path: "merchants[2].sub_appid", sentinel: ErrInvalid}}},
		{name: "two merchants on one direct account", edits: []edit{{"name = \"inn-1\"\nkind = \"sub_merchant\"\naccount = \"sp\"\nsub_mchid = \"1900000201\"",
			"name = \"shop-2\"\nkind = \"direct\"\naccount = \"shop\""}},
			want: []want{{path: "merchants[1].account", sentinel: ErrConflict, text: `merchants[0] already refunds for account "shop"`}}},
		{name: "account missing and unknown", edits: []edit{{`account = "shop"`, ``}, {`account = "sp"`, `account = "nope"`}},
			want: []want{{path: "merchants[0].account", sentinel: ErrMissing}, {path: "merchants[1].account", sentinel: ErrInvalid, text: `"nope"`},
				{path: "accounts[0].name", sentinel: ErrInvalid}}},
		{name: "direct merchant on a provider", edits: []edit{{`account = "shop"`, `account = "sp"`}},
			want: []want{{path: "merchants[0].account", sentinel: ErrInvalid, text: "a direct merchant needs a direct account"},
				{path: "accounts[0].name", sentinel: ErrInvalid}}},
		{name: "sub-merchant on a direct account", edits: []edit{{"kind = \"direct\"\naccount = \"shop\"", "kind = \"sub_merchant\"\naccount = \"shop\"\nsub_mchid = \"1900000301\""}},
			want: []want{{path: "merchants[0].account", sentinel: ErrInvalid, text: "a sub_merchant merchant needs a service_provider account"}}},
		{name: "refund prefix missing", edits: []edit{{shopPrefix, ``}},
			want: []want{{path: "merchants[0].refund_prefix", sentinel: ErrMissing}}},
		{name: "refund prefix malformed", edits: []edit{{shopPrefix, `refund_prefix = "S-H"`}},
			want: []want{{path: "merchants[0].refund_prefix", sentinel: ErrInvalid}}},
		{name: "refund prefix too long", edits: []edit{{shopPrefix, `refund_prefix = "` + strings.Repeat("S", 17) + `"`}},
			want: []want{{path: "merchants[0].refund_prefix", sentinel: ErrInvalid}}},
		{name: "refund prefix twice", edits: []edit{{`refund_prefix = "IB"`, `refund_prefix = "SH"`}},
			want: []want{{path: "merchants[2].refund_prefix", sentinel: ErrConflict, text: `merchants[0]'s "SH"`}}},
		{name: "refund prefix twice ignoring case", edits: []edit{{`refund_prefix = "IB"`, `refund_prefix = "ia"`}},
			want: []want{{path: "merchants[2].refund_prefix", sentinel: ErrConflict, text: "merchants[1]"}}},
		{name: "refund prefix starts another", edits: []edit{{`refund_prefix = "IA"`, `refund_prefix = "I"`}},
			want: []want{{path: "merchants[2].refund_prefix", sentinel: ErrConflict, text: `"IB" and merchants[1]'s "I"`}}},
		{name: "refund prefix started by a later one", edits: []edit{{`refund_prefix = "IB"`, `refund_prefix = "SHX"`}},
			want: []want{{path: "merchants[2].refund_prefix", sentinel: ErrConflict}}},
		{name: "notify_url with a query", edits: []edit{{`/v1/notify/wechatpay/refund"`, `/v1/notify/wechatpay/refund?m=shop"`}},
			want: []want{{path: "merchants[0].notify_url", sentinel: ErrInvalid}}},
		{name: "notify_url relative", edits: []edit{{`notify_url = "https://refundd.example.com/v1/notify/wechatpay/refund"`, `notify_url = "/v1/notify"`}},
			want: []want{{path: "merchants[0].notify_url", sentinel: ErrInvalid}}},
		{name: "policy values", edits: []edit{
			{`refund_spacing = "0s"`, `refund_spacing = "-1s"`}, {`refund_window = "720h"`, `refund_window = "1y"`},
			{`retry_max_attempts = 3`, `retry_max_attempts = 0`}, {`retry_backoff = "2s"`, `retry_backoff = "0s"`},
			{`retry_backoff_max = "2m"`, `retry_backoff_max = ""`}},
			want: []want{
				{path: "merchants[2].policy.refund_spacing", sentinel: ErrInvalid, text: "negative"},
				{path: "merchants[2].policy.refund_window", sentinel: ErrInvalid, text: `"1y" is not a Go duration`},
				{path: "merchants[2].policy.retry_backoff", sentinel: ErrInvalid, text: "positive"},
				{path: "merchants[2].policy.retry_backoff_max", sentinel: ErrInvalid},
				{path: "merchants[2].policy.retry_max_attempts", sentinel: ErrInvalid},
			}},
		{name: "approval values", edits: []edit{
			{`approve_above = 50000`, `approve_above = -1`}, {`approve_above_percent = 50`, `approve_above_percent = 101`},
			{`approval_timeout = "4h"`, `approval_timeout = "0s"`}},
			want: []want{
				{path: "merchants[2].policy.approval_timeout", sentinel: ErrInvalid, text: "positive"},
				{path: "merchants[2].policy.approve_above", sentinel: ErrInvalid, text: "fen"},
				{path: "merchants[2].policy.approve_above_percent", sentinel: ErrInvalid, text: "0..100"},
			}},
		{name: "approval flag of the wrong type", edits: []edit{{`approve_non_service = true`, `approve_non_service = "yes"`}},
			want: []want{{path: "merchants[2].policy.approve_non_service", sentinel: ErrSyntax}}},
		{name: "approval key misspelt", edits: []edit{{`approve_non_service = true`, `approve_operator = true`}},
			want: []want{{path: "merchants[2].policy.approve_operator", sentinel: ErrUnknownKey}}},
		{name: "retry_max_attempts too large", edits: []edit{{`retry_max_attempts = 3`, `retry_max_attempts = 9223372036854775807`}},
			want: []want{{path: "merchants[2].policy.retry_max_attempts", sentinel: ErrInvalid}}},
		{name: "policy duration of the wrong type", edits: []edit{{`refund_window = "720h"`, `refund_window = 720`}},
			want: []want{{path: "merchants[2].policy.refund_window", line: 45, sentinel: ErrSyntax, text: "a TOML integer where a string belongs"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := tc.doc
			if doc == "" && tc.edits != nil {
				doc = base
				for _, e := range tc.edits {
					if !strings.Contains(doc, e.old) {
						t.Fatalf("edit %q: not in the file", e.old)
					}
					doc = strings.Replace(doc, e.old, e.new, 1)
				}
			}
			r, err := Parse([]byte(doc), "")
			if err == nil {
				t.Fatalf("parsed: %v", r)
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("%T %v: not Errors", err, err)
			}
			if len(es) != len(tc.want) {
				t.Fatalf("%d problems, want %d:\n%v", len(es), len(tc.want), err)
			}
			for i, w := range tc.want {
				e := es[i]
				if e.Path != w.path || (w.sentinel != nil && !errors.Is(e, w.sentinel)) || !strings.Contains(e.Error(), w.text) || (w.line != 0 && e.Line != w.line) {
					t.Errorf("problem %d: %q (path %q, line %d), want path %q, line %d, %v, containing %q", i, e.Error(), e.Path, e.Line, w.path, w.line, w.sentinel, w.text)
				}
				if w.sentinel != nil && !errors.Is(err, w.sentinel) {
					t.Errorf("errors.Is(err, %v) is false", w.sentinel)
				}
			}
		})
	}
}

// TestParse_InlineSecretNotEchoed: an error about an inline secret must not
// repeat it (errors are logged).
func TestParse_InlineSecretNotEchoed(t *testing.T) {
	const key = "0123456789abcdefghijABCDEFGHIJ01"
	for _, e := range []edit{
		{`private_key = "file:keys/shop.pem"`, `private_key = "` + key + `"`},
		{`apiv3_key = "env:SHOP_APIV3_KEY"`, `apiv3_key = "` + key + `"`},
		{`apiv2_key = "env:SP_APIV2_KEY"`, `apiv2_key = "` + key + `"`},
		{`apiv2_key = "env:SP_APIV2_KEY"`, `apiv2_key = "file:` + key + `\n"`},
	} {
		_, err := Parse([]byte(strings.Replace(base, e.old, e.new, 1)), "")
		if !errors.Is(err, ErrInlineSecret) {
			t.Fatalf("%s: %v, want ErrInlineSecret", e.new, err)
		}
		if strings.Contains(err.Error(), key[:8]) {
			t.Errorf("%s: the error repeats the secret: %v", e.new, err)
		}
	}
}

func TestReadFile(t *testing.T) {
	files := map[string][]byte{"/etc/refundd/merchants.toml": []byte(base)}
	read := func(name string) ([]byte, error) {
		if b, ok := files[name]; ok {
			return b, nil
		}
		return nil, errors.New("open " + name + ": no such file")
	}
	r, err := ReadFile("/etc/refundd/merchants.toml", read)
	if err != nil {
		t.Fatal(err)
	}
	shop, _ := r.Account("shop")
	if want := filepath.Join("/etc/refundd", "keys/shop.pem"); shop.PrivateKey.File != want {
		t.Errorf("private key %q, want %q", shop.PrivateKey.File, want)
	}
	if _, err := ReadFile("/nope.toml", read); err == nil || !strings.Contains(err.Error(), "/nope.toml") {
		t.Errorf("missing file: %v", err)
	}
	files["/bad.toml"] = []byte("version = 1\n")
	_, err = ReadFile("/bad.toml", read)
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "merchants file /bad.toml:\nline 1: version: ") {
		t.Errorf("bad file: %v", err)
	}
}

func TestEncode_RoundTrip(t *testing.T) {
	r, err := Parse([]byte(base), "/etc/refundd")
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Parse(out, "/elsewhere") // paths were made absolute
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out2, err := r2.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(out2) {
		t.Errorf("not stable:\n%s\n---\n%s", out, out2)
	}
	inn2, _ := r2.ByName("inn-2")
	if inn2.Overrides.RefundSpacing == nil || *inn2.Overrides.RefundSpacing != 0 {
		t.Errorf("a zero spacing override must survive: %+v", inn2.Overrides)
	}
}

// An account in certificate mode needs neither a public key nor a
// certificate file; without download_certificates one of them is required.
func TestParse_DownloadCertificates(t *testing.T) {
	noKey := strings.Replace(base, "public_key_id = \"PUB_KEY_ID_0100000000000001\"\npublic_key_file = \"keys/shop_pub.pem\"\n", "", 1)
	if _, err := Parse([]byte(noKey), ""); err == nil || !strings.Contains(err.Error(), "download_certificates") {
		t.Fatalf("no key and no download: %v, want an error naming download_certificates", err)
	}
	withDownload := strings.Replace(noKey, "mchid = \"1900000101\"\n", "mchid = \"1900000101\"\ndownload_certificates = true\n", 1)
	r, err := Parse([]byte(withDownload), "")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := r.Account("shop")
	if sp, _ := r.Account("sp"); !a.DownloadCertificates || sp.DownloadCertificates {
		t.Fatalf("shop download %v, sp download %v; want true, false", a.DownloadCertificates, sp.DownloadCertificates)
	}
	out, err := r.Encode()
	if err != nil || !strings.Contains(string(out), "download_certificates = true") {
		t.Fatalf("Encode lost download_certificates: %v\n%s", err, out)
	}
}
