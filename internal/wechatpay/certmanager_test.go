package wechatpay_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// certSandbox is a sandbox in certificate mode and a merchant's pieces.
type certSandbox struct {
	keys sandbox.Keys
	sb   *sandbox.Server
	url  string
	// downloads counts GET /v3/certificates calls reaching the sandbox.
	downloads atomic.Int64
}

func newCertSandbox(t *testing.T, edit func(*sandbox.Config)) *certSandbox {
	t.Helper()
	keys, err := sandbox.GenerateKeys("1900000100")
	if err != nil {
		t.Fatal(err)
	}
	cfg := keys.Config()
	cfg.CertificateMode = true
	cfg.TimeFactor = 0.001
	if edit != nil {
		edit(&cfg)
	}
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &certSandbox{keys: keys, sb: sb}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wechatpay.CertificatesPath {
			c.downloads.Add(1)
		}
		sb.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { sb.Close(); hs.Close() })
	c.url = hs.URL
	return c
}

func (c *certSandbox) manager(t *testing.T, v *wechatpay.Verifier, dir string, now func() time.Time) *wechatpay.CertificateManager {
	t.Helper()
	m, err := wechatpay.NewCertificateManager(wechatpay.CertificateManagerConfig{
		BaseURL: c.url, Signer: c.keys.Signer(), APIv3Key: c.keys.APIv3Key, Verifier: v, Dir: dir, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not waiting for time to pass
	}
}

// TestCertificateManager_StoreSurvivesRestart: the first download is
// trusted on decryption and stored; a new manager on the same directory
// verifies with the stored certificate while WeChat Pay is unreachable.
func TestCertificateManager_StoreSurvivesRestart(t *testing.T) {
	c := newCertSandbox(t, nil)
	dir := filepath.Join(t.TempDir(), "certs")
	v := &wechatpay.Verifier{}
	m := c.manager(t, v, dir, nil)
	ctx := context.Background()
	if n, err := m.Load(ctx); n != 0 || err != nil {
		t.Fatalf("empty store: %d %v", n, err)
	}
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	stable, err := sandbox.StablePlatformCertificate(c.keys.PlatformKey, c.keys.MchID)
	if err != nil {
		t.Fatal(err)
	}
	serial := wechatpay.CertificateSerial(stable)
	if got := v.Serials(); len(got) != 1 || got[0] != serial {
		t.Fatalf("verifier holds %v, want %s", got, serial)
	}
	if _, err := os.Stat(filepath.Join(dir, serial+".pem")); err != nil {
		t.Fatal(err)
	}
	st := m.Status()
	if st.Downloads != 1 || st.Failures != 0 || len(st.Certificates) != 1 || st.Certificates[0].Source != wechatpay.CertSourceDownload {
		t.Fatalf("status %+v", st)
	}

	// Restart: WeChat Pay unreachable.
	v2 := &wechatpay.Verifier{}
	m2, err := wechatpay.NewCertificateManager(wechatpay.CertificateManagerConfig{
		BaseURL: "http://127.0.0.1:1", Signer: c.keys.Signer(), APIv3Key: c.keys.APIv3Key, Verifier: v2, Dir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := m2.Load(ctx); n != 1 || err != nil {
		t.Fatalf("load: %d %v", n, err)
	}
	if err := m2.Refresh(ctx); !errors.Is(err, wechatpay.ErrDownload) {
		t.Fatalf("refresh without network: %v", err)
	}
	h, err := wechatpay.SignHeaders(c.keys.PlatformKey, serial, time.Now().Unix(), wechatpay.NewNonce(), []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := v2.Verify(h, []byte(`{}`)); err != nil {
		t.Fatalf("stored certificate does not verify: %v", err)
	}
	st = m2.Status()
	if st.Failures != 1 || st.ConsecutiveFail != 1 || st.LastError == "" || st.Certificates[0].Source != wechatpay.CertSourceStore {
		t.Fatalf("status after a failed download %+v", st)
	}
}

// TestCertificateManager_RotationNotification: WeChat Pay starts signing
// with a certificate the merchant has not downloaded. The notification
// signed with it is refused (non-2xx, so WeChat Pay retries), the unknown
// serial triggers a download, and the retry is accepted; nothing is
// accepted unverified. A refund response behaves the same way.
func TestCertificateManager_RotationNotification(t *testing.T) {
	c := newCertSandbox(t, nil)
	v := &wechatpay.Verifier{}
	m := c.manager(t, v, t.TempDir(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	go m.Run(ctx)

	var mu sync.Mutex
	var results []error
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, res, err := wechatpay.ParseRefundNotification(v, c.keys.APIv3Key, wechatpay.HeadersFrom(r.Header), body)
		mu.Lock()
		results = append(results, err)
		mu.Unlock()
		if err != nil || res.OutRefundNo != "R1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(recv.Close)

	next, err := c.sb.RotateCertificate(0, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.sb.CreateOrder("O1", "", 1000); err != nil {
		t.Fatal(err)
	}
	// The refund is created by a client that does not share v, so the
	// notification is the first message v sees signed by the new serial.
	other, err := c.keys.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	creator, err := wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: c.url, Signer: c.keys.Signer(), Verifier: other, NotifyURL: recv.URL + "/n"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := creator.RequestBody(reservation.RefundRequest{RefundNo: "R1", OutTradeNo: "O1", Amount: 100, Total: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if o := creator.Submit(ctx, "R1", body, 1); o.Kind != reservation.OutcomeUnknown || o.Code != "UNVERIFIED_RESPONSE" {
		t.Fatalf("create: %+v", o)
	}
	waitFor(t, "the notification to be accepted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(results) > 0 && results[len(results)-1] == nil
	})
	mu.Lock()
	got := slices.Clone(results)
	mu.Unlock()
	if len(got) < 2 || !errors.Is(got[0], wechatpay.ErrUnknownSerial) {
		t.Fatalf("notification attempts %v: want refused for the unknown serial, then accepted", got)
	}
	for _, err := range got[1 : len(got)-1] {
		if !errors.Is(err, wechatpay.ErrUnknownSerial) {
			t.Fatalf("attempt refused for another reason: %v", err)
		}
	}
	client, err := wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: c.url, Signer: c.keys.Signer(), Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(v.Serials(), wechatpay.CertificateSerial(next)) {
		t.Fatalf("new certificate not held: %v", v.Serials())
	}
	if got := c.downloads.Load(); got != 2 {
		t.Fatalf("%d downloads, want the first and one on demand", got)
	}
	if o := client.Query(ctx, "R1"); o.Kind != reservation.OutcomeSucceeded {
		t.Fatalf("query after the download: %+v", o)
	}
}

// TestCertificateManager_ForgedSerialFlood: 1,000 messages with forged
// serials within a minute cost one download; the next minute allows one
// more.
func TestCertificateManager_ForgedSerialFlood(t *testing.T) {
	c := newCertSandbox(t, nil)
	var clock atomic.Int64
	clock.Store(time.Now().Unix())
	now := func() time.Time { return time.Unix(clock.Load(), 0) }
	v := &wechatpay.Verifier{Now: now}
	m := c.manager(t, v, "", now)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	go m.Run(ctx)
	forge := func(i int) {
		h := wechatpay.Headers{Timestamp: strconv.FormatInt(clock.Load(), 10), Nonce: "n", Signature: "c2ln",
			Serial: "F0RGED" + strconv.Itoa(i)}
		if err := v.Verify(h, []byte("{}")); !errors.Is(err, wechatpay.ErrUnknownSerial) {
			t.Fatalf("forged serial: %v", err)
		}
	}
	for i := range 1000 {
		forge(i)
	}
	waitFor(t, "the on-demand download", func() bool { return m.Status().Downloads == 2 })
	st := m.Status()
	if st.OnDemand != 1 || st.OnDemandDropped != 999 || c.downloads.Load() != 2 {
		t.Fatalf("on demand %d, dropped %d, downloads %d; want 1, 999, 2 (first + 1)", st.OnDemand, st.OnDemandDropped, c.downloads.Load())
	}
	clock.Add(59)
	forge(1000)
	if st := m.Status(); st.OnDemand != 1 {
		t.Fatalf("a download 59s after the last: %+v", st)
	}
	clock.Add(2)
	forge(1001)
	waitFor(t, "the next minute's download", func() bool { return m.Status().Downloads == 3 })
	// Public key ids cannot be downloaded: they never trigger.
	h := wechatpay.Headers{Timestamp: strconv.FormatInt(clock.Load()+120, 10), Nonce: "n", Signature: "c2ln", Serial: "PUB_KEY_ID_0001"}
	clock.Add(120)
	_ = v.Verify(h, []byte("{}"))
	if st := m.Status(); st.OnDemand != 2 {
		t.Fatalf("a public key id triggered a download: %+v", st)
	}
}

// TestCertificateManager_RefusesBadSignature: a download whose answer is
// signed by a held serial but with another key is refused as a whole, even
// though it decrypts.
func TestCertificateManager_RefusesBadSignature(t *testing.T) {
	c := newCertSandbox(t, nil)
	v := &wechatpay.Verifier{}
	m := c.manager(t, v, "", nil)
	ctx := context.Background()
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	held := v.Serials()[0]
	attacker, err := sandbox.GenerateKeys("1900000100")
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := sandbox.StablePlatformCertificate(attacker.PlatformKey, "x")
	if err != nil {
		t.Fatal(err)
	}
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := wechatpay.EncryptCertificate(c.keys.APIv3Key, rogue)
		if err != nil {
			t.Error(err)
		}
		body, _ := json.Marshal(wechatpay.CertificatesResponse{Data: []wechatpay.DownloadedCertificate{d}})
		h, _ := wechatpay.SignHeaders(attacker.PlatformKey, held, time.Now().Unix(), wechatpay.NewNonce(), body)
		h.SignatureType = ""
		h.Set(w.Header())
		w.Write(body)
	}))
	t.Cleanup(fake.Close)
	m2, err := wechatpay.NewCertificateManager(wechatpay.CertificateManagerConfig{
		BaseURL: fake.URL, Signer: c.keys.Signer(), APIv3Key: c.keys.APIv3Key, Verifier: v,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Refresh(ctx); !errors.Is(err, wechatpay.ErrDownload) || !errors.Is(err, wechatpay.ErrBadSignature) {
		t.Fatalf("forged download: %v", err)
	}
	if got := v.Serials(); len(got) != 1 || got[0] != held {
		t.Fatalf("verifier changed: %v", got)
	}
}

// TestCertificateManager_ExpiryAndAPIv3Key: an expired certificate leaves
// the verifier and the store; after an APIv3 key change downloads fail
// until the manager has the new key.
func TestCertificateManager_ExpiryAndAPIv3Key(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	c := newCertSandbox(t, func(cfg *sandbox.Config) { cfg.Now = now; cfg.MaxSkew = 48 * time.Hour })
	short, err := c.sb.RotateCertificate(time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	v := &wechatpay.Verifier{Now: now, MaxSkew: 48 * time.Hour}
	m := c.manager(t, v, dir, now)
	ctx := context.Background()
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	shortSerial := wechatpay.CertificateSerial(short)
	if len(v.Serials()) != 2 {
		t.Fatalf("held %v", v.Serials())
	}
	offset.Store(int64(2 * time.Hour))
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := v.Serials(); len(got) != 1 || got[0] == shortSerial {
		t.Fatalf("after expiry held %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, shortSerial+".pem")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("expired certificate still stored: %v", err)
	}
	newKey := []byte("NEWKEYNEWKEYNEWKEYNEWKEYNEWKEY12")
	if err := c.sb.ChangeAPIv3Key(newKey, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(ctx); !errors.Is(err, wechatpay.ErrDecrypt) {
		t.Fatalf("download with the old APIv3 key: %v", err)
	}
	if len(v.Serials()) != 1 {
		t.Fatal("a failed download changed the verifier")
	}
	if err := m.SetAPIv3Key(newKey); err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestVerifier_UpdateCertificatesAtomic: readers see the old set or the
// new one, never half of an update.
func TestVerifier_UpdateCertificatesAtomic(t *testing.T) {
	var certs []*x509.Certificate
	for range 2 {
		k, err := sandbox.GenerateKeys("1")
		if err != nil {
			t.Fatal(err)
		}
		cert, err := sandbox.StablePlatformCertificate(k.PlatformKey, "1")
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, cert)
	}
	v := &wechatpay.Verifier{}
	serials := []string{wechatpay.CertificateSerial(certs[0]), wechatpay.CertificateSerial(certs[1])}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var bad atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if n := len(v.Keys()); n != 0 && n != 2 {
					bad.Add(1)
				}
			}
		}()
	}
	for range 200 {
		if err := v.UpdateCertificates(certs, nil); err != nil {
			t.Fatal(err)
		}
		if err := v.UpdateCertificates(nil, serials); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d reads saw half an update", bad.Load())
	}
	// A bad certificate refuses the whole update.
	if err := v.UpdateCertificates([]*x509.Certificate{certs[0], {}}, nil); !errors.Is(err, wechatpay.ErrInvalidKey) || len(v.Keys()) != 0 {
		t.Fatalf("partial update: %v, %d keys", err, len(v.Keys()))
	}
}

// TestCertificateManager_FirstDownloadTrustsDecryption: with nothing held,
// a download is trusted on the APIv3 key alone, whatever signs it (as
// wechatpay-go's first download); once something is held, an answer signed
// by an unknown key that the download does not carry is refused.
func TestCertificateManager_FirstDownloadTrustsDecryption(t *testing.T) {
	c := newCertSandbox(t, nil)
	other, err := sandbox.GenerateKeys("1900000100")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := sandbox.StablePlatformCertificate(c.keys.PlatformKey, c.keys.MchID)
	if err != nil {
		t.Fatal(err)
	}
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := wechatpay.EncryptCertificate(c.keys.APIv3Key, cert)
		body, _ := json.Marshal(wechatpay.CertificatesResponse{Data: []wechatpay.DownloadedCertificate{d}})
		h, _ := wechatpay.SignHeaders(other.PlatformKey, "PUB_KEY_ID_0099", time.Now().Unix(), wechatpay.NewNonce(), body)
		h.SignatureType = ""
		h.Set(w.Header())
		w.Write(body)
	}))
	t.Cleanup(fake.Close)
	v := &wechatpay.Verifier{}
	m, err := wechatpay.NewCertificateManager(wechatpay.CertificateManagerConfig{
		BaseURL: fake.URL, Signer: c.keys.Signer(), APIv3Key: c.keys.APIv3Key, Verifier: v,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Refresh(ctx); err != nil {
		t.Fatalf("first download: %v", err)
	}
	if len(v.Serials()) != 1 {
		t.Fatalf("held %v", v.Serials())
	}
	if err := m.Refresh(ctx); !errors.Is(err, wechatpay.ErrUnknownSerial) {
		t.Fatalf("second download signed by an unknown key: %v", err)
	}
}
