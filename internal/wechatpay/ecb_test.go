package wechatpay

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

func TestECBEncrypt_V8(t *testing.T) {
	v := loadVectors(t).V8
	ct, err := ecbEncrypt([]byte(v.Key), []byte(v.Plaintext))
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.StdEncoding.EncodeToString(ct); got != v.Ciphertext {
		t.Fatalf("ciphertext %s, want %s", got, v.Ciphertext)
	}
	pt, err := ecbDecrypt([]byte(v.Key), ct)
	if err != nil || string(pt) != v.Plaintext {
		t.Fatalf("decrypt %q, %v", pt, err)
	}
}

func TestV2ReqInfoKey_V9(t *testing.T) {
	v := loadVectors(t).V9
	if got := string(v2ReqInfoKey([]byte(v.APIv2Key))); got != v.DerivedKey {
		t.Fatalf("key* = %s, want %s", got, v.DerivedKey)
	}
}

func TestPKCS7Unpad_Cases(t *testing.T) {
	a := func(n int) []byte { return bytes.Repeat([]byte{'a'}, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name string
		in   []byte
		want []byte // nil means ErrBadPadding
	}{
		{"pad 1", cat(a(15), []byte{1}), a(15)},
		{"pad 3", cat(a(13), []byte{3, 3, 3}), a(13)},
		{"full block of padding", cat(a(16), bytes.Repeat([]byte{16}, 16)), a(16)},
		{"only padding", bytes.Repeat([]byte{16}, 16), []byte{}},
		{"pad 0", cat(a(15), []byte{0}), nil},
		{"pad 17", cat(a(15), []byte{17}), nil},
		{"pad 255", cat(a(15), []byte{255}), nil},
		{"inconsistent", cat(a(13), []byte{2, 3, 3}), nil},
		{"inconsistent first pad byte", cat([]byte{15}, bytes.Repeat([]byte{16}, 15)), nil},
		{"empty", nil, nil},
		{"15 bytes", bytes.Repeat([]byte{1}, 15), nil},
		{"17 bytes", bytes.Repeat([]byte{1}, 17), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := pkcs7Unpad(c.in, 16)
			if c.want == nil {
				if !errors.Is(err, ErrBadPadding) {
					t.Fatalf("err = %v, got %q; want ErrBadPadding", err, got)
				}
				return
			}
			if err != nil || !bytes.Equal(got, c.want) {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestECBDecrypt_Rejects(t *testing.T) {
	key := []byte(loadVectors(t).V8.Key)
	for _, n := range []int{0, 1, 15, 17, 31} {
		if _, err := ecbDecrypt(key, make([]byte, n)); !errors.Is(err, ErrBadPadding) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	if _, err := ecbDecrypt([]byte("short"), make([]byte, 16)); !errors.Is(err, ErrInvalidKey) {
		t.Fatal("bad key size accepted")
	}
	if _, err := ecbEncrypt([]byte("short"), nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatal("bad key size accepted")
	}
}

func TestECB_RoundTripProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		key := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(rt, "key")
		pt := rapid.SliceOf(rapid.Byte()).Draw(rt, "pt")
		ct, err := ecbEncrypt(key, pt)
		if err != nil {
			rt.Fatal(err)
		}
		if len(ct)%16 != 0 || len(ct) <= len(pt) || len(ct) > len(pt)+16 {
			rt.Fatalf("ciphertext length %d for %d-byte plaintext", len(ct), len(pt))
		}
		got, err := ecbDecrypt(key, ct)
		if err != nil || !bytes.Equal(got, pt) {
			rt.Fatalf("round trip %q, %v", got, err)
		}
	})
}
