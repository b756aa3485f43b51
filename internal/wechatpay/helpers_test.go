package wechatpay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// vectors mirrors testdata/vectors.json: the small string vectors of
// PROTOCOL.md §5. Larger ones live in their own testdata files.
type vectors struct {
	V1, V2 struct {
		Key            string `json:"key"`
		Nonce          string `json:"nonce"`
		AssociatedData string `json:"associated_data"`
		Ciphertext     string `json:"ciphertext"`
		Plaintext      string `json:"plaintext"`
	}
	V3 struct {
		Key            string `json:"key"`
		Nonce          string `json:"nonce"`
		AssociatedData string `json:"associated_data"`
		Serial         string `json:"serial"`
		PlaintextLen   int    `json:"plaintext_len"`
	}
	V4 struct {
		APIv3Key      string `json:"api_v3_key"`
		WrongAPIv3Key string `json:"wrong_api_v3_key"`
		Timestamp     string `json:"timestamp"`
		Nonce         string `json:"nonce"`
		Serial        string `json:"serial"`
		Signature     string `json:"signature"`
		Plaintext     string `json:"plaintext"`
	}
	V5 struct {
		Message     string `json:"message"`
		PublicKeyID string `json:"public_key_id"`
	}
	V6 struct {
		MchID          string `json:"mchid"`
		SerialNo       string `json:"serial_no"`
		Method         string `json:"method"`
		URL            string `json:"url"`
		Timestamp      int64  `json:"timestamp"`
		Nonce          string `json:"nonce"`
		Message        string `json:"message"`
		HeaderTemplate string `json:"header_template"`
	}
	V7 struct {
		MchID       string `json:"mchid"`
		SerialNo    string `json:"serial_no"`
		Nonce       string `json:"nonce"`
		Timestamp   int64  `json:"timestamp"`
		GetHeader   string `json:"get_header"`
		PostBody    string `json:"post_body"`
		PostMessage string `json:"post_message"`
	}
	V8 struct {
		Key        string `json:"key"`
		Plaintext  string `json:"plaintext"`
		Ciphertext string `json:"ciphertext"`
	}
	V9 struct {
		APIv2Key   string `json:"api_v2_key"`
		DerivedKey string `json:"derived_key"`
	}
	V12 struct {
		Signature string `json:"signature"`
		Serial    string `json:"serial"`
		Timestamp string `json:"timestamp"`
	}
}

func loadVectors(t testing.TB) vectors {
	t.Helper()
	var v vectors
	if err := json.Unmarshal(readTestdata(t, "vectors.json"), &v); err != nil {
		t.Fatalf("vectors.json: %v", err)
	}
	return v
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readTestdataString reads a one-value text file, dropping a final newline.
func readTestdataString(t testing.TB, name string) string {
	return strings.TrimSuffix(string(readTestdata(t, name)), "\n")
}

// v5Key is WeChat Pay's Go SDK test key; V4's certificate carries its
// public half, so it can sign notifications that certificate verifies.
func v5Key(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := ParsePrivateKey(readTestdata(t, "v5_private_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func v6Key(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := ParsePrivateKey(readTestdata(t, "v6_private_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func v4Cert(t testing.TB) *x509.Certificate {
	t.Helper()
	c, err := ParseCertificate(readTestdata(t, "v4_cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// v4Time is the instant V4's notification was signed.
var v4Time = time.Unix(1624523846, 0)

// fixedClock returns a Now func frozen at t.
func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

// newV4Verifier holds V4's certificate (serial D7CE59D1F522D701) with the
// clock frozen at V4's timestamp.
func newV4Verifier(t testing.TB) *Verifier {
	t.Helper()
	v := &Verifier{Now: fixedClock(v4Time)}
	if err := v.AddCertificate(v4Cert(t)); err != nil {
		t.Fatal(err)
	}
	return v
}

// apiV3Key32 is a 32-byte APIv3 key (V2's).
const apiV3Key32 = "a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb"
