package wechatpay

import (
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
)

func TestSignMessage_V5(t *testing.T) {
	v := loadVectors(t)
	key := v5Key(t)
	want := readTestdataString(t, "v5_signature.txt")
	got, err := SignMessage(key, []byte(v.V5.Message))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("signature\n got %s\nwant %s", got, want)
	}
	pub, err := ParsePublicKey(readTestdata(t, "v5_public_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyMessage(pub, []byte(v.V5.Message), want); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

func TestVerifyMessage_Rejects(t *testing.T) {
	v := loadVectors(t)
	pub := &v5Key(t).PublicKey
	good := readTestdataString(t, "v5_signature.txt")
	cases := []struct {
		name string
		msg  string
		sig  string
		want error
	}{
		{"wrong message", "wrong source", good, ErrBadSignature},
		{"empty message", "", good, ErrBadSignature},
		{"empty signature", v.V5.Message, "", ErrBadSignature},
		{"not base64", v.V5.Message, "invalid base64 signature", ErrBadSignature},
		{"truncated base64", v.V5.Message, good[:len(good)-3], ErrBadSignature},
		{"too long", v.V5.Message, strings.Repeat("A", 2000), ErrBadSignature},
		{"other key's signature", v.V5.Message, mustSign(t, v6Key(t), v.V5.Message), ErrBadSignature},
		{"probe", v.V5.Message, v.V12.Signature, ErrProbe},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := VerifyMessage(pub, []byte(c.msg), c.sig)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	if err := VerifyMessage(nil, nil, good); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("nil key: %v", err)
	}
	if _, err := SignMessage(nil, nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("nil key: %v", err)
	}
}

func mustSign(t testing.TB, key *rsa.PrivateKey, msg string) string {
	t.Helper()
	s, err := SignMessage(key, []byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRequestMessage_Vectors(t *testing.T) {
	v := loadVectors(t)
	if got := string(RequestMessage(v.V6.Method, v.V6.URL, v.V6.Timestamp, v.V6.Nonce, nil)); got != v.V6.Message {
		t.Fatalf("V6 message %q", got)
	}
	if got := string(RequestMessage("POST", "/v3/certificates", v.V7.Timestamp, v.V7.Nonce, []byte(v.V7.PostBody))); got != v.V7.PostMessage {
		t.Fatalf("V7 POST message %q", got)
	}
}

func TestFormatAuthorization_V7Layout(t *testing.T) {
	v := loadVectors(t)
	msg := RequestMessage("GET", "/v3/certificates", v.V7.Timestamp, v.V7.Nonce, []byte(""))
	got := formatAuthorization("WECHATPAY2-Mock", v.V7.MchID, v.V7.Nonce, v.V7.Timestamp, v.V7.SerialNo, "Sign:"+string(msg))
	if got != v.V7.GetHeader {
		t.Fatalf("header\n got %q\nwant %q", got, v.V7.GetHeader)
	}
}

func TestSignerAuthorization_V6(t *testing.T) {
	v := loadVectors(t)
	sig := readTestdataString(t, "v6_signature.txt")
	s := Signer{MchID: v.V6.MchID, SerialNo: v.V6.SerialNo, Key: v6Key(t)}
	got, err := s.Authorization(v.V6.Method, v.V6.URL, nil, v.V6.Timestamp, v.V6.Nonce)
	if err != nil {
		t.Fatal(err)
	}
	want := `WECHATPAY2-SHA256-RSA2048 mchid="1900007291",nonce_str="593BEC0C930BF1AFEB40B4A08C8FB242",timestamp="1554208460",serial_no="408B07E79B8269FEC3D5D3E6AB8ED163A6A380DB",signature="` + sig + `"`
	if got != want {
		t.Fatalf("header\n got %s\nwant %s", got, want)
	}
}

func TestSignerAuthorization_InvalidArguments(t *testing.T) {
	key := v5Key(t)
	ok := Signer{MchID: "1900007291", SerialNo: "408B07E79B8269FEC3D5D3E6AB8ED163A6A380DB", Key: key}
	cases := []struct {
		name   string
		s      Signer
		method string
		url    string
		ts     int64
		nonce  string
		want   error
	}{
		{"nil key", Signer{MchID: "1", SerialNo: "S"}, "GET", "/v3/x", 1, "n", ErrInvalidKey},
		{"empty mchid", Signer{SerialNo: "S", Key: key}, "GET", "/v3/x", 1, "n", ErrInvalidArgument},
		{"empty serial", Signer{MchID: "1", Key: key}, "GET", "/v3/x", 1, "n", ErrInvalidArgument},
		{"quote in mchid", Signer{MchID: `1"`, SerialNo: "S", Key: key}, "GET", "/v3/x", 1, "n", ErrInvalidArgument},
		{"comma in serial", Signer{MchID: "1", SerialNo: "S,x", Key: key}, "GET", "/v3/x", 1, "n", ErrInvalidArgument},
		{"empty nonce", ok, "GET", "/v3/x", 1, "", ErrInvalidArgument},
		{"space in nonce", ok, "GET", "/v3/x", 1, "a b", ErrInvalidArgument},
		{"empty method", ok, "", "/v3/x", 1, "n", ErrInvalidArgument},
		{"lower-case method", ok, "get", "/v3/x", 1, "n", ErrInvalidArgument},
		{"absolute URL", ok, "GET", "https://api.mch.weixin.qq.com/v3/x", 1, "n", ErrInvalidArgument},
		{"newline in URL", ok, "GET", "/v3/x\n", 1, "n", ErrInvalidArgument},
		{"unescaped UTF-8 URL", ok, "GET", "/v3/退款", 1, "n", ErrInvalidArgument},
		{"zero timestamp", ok, "GET", "/v3/x", 0, "n", ErrInvalidArgument},
		{"millisecond-style negative", ok, "GET", "/v3/x", -5, "n", ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.s.Authorization(c.method, c.url, nil, c.ts, c.nonce)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestNewNonce_Shape(t *testing.T) {
	a, b := NewNonce(), NewNonce()
	if a == b {
		t.Fatal("two nonces are equal")
	}
	for _, n := range []string{a, b, RandomAEADNonce()} {
		if len(n) != 32 && len(n) != AEADNonceSize {
			t.Fatalf("nonce %q has length %d", n, len(n))
		}
		if strings.Trim(n, alnum) != "" {
			t.Fatalf("nonce %q has characters outside [0-9A-Za-z]", n)
		}
	}
	if len(a) != 32 || len(RandomAEADNonce()) != AEADNonceSize {
		t.Fatal("wrong nonce length")
	}
}
