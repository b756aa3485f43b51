package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A configuration error is found before anything is created on disk: no
// journal, no sandbox keys, no local tokens under a data directory that
// did not exist.
func TestRun_BadConfigurationCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("not a valid line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	elsewhere := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(elsewhere, []byte("reader "+strings.Repeat("ab", 32)+" ledger merchants=hotel-nowhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const serial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad tokens file", []string{"--tokens-file", bad}, "--tokens-file"},
		{"missing tokens file", []string{"--tokens-file", missing}, "--tokens-file"},
		{"token limited to an unconfigured merchant", []string{"--tokens-file", elsewhere}, "hotel-nowhere"},
		{"bad webhooks file", []string{"--webhooks-file", bad}, "--webhooks-file"},
		{"missing webhooks file", []string{"--webhooks-file", missing}, "--webhooks-file"},
		{"bad checkpoint key", []string{"--checkpoint-key", bad}, "--checkpoint-key"},
		{"merchant account without its key", []string{"--provider", "wechatpay", "--wechatpay-base-url", "http://127.0.0.1:1",
			"--wechatpay-mchid", "1900000001", "--wechatpay-serial", serial, "--wechatpay-private-key", missing,
			"--wechatpay-public-key", missing, "--wechatpay-public-key-id", "PUB_KEY_ID_1", "--wechatpay-apiv3-key-file", missing}, "--wechatpay-apiv3-key-file"},
		{"merchant private key unreadable", []string{"--provider", "wechatpay", "--wechatpay-base-url", "http://127.0.0.1:1",
			"--wechatpay-mchid", "1900000001", "--wechatpay-serial", serial, "--wechatpay-private-key", missing,
			"--wechatpay-public-key", missing, "--wechatpay-public-key-id", "PUB_KEY_ID_1"}, "--wechatpay-private-key"},
		{"merchant serial not hex", []string{"--provider", "wechatpay", "--wechatpay-base-url", "http://127.0.0.1:1",
			"--wechatpay-mchid", "1900000001", "--wechatpay-serial", "S", "--wechatpay-private-key", missing,
			"--wechatpay-public-key", missing, "--wechatpay-public-key-id", "PUB_KEY_ID_1"}, "--wechatpay-serial"},
		{"wechatpay without an account", []string{"--provider", "wechatpay"}, "--wechatpay-mchid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			m := NewMain()
			m.Stdout, m.Stderr = io.Discard, io.Discard
			env := func(k string) string {
				if k == "REFUNDD_WECHATPAY_APIV3_KEY" && !strings.Contains(strings.Join(tc.args, " "), "apiv3") {
					return "0123456789abcdef0123456789abcdef"
				}
				return ""
			}
			if err := m.ParseFlags(append([]string{"--listen", "127.0.0.1:0", "--data", data}, tc.args...), env); err != nil {
				t.Fatal(err)
			}
			err := m.Run(context.Background())
			if err == nil {
				m.Close()
				t.Fatal("Run succeeded; want a configuration error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v; want an error naming %s", err, tc.want)
			}
			if _, serr := os.Stat(data); !os.IsNotExist(serr) {
				var made []string
				_ = filepath.Walk(data, func(p string, _ os.FileInfo, _ error) error { made = append(made, p); return nil })
				t.Errorf("Run failed (%v) after creating %v", err, made)
			}
		})
	}
}
