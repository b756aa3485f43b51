package wechatpay

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestDecryptAEAD_V2(t *testing.T) {
	v := loadVectors(t).V2
	pt, err := DecryptAEAD([]byte(v.Key), v.Nonce, v.AssociatedData, v.Ciphertext)
	if err != nil {
		t.Fatal(err)
	}
	if string(pt) != v.Plaintext {
		t.Fatalf("plaintext %q", pt)
	}
	ct, err := EncryptAEAD([]byte(v.Key), v.Nonce, v.AssociatedData, []byte(v.Plaintext))
	if err != nil {
		t.Fatal(err)
	}
	if ct != v.Ciphertext {
		t.Fatalf("ciphertext %s, want %s", ct, v.Ciphertext)
	}
}

// V3 is a certificate download: decrypting it yields the platform
// certificate whose serial the response names.
func TestDecryptAEAD_V3Certificate(t *testing.T) {
	v := loadVectors(t).V3
	pt, err := DecryptAEAD([]byte(v.Key), v.Nonce, v.AssociatedData, readTestdataString(t, "v3_cert_ciphertext.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pt) != v.PlaintextLen {
		t.Fatalf("plaintext is %d bytes, want %d", len(pt), v.PlaintextLen)
	}
	cert, err := ParseCertificate(pt)
	if err != nil {
		t.Fatal(err)
	}
	if got := CertificateSerial(cert); got != v.Serial {
		t.Fatalf("serial %s, want %s", got, v.Serial)
	}
	cst := time.FixedZone("CST", 8*3600)
	if !cert.NotBefore.Equal(time.Date(2023, 9, 19, 23, 15, 58, 0, cst)) || !cert.NotAfter.Equal(time.Date(2028, 9, 17, 23, 15, 58, 0, cst)) {
		t.Fatalf("validity %s .. %s", cert.NotBefore, cert.NotAfter)
	}
}

// V1 uses a 16-byte key (AES-128-GCM): the shared GCM code decrypts it, but
// DecryptAEAD refuses it because AEAD_AES_256_GCM needs 32 bytes.
func TestDecryptAEAD_V1RejectsAES128(t *testing.T) {
	v := loadVectors(t).V1
	pt, err := aeadOpen([]byte(v.Key), v.Nonce, v.AssociatedData, v.Ciphertext)
	if err != nil || string(pt) != v.Plaintext {
		t.Fatalf("aeadOpen = %q, %v", pt, err)
	}
	if _, err := DecryptAEAD([]byte(v.Key), v.Nonce, v.AssociatedData, v.Ciphertext); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("err = %v, want ErrInvalidKey", err)
	}
	if _, err := aeadOpen([]byte("testAPIv3Key1111"), v.Nonce, v.AssociatedData, v.Ciphertext); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := aeadOpen([]byte("not a aes key"), v.Nonce, v.AssociatedData, v.Ciphertext); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("bad key size: %v", err)
	}
}

