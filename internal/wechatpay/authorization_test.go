package wechatpay

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAuthorization_V6Layout(t *testing.T) {
	v := loadVectors(t)
	sig := readTestdataString(t, "v6_signature.txt")
	// The documentation's layout puts signature before timestamp.
	header := strings.Replace(v.V6.HeaderTemplate, "{signature}", sig, 1)
	a, err := ParseAuthorization(header)
	if err != nil {
		t.Fatal(err)
	}
	want := Authorization{MchID: v.V6.MchID, Nonce: v.V6.Nonce, Timestamp: v.V6.Timestamp, SerialNo: v.V6.SerialNo, Signature: sig}
	if a != want {
		t.Fatalf("got %+v\nwant %+v", a, want)
	}
	pub := &v6Key(t).PublicKey
	if err := VerifyAuthorization(pub, a, v.V6.Method, v.V6.URL, nil); err != nil {
		t.Fatalf("verify: %v", err)
	}
	for _, bad := range []struct{ name, method, url, body string }{
		{"body added", v.V6.Method, v.V6.URL, "x"},
		{"other URL", v.V6.Method, v.V6.URL + "?sub_mchid=1", ""},
		{"other method", "POST", v.V6.URL, ""},
	} {
		if err := VerifyAuthorization(pub, a, bad.method, bad.url, []byte(bad.body)); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("%s: err = %v, want ErrBadSignature", bad.name, err)
		}
	}
	if err := VerifyAuthorization(&v5Key(t).PublicKey, a, v.V6.Method, v.V6.URL, nil); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("wrong key: err = %v", err)
	}
}

func TestParseAuthorization_RoundTrip(t *testing.T) {
	s := Signer{MchID: "1900007291", SerialNo: "ABC", Key: v5Key(t)}
	body := []byte(`{"out_refund_no":"R1","amount":{"refund":1,"total":1,"currency":"CNY"}}`)
	h, err := s.Authorization("POST", "/v3/refund/domestic/refunds", body, 1700000000, "n0nce")
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAuthorization(h)
	if err != nil {
		t.Fatal(err)
	}
	if a.String() != h {
		t.Fatalf("String() = %s\nwant %s", a.String(), h)
	}
	if err := VerifyAuthorization(&s.Key.PublicKey, a, "POST", "/v3/refund/domestic/refunds", body); err != nil {
		t.Fatal(err)
	}
	// Spaces after commas and unknown parameters are tolerated.
	loose := strings.ReplaceAll(h, ",", ", ") + `,future="x"`
	b, err := ParseAuthorization(loose)
	if err != nil {
		t.Fatal(err)
	}
	if b != a {
		t.Fatalf("loose parse %+v != %+v", b, a)
	}
}

func TestParseAuthorization_Invalid(t *testing.T) {
	good := `WECHATPAY2-SHA256-RSA2048 mchid="1",nonce_str="n",timestamp="1554208460",serial_no="S",signature="c2ln"`
	if _, err := ParseAuthorization(good); err != nil {
		t.Fatalf("baseline: %v", err)
	}
	cases := []struct{ name, header string }{
		{"empty", ""},
		{"scheme only", "WECHATPAY2-SHA256-RSA2048"},
		{"other scheme", strings.Replace(good, "SHA256-RSA2048", "SM2-WITH-SM3", 1)},
		{"lower-case scheme", strings.Replace(good, "WECHATPAY2", "wechatpay2", 1)},
		{"bearer", "Bearer abc"},
		{"missing mchid", strings.Replace(good, `mchid="1",`, "", 1)},
		{"missing nonce", strings.Replace(good, `nonce_str="n",`, "", 1)},
		{"missing timestamp", strings.Replace(good, `timestamp="1554208460",`, "", 1)},
		{"missing serial", strings.Replace(good, `serial_no="S",`, "", 1)},
		{"missing signature", strings.Replace(good, `,signature="c2ln"`, "", 1)},
		{"duplicate mchid", good + `,mchid="2"`},
		{"unquoted", strings.Replace(good, `mchid="1"`, `mchid=1`, 1)},
		{"half quoted", strings.Replace(good, `mchid="1"`, `mchid="1`, 1)},
		{"empty value", strings.Replace(good, `mchid="1"`, `mchid=""`, 1)},
		{"lone quote", strings.Replace(good, `mchid="1"`, `mchid="`, 1)},
		{"quote inside", strings.Replace(good, `mchid="1"`, `mchid="1"2"`, 1)},
		{"no equals", good + ",junk"},
		{"trailing comma", good + ","},
		{"leading-zero timestamp", strings.Replace(good, `"1554208460"`, `"01554208460"`, 1)},
		{"zero timestamp", strings.Replace(good, `"1554208460"`, `"0"`, 1)},
		{"negative timestamp", strings.Replace(good, `"1554208460"`, `"-1"`, 1)},
		{"plus timestamp", strings.Replace(good, `"1554208460"`, `"+1554208460"`, 1)},
		{"hex timestamp", strings.Replace(good, `"1554208460"`, `"0x10"`, 1)},
		{"huge timestamp", strings.Replace(good, `"1554208460"`, `"99999999999999999999"`, 1)},
		{"too long", good + `,x="` + strings.Repeat("a", 5000) + `"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := ParseAuthorization(c.header)
			if !errors.Is(err, ErrBadAuthorization) {
				t.Fatalf("err = %v (parsed %+v), want ErrBadAuthorization", err, a)
			}
		})
	}
}

func TestVerifyAuthorization_Probe(t *testing.T) {
	v := loadVectors(t)
	a := Authorization{MchID: "1", Nonce: "n", Timestamp: 1, SerialNo: "S", Signature: v.V12.Signature}
	err := VerifyAuthorization(&v5Key(t).PublicKey, a, "GET", "/", nil)
	if !errors.Is(err, ErrProbe) || errors.Is(err, ErrBadSignature) {
		t.Fatalf("err = %v, want only ErrProbe", err)
	}
}
