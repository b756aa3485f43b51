package wechatpay

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCertificateRefresh is how often a CertificateManager downloads the
// platform certificates when not told otherwise: every 60 minutes, as
// wechatpay-java's auto-certificate service does, well inside WeChat Pay's
// "call it at intervals under 12 hours" and the Go SDK's "not above 2 days,
// not below 1 hour" (PARTNER.md §3.1, §3.3).
const DefaultCertificateRefresh = time.Hour

// DefaultOnDemandGap is the least time between two downloads triggered by
// unknown serials: a flood of forged Wechatpay-Serial values must not turn
// into a flood of downloads.
const DefaultOnDemandGap = time.Minute

// certificateFileSuffix names the stored certificates: SERIAL.pem.
const certificateFileSuffix = ".pem"

// Sentinel errors of CertificateManager.
var (
	// ErrDownload is returned when a certificate download fails: transport
	// error, a non-2xx answer other than "no certificate", or an answer
	// whose signature does not verify.
	ErrDownload = errors.New("wechatpay: certificate download failed")
	// ErrNoCertificates is returned when neither the store nor WeChat Pay
	// has a platform certificate for the account (WeChat Pay answers 404
	// for merchants on public keys only).
	ErrNoCertificates = errors.New("wechatpay: no platform certificate")
)

// CertificateManagerConfig configures a CertificateManager. BaseURL,
// Signer, APIv3Key and Verifier are required.
type CertificateManagerConfig struct {
	// BaseURL is scheme and host as for ClientConfig.BaseURL.
	BaseURL string
	// Signer signs the download request (the account's merchant key).
	Signer Signer
	// APIv3Key decrypts the downloaded certificates.
	APIv3Key []byte
	// Verifier is the account's verifier: downloaded certificates are
	// added to it, and its unknown-serial hook is taken over.
	Verifier *Verifier
	// Dir stores every certificate held as SERIAL.pem (written atomically),
	// so a restart without network still verifies. Empty: not stored.
	Dir string
	// Refresh is the download schedule of Run; zero means
	// DefaultCertificateRefresh.
	Refresh time.Duration
	// OnDemandGap is the least time between downloads triggered by unknown
	// serials; zero means DefaultOnDemandGap.
	OnDemandGap time.Duration
	// HTTPClient sends the downloads; nil means one with
	// DefaultClientTimeout.
	HTTPClient *http.Client
	// Now is the clock (validity, rate limit); nil means time.Now.
	Now func() time.Time
	// Logger receives one line per download and per certificate change;
	// nil discards.
	Logger *slog.Logger
}

// CertificateManager keeps one account's WeChat Pay platform certificates
// in its Verifier current, as the official SDKs' auto-certificate
// downloaders do (PARTNER.md §3):
//
//   - Load reads the stored certificates, so a restart verifies without
//     reaching WeChat Pay.
//   - Refresh downloads GET /v3/certificates, decrypts each certificate
//     with the APIv3 key and adds the new ones. Trust: the answer's
//     signature must verify with a key already held; when the Verifier
//     holds no key at all (the first download; its signature is not
//     checked), or the answer is signed by one of the certificates it
//     carries (WeChat Pay signing
//     with a certificate it has just started serving), the certificates
//     are trusted on the AES-256-GCM decryption with the APIv3 key alone,
//     which only WeChat Pay and the merchant know: what wechatpay-go
//     (first download) and wechatpay-php do. A bad signature by a known
//     key refuses the whole download.
//   - Every certificate is kept until its NotAfter, then dropped from the
//     Verifier and the store, whether or not WeChat Pay still lists it.
//   - Run refreshes every Refresh, and when Verify meets an unknown
//     certificate serial (a new certificate WeChat Pay signs with), at most
//     once per OnDemandGap: the message that named it fails verification
//     (a response stays unknown, a notification is answered non-2xx so
//     WeChat Pay retries) and verifies once the download has brought the
//     certificate.
//
// Methods are safe for concurrent use.
type CertificateManager struct {
	base     string
	signer   atomic.Pointer[Signer] // swapped by SetSigner
	verifier *Verifier
	dir      string
	refresh  time.Duration
	gap      time.Duration
	http     *http.Client
	now      func() time.Time
	log      *slog.Logger
	trigger  chan struct{}

	mu       sync.Mutex
	apiV3Key []byte
	managed  map[string]managedCert // by serial
	lastAsk  time.Time              // last on-demand download granted
	status   CertificateStatus
}

type managedCert struct {
	cert   *x509.Certificate
	source string // CertSourceStore or CertSourceDownload
}

// Where a managed certificate came from.
const (
	CertSourceStore    = "store"
	CertSourceDownload = "download"
)

