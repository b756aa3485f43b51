package sandbox

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// DefaultCertificateValidity is how long a platform certificate issued by
// RotateCertificate is valid when no validity is given: WeChat Pay's are
// valid five years (PARTNER.md §3.4).
const DefaultCertificateValidity = 5 * 365 * 24 * time.Hour

// keyring is the WeChat Pay side's credentials of one account: platform
// certificates (served by /v3/certificates), public keys, which of them
// signs responses and notifications, and the APIv3 key with a pending
// change. The books of one account share it (Multi), so a rotation applies
// to the whole account.
type keyring struct {
	mu      sync.RWMutex
	keys    map[string]*platformKey // by certificate serial or public key id
	certs   []string                // certificate serials in issue order
	signing string
	apiV3   []byte
	nextV3  []byte    // replaces apiV3 at nextAt
	nextAt  time.Time // zero: no change pending
	// merchantKeys verify the merchant's request signatures, by API
	// certificate serial (upper case): WeChat Pay accepts every API
	// certificate of the merchant that is not revoked.
	merchantKeys map[string]*rsa.PublicKey
}

type platformKey struct {
	key     *rsa.PrivateKey
	cert    *x509.Certificate // nil for a public key
	retired bool              // no longer served or used (作废 / expired early)
}

// newKeyring builds the keyring of a config: the public key
// cfg.PublicKeyID over cfg.PlatformKey, and in certificate mode a platform
// certificate over the same key that signs instead. The certificate is
// derived from the key alone, so a restarted sandbox serves the same one.
func newKeyring(cfg *Config) (*keyring, error) {
	k := &keyring{keys: map[string]*platformKey{cfg.PublicKeyID: {key: cfg.PlatformKey}}, signing: cfg.PublicKeyID,
		apiV3: cfg.APIv3Key, merchantKeys: map[string]*rsa.PublicKey{strings.ToUpper(cfg.MerchantSerial): cfg.MerchantPublicKey}}
	if !cfg.CertificateMode {
		return k, nil
	}
	cert, err := StablePlatformCertificate(cfg.PlatformKey, cfg.MchID)
	if err != nil {
		return nil, err
	}
	serial := wechatpay.CertificateSerial(cert)
	k.keys[serial] = &platformKey{key: cfg.PlatformKey, cert: cert}
	k.certs = append(k.certs, serial)
	k.signing = serial
	return k, nil
}

// StablePlatformCertificate returns the self-signed platform certificate a
// sandbox in certificate mode starts with: its serial is derived from key,
// valid 2025-01-01 to 2035-01-01, so the same key always gives the same
// certificate.
func StablePlatformCertificate(key *rsa.PrivateKey, mchID string) (*x509.Certificate, error) {
	if key == nil {
		return nil, fmt.Errorf("%w: nil platform key", ErrInvalidArgument)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("sandbox: marshal platform key: %w", err)
	}
	sum := sha256.Sum256(der)
	sum[0] &= 0x7f // positive
	sum[0] |= 0x10 // and no leading zero byte, so the hex is 40 digits
	serial := new(big.Int).SetBytes(sum[:20])
	nb := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	return issueCertificate(key, serial, mchID, nb, nb.AddDate(10, 0, 0))
}

func issueCertificate(key *rsa.PrivateKey, serial *big.Int, mchID string, notBefore, notAfter time.Time) (*x509.Certificate, error) {
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "Tenpay.com Root CA sandbox platform certificate", Organization: []string{"sandbox " + mchID}},
		NotBefore:    notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("sandbox: issue certificate: %w", err)
	}
	return x509.ParseCertificate(der)
}

// signer returns the key and serial that sign now.
func (k *keyring) signer() (*rsa.PrivateKey, string) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.keys[k.signing].key, k.signing
}

// decryptionKey returns the private key of the public key or platform
// certificate serial names, if the account has it and has not retired it:
// what a merchant may encrypt sensitive fields for.
func (k *keyring) decryptionKey(serial string) *rsa.PrivateKey {
	k.mu.RLock()
	defer k.mu.RUnlock()
	pk := k.keys[serial]
	if pk == nil || pk.retired {
		return nil
	}
	return pk.key
}

// apiV3Key returns the APIv3 key in force at now.
func (k *keyring) apiV3Key(now time.Time) []byte {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if !k.nextAt.IsZero() && !now.Before(k.nextAt) {
		return k.nextV3
	}
	return k.apiV3
}

