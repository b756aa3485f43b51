package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/wechatpay"
)

func TestGenerateKeys_Shape(t *testing.T) {
	k := keys(t)
	if !strings.HasPrefix(k.PublicKeyID, "PUB_KEY_ID_") || len(k.PublicKeyID) != 45 || len(k.MerchantSerial) != 40 ||
		len(k.APIv3Key) != 32 || len(k.APIv2Key) != 32 || k.MerchantKey.N.BitLen() != 2048 || k.PlatformKey.N.BitLen() != 2048 {
		t.Fatalf("keys %s %s %d %d", k.PublicKeyID, k.MerchantSerial, len(k.APIv3Key), len(k.APIv2Key))
	}
	if _, err := GenerateKeys(""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty mchid: %v", err)
	}
}

func TestWriteDir_LoadKeysRoundTrip(t *testing.T) {
	k := keys(t)
	dir := filepath.Join(t.TempDir(), "keys")
	m, err := k.WriteDir(dir, "http://127.0.0.1:8090")
	if err != nil {
		t.Fatal(err)
	}
	if m.MchID != k.MchID || m.PublicKeyID != k.PublicKeyID || m.BaseURL != "http://127.0.0.1:8090" {
		t.Fatalf("manifest %+v", m)
	}
	// The files are what a merchant configures, in the forms WeChat Pay issues.
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if priv, err := wechatpay.ParsePrivateKey(read(MerchantKeyFile)); err != nil || !priv.Equal(k.MerchantKey) {
		t.Fatalf("merchant key: %v", err)
	}
	if pub, err := wechatpay.ParsePublicKey(read(PublicKeyFile)); err != nil || !pub.Equal(&k.PlatformKey.PublicKey) {
		t.Fatalf("public key: %v", err)
	}
	if v3, err := wechatpay.ParseAPIv3Key(read(APIv3KeyFile)); err != nil || string(v3) != string(k.APIv3Key) {
		t.Fatalf("apiv3 key: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, MerchantKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("merchant key mode %v %v", fi.Mode(), err)
	}
	got, err := LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.MchID != k.MchID || got.MerchantSerial != k.MerchantSerial || got.PublicKeyID != k.PublicKeyID ||
		!got.MerchantKey.Equal(k.MerchantKey) || !got.PlatformKey.Equal(k.PlatformKey) ||
		string(got.APIv3Key) != string(k.APIv3Key) || string(got.APIv2Key) != string(k.APIv2Key) {
		t.Fatal("loaded keys differ")
	}
	if _, err := LoadKeys(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty dir: %v", err)
	}
	os.WriteFile(filepath.Join(dir, PublicKeyFile), []byte("garbage"), 0o644)
	if _, err := LoadKeys(dir); !errors.Is(err, ErrKeyFiles) {
		t.Fatalf("bad public key file: %v", err)
	}
}