// CertificateStatus reports a CertificateManager's state, for operators.
type CertificateStatus struct {
	Certificates    []ManagedCertificate `json:"certificates"`
	LastAttempt     time.Time            `json:"last_attempt,omitzero"`
	LastSuccess     time.Time            `json:"last_success,omitzero"`
	LastError       string               `json:"last_error,omitempty"`
	Downloads       int64                `json:"downloads"`         // attempts
	Failures        int64                `json:"failures"`          // failed attempts
	ConsecutiveFail int64                `json:"consecutive_fails"` // failed attempts since the last success
	OnDemand        int64                `json:"on_demand"`         // downloads triggered by unknown serials
	OnDemandDropped int64                `json:"on_demand_dropped"` // unknown serials seen within the gap
}

// ManagedCertificate is one certificate a CertificateManager holds.
type ManagedCertificate struct {
	Serial    string    `json:"serial"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	Source    string    `json:"source"` // "store" or "download"
}

// NewCertificateManager validates cfg, and installs the manager as the
// Verifier's unknown-serial hook. Nothing is read or downloaded yet.
//
// Errors wrap ErrInvalidArgument or ErrInvalidKey.
func NewCertificateManager(cfg CertificateManagerConfig) (*CertificateManager, error) {
	base, err := checkBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if !headerSafe(cfg.Signer.MchID) || !headerSafe(cfg.Signer.SerialNo) || cfg.Signer.Key == nil {
		return nil, fmt.Errorf("%w: certificates: Signer needs a mchid, a serial and a key", ErrInvalidArgument)
	}
	if len(cfg.APIv3Key) != APIv3KeySize {
		return nil, fmt.Errorf("%w: certificates: APIv3 key is %d bytes, want %d", ErrInvalidKey, len(cfg.APIv3Key), APIv3KeySize)
	}
	if cfg.Verifier == nil {
		return nil, fmt.Errorf("%w: certificates: Verifier is required", ErrInvalidArgument)
	}
	if cfg.Refresh < 0 || cfg.OnDemandGap < 0 {
		return nil, fmt.Errorf("%w: certificates: negative Refresh or OnDemandGap", ErrInvalidArgument)
	}
	m := &CertificateManager{
		base: base, verifier: cfg.Verifier, dir: cfg.Dir,
		refresh: cfg.Refresh, gap: cfg.OnDemandGap, now: cfg.Now, log: cfg.Logger,
		trigger: make(chan struct{}, 1), apiV3Key: slices.Clone(cfg.APIv3Key), managed: map[string]managedCert{},
	}
	if m.refresh == 0 {
		m.refresh = DefaultCertificateRefresh
	}
	if m.gap == 0 {
		m.gap = DefaultOnDemandGap
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	hc := &http.Client{Timeout: DefaultClientTimeout}
	if cfg.HTTPClient != nil {
		cp := *cfg.HTTPClient
		hc = &cp
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	m.http = hc
	signer := cfg.Signer
	m.signer.Store(&signer)
	m.verifier.SetUnknownSerialHook(m.unknownSerial)
	return m, nil
}

// SetSigner replaces the merchant key and serial downloads are signed
// with (a reload after the operator replaced the API certificate).
//
// Errors wrap ErrInvalidArgument; on error nothing changes.
func (m *CertificateManager) SetSigner(signer Signer) error {
	if !headerSafe(signer.MchID) || !headerSafe(signer.SerialNo) || signer.Key == nil {
		return fmt.Errorf("%w: certificates: Signer needs a mchid, a serial and a key", ErrInvalidArgument)
	}
	m.signer.Store(&signer)
	return nil
}

// SetAPIv3Key replaces the key that decrypts downloads (after the merchant
// changed it on the merchant platform).
//
// Errors wrap ErrInvalidKey.
func (m *CertificateManager) SetAPIv3Key(key []byte) error {
	if len(key) != APIv3KeySize {
		return fmt.Errorf("%w: APIv3 key is %d bytes, want %d", ErrInvalidKey, len(key), APIv3KeySize)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apiV3Key = slices.Clone(key)
	return nil
}

// unknownSerial is the Verifier's hook. It only decides and signals, so a
// flood of forged serials costs a mutex each: at most one download per
// gap is granted, the rest are counted and dropped.
func (m *CertificateManager) unknownSerial(serial string) {
	now := m.now()
	m.mu.Lock()
	if !m.lastAsk.IsZero() && now.Sub(m.lastAsk) < m.gap {
		m.status.OnDemandDropped++
		m.mu.Unlock()
		return
	}
	m.lastAsk = now
	m.status.OnDemand++
	m.mu.Unlock()
	m.log.Info("wechatpay: unknown platform certificate serial; downloading certificates", "serial", limit(serial, 64))
	select {
	case m.trigger <- struct{}{}:
	default: // a download is already pending
	}
}

// Load reads the stored certificates into the Verifier, dropping (and
// deleting) expired ones. It returns how many are held afterwards. A
// missing directory is not an error.
//
// Errors wrap ErrInvalidKey (a stored file that does not parse, or whose
// name is not its serial) or come from the file system.
func (m *CertificateManager) Load(ctx context.Context) (int, error) {
	if m.dir == "" {
		return 0, nil
	}
	entries, err := os.ReadDir(m.dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("wechatpay: certificate store: %w", err)
	}
	var certs []*x509.Certificate
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, certificateFileSuffix) || strings.HasPrefix(name, ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.dir, name))
		if err != nil {
			return 0, fmt.Errorf("wechatpay: certificate store: %w", err)
		}
		cert, err := ParseCertificate(b)
		if err != nil {
			return 0, fmt.Errorf("certificate store %s: %w", name, err)
		}
		if CertificateSerial(cert)+certificateFileSuffix != name {
			return 0, fmt.Errorf("%w: certificate store: %s holds serial %s", ErrInvalidKey, name, CertificateSerial(cert))
		}
		certs = append(certs, cert)
	}
	if err := m.apply(certs, CertSourceStore); err != nil {
		return 0, err
	}
	m.mu.Lock()
	n := len(m.managed)
	m.mu.Unlock()
	m.log.Info("wechatpay: platform certificates loaded from the store", "dir", m.dir, "certificates", n)
	return n, nil
}

// Refresh downloads the certificates once, adds the new ones to the
// Verifier and the store, and drops expired ones. A 404 (RESOURCE_NOT_EXISTS
// or NOT_FOUND: the account has no platform certificate) is
// ErrNoCertificates, not a failure of the download.
//
// Errors wrap ErrDownload, ErrNoCertificates, or the decryption and parse
// errors of DecryptCertificates.
func (m *CertificateManager) Refresh(ctx context.Context) error {
	start := m.now()
	err := m.download(ctx)
	m.mu.Lock()
	m.status.LastAttempt = start
	m.status.Downloads++
	if err != nil && !errors.Is(err, ErrNoCertificates) {
		m.status.Failures++
		m.status.ConsecutiveFail++
		m.status.LastError = limit(err.Error(), 300)
	} else {
		m.status.LastSuccess = start
		m.status.ConsecutiveFail = 0
		m.status.LastError = ""
		if err != nil {
			m.status.LastError = limit(err.Error(), 300)
		}
	}
	m.mu.Unlock()
	if err != nil {
		m.log.Warn("wechatpay: platform certificate download failed", "err", err.Error())
		return err
	}
	return nil
}

func (m *CertificateManager) download(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+CertificatesPath, nil)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrDownload, limit(err.Error(), maxLoggedMessage))
	}
	auth, err := m.signer.Load().Authorization(http.MethodGet, req.URL.RequestURI(), nil, m.now().Unix(), NewNonce())
	if err != nil {
		return fmt.Errorf("%w: sign: %w", ErrDownload, err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	resp, err := m.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrDownload, limit(err.Error(), maxLoggedMessage))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize+1))
	if err != nil {
		return fmt.Errorf("%w: read: %s", ErrDownload, limit(err.Error(), maxLoggedMessage))
	}
	if len(raw) > MaxResponseSize {
		return fmt.Errorf("%w: answer over %d bytes", ErrDownload, MaxResponseSize)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e ErrorResponse
		_ = json.Unmarshal(raw, &e)
		if resp.StatusCode == http.StatusNotFound && (e.Code == "RESOURCE_NOT_EXISTS" || e.Code == "NOT_FOUND") {
			return fmt.Errorf("%w: WeChat Pay answered %s (the account is on public keys)", ErrNoCertificates, e.Code)
		}
		return fmt.Errorf("%w: HTTP %d %s %s", ErrDownload, resp.StatusCode, limit(e.Code, 64), limit(e.Message, maxLoggedMessage))
	}
	m.mu.Lock()
	key := m.apiV3Key
	m.mu.Unlock()
	certs, err := DecryptCertificates(key, raw)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDownload, err)
	}
	if err := m.checkSignature(HeadersFrom(resp.Header), raw, certs); err != nil {
		return fmt.Errorf("%w: answer signature: %w", ErrDownload, err)
	}
	if len(certs) == 0 {
		return fmt.Errorf("%w: the download lists none", ErrNoCertificates)
	}
	return m.apply(certs, CertSourceDownload)
}

// checkSignature verifies a download's answer with the keys held, falling
// back to the certificates it carries when its serial is unknown (see
// CertificateManager for why).
func (m *CertificateManager) checkSignature(h Headers, raw []byte, certs []*x509.Certificate) error {
	if len(m.verifier.Serials()) == 0 {
		// The first download: nothing to check the signature against, so
		// the decryption with the APIv3 key is the proof (wechatpay-go's
		// null validator does the same).
		m.log.Info("wechatpay: first certificate download trusted on the APIv3 key decryption", "serial", limit(h.Serial, 64))
		return nil
	}
	err := m.verifyKnown(h, raw)
	if !errors.Is(err, ErrUnknownSerial) {
		return err
	}
	carried := &Verifier{MaxSkew: m.verifier.MaxSkew, Now: m.now}
	if err := carried.UpdateCertificates(certs, nil); err != nil {
		return err
	}
	if err := carried.Verify(h, raw); err != nil {
		return err
	}
	m.log.Info("wechatpay: certificate download signed by a certificate it carries; trusted on the APIv3 key decryption",
		"serial", limit(h.Serial, 64))
	return nil
}

// verifyKnown verifies with the account's Verifier without triggering its
// unknown-serial hook (this is the download the hook asks for).
func (m *CertificateManager) verifyKnown(h Headers, raw []byte) error {
	v := m.verifier
	v.mu.RLock()
	snapshot := &Verifier{MaxSkew: v.MaxSkew, Now: v.Now, keys: make(map[string]verifyKey, len(v.keys))}
	for s, k := range v.keys {
		snapshot.keys[s] = k
	}
	v.mu.RUnlock()
	return snapshot.Verify(h, raw)
}

// apply merges certs into the managed set, drops the expired ones, stores
// the new ones, and updates the Verifier in one step.
func (m *CertificateManager) apply(certs []*x509.Certificate, source string) error {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var add []*x509.Certificate
	var remove []string
	for _, c := range certs {
		serial := CertificateSerial(c)
		if now.After(c.NotAfter) {
			if _, held := m.managed[serial]; !held {
				m.removeStored(serial) // an expired certificate found in the store
			}
			continue
		}
		if old, ok := m.managed[serial]; ok && old.cert.Equal(c) {
			continue
		}
		if source == CertSourceDownload {
			if err := m.store(c); err != nil {
				return err
			}
		}
		add = append(add, c)
	}
	for serial, mc := range m.managed {
		if now.After(mc.cert.NotAfter) {
			remove = append(remove, serial)
		}
	}
	if err := m.verifier.UpdateCertificates(add, remove); err != nil {
		return err
	}
	for _, c := range add {
		serial := CertificateSerial(c)
		m.managed[serial] = managedCert{cert: c, source: source}
		m.log.Info("wechatpay: platform certificate added", "serial", serial, "source", source,
			"not_before", c.NotBefore.Format(time.RFC3339), "not_after", c.NotAfter.Format(time.RFC3339))
	}
	for _, serial := range remove {
		delete(m.managed, serial)
		m.removeStored(serial)
		m.log.Info("wechatpay: expired platform certificate dropped", "serial", serial)
	}
	return nil
}

func (m *CertificateManager) store(c *x509.Certificate) error {
	if m.dir == "" {
		return nil
	}
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return fmt.Errorf("wechatpay: certificate store: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	return writeFileAtomic(filepath.Join(m.dir, CertificateSerial(c)+certificateFileSuffix), data)
}

func (m *CertificateManager) removeStored(serial string) {
	if m.dir == "" {
		return
	}
	if err := os.Remove(filepath.Join(m.dir, serial+certificateFileSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("wechatpay: remove expired certificate file", "serial", serial, "err", err.Error())
	}
}

// writeFileAtomic replaces path with data: temporary file, fsync, rename,
// directory fsync, so a crash leaves the old file or the new one.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("wechatpay: certificate store: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("wechatpay: certificate store: %w", werr)
	}
	d, err := os.Open(filepath.Dir(path))
	if err == nil {
		err = d.Sync()
		d.Close()
	}
	if err != nil {
		return fmt.Errorf("wechatpay: certificate store: sync directory: %w", err)
	}
	return nil
}

// Run refreshes every Refresh and whenever an unknown serial asks for it,
// until ctx ends. Failures are logged and counted (Status); the
// certificates held stay in use.
func (m *CertificateManager) Run(ctx context.Context) {
	t := time.NewTimer(m.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.trigger:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		_ = m.Refresh(ctx) // logged and counted by Refresh
		t.Reset(m.refresh)
	}
}

// Status returns the certificates held and the download history.
func (m *CertificateManager) Status() CertificateStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.status
	st.Certificates = make([]ManagedCertificate, 0, len(m.managed))
	for serial, mc := range m.managed {
		st.Certificates = append(st.Certificates, ManagedCertificate{Serial: serial, NotBefore: mc.cert.NotBefore,
			NotAfter: mc.cert.NotAfter, Source: mc.source})
	}
	slices.SortFunc(st.Certificates, func(a, b ManagedCertificate) int { return strings.Compare(a.Serial, b.Serial) })
	return st
}
