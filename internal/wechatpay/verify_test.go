package wechatpay

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func v4Headers(t testing.TB) Headers {
	v := loadVectors(t)
	return Headers{Timestamp: v.V4.Timestamp, Nonce: v.V4.Nonce, Signature: v.V4.Signature, Serial: v.V4.Serial}
}

func TestVerifierVerify_V4(t *testing.T) {
	v := newV4Verifier(t)
	if err := v.Verify(v4Headers(t), readTestdata(t, "v4_body.json")); err != nil {
		t.Fatal(err)
	}
	h := v4Headers(t)
	h.SignatureType = Scheme
	if err := v.Verify(h, readTestdata(t, "v4_body.json")); err != nil {
		t.Fatalf("explicit signature type: %v", err)
	}
}

func TestVerifierVerify_Rejects(t *testing.T) {
	vec := loadVectors(t)
	body := readTestdata(t, "v4_body.json")
	tampered := append([]byte(nil), body...)
	tampered[10] ^= 1
	with := func(f func(*Headers)) Headers { h := v4Headers(t); f(&h); return h }
	cases := []struct {
		name string
		h    Headers
		body []byte
		now  time.Time
		want error
	}{
		{"tampered body", v4Headers(t), tampered, v4Time, ErrBadSignature},
		{"body with extra newline", v4Headers(t), append(append([]byte(nil), body...), '\n'), v4Time, ErrBadSignature},
		{"empty body", v4Headers(t), nil, v4Time, ErrBadSignature},
		{"missing timestamp", with(func(h *Headers) { h.Timestamp = "" }), body, v4Time, ErrMissingHeader},
		{"missing nonce", with(func(h *Headers) { h.Nonce = "" }), body, v4Time, ErrMissingHeader},
		{"missing signature", with(func(h *Headers) { h.Signature = "" }), body, v4Time, ErrMissingHeader},
		{"missing serial", with(func(h *Headers) { h.Serial = "" }), body, v4Time, ErrMissingHeader},
		{"all missing", Headers{}, body, v4Time, ErrMissingHeader},
		{"other nonce", with(func(h *Headers) { h.Nonce = "x" + h.Nonce[1:] }), body, v4Time, ErrBadSignature},
		{"unknown serial", with(func(h *Headers) { h.Serial = "PUB_KEY_ID_0000000000000024101100397200000006" }), body, v4Time, ErrUnknownSerial},
		{"stale: 301s after", v4Headers(t), body, v4Time.Add(301 * time.Second), ErrStaleTimestamp},
		{"stale: 301s before", v4Headers(t), body, v4Time.Add(-301 * time.Second), ErrStaleTimestamp},
		{"stale: a year after", v4Headers(t), body, v4Time.AddDate(1, 0, 0), ErrStaleTimestamp},
		{"timestamp not decimal", with(func(h *Headers) { h.Timestamp = "1624523846.0" }), body, v4Time, ErrInvalidHeader},
		{"timestamp negative", with(func(h *Headers) { h.Timestamp = "-1624523846" }), body, v4Time, ErrInvalidHeader},
		{"timestamp huge", with(func(h *Headers) { h.Timestamp = "9999999999999999999999" }), body, v4Time, ErrInvalidHeader},
		{"signature type SM2", with(func(h *Headers) { h.SignatureType = "WECHATPAY2-SM2-WITH-SM3" }), body, v4Time, ErrUnsupportedAlgorithm},
		{"signature not base64", with(func(h *Headers) { h.Signature = "invalid base64 signature" }), body, v4Time, ErrBadSignature},
		{"signature truncated", with(func(h *Headers) { h.Signature = h.Signature[:100] }), body, v4Time, ErrBadSignature},
		{"probe", with(func(h *Headers) { h.Signature = vec.V12.Signature }), body, v4Time, ErrProbe},
		{"probe with stale timestamp", with(func(h *Headers) { h.Signature = vec.V12.Signature }), body, v4Time.AddDate(0, 0, 1), ErrProbe},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := newV4Verifier(t)
			v.Now = fixedClock(c.now)
			err := v.Verify(c.h, c.body)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if c.want == ErrProbe && errors.Is(err, ErrBadSignature) {
				t.Fatal("a probe must not also match ErrBadSignature")
			}
		})
	}
}

func TestVerifierVerify_SkewBoundary(t *testing.T) {
	body := readTestdata(t, "v4_body.json")
	for _, d := range []time.Duration{-300 * time.Second, 300 * time.Second, 0} {
		v := newV4Verifier(t)
		v.Now = fixedClock(v4Time.Add(d))
		if err := v.Verify(v4Headers(t), body); err != nil {
			t.Fatalf("skew %s: %v", d, err)
		}
	}
	v := newV4Verifier(t)
	v.MaxSkew = time.Minute
	v.Now = fixedClock(v4Time.Add(61 * time.Second))
	if err := v.Verify(v4Headers(t), body); !errors.Is(err, ErrStaleTimestamp) {
		t.Fatalf("MaxSkew 1m, 61s: %v", err)
	}
}