// served returns the certificates /v3/certificates lists at now: not
// retired and not expired, in issue order.
func (k *keyring) served(now time.Time) []*x509.Certificate {
	k.mu.RLock()
	defer k.mu.RUnlock()
	var out []*x509.Certificate
	for _, s := range k.certs {
		if pk := k.keys[s]; !pk.retired && !now.After(pk.cert.NotAfter) {
			out = append(out, pk.cert)
		}
	}
	return out
}

// CredentialsInfo describes a sandbox account's WeChat Pay credentials.
type CredentialsInfo struct {
	Signing      string            `json:"signing"` // serial or public key id signing now
	Certificates []CertificateInfo `json:"certificates"`
	PublicKeys   []string          `json:"public_keys"`
	// APIv3KeyChangeAt is when a pending APIv3 key change takes effect;
	// zero when none is pending or it has happened.
	APIv3KeyChangeAt time.Time `json:"apiv3_key_change_at,omitzero"`
}

// CertificateInfo is one platform certificate of CredentialsInfo.
type CertificateInfo struct {
	Serial    string    `json:"serial"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	Retired   bool      `json:"retired"`
}

// Credentials describes the account's platform certificates, public keys
// and signing key.
func (s *Server) Credentials() CredentialsInfo {
	k := s.keys
	now := s.cfg.Now()
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := CredentialsInfo{Signing: k.signing, Certificates: []CertificateInfo{}, PublicKeys: []string{}}
	for _, serial := range k.certs {
		pk := k.keys[serial]
		out.Certificates = append(out.Certificates, CertificateInfo{Serial: serial, NotBefore: pk.cert.NotBefore,
			NotAfter: pk.cert.NotAfter, Retired: pk.retired})
	}
	for id, pk := range k.keys {
		if pk.cert == nil {
			out.PublicKeys = append(out.PublicKeys, id)
		}
	}
	slices.Sort(out.PublicKeys)
	if !k.nextAt.IsZero() && now.Before(k.nextAt) {
		out.APIv3KeyChangeAt = k.nextAt
	}
	return out
}

// RotateCertificate issues a new platform certificate over a new key,
// valid from a minute ago for validFor (zero: DefaultCertificateValidity),
// served by /v3/certificates from now on next to the old ones, which stay
// served until they expire or are retired. With sign it signs responses and
// notifications at once; otherwise the old key keeps signing until
// SignWith (WeChat Pay publishes a new certificate days before it uses it,
// PARTNER.md §3.4).
//
// Errors wrap ErrInvalidArgument (negative validFor).
func (s *Server) RotateCertificate(validFor time.Duration, sign bool) (*x509.Certificate, error) {
	if validFor < 0 {
		return nil, fmt.Errorf("%w: negative certificate validity", ErrInvalidArgument)
	}
	if validFor == 0 {
		validFor = DefaultCertificateValidity
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("sandbox: generate platform key: %w", err)
	}
	b := make([]byte, 20)
	rand.Read(b)
	b[0] = b[0]&0x7f | 0x10
	now := s.cfg.Now()
	cert, err := issueCertificate(key, new(big.Int).SetBytes(b), s.cfg.MchID, now.Add(-time.Minute), now.Add(validFor))
	if err != nil {
		return nil, err
	}
	serial := wechatpay.CertificateSerial(cert)
	k := s.keys
	k.mu.Lock()
	k.keys[serial] = &platformKey{key: key, cert: cert}
	k.certs = append(k.certs, serial)
	if sign {
		k.signing = serial
	}
	k.mu.Unlock()
	s.log.Info("platform certificate issued", "serial", serial, "not_after", cert.NotAfter, "signing", sign)
	return cert, nil
}

// AddPublicKey creates a new WeChat Pay public key (PUB_KEY_ID_...) over a
// new key; with sign it signs responses and notifications at once (the
// switchover from certificates, PARTNER.md §3.5, compressed to one step;
// SignWith can switch back and forth to imitate the gradual one).
func (s *Server) AddPublicKey(sign bool) (string, *rsa.PublicKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", nil, fmt.Errorf("sandbox: generate public key: %w", err)
	}
	id := "PUB_KEY_ID_" + randomDigits(34)
	k := s.keys
	k.mu.Lock()
	k.keys[id] = &platformKey{key: key}
	if sign {
		k.signing = id
	}
	k.mu.Unlock()
	s.log.Info("public key added", "id", id, "signing", sign)
	return id, &key.PublicKey, nil
}

// SignWith makes the certificate or public key id sign responses and
// notifications from now on.
//
// Errors wrap ErrInvalidArgument (unknown or retired).
func (s *Server) SignWith(id string) error {
	k := s.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	pk, ok := k.keys[id]
	if !ok {
		pk, ok = k.keys[strings.ToUpper(id)]
		id = strings.ToUpper(id)
	}
	if !ok || pk.retired {
		return fmt.Errorf("%w: no usable key %q", ErrInvalidArgument, id)
	}
	k.signing = id
	return nil
}

// AddMerchantKey makes the merchant API certificate serial, over pub,
// accepted on requests next to those already accepted, as when the
// merchant has applied for a new API certificate.
//
// Errors wrap ErrInvalidArgument.
func (s *Server) AddMerchantKey(serial string, pub *rsa.PublicKey) error {
	if !headerSafe(serial) || pub == nil {
		return fmt.Errorf("%w: a merchant key needs a serial and a public key", ErrInvalidArgument)
	}
	k := s.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	k.merchantKeys[strings.ToUpper(serial)] = pub
	return nil
}

// RevokeMerchantKey stops accepting requests signed under the merchant API
// certificate serial, as when the merchant revokes its old certificate
// after switching to a new one. The last one cannot be revoked.
//
// Errors wrap ErrInvalidArgument.
func (s *Server) RevokeMerchantKey(serial string) error {
	k := s.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	key := strings.ToUpper(serial)
	if _, ok := k.merchantKeys[key]; !ok || len(k.merchantKeys) == 1 {
		return fmt.Errorf("%w: %q is not a merchant key, or is the last one", ErrInvalidArgument, serial)
	}
	delete(k.merchantKeys, key)
	return nil
}

// merchantKey is the merchant public key of an API certificate serial.
func (k *keyring) merchantKey(serial string) (*rsa.PublicKey, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	pub, ok := k.merchantKeys[strings.ToUpper(serial)]
	return pub, ok
}

// RetireCertificate stops serving and using a platform certificate, as
// when WeChat Pay's old certificate expires or the merchant voids it.
//
// Errors wrap ErrInvalidArgument (unknown serial, or the certificate signs
// now: switch with SignWith first).
func (s *Server) RetireCertificate(serial string) error {
	serial = strings.ToUpper(serial)
	k := s.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	pk, ok := k.keys[serial]
	switch {
	case !ok || pk.cert == nil:
		return fmt.Errorf("%w: no platform certificate %q", ErrInvalidArgument, serial)
	case k.signing == serial:
		return fmt.Errorf("%w: certificate %s signs now; switch first", ErrInvalidArgument, serial)
	}
	pk.retired = true
	return nil
}

// ChangeAPIv3Key replaces the APIv3 key at at (zero: now). WeChat Pay
// invalidates the old key at once (PARTNER.md §3.6): certificate downloads
// and notifications built from then on use the new key. A notification
// built before keeps its ciphertext on retries (whether WeChat Pay
// re-encrypts is unconfirmed; this is the harder case for a merchant).
//
// Errors wrap ErrInvalidArgument (key not 32 bytes).
func (s *Server) ChangeAPIv3Key(key []byte, at time.Time) error {
	if len(key) != wechatpay.APIv3KeySize {
		return fmt.Errorf("%w: APIv3 key is %d bytes, want %d", ErrInvalidArgument, len(key), wechatpay.APIv3KeySize)
	}
	now := s.cfg.Now()
	if at.IsZero() {
		at = now
	}
	k := s.keys
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.nextAt.IsZero() && !now.Before(k.nextAt) {
		k.apiV3 = k.nextV3 // the earlier change has happened
	}
	k.nextV3, k.nextAt = slices.Clone(key), at
	s.log.Info("APIv3 key change scheduled", "at", at)
	return nil
}

// handleCertificates serves GET /v3/certificates: every served platform
// certificate encrypted with the APIv3 key in force, signed like any
// answer. Without one it is 404 RESOURCE_NOT_EXISTS, WeChat Pay's answer to
// a merchant on public keys only (PARTNER.md §3.1).
func (s *Server) handleCertificates(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok || !s.authenticate(w, r, body, true) {
		return
	}
	now := s.cfg.Now()
	certs := s.keys.served(now)
	if len(certs) == 0 {
		s.writeError(w, newError(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "无可用的平台证书，请在商户平台-API安全申请使用微信支付公钥。"), sigOK)
		return
	}
	key := s.keys.apiV3Key(now)
	resp := wechatpay.CertificatesResponse{Data: make([]wechatpay.DownloadedCertificate, 0, len(certs))}
	for _, c := range certs {
		d, err := wechatpay.EncryptCertificate(key, c)
		if err != nil {
			s.log.Error("encrypt certificate", "err", err)
			s.writeError(w, errSystem(), sigOK)
			return
		}
		resp.Data = append(resp.Data, d)
	}
	s.writeJSON(w, http.StatusOK, resp, sigOK)
}
