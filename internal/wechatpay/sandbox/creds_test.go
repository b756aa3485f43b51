package sandbox

import (
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// downloadCerts fetches /v3/certificates and decrypts it with apiV3Key.
func downloadCerts(t *testing.T, m *merchant, apiV3Key []byte, o reqOpts) (response, []*x509.Certificate) {
	t.Helper()
	r, err := m.send(http.MethodGet, certificatesPath, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusOK {
		return r, nil
	}
	certs, err := wechatpay.DecryptCertificates(apiV3Key, r.body)
	if err != nil {
		t.Fatalf("decrypt download: %v (%s)", err, r.body)
	}
	return r, certs
}

func serials(certs []*x509.Certificate) []string {
	var out []string
	for _, c := range certs {
		out = append(out, wechatpay.CertificateSerial(c))
	}
	return out
}

// certMerchant is a merchant on platform certificates: it trusts what the
// first download decrypts to.
func certMerchant(t *testing.T, f *fixture) (*merchant, *x509.Certificate) {
	t.Helper()
	m := &merchant{t: t, base: f.http.URL, client: f.m.client, signer: f.m.signer, verifier: &wechatpay.Verifier{}}
	r, certs := downloadCerts(t, m, f.keys.APIv3Key, reqOpts{})
	if r.status != 200 || len(certs) != 1 {
		t.Fatalf("first download: %d %s", r.status, r.body)
	}
	if err := m.verifier.AddCertificate(certs[0]); err != nil {
		t.Fatal(err)
	}
	return m, certs[0]
}

func TestCertificates_CertificateMode(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.CertificateMode = true })
	f.order(t, "O1", 1000)
	m, cert := certMerchant(t, f)
	stable, err := StablePlatformCertificate(f.keys.PlatformKey, f.keys.MchID)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.Equal(stable) || !f.keys.PlatformKey.PublicKey.Equal(cert.PublicKey) {
		t.Fatal("served certificate is not the stable one over the platform key")
	}
	serial := wechatpay.CertificateSerial(cert)
	if len(serial) != 40 {
		t.Fatalf("serial %q is not 40 hex digits", serial)
	}
	// The download and a refund answer are signed with the certificate's serial.
	r, _ := downloadCerts(t, m, f.keys.APIv3Key, reqOpts{})
	if r.verifyErr != nil || r.header.Get(wechatpay.HeaderSerial) != serial {
		t.Fatalf("download signed by %q: %v", r.header.Get(wechatpay.HeaderSerial), r.verifyErr)
	}
	cr := m.must(http.MethodPost, refundsPath, refundBody("O1", "R1", 100, 1000, ""))
	if cr.header.Get(wechatpay.HeaderSerial) != serial {
		t.Fatalf("refund answer signed by %q, want %s", cr.header.Get(wechatpay.HeaderSerial), serial)
	}
	// The public key id no longer verifies: the merchant on public keys
	// sees an unknown serial.
	pr, err := f.m.send(http.MethodGet, refundsPath+"/R1", nil, reqOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(pr.verifyErr, wechatpay.ErrUnknownSerial) {
		t.Fatalf("public-key merchant verified a certificate-signed answer: %v", pr.verifyErr)
	}
	// The wrong APIv3 key does not open the download.
	if _, err := wechatpay.DecryptCertificates([]byte(strings.Repeat("x", 32)), r.body); !errors.Is(err, wechatpay.ErrDecrypt) {
		t.Fatalf("wrong APIv3 key: %v", err)
	}
	// An unsigned download is refused like any call.
	if r, _ := downloadCerts(t, m, f.keys.APIv3Key, reqOpts{noAuth: true}); r.status != 401 || r.code() != "SIGN_ERROR" {
		t.Fatalf("unsigned download: %d %s", r.status, r.body)
	}
}

func TestCertificates_PublicKeyModeHasNone(t *testing.T) {
	f := newFixture(t, nil)
	r, _ := downloadCerts(t, f.m, f.keys.APIv3Key, reqOpts{})
	if r.status != http.StatusNotFound || r.code() != "RESOURCE_NOT_EXISTS" || r.verifyErr != nil {
		t.Fatalf("download without certificates: %d %s (%v)", r.status, r.body, r.verifyErr)
	}
}

// TestCertificates_Rotation drives WeChat Pay's rotation: a new certificate
// is served next to the old one, then signs, then the old one is retired;
// a short-lived one stops being served when it expires.
func TestCertificates_Rotation(t *testing.T) {
	var offset atomic.Int64
	f := newFixture(t, func(c *Config) {
		c.CertificateMode = true
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	})
	f.order(t, "O1", 1000)
	m, old := certMerchant(t, f)
	oldSerial := wechatpay.CertificateSerial(old)
	next, err := f.sb.RotateCertificate(2*time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	nextSerial := wechatpay.CertificateSerial(next)
	r, certs := downloadCerts(t, m, f.keys.APIv3Key, reqOpts{})
	if got := serials(certs); len(got) != 2 || got[0] != oldSerial || got[1] != nextSerial {
		t.Fatalf("served %v, want old then new", got)
	}
	if r.verifyErr != nil || r.header.Get(wechatpay.HeaderSerial) != oldSerial {
		t.Fatalf("before the switch the old certificate signs: %q %v", r.header.Get(wechatpay.HeaderSerial), r.verifyErr)
	}
	if err := f.sb.RetireCertificate(oldSerial); err == nil {
		t.Fatal("retired the certificate that signs")
	}
	if err := f.sb.SignWith(strings.ToLower(nextSerial)); err != nil {
		t.Fatal(err)
	}
	resp, err := m.send(http.MethodPost, refundsPath, refundBody("O1", "R1", 100, 1000, ""), reqOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.header.Get(wechatpay.HeaderSerial) != nextSerial || !errors.Is(resp.verifyErr, wechatpay.ErrUnknownSerial) {
		t.Fatalf("after the switch: serial %q, verify %v; want the new serial, unknown to the merchant", resp.header.Get(wechatpay.HeaderSerial), resp.verifyErr)
	}
	if err := m.verifier.AddCertificate(certs[1]); err != nil {
		t.Fatal(err)
	}
	if q := m.must(http.MethodGet, refundsPath+"/R1", nil); q.header.Get(wechatpay.HeaderSerial) != nextSerial {
		t.Fatalf("query signed by %q", q.header.Get(wechatpay.HeaderSerial))
	}
	if err := f.sb.RetireCertificate(oldSerial); err != nil {
		t.Fatal(err)
	}
	if _, certs := downloadCerts(t, m, f.keys.APIv3Key, reqOpts{}); len(certs) != 1 || serials(certs)[0] != nextSerial {
		t.Fatalf("after retiring: %v", serials(certs))
	}
	if err := f.sb.SignWith(oldSerial); err == nil {
		t.Fatal("signing with a retired certificate")
	}
	// Past its NotAfter the new one is no longer served either.
	offset.Store(int64(3 * time.Hour))
	ts := time.Now().Add(3 * time.Hour).Unix()
	if r, _ := downloadCerts(t, m, f.keys.APIv3Key, reqOpts{timestamp: ts}); r.status != http.StatusNotFound || r.code() != "RESOURCE_NOT_EXISTS" {
		t.Fatalf("after expiry: %d %s", r.status, r.body)
	}
}

func TestCredentials_PublicKeySwitch(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.CertificateMode = true })
	f.order(t, "O1", 1000)
	m, _ := certMerchant(t, f)
	id, pub, err := f.sb.AddPublicKey(true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "PUB_KEY_ID_") || f.sb.Credentials().Signing != id {
		t.Fatalf("id %q, credentials %+v", id, f.sb.Credentials())
	}
	r, err := m.send(http.MethodPost, refundsPath, refundBody("O1", "R1", 100, 1000, ""), reqOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(r.verifyErr, wechatpay.ErrUnknownSerial) {
		t.Fatalf("certificate-only merchant: %v", r.verifyErr)
	}
	if err := m.verifier.AddPublicKey(id, pub); err != nil {
		t.Fatal(err)
	}
	if q := m.must(http.MethodGet, refundsPath+"/R1", nil); q.header.Get(wechatpay.HeaderSerial) != id {
		t.Fatalf("signed by %q", q.header.Get(wechatpay.HeaderSerial))
	}
	// Certificates are still served during the switchover.
	if _, certs := downloadCerts(t, m, f.keys.APIv3Key, reqOpts{}); len(certs) != 1 {
		t.Fatalf("certificates during the switchover: %d", len(certs))
	}
}

func TestCredentials_APIv3KeyChange(t *testing.T) {
	var offset atomic.Int64
	f := newFixture(t, func(c *Config) {
		c.CertificateMode = true
		c.MaxSkew = 24 * time.Hour
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	})
	m, _ := certMerchant(t, f)
	newKey := []byte(strings.Repeat("N", 32))
	if err := f.sb.ChangeAPIv3Key(newKey[:31], time.Time{}); err == nil {
		t.Fatal("accepted a 31-byte key")
	}
	if err := f.sb.ChangeAPIv3Key(newKey, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if at := f.sb.Credentials().APIv3KeyChangeAt; at.IsZero() {
		t.Fatal("pending change not reported")
	}
	if _, certs := downloadCerts(t, m, f.keys.APIv3Key, reqOpts{}); len(certs) != 1 {
		t.Fatal("before the change the old key opens the download")
	}
	offset.Store(int64(time.Hour))
	r, err := m.send(http.MethodGet, certificatesPath, nil, reqOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wechatpay.DecryptCertificates(f.keys.APIv3Key, r.body); !errors.Is(err, wechatpay.ErrDecrypt) {
		t.Fatalf("old key after the change: %v", err)
	}
	if certs, err := wechatpay.DecryptCertificates(newKey, r.body); err != nil || len(certs) != 1 {
		t.Fatalf("new key after the change: %v", err)
	}
}

func TestCredentials_AdminRoutes(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.CertificateMode = true })
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(f.http.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}
	if st, body := post("/sandbox/credentials/certificates", `{"valid_for":"48h"}`); st != 201 || !strings.Contains(body, "BEGIN CERTIFICATE") {
		t.Fatalf("rotate: %d %s", st, body)
	}
	info := f.sb.Credentials()
	if len(info.Certificates) != 2 {
		t.Fatalf("credentials %+v", info)
	}
	newSerial := info.Certificates[1].Serial
	if st, body := post("/sandbox/credentials/signing", `{"id":"`+newSerial+`"}`); st != 204 {
		t.Fatalf("switch: %d %s", st, body)
	}
	req, _ := http.NewRequest(http.MethodDelete, f.http.URL+"/sandbox/credentials/certificates/"+info.Certificates[0].Serial, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || !f.sb.Credentials().Certificates[0].Retired {
		t.Fatalf("retire: %d", resp.StatusCode)
	}
	if st, body := post("/sandbox/credentials/public-keys", `{"sign":true}`); st != 201 || !strings.Contains(body, "PUB_KEY_ID_") || !strings.Contains(body, "BEGIN PUBLIC KEY") {
		t.Fatalf("public key: %d %s", st, body)
	}
	if st, body := post("/sandbox/credentials/apiv3-key", `{"key":"`+strings.Repeat("k", 32)+`","at":"`+time.Now().Add(time.Hour).Format(time.RFC3339)+`"}`); st != 204 {
		t.Fatalf("apiv3 key: %d %s", st, body)
	}
	for _, bad := range []struct{ path, body string }{
		{"/sandbox/credentials/signing", `{"id":"NOPE"}`},
		{"/sandbox/credentials/apiv3-key", `{"key":"short"}`},
		{"/sandbox/credentials/certificates", `{"valid_for":"-1h"}`},
		{"/sandbox/credentials/certificates", `{"bogus":1}`},
	} {
		if st, body := post(bad.path, bad.body); st != 400 {
			t.Errorf("%s %s: %d %s", bad.path, bad.body, st, body)
		}
	}
	resp, err = http.Get(f.http.URL + "/sandbox/credentials")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET credentials: %d", resp.StatusCode)
	}
}

// TestMulti_CertificatesPerAccount: a provider's certificates are the
// account's, downloaded without sub_mchid, and a rotation through one
// sub-merchant's books signs the other's answers too.
func TestMulti_CertificatesPerAccount(t *testing.T) {
	f := newMultiFixture(t, func(_ wechatpay.Merchant, c *Config) { c.CertificateMode = true })
	r, certs := downloadCerts(t, f.p, f.kp.APIv3Key, reqOpts{})
	if r.status != 200 || len(certs) != 1 {
		t.Fatalf("provider download: %d %s", r.status, r.body)
	}
	next, err := f.mu.Book(bookS1).RotateCertificate(0, true)
	if err != nil {
		t.Fatal(err)
	}
	f.order(t, bookS2, "O1", 1000)
	resp, err := f.p.send(http.MethodPost, refundsPath, partnerBody(subS2, "O1", "R1", 100, 1000), reqOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.status != 200 || resp.header.Get(wechatpay.HeaderSerial) != wechatpay.CertificateSerial(next) {
		t.Fatalf("S2 answer: %d, serial %q", resp.status, resp.header.Get(wechatpay.HeaderSerial))
	}
	// Another account is untouched.
	if _, certs := downloadCerts(t, f.a, f.ka.APIv3Key, reqOpts{}); len(certs) != 1 {
		t.Fatalf("A serves %d certificates", len(certs))
	}
}

// TestMulti_CredentialsAdmin: the credential routes of a book rotate its
// account's keys, seen by the account's other books and not by another
// account.
func TestMulti_CredentialsAdmin(t *testing.T) {
	f := newMultiFixture(t, func(_ wechatpay.Merchant, c *Config) { c.CertificateMode = true })
	resp, err := http.Post(f.http.URL+"/sandbox/books/"+mchP+"-"+subS1+"/credentials/public-keys", "application/json", strings.NewReader(`{"sign":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("add public key: %d", resp.StatusCode)
	}
	s1, s2, a := f.mu.Book(bookS1).Credentials(), f.mu.Book(bookS2).Credentials(), f.mu.Book(bookA).Credentials()
	if !strings.HasPrefix(s1.Signing, "PUB_KEY_ID_") || s1.Signing != s2.Signing || len(s2.PublicKeys) != 2 {
		t.Fatalf("S1 %+v, S2 %+v", s1, s2)
	}
	if strings.HasPrefix(a.Signing, "PUB_KEY_ID_") || len(a.PublicKeys) != 1 {
		t.Fatalf("another account changed: %+v", a)
	}
}