func TestVerifierVerify_CertificateValidity(t *testing.T) {
	key := v5Key(t)
	notBefore := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	notAfter := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	cert := selfSigned(t, key, big.NewInt(0x1234), notBefore, notAfter)
	body := []byte(`{"hello":"world"}`)
	for _, c := range []struct {
		name string
		at   time.Time
		want error
	}{
		{"before validity", notBefore.Add(-time.Hour), ErrCertificateExpired},
		{"within validity", notBefore.Add(time.Hour), nil},
		{"after expiry", notAfter.Add(time.Hour), ErrCertificateExpired},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := SignHeaders(key, "1234", c.at.Unix(), "nonce", body)
			if err != nil {
				t.Fatal(err)
			}
			v := &Verifier{Now: fixedClock(c.at)}
			if err := v.AddCertificate(cert); err != nil {
				t.Fatal(err)
			}
			if err := v.Verify(h, body); !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

// During the switchover WeChat Pay signs some messages with the platform
// certificate and some with the public key; both must verify, each only
// with its own key.
func TestVerifierVerify_Switchover(t *testing.T) {
	const pubID = "PUB_KEY_ID_0114232134912410000000000012345678"
	certKey, pubKey := v5Key(t), v6Key(t)
	v := newV4Verifier(t)
	if err := v.AddPublicKey(pubID, &pubKey.PublicKey); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"x"}`)
	ts := v4Time.Unix()
	for _, c := range []struct {
		name   string
		key    *rsa.PrivateKey
		serial string
		want   error
	}{
		{"certificate", certKey, "D7CE59D1F522D701", nil},
		{"certificate, lower-case serial", certKey, "d7ce59d1f522d701", nil},
		{"public key", pubKey, pubID, nil},
		{"public key id with cert key", certKey, pubID, ErrBadSignature},
		{"cert serial with public key", pubKey, "D7CE59D1F522D701", ErrBadSignature},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := SignHeaders(c.key, c.serial, ts, "abc", body)
			if err != nil {
				t.Fatal(err)
			}
			err = v.Verify(h, body)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	if got := v.Serials(); len(got) != 2 || got[0] != "D7CE59D1F522D701" || got[1] != pubID {
		t.Fatalf("Serials = %v", got)
	}
	v.Remove(pubID)
	h, err := SignHeaders(pubKey, pubID, ts, "abc", body)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(h, body); !errors.Is(err, ErrUnknownSerial) {
		t.Fatalf("after Remove: %v", err)
	}
}

func TestVerifier_AddRejects(t *testing.T) {
	var v Verifier
	pub := &v5Key(t).PublicKey
	if err := v.AddPublicKey("", pub); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty id: %v", err)
	}
	if err := v.AddPublicKey(`a"b`, pub); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("quote in id: %v", err)
	}
	if err := v.AddPublicKey("PUB_KEY_ID_1", nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("nil key: %v", err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.AddPublicKey("PUB_KEY_ID_1", &small.PublicKey); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("1024-bit key: %v", err)
	}
	if err := v.AddCertificate(nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("nil cert: %v", err)
	}
	if len(v.Serials()) != 0 {
		t.Fatal("rejected keys were stored")
	}
	// The zero Verifier knows no serial.
	h, err := SignHeaders(v5Key(t), "S", time.Now().Unix(), "n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(h, nil); !errors.Is(err, ErrUnknownSerial) {
		t.Fatalf("zero Verifier: %v", err)
	}
}

func TestVerifier_PreferredSerial(t *testing.T) {
	key := v5Key(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v := &Verifier{Now: fixedClock(now)}
	if got := v.PreferredSerial(); got != "" {
		t.Fatalf("empty verifier: %q", got)
	}
	add := func(serial int64, from, to time.Time) {
		if err := v.AddCertificate(selfSigned(t, key, big.NewInt(serial), from, to)); err != nil {
			t.Fatal(err)
		}
	}
	add(0x11, now.AddDate(-1, 0, 0), now.AddDate(1, 0, 0))
	add(0x22, now.AddDate(-1, 0, 0), now.AddDate(3, 0, 0))
	add(0x33, now.AddDate(-5, 0, 0), now.AddDate(-1, 0, 0)) // expired, even if added last
	if got := v.PreferredSerial(); got != "22" {
		t.Fatalf("certificates only: %q, want 22", got)
	}
	if err := v.AddPublicKey("PUB_KEY_ID_A", &key.PublicKey); err != nil {
		t.Fatal(err)
	}
	if err := v.AddPublicKey("PUB_KEY_ID_B", &key.PublicKey); err != nil {
		t.Fatal(err)
	}
	if got := v.PreferredSerial(); got != "PUB_KEY_ID_B" {
		t.Fatalf("with public keys: %q, want the latest added", got)
	}
}

func TestHeaders_RoundTrip(t *testing.T) {
	h, err := SignHeaders(v5Key(t), "D7CE59D1F522D701", 1624523846, "nonce1", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	hh := http.Header{}
	h.Set(hh)
	if got := HeadersFrom(hh); got != h {
		t.Fatalf("got %+v want %+v", got, h)
	}
	if hh.Get("Wechatpay-Signature-Type") != Scheme || hh.Get("Wechatpay-Timestamp") != "1624523846" {
		t.Fatalf("headers %v", hh)
	}
	v := newV4Verifier(t)
	if err := v.Verify(HeadersFrom(hh), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		serial, nonce string
		ts            int64
	}{{"", "n", 1}, {"S", "", 1}, {"S", "n", 0}, {"S\n", "n", 1}} {
		if _, err := SignHeaders(v5Key(t), c.serial, c.ts, c.nonce, nil); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("SignHeaders(%q,%d,%q): %v", c.serial, c.ts, c.nonce, err)
		}
	}
}

func TestResponseMessage_EmptyBody(t *testing.T) {
	if got := string(ResponseMessage("1", "n", nil)); got != "1\nn\n\n" {
		t.Fatalf("%q", got)
	}
}

func TestCheckTimestamp_Cases(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name string
		ts   int64
		skew time.Duration
		ok   bool
	}{
		{"now", now.Unix(), 0, true},
		{"5m ago", now.Unix() - 300, 0, true},
		{"5m ahead", now.Unix() + 300, 0, true},
		{"5m1s ago", now.Unix() - 301, 0, false},
		{"5m1s ahead", now.Unix() + 301, 0, false},
		{"milliseconds by mistake", now.UnixMilli(), 0, false},
		{"zero", 0, 0, false},
		{"negative", -1 << 62, 0, false},
		{"max int64", 1<<63 - 1, 0, false},
		{"custom skew", now.Unix() - 30, 10 * time.Second, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckTimestamp(c.ts, now, c.skew)
			if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrStaleTimestamp)) {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
		})
	}
}

