package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// refundd check-config runs the checks Run makes before it creates
// anything, prints the effective configuration with secrets masked, and
// exits non-zero naming the setting at fault.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	keys, err := sandbox.GenerateKeys("1900000001")
	if err != nil {
		t.Fatal(err)
	}
	keyDir := filepath.Join(dir, "keys")
	if _, err := keys.WriteDir(keyDir, ""); err != nil {
		t.Fatal(err)
	}
	const (
		token    = "svc-0123456789abcdef0123456789abcdef"
		password = "pg-s3cret-pw"
	)
	apiv3 := string(keys.APIv3Key)
	merchantArgs := []string{"--provider", "wechatpay", "--wechatpay-base-url", "http://127.0.0.1:1",
		"--wechatpay-mchid", keys.MchID, "--wechatpay-serial", keys.MerchantSerial,
		"--wechatpay-private-key", filepath.Join(keyDir, sandbox.MerchantKeyFile),
		"--wechatpay-public-key", filepath.Join(keyDir, sandbox.PublicKeyFile), "--wechatpay-public-key-id", keys.PublicKeyID}
	cluster := []string{"--cluster", "etcd://127.0.0.1:2379", "--journal", "postgres://refundd:" + password + "@db.internal:5432/refundd"}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		want     string // in stderr when failing, in stdout when not
	}{
		{"good", append(append([]string{}, merchantArgs...), cluster...),
			map[string]string{"REFUNDD_WECHATPAY_APIV3_KEY": apiv3, "REFUNDD_TOKENS": "service:" + token}, 0, "configuration OK"},
		{"bad flag value", []string{"--refund-prefix", "R-1"}, nil, 2, "--refund-prefix"},
		{"missing tokens file", []string{"--tokens-file", missing}, nil, 1, "--tokens-file"},
		{"bad REFUNDD_TOKENS", nil, map[string]string{"REFUNDD_TOKENS": "nocolon"}, 1, "REFUNDD_TOKENS"},
		{"merchant without its APIv3 key", merchantArgs, nil, 1, "--wechatpay-apiv3-key-file"},
		{"merchant with a bad serial", append(append([]string{}, merchantArgs...), "--wechatpay-serial", "S"),
			map[string]string{"REFUNDD_WECHATPAY_APIV3_KEY": apiv3}, 1, "--wechatpay-serial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			var stdout, stderr bytes.Buffer
			code := checkConfig(append([]string{"--data", data}, tc.args...), func(k string) string { return tc.env[k] }, &stdout, &stderr)
			if code != tc.wantCode {
				t.Fatalf("exit %d; want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, stdout.String(), stderr.String())
			}
			out := stderr.String()
			if code == 0 {
				out = stdout.String()
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output does not name %q:\n%s", tc.want, out)
			}
			for _, secret := range []string{token, password, apiv3} {
				if strings.Contains(stdout.String()+stderr.String(), secret) {
					t.Errorf("output shows a secret %q:\n%s%s", secret, stdout.String(), stderr.String())
				}
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("check-config created %s (stat: %v)", data, err)
			}
		})
	}
}

// The good configuration's output is the effective configuration: every
// flag with its value, the journal URL without its password, and the
// secrets taken from variables named but masked.
func TestCheckConfig_PrintsTheEffectiveConfiguration(t *testing.T) {
	var stdout, stderr bytes.Buffer
	env := map[string]string{"REFUNDD_TOKENS": "service:svc-0123456789abcdef0123456789abcdef"}
	code := checkConfig([]string{"--data", filepath.Join(t.TempDir(), "data"), "--listen", "127.0.0.1:9999"},
		func(k string) string { return env[k] }, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{`listen = "127.0.0.1:9999"  # flag`, `provider = "sandbox"  # default`, "REFUNDD_TOKENS = ********"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
}