func TestDecryptAEAD_Rejects(t *testing.T) {
	v := loadVectors(t).V2
	key := []byte(v.Key)
	cases := []struct {
		name          string
		key           []byte
		nonce, ad, ct string
		want          error
	}{
		{"wrong associated data", key, v.Nonce, "bad-associatedData", v.Ciphertext, ErrDecrypt},
		{"empty associated data", key, v.Nonce, "", v.Ciphertext, ErrDecrypt},
		{"wrong nonce", key, "bad-4a9R25RW", v.AssociatedData, v.Ciphertext, ErrDecrypt},
		{"128 zero bytes", key, v.Nonce, v.AssociatedData, base64.StdEncoding.EncodeToString(make([]byte, 128)), ErrDecrypt},
		{"wrong key", []byte(strings.Repeat("x", 32)), v.Nonce, v.AssociatedData, v.Ciphertext, ErrDecrypt},
		{"not base64", key, v.Nonce, v.AssociatedData, "invalid cipher", ErrDecrypt},
		{"truncated base64", key, v.Nonce, v.AssociatedData, v.Ciphertext[:len(v.Ciphertext)-1], ErrDecrypt},
		{"truncated ciphertext", key, v.Nonce, v.AssociatedData, base64.StdEncoding.EncodeToString(mustB64(t, v.Ciphertext)[:18]), ErrDecrypt},
		{"shorter than tag", key, v.Nonce, v.AssociatedData, base64.StdEncoding.EncodeToString(make([]byte, 15)), ErrDecrypt},
		{"empty ciphertext", key, v.Nonce, v.AssociatedData, "", ErrDecrypt},
		{"empty nonce", key, "", v.AssociatedData, v.Ciphertext, ErrInvalidNonce},
		{"11-byte nonce", key, v.Nonce[:11], v.AssociatedData, v.Ciphertext, ErrInvalidNonce},
		{"13-byte nonce", key, v.Nonce + "x", v.AssociatedData, v.Ciphertext, ErrInvalidNonce},
		{"16-byte nonce", key, v.Nonce + "xxxx", v.AssociatedData, v.Ciphertext, ErrInvalidNonce},
		{"12 runes, more bytes", key, "退退退退退退退退退退退退", v.AssociatedData, v.Ciphertext, ErrInvalidNonce},
		{"nil key", nil, v.Nonce, v.AssociatedData, v.Ciphertext, ErrInvalidKey},
		{"16-byte key", key[:16], v.Nonce, v.AssociatedData, v.Ciphertext, ErrInvalidKey},
		{"31-byte key", key[:31], v.Nonce, v.AssociatedData, v.Ciphertext, ErrInvalidKey},
		{"33-byte key", append(append([]byte(nil), key...), 'x'), v.Nonce, v.AssociatedData, v.Ciphertext, ErrInvalidKey},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pt, err := DecryptAEAD(c.key, c.nonce, c.ad, c.ct)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if pt != nil {
				t.Fatal("plaintext returned with an error")
			}
			if strings.Contains(err.Error(), v.Key) {
				t.Fatal("error leaks the key")
			}
		})
	}
	for _, n := range []string{"", "short", strings.Repeat("n", 13)} {
		if _, err := EncryptAEAD(key, n, "", []byte("x")); !errors.Is(err, ErrInvalidNonce) {
			t.Fatalf("EncryptAEAD nonce %q: %v", n, err)
		}
	}
	if _, err := EncryptAEAD(key[:16], v.Nonce, "", []byte("x")); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("EncryptAEAD 16-byte key: %v", err)
	}
}

func mustB64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Property: encryption round-trips, and flipping any ciphertext bit fails
// authentication instead of yielding other plaintext.
func TestEncryptAEAD_RoundTripProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		key := rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(rt, "key")
		nonce := string(rapid.SliceOfN(rapid.Byte(), 12, 12).Draw(rt, "nonce"))
		ad := rapid.String().Draw(rt, "ad")
		pt := rapid.SliceOf(rapid.Byte()).Draw(rt, "pt")
		ct, err := EncryptAEAD(key, nonce, ad, pt)
		if err != nil {
			rt.Fatal(err)
		}
		got, err := DecryptAEAD(key, nonce, ad, ct)
		if err != nil || !bytes.Equal(got, pt) {
			rt.Fatalf("round trip: %q, %v", got, err)
		}
		raw, _ := base64.StdEncoding.DecodeString(ct)
		i := rapid.IntRange(0, len(raw)*8-1).Draw(rt, "bit")
		raw[i/8] ^= 1 << (i % 8)
		if _, err := DecryptAEAD(key, nonce, ad, base64.StdEncoding.EncodeToString(raw)); !errors.Is(err, ErrDecrypt) {
			rt.Fatalf("flipped bit %d: %v", i, err)
		}
	})
}
