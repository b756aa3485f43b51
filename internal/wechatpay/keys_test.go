package wechatpay

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

func TestParsePrivateKey_PKCS8(t *testing.T) {
	for _, name := range []string{"v5_private_key.pem", "v6_private_key.pem"} {
		t.Run(name, func(t *testing.T) {
			k, err := ParsePrivateKey(readTestdata(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if k.N.BitLen() != 2048 {
				t.Fatalf("bits = %d", k.N.BitLen())
			}
		})
	}
}

func TestParsePrivateKey_MatchesPublicKey(t *testing.T) {
	pub, err := ParsePublicKey(readTestdata(t, "v5_public_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if !v5Key(t).PublicKey.Equal(pub) {
		t.Fatal("V5 private key does not match V5 public key")
	}
}

func TestParsePrivateKey_PKCS1(t *testing.T) {
	k := v5Key(t)
	p := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	got, err := ParsePrivateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(k) {
		t.Fatal("PKCS#1 round trip changed the key")
	}
}

func TestParsePrivateKey_Invalid(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	smallDER, err := x509.MarshalPKCS8PrivateKey(small)
	if err != nil {
		t.Fatal(err)
	}
	// A distinctive body lets the test check that errors never echo it.
	secret := []byte("SECRETKEYMATERIAL-0123456789-SECRETKEYMATERIAL")
	cases := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"not PEM", []byte("hello")},
		{"certificate block", readTestdata(t, "v4_cert.pem")},
		{"public key block", readTestdata(t, "v5_public_key.pem")},
		{"corrupt PKCS8", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: secret})},
		{"corrupt PKCS1", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: secret})},
		{"EC key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})},
		{"1024-bit RSA", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: smallDER})},
		{"testing label", []byte(strings.ReplaceAll(string(readTestdata(t, "v5_private_key.pem")), "PRIVATE KEY", "TESTING KEY"))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePrivateKey(c.in)
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("err = %v, want ErrInvalidKey", err)
			}
			if strings.Contains(err.Error(), "SECRETKEY") || strings.Contains(err.Error(), "MIIE") {
				t.Fatalf("error leaks key material: %v", err)
			}
		})
	}
}

func TestParsePublicKey_Invalid(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"private key block", readTestdata(t, "v5_private_key.pem")},
		{"certificate block", readTestdata(t, "v4_cert.pem")},
		{"corrupt", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("junk")})},
		{"EC key", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParsePublicKey(c.in); !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("err = %v, want ErrInvalidKey", err)
			}
		})
	}
}

func TestParseCertificate_V4(t *testing.T) {
	c := v4Cert(t)
	if got := CertificateSerial(c); got != "D7CE59D1F522D701" {
		t.Fatalf("serial = %s", got)
	}
	pub, err := ParsePublicKey(readTestdata(t, "v5_public_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(c.PublicKey) {
		t.Fatal("V4 certificate should carry V5's public key")
	}
}

func TestParseCertificate_Invalid(t *testing.T) {
	for _, in := range [][]byte{nil, readTestdata(t, "v5_public_key.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")})} {
		if _, err := ParseCertificate(in); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("err = %v, want ErrInvalidKey", err)
		}
	}
}

// selfSigned makes a certificate for key with the given serial and validity.
func selfSigned(t testing.TB, key *rsa.PrivateKey, serial *big.Int, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "test"}, NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCertificate(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCertificateSerial_LeadingZeroNibble(t *testing.T) {
	c := selfSigned(t, v5Key(t), big.NewInt(0x05ab), time.Unix(0, 0), time.Unix(1<<32, 0))
	if got := CertificateSerial(c); got != "05AB" {
		t.Fatalf("serial = %q, want 05AB", got)
	}
	if got := CertificateSerial(nil); got != "" {
		t.Fatalf("nil serial = %q", got)
	}
}

func TestParseAPIv3Key_Cases(t *testing.T) {
	k32 := strings.Repeat("k", 32)
	cases := []struct {
		name string
		in   string
		ok   bool
	}{
		{"exact", k32, true},
		{"trailing newline", k32 + "\n", true},
		{"surrounding space", "  " + k32 + "\r\n", true},
		{"empty", "", false},
		{"31 bytes", k32[:31], false},
		{"33 bytes", k32 + "k", false},
		{"AES-128 size", "testMchAPIv3Key0", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseAPIv3Key([]byte(c.in))
			if c.ok {
				if err != nil || string(got) != k32 {
					t.Fatalf("got %q, %v", got, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("err = %v, want ErrInvalidKey", err)
			}
			if c.in != "" && strings.Contains(err.Error(), c.in) {
				t.Fatalf("error leaks the key: %v", err)
			}
		})
	}
}