// Keys can be rotated while other goroutines verify (run with -race).
func TestVerifier_ConcurrentRotation(t *testing.T) {
	v := newV4Verifier(t)
	body := readTestdata(t, "v4_body.json")
	h := v4Headers(t)
	pub := &v6Key(t).PublicKey
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 50 {
				if err := v.Verify(h, body); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range 50 {
		id := "PUB_KEY_ID_" + strconv.Itoa(i)
		if err := v.AddPublicKey(id, pub); err != nil {
			t.Fatal(err)
		}
		_ = v.PreferredSerial()
		v.Remove(id)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Monitoring reads each certificate's NotAfter from Keys; a public key has
// no expiry and is listed without a made-up date.
func TestVerifierKeys_Expiries(t *testing.T) {
	notAfter := time.Date(2031, 6, 30, 12, 0, 0, 0, time.UTC)
	cert := selfSigned(t, v5Key(t), big.NewInt(0x1234), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), notAfter)
	for _, c := range []struct {
		name      string
		cert, pub bool
		want      map[string]time.Time
	}{
		{"empty", false, false, map[string]time.Time{}},
		{"public key only", false, true, map[string]time.Time{}},
		{"certificate", true, false, map[string]time.Time{"1234": notAfter}},
		{"both, during the switchover", true, true, map[string]time.Time{"1234": notAfter}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := &Verifier{}
			if c.pub {
				if err := v.AddPublicKey("PUB_KEY_ID_0114232134912410000000000012345678", &v6Key(t).PublicKey); err != nil {
					t.Fatal(err)
				}
			}
			if c.cert {
				if err := v.AddCertificate(cert); err != nil {
					t.Fatal(err)
				}
			}
			got := map[string]time.Time{}
			for _, k := range v.Keys() {
				switch {
				case k.Certificate:
					got[k.Serial] = k.NotAfter
				case !k.NotAfter.IsZero() || !k.NotBefore.IsZero():
					t.Fatalf("public key %s has dates %v..%v", k.Serial, k.NotBefore, k.NotAfter)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("expiries = %v, want %v", got, c.want)
			}
			for s, at := range c.want {
				if !got[s].Equal(at) {
					t.Fatalf("expiries = %v, want %v", got, c.want)
				}
			}
		})
	}
}

// TestVerifier_Replace: the serials named are dropped and every key of the
// other Verifier added, in one step; keys not named stay.
func TestVerifier_Replace(t *testing.T) {
	v := newV4Verifier(t)
	if err := v.AddPublicKey("PUB_KEY_ID_OLD", &v6Key(t).PublicKey); err != nil {
		t.Fatal(err)
	}
	from := &Verifier{}
	if err := from.AddPublicKey("PUB_KEY_ID_NEW", &v5Key(t).PublicKey); err != nil {
		t.Fatal(err)
	}
	v.Replace(from, []string{"PUB_KEY_ID_OLD", "NOT_HELD"})
	got := strings.Join(v.Serials(), ",")
	if want := "D7CE59D1F522D701,PUB_KEY_ID_NEW"; got != want {
		t.Fatalf("serials %s, want %s", got, want)
	}
	if s := strings.Join(from.Serials(), ","); s != "PUB_KEY_ID_NEW" {
		t.Fatalf("from changed: %s", s)
	}
}
