package merchant

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// fakeLive records what a reload swaps in.
type fakeLive struct {
	mu      sync.Mutex
	signers []string // serials set
	v3      []string // APIv3 keys set
	grace   time.Duration
}

func (f *fakeLive) SetSigner(s wechatpay.Signer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signers = append(f.signers, s.SerialNo)
	return nil
}

func (f *fakeLive) Set(apiV3, _ []byte, grace time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.v3, f.grace = append(f.v3, string(apiV3)), grace
}

// TestReloader: a reload swaps in every account's new signer, APIv3 key
// and file keys only when every file is good and nothing needing a
// restart changed; a refusal changes nothing, is logged and counted, and
// names the file or setting.
func TestReloader(t *testing.T) {
	w := goodWorld(t)
	reg := mustParse(t, credFile)
	creds, err := reg.LoadCredentials(w.sources())
	if err != nil {
		t.Fatal(err)
	}
	running := creds["shop"].Verifier // what the client and notification route hold
	live := map[string]*fakeLive{"shop": {}, "sp": {}}
	var logs bytes.Buffer
	var results []string
	file := credFile
	rl, err := NewReloader(ReloaderConfig{Registry: reg, Credentials: creds,
		Live: map[string]Live{"shop": {Client: live["shop"], Notify: live["shop"]}, "sp": {Client: live["sp"], Notify: live["sp"]}},
		Read: func() (*Registry, map[string]*Credentials, error) {
			r, err := Parse([]byte(file), "/")
			if err != nil {
				return nil, nil, err
			}
			c, err := r.LoadCredentials(w.sources())
			return r, c, err
		},
		Grace: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Observe: func(r string) { results = append(results, r) }})
	if err != nil {
		t.Fatal(err)
	}
	const newSerial = "6A6A6A6A6A6A6A6A6A6A6A6A6A6A6A6A6A6A6A6A"
	const newV3 = "NEWnewNEWnewNEWnewNEWnewNEWnew12"
	good := strings.Replace(file, "5157F09EFDC096DE15EBE81A47057A7232F1B8E1", newSerial, 1)
	good = strings.Replace(good, `public_key_file = "/k/pub.pem"`, `public_key_file = "/k/pub.pem"
platform_cert_files = ["/k/cert.pem"]`, 1)
	// sp, on a platform certificate, adds the WeChat Pay public key (the
	// switchover to public keys: both verify).
	good = strings.Replace(good, `platform_cert_files = ["/k/cert.pem"]

[[merchants]]`, `platform_cert_files = ["/k/cert.pem"]
public_key_id = "PUB_KEY_ID_0100000000000002"
public_key_file = "/k/pub.pem"

[[merchants]]`, 1)
	spRunning := creds["sp"].Verifier
	for _, tt := range []struct {
		name     string
		file     string
		setup    func()
		want     error
		contains string
	}{
		{"broken private key", file, func() { w.files["/k/shop.pem"] = []byte("-----BEGIN GARBAGE-----\n") }, ErrReloadInvalid,
			`account "shop": accounts[0].private_key: wechatpay: invalid key`},
		{"missing public key file", file, func() { delete(w.files, "/k/pub.pem") },
			ErrReloadInvalid, "/k/pub.pem"},
		{"mchid changed", strings.Replace(file, "1900000101", "1900000102", 1), nil, ErrRestartRequired,
			`account "shop": mchid changed from 1900000101 to 1900000102`},
		{"merchant added", file + "\n[[merchants]]\nname = \"cafe\"\nkind = \"sub_merchant\"\naccount = \"sp\"\nsub_mchid = \"1900000202\"\nrefund_prefix = \"CF\"\n",
			nil, ErrRestartRequired, `merchant "cafe" added`},
		{"prefix changed", strings.Replace(file, `"SH"`, `"SX"`, 1), nil, ErrRestartRequired, `merchant "shop": refund_prefix changed from "SH" to "SX"`},
	} {
		keys := mustKeys(t)
		w.files["/k/shop.pem"], w.files["/k/pub.pem"] = keys.privatePEM, keys.publicPEM
		if tt.setup != nil {
			tt.setup()
		}
		file = tt.file
		err := rl.Reload(context.Background(), "test")
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.contains) {
			t.Errorf("%s: %v, want %v naming %s", tt.name, err, tt.want, tt.contains)
		}
		if len(live["shop"].signers)+len(live["shop"].v3)+len(live["sp"].signers) != 0 {
			t.Fatalf("%s: swapped in after a refusal", tt.name)
		}
		if got := rl.Credentials("shop"); got.Signer.SerialNo != "5157F09EFDC096DE15EBE81A47057A7232F1B8E1" ||
			!slices.Equal(running.Serials(), []string{"PUB_KEY_ID_0100000000000001"}) {
			t.Fatalf("%s: running credentials changed: %s %v", tt.name, got.Signer.SerialNo, running.Serials())
		}
	}
	if !strings.Contains(logs.String(), "credentials reload refused") || strings.Contains(logs.String(), string(mustKeys(t).privatePEM[30:60])) {
		t.Fatalf("refusals not logged, or a key logged:\n%s", logs.String())
	}

	// Good files: a new serial, a new APIv3 key and a certificate added.
	w.env["SHOP_APIV3_KEY"] = newV3
	file = good
	if err := rl.Reload(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(live["shop"].signers, []string{newSerial}) || !slices.Equal(live["shop"].v3, []string{newV3}) || live["shop"].grace != time.Hour {
		t.Fatalf("shop: signers %v, APIv3 keys %v, grace %v", live["shop"].signers, live["shop"].v3, live["shop"].grace)
	}
	if !slices.Equal(live["sp"].v3, []string{spV3}) {
		t.Fatalf("sp: APIv3 keys %v", live["sp"].v3)
	}
	got := rl.Credentials("shop")
	if got.Signer.SerialNo != newSerial || string(got.APIv3Key) != newV3 || got.Verifier != running {
		t.Fatalf("shop after reload: %s, same verifier %v", got.Signer.SerialNo, got.Verifier == running)
	}
	if s := running.Serials(); !slices.Contains(s, "5157F09E") || !slices.Contains(s, "PUB_KEY_ID_0100000000000001") {
		t.Fatalf("running verifier holds %v", s)
	}
	if s := spRunning.Serials(); len(s) != 2 || !slices.Contains(s, "5157F09E") || !slices.Contains(s, "PUB_KEY_ID_0100000000000002") {
		t.Fatalf("sp's running verifier holds %v after the public key was added", s)
	}
	if !strings.Contains(logs.String(), "credentials reloaded") || !strings.Contains(logs.String(), "previous_merchant_serial=5157F09E") {
		t.Fatalf("reload not logged:\n%s", logs.String())
	}
	// The public key dropped from the file leaves the running verifier.
	file = strings.Replace(good, "public_key_id = \"PUB_KEY_ID_0100000000000001\"\npublic_key_file = \"/k/pub.pem\"\n", "", 1)
	if err := rl.Reload(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	if s := running.Serials(); !slices.Equal(s, []string{"5157F09E"}) {
		t.Fatalf("running verifier holds %v after the public key was dropped", s)
	}
	want := []string{ReloadInvalid, ReloadInvalid, ReloadRestartRequired, ReloadRestartRequired, ReloadRestartRequired, ReloadOK, ReloadOK}
	if !slices.Equal(results, want) {
		t.Fatalf("results %v, want %v", results, want)
	}
}

func mustKeys(t *testing.T) keyFiles {
	t.Helper()
	f, err := testKeys()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestReloader_AddMerchant: with an Add hook, a merchant added on a
// running account is checked by the hook before any credential is
// swapped, committed after, and named by Registry; a hook's refusal, a
// merchant removed, renamed or changed are refused naming what changed,
// and leave the running registry and credentials.
func TestReloader_AddMerchant(t *testing.T) {
	const cafe = "\n[[merchants]]\nname = \"cafe\"\nkind = \"sub_merchant\"\naccount = \"sp\"\nsub_mchid = \"1900000202\"\nrefund_prefix = \"CF\"\n"
	for _, tt := range []struct {
		name     string
		file     string
		refuse   error // the Add hook's answer
		want     error
		contains string
		added    []string
	}{
		{name: "merchant added on a running account", file: credFile + cafe, added: []string{"cafe"}},
		{name: "the hook refuses", file: credFile + cafe, refuse: errors.New("prefix CF clashes"), want: ErrReloadInvalid,
			contains: "prefix CF clashes"},
		{name: "merchant removed", file: strings.Replace(credFile, "name = \"inn\"", "name = \"inn2\"", 1) + cafe,
			want: ErrRestartRequired, contains: `merchant "inn" removed (or renamed)`},
		{name: "prefix changed with an addition", file: strings.Replace(credFile, `"IN"`, `"IX"`, 1) + cafe,
			want: ErrRestartRequired, contains: `merchant "inn": refund_prefix changed from "IN" to "IX"`},
		{name: "sub_mchid changed", file: strings.Replace(credFile, `"1900000201"`, `"1900000209"`, 1),
			want: ErrRestartRequired, contains: `merchant "inn": sub_mchid changed`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := goodWorld(t)
			reg := mustParse(t, credFile)
			creds, err := reg.LoadCredentials(w.sources())
			if err != nil {
				t.Fatal(err)
			}
			live := map[string]*fakeLive{"shop": {}, "sp": {}}
			var got []string
			committed := false
			rl, err := NewReloader(ReloaderConfig{Registry: reg, Credentials: creds,
				Live: map[string]Live{"shop": {Client: live["shop"]}, "sp": {Client: live["sp"]}},
				Read: func() (*Registry, map[string]*Credentials, error) {
					r, err := Parse([]byte(tt.file), "/")
					if err != nil {
						return nil, nil, err
					}
					c, err := r.LoadCredentials(w.sources())
					return r, c, err
				},
				Add: func(add Addition) (Staged, error) {
					for _, m := range add.Merchants {
						got = append(got, m.Name)
					}
					if len(add.Accounts) != 0 {
						t.Errorf("accounts added: %v", add.Accounts)
					}
					if len(live["sp"].signers) != 0 {
						t.Error("the hook ran after the credentials were swapped")
					}
					if tt.refuse != nil {
						return Staged{}, tt.refuse
					}
					return Staged{Commit: func() {
						if len(live["sp"].signers) != 1 {
							t.Error("the commit ran before the credentials were swapped")
						}
						committed = true
					}}, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			err = rl.Reload(context.Background(), "test")
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, tt.added) || !committed {
					t.Fatalf("added %v, committed %v; want %v", got, committed, tt.added)
				}
				if m, ok := rl.Registry().ByName("cafe"); !ok || m.RefundNoPrefix != "CF" {
					t.Fatal("the running registry does not name the added merchant")
				}
				if m, ok := rl.Registry().ByMchID("1900000200", "1900000202"); !ok || m.Name != "cafe" {
					t.Fatal("notifications cannot find the added merchant")
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("%v, want %v naming %s", err, tt.want, tt.contains)
			}
			if committed || len(live["sp"].signers)+len(live["shop"].signers) != 0 {
				t.Fatal("changed after a refusal")
			}
			if rl.Registry() != reg {
				t.Fatal("the running registry was replaced after a refusal")
			}
		})
	}
}

// barAccount is a direct account and its merchant added to credFile; its
// private key is its own file, /k/bar.pem.
const barAccount = `
[[accounts]]
name = "bar"
kind = "direct"
mchid = "1900000301"
serial = "6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B"
private_key = "file:/k/bar.pem"
apiv3_key = "env:SHOP_APIV3_KEY"
public_key_id = "PUB_KEY_ID_0100000000000003"
public_key_file = "/k/pub.pem"

[[merchants]]
name = "bar"
kind = "direct"
account = "bar"
refund_prefix = "BA"
`

// TestReloader_AddAccount: an account added to the file with its
// merchant is handed to the Add hook with its credentials, before any
// credential is swapped; once committed the registry and the credentials
// in use name it, the next reload swaps its keys in the parts the hook
// built, and it is logged. A broken key file of the new account is
// refused naming the setting: the hook is not called, and the registry,
// the credentials and the running accounts stay as they were.
func TestReloader_AddAccount(t *testing.T) {
	w := goodWorld(t)
	keys := mustKeys(t)
	w.files["/k/bar.pem"] = []byte("-----BEGIN GARBAGE-----\n")
	reg := mustParse(t, credFile)
	creds, err := reg.LoadCredentials(w.sources())
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]*fakeLive{"shop": {}, "sp": {}, "bar": {}}
	var logs bytes.Buffer
	var results []string
	var adds []Addition
	committed := 0
	file := credFile + barAccount
	rl, err := NewReloader(ReloaderConfig{Registry: reg, Credentials: creds,
		Live: map[string]Live{"shop": {Client: live["shop"], Notify: live["shop"]}, "sp": {Client: live["sp"], Notify: live["sp"]}},
		Read: func() (*Registry, map[string]*Credentials, error) {
			r, err := Parse([]byte(file), "/")
			if err != nil {
				return nil, nil, err
			}
			c, err := r.LoadCredentials(w.sources())
			return r, c, err
		},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Observe: func(r string) { results = append(results, r) },
		Add: func(add Addition) (Staged, error) {
			adds = append(adds, add)
			if len(live["shop"].signers) != 0 {
				t.Error("the hook ran after the credentials were swapped")
			}
			return Staged{Live: map[string]Live{"bar": {Client: live["bar"], Notify: live["bar"]}},
				Commit: func() { committed++ }}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}

	// The new account's key file is broken.
	err = rl.Reload(context.Background(), "test")
	if !errors.Is(err, ErrReloadInvalid) || !strings.Contains(err.Error(), `account "bar": accounts[2].private_key`) {
		t.Fatalf("broken key of the added account: %v", err)
	}
	if len(adds) != 0 || committed != 0 {
		t.Fatalf("the hook ran (%d) or committed (%d) on a broken file", len(adds), committed)
	}
	if rl.Registry() != reg || rl.Credentials("bar") != nil || rl.Credentials("shop") != creds["shop"] {
		t.Fatal("the running registry or credentials changed after a refusal")
	}
	if n := len(live["shop"].signers) + len(live["sp"].signers) + len(live["shop"].v3) + len(live["sp"].v3); n != 0 {
		t.Fatalf("%d swaps in the running accounts after a refusal", n)
	}
	if !strings.Contains(logs.String(), "credentials reload refused") {
		t.Fatalf("refusal not logged:\n%s", logs.String())
	}

	// The key file fixed: the account and its merchant are added.
	w.files["/k/bar.pem"] = keys.privatePEM
	if err := rl.Reload(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	if len(adds) != 1 || committed != 1 {
		t.Fatalf("hook called %d times, committed %d", len(adds), committed)
	}
	add := adds[0]
	if len(add.Accounts) != 1 || add.Accounts[0].Name != "bar" || len(add.Merchants) != 1 || add.Merchants[0].Name != "bar" ||
		add.Credentials["bar"] == nil || add.Credentials["bar"].MchID != "1900000301" {
		t.Fatalf("addition: accounts %v, merchants %v, credentials %v", add.Accounts, add.Merchants, add.Credentials)
	}
	if _, ok := rl.Registry().Account("bar"); !ok {
		t.Fatal("the running registry does not name the added account")
	}
	if m, ok := rl.Registry().ByMchID("1900000301", ""); !ok || m.Name != "bar" {
		t.Fatal("notifications cannot find the added account's merchant")
	}
	if c := rl.Credentials("bar"); c != add.Credentials["bar"] || c.Verifier != add.Credentials["bar"].Verifier {
		t.Fatal("the credentials in use are not the ones the added account was built on")
	}
	if len(live["bar"].signers) != 0 {
		t.Fatalf("the added account's signer was swapped on its own addition: %v", live["bar"].signers)
	}
	if !strings.Contains(logs.String(), `msg="account added" trigger=test account=bar kind=direct mchid=1900000301`) ||
		!strings.Contains(logs.String(), `msg="merchant added" trigger=test merchant=bar`) {
		t.Fatalf("addition not logged:\n%s", logs.String())
	}

	// The next reload treats it as running: a new serial reaches the
	// parts the hook built, and nothing is added again.
	const newSerial = "7C7C7C7C7C7C7C7C7C7C7C7C7C7C7C7C7C7C7C7C"
	file = strings.Replace(credFile+barAccount, "6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B6B", newSerial, 1)
	if err := rl.Reload(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(live["bar"].signers, []string{newSerial}) || len(adds) != 1 {
		t.Fatalf("bar's signers %v, additions %d", live["bar"].signers, len(adds))
	}
	// Taking it out again needs a restart.
	file = credFile
	if err := rl.Reload(context.Background(), "test"); !errors.Is(err, ErrRestartRequired) || !strings.Contains(err.Error(), `account "bar" removed`) {
		t.Fatalf("account removed: %v", err)
	}
	if want := []string{ReloadInvalid, ReloadOK, ReloadOK, ReloadRestartRequired}; !slices.Equal(results, want) {
		t.Fatalf("results %v, want %v", results, want)
	}
}

// TestReloader_AddAccountHookRefuses: an account whose parts the hook
// cannot build (a certificate download that fails, say) is refused and
// the registry and credentials stay.
func TestReloader_AddAccountHookRefuses(t *testing.T) {
	w := goodWorld(t)
	w.files["/k/bar.pem"] = mustKeys(t).privatePEM
	reg := mustParse(t, credFile)
	creds, err := reg.LoadCredentials(w.sources())
	if err != nil {
		t.Fatal(err)
	}
	shop, sp := &fakeLive{}, &fakeLive{}
	rl, err := NewReloader(ReloaderConfig{Registry: reg, Credentials: creds,
		Live: map[string]Live{"shop": {Client: shop}, "sp": {Client: sp}},
		Read: func() (*Registry, map[string]*Credentials, error) {
			r, err := Parse([]byte(credFile+barAccount), "/")
			if err != nil {
				return nil, nil, err
			}
			c, err := r.LoadCredentials(w.sources())
			return r, c, err
		},
		Add: func(Addition) (Staged, error) {
			return Staged{}, errors.New("account \"bar\": certificate download failed")
		}})
	if err != nil {
		t.Fatal(err)
	}
	err = rl.Reload(context.Background(), "test")
	if !errors.Is(err, ErrReloadInvalid) || !strings.Contains(err.Error(), "certificate download failed") {
		t.Fatalf("refused build: %v", err)
	}
	if rl.Registry() != reg || rl.Credentials("bar") != nil || len(shop.signers)+len(sp.signers) != 0 {
		t.Fatal("changed after a refusal")
	}
}
