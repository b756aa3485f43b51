package wechatpay

import (
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultMaxSkew is the clock difference WeChat Pay's documentation allows
// between a signed timestamp and now, in either direction.
const DefaultMaxSkew = 5 * time.Minute

// Header names WeChat Pay uses on responses and notifications.
const (
	HeaderTimestamp     = "Wechatpay-Timestamp"
	HeaderNonce         = "Wechatpay-Nonce"
	HeaderSignature     = "Wechatpay-Signature"
	HeaderSerial        = "Wechatpay-Serial"
	HeaderSignatureType = "Wechatpay-Signature-Type"
	HeaderRequestID     = "Request-ID"
)

// Headers are the signature headers of a WeChat Pay response or
// notification, as received (the timestamp is kept as a string because the
// signature covers its exact bytes).
type Headers struct {
	Timestamp     string // Wechatpay-Timestamp, Unix seconds
	Nonce         string // Wechatpay-Nonce
	Signature     string // Wechatpay-Signature, base64
	Serial        string // Wechatpay-Serial: public key id (PUB_KEY_ID_...) or platform certificate serial
	SignatureType string // Wechatpay-Signature-Type; empty means WECHATPAY2-SHA256-RSA2048
}

// HeadersFrom reads the signature headers from h.
func HeadersFrom(h http.Header) Headers {
	return Headers{
		Timestamp:     h.Get(HeaderTimestamp),
		Nonce:         h.Get(HeaderNonce),
		Signature:     h.Get(HeaderSignature),
		Serial:        h.Get(HeaderSerial),
		SignatureType: h.Get(HeaderSignatureType),
	}
}

// Set writes the non-empty headers into dst, for a server that signs its
// responses or notifications.
func (h Headers) Set(dst http.Header) {
	for _, kv := range [...]struct{ k, v string }{
		{HeaderTimestamp, h.Timestamp}, {HeaderNonce, h.Nonce}, {HeaderSignature, h.Signature},
		{HeaderSerial, h.Serial}, {HeaderSignatureType, h.SignatureType},
	} {
		if kv.v != "" {
			dst.Set(kv.k, kv.v)
		}
	}
}

// ResponseMessage returns the string WeChat Pay signs on a response or
// notification: timestamp\nnonce\nbody\n (an empty body leaves just "\n" as
// the last line).
func ResponseMessage(timestamp, nonce string, body []byte) []byte {
	m := make([]byte, 0, len(timestamp)+len(nonce)+len(body)+3)
	m = append(m, timestamp...)
	m = append(m, '\n')
	m = append(m, nonce...)
	m = append(m, '\n')
	m = append(m, body...)
	return append(m, '\n')
}

// SignHeaders signs body as WeChat Pay does on responses and notifications
// and returns the headers to send. It exists for sandboxes and tests.
//
// Errors wrap ErrInvalidKey (nil key) or ErrInvalidArgument (timestamp <= 0,
// or a serial or nonce that is empty or not header-safe).
func SignHeaders(key *rsa.PrivateKey, serial string, timestamp int64, nonce string, body []byte) (Headers, error) {
	if timestamp <= 0 {
		return Headers{}, fmt.Errorf("%w: timestamp %d", ErrInvalidArgument, timestamp)
	}
	if !headerSafe(serial) || !headerSafe(nonce) {
		return Headers{}, fmt.Errorf("%w: serial or nonce is empty or not header-safe", ErrInvalidArgument)
	}
	ts := strconv.FormatInt(timestamp, 10)
	sig, err := SignMessage(key, ResponseMessage(ts, nonce, body))
	if err != nil {
		return Headers{}, err
	}
	return Headers{Timestamp: ts, Nonce: nonce, Signature: sig, Serial: serial, SignatureType: Scheme}, nil
}

// CheckTimestamp reports whether the Unix-seconds timestamp ts is within
// maxSkew of now, in either direction; a difference of exactly maxSkew is
// allowed. maxSkew <= 0 means DefaultMaxSkew.
//
// Errors wrap ErrStaleTimestamp.
func CheckTimestamp(ts int64, now time.Time, maxSkew time.Duration) error {
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	if ts <= 0 {
		return fmt.Errorf("%w: timestamp %d", ErrStaleTimestamp, ts)
	}
	// Compare in seconds so that huge timestamps cannot overflow a Duration;
	// with now and ts both positive the subtraction cannot overflow.
	d := now.Unix() - ts
	if d < 0 {
		d = -d
	}
	if d > int64(maxSkew/time.Second) {
		return fmt.Errorf("%w: timestamp %d is %ds from now (max %s)", ErrStaleTimestamp, ts, d, maxSkew)
	}
	return nil
}

// Verifier verifies WeChat Pay responses and notifications against a set of
// WeChat Pay keys chosen by Wechatpay-Serial. It holds WeChat Pay public keys
// (ids like PUB_KEY_ID_...) and platform certificates at the same time,
// because during WeChat Pay's switchover from certificates to public keys
// both kinds arrive.
//
// The zero Verifier holds no keys and uses DefaultMaxSkew and time.Now.
// Methods are safe for concurrent use, so keys can be rotated while
// requests are verified; set MaxSkew and Now before first use. A Verifier
// must not be copied after first use.
type Verifier struct {
	// MaxSkew is the allowed clock difference; zero means DefaultMaxSkew.
	MaxSkew time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time

	mu    sync.RWMutex
	keys  map[string]verifyKey
	added uint64
	// onUnknown is told the serial of every message that names a
	// certificate serial the Verifier does not hold (CertificateManager
	// installs it to download new certificates).
	onUnknown func(serial string)
}

// SetUnknownSerialHook makes Verify call f with the serial of every
// message whose Wechatpay-Serial names no key held, other than a public
// key id (a download cannot fetch those). f runs synchronously in Verify
// and must return quickly; nil removes the hook.
func (v *Verifier) SetUnknownSerialHook(f func(serial string)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.onUnknown = f
}

// UpdateCertificates adds certificates and removes serials in one step,
// so a concurrent Verify sees either the old set or the new one, never a
// mix (during a rotation the old and the new certificate must both be
// there). Each certificate is checked as by AddCertificate before anything
// changes.
//
// Errors wrap ErrInvalidKey; on error nothing changes.
func (v *Verifier) UpdateCertificates(add []*x509.Certificate, remove []string) error {
	type entry struct {
		serial string
		k      verifyKey
	}
	entries := make([]entry, 0, len(add))
	for _, cert := range add {
		serial := CertificateSerial(cert)
		if serial == "" {
			return fmt.Errorf("%w: nil certificate or serial", ErrInvalidKey)
		}
		pub, err := checkRSAPublic(cert.PublicKey, "certificate")
		if err != nil {
			return err
		}
		entries = append(entries, entry{serial, verifyKey{pub: pub, cert: cert}})
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.keys == nil {
		v.keys = make(map[string]verifyKey)
	}
	for _, s := range remove {
		delete(v.keys, s)
	}
	for _, e := range entries {
		v.added++
		e.k.added = v.added
		v.keys[e.serial] = e.k
	}
	return nil
}

// KeyInfo describes one key a Verifier holds.
type KeyInfo struct {
	Serial      string    // certificate serial or public key id
	Certificate bool      // a platform certificate (else a public key)
	NotBefore   time.Time // zero for a public key
	NotAfter    time.Time // zero for a public key
}

// Keys lists the keys held, sorted by serial.
func (v *Verifier) Keys() []KeyInfo {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]KeyInfo, 0, len(v.keys))
	for s, k := range v.keys {
		ki := KeyInfo{Serial: s, Certificate: k.cert != nil}
		if k.cert != nil {
			ki.NotBefore, ki.NotAfter = k.cert.NotBefore, k.cert.NotAfter
		}
		out = append(out, ki)
	}
	slices.SortFunc(out, func(a, b KeyInfo) int { return strings.Compare(a.Serial, b.Serial) })
	return out
}

type verifyKey struct {
	pub   *rsa.PublicKey
	cert  *x509.Certificate // nil for a bare public key
	added uint64            // insertion order, for PreferredSerial
}

// AddPublicKey adds a WeChat Pay public key (pub_key.pem) under its id, as
// sent in Wechatpay-Serial. Adding an id again replaces the key.
//
// Errors wrap ErrInvalidArgument (id empty or not header-safe) or
// ErrInvalidKey (nil or shorter than MinRSABits).
func (v *Verifier) AddPublicKey(id string, pub *rsa.PublicKey) error {
	if !headerSafe(id) {
		return fmt.Errorf("%w: public key id is empty or not header-safe", ErrInvalidArgument)
	}
	if pub == nil {
		return fmt.Errorf("%w: nil public key", ErrInvalidKey)
	}
	if _, err := checkRSAPublic(pub, "public key"); err != nil {
		return err
	}
	v.add(id, verifyKey{pub: pub})
	return nil
}

// AddCertificate adds a platform certificate under CertificateSerial(cert).
// Adding a serial again replaces the certificate. Validity dates are checked
// at each verification, not here, so a not-yet-valid certificate can be
// loaded ahead of time.
//
// Errors wrap ErrInvalidKey (nil certificate, no serial, a non-RSA key or
// one shorter than MinRSABits).
func (v *Verifier) AddCertificate(cert *x509.Certificate) error {
	serial := CertificateSerial(cert)
	if serial == "" {
		return fmt.Errorf("%w: nil certificate or serial", ErrInvalidKey)
	}
	pub, err := checkRSAPublic(cert.PublicKey, "certificate")
	if err != nil {
		return err
	}
	v.add(serial, verifyKey{pub: pub, cert: cert})
	return nil
}

func (v *Verifier) add(serial string, k verifyKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.keys == nil {
		v.keys = make(map[string]verifyKey)
	}
	v.added++
	k.added = v.added
	v.keys[serial] = k
}

// Replace removes the serials of remove, then adds every key and
// certificate that from holds (replacing one under the same serial), in one
// step: a concurrent Verify sees the old set or the new one. A reload
// parses new key files into a fresh Verifier, then Replaces the running
// one's file keys with it.
func (v *Verifier) Replace(from *Verifier, remove []string) {
	from.mu.RLock()
	add := make(map[string]verifyKey, len(from.keys))
	for s, k := range from.keys {
		add[s] = k
	}
	from.mu.RUnlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.keys == nil {
		v.keys = make(map[string]verifyKey)
	}
	for _, s := range remove {
		delete(v.keys, s)
	}
	for s, k := range add {
		v.added++
		k.added = v.added
		v.keys[s] = k
	}
}

// Remove drops the key or certificate stored under serial, if any.
func (v *Verifier) Remove(serial string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.keys, serial)
}

// Serials returns the serials and public key ids held, sorted.
func (v *Verifier) Serials() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]string, 0, len(v.keys))
	for s := range v.keys {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// RenewalDue reports whether an account that verifies with keys must get a
// new certificate: it holds platform certificates only (a public key does
// not expire) and the last of them ends before now+window. certs is false
// when keys hold no certificate. Monitoring (the expiring gauge) and
// refundctl credentials both decide by it.
func RenewalDue(keys []KeyInfo, now time.Time, window time.Duration) (due, certs bool) {
	var last time.Time
	pub := false
	for _, k := range keys {
		if !k.Certificate {
			pub = true
			continue
		}
		certs = true
		if k.NotAfter.After(last) {
			last = k.NotAfter
		}
	}
	return certs && !pub && last.Sub(now) < window, certs
}

// PreferredSerial returns what a merchant should send in Wechatpay-Serial
// on requests, which tells WeChat Pay which key to sign responses with: the
// most recently added public key id if there is one, else the serial of the
// currently valid certificate expiring last, else "".
func (v *Verifier) PreferredSerial() string {
	now := v.now()
	v.mu.RLock()
	defer v.mu.RUnlock()
	var pubID, certSerial string
	var pubAdded uint64
	var certEnd time.Time
	for s, k := range v.keys {
		if k.cert == nil {
			if pubID == "" || k.added > pubAdded {
				pubID, pubAdded = s, k.added
			}
			continue
		}
		if !validAt(k.cert, now) {
			continue
		}
		// Ties broken by serial so the answer never depends on map order.
		if end := k.cert.NotAfter; certSerial == "" || end.After(certEnd) || (end.Equal(certEnd) && s > certSerial) {
			certSerial, certEnd = s, end
		}
	}
	if pubID != "" {
		return pubID
	}
	return certSerial
}

func validAt(c *x509.Certificate, t time.Time) bool {
	return !t.Before(c.NotBefore) && !t.After(c.NotAfter)
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// Verify checks a WeChat Pay response or notification: all four signature
// headers present, signature type WECHATPAY2-SHA256-RSA2048 (or absent), the
// timestamp within MaxSkew of Now, a known serial (a platform certificate
// must also be valid at Now), and a signature over ResponseMessage(h.Timestamp,
// h.Nonce, body). body must be the raw bytes received.
//
// Errors wrap, checked in this order: ErrMissingHeader,
// ErrUnsupportedAlgorithm, ErrProbe (signature starts with
// "WECHATPAY/SIGNTEST/"; reject it like a bad signature, but do not alert),
// ErrInvalidHeader (timestamp not decimal), ErrStaleTimestamp,
// ErrUnknownSerial, ErrCertificateExpired, ErrBadSignature.
func (v *Verifier) Verify(h Headers, body []byte) error {
	var missing []string
	for _, kv := range [...]struct{ k, v string }{
		{HeaderTimestamp, h.Timestamp}, {HeaderNonce, h.Nonce}, {HeaderSignature, h.Signature}, {HeaderSerial, h.Serial},
	} {
		if kv.v == "" {
			missing = append(missing, kv.k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s", ErrMissingHeader, strings.Join(missing, ", "))
	}
	if h.SignatureType != "" && h.SignatureType != Scheme {
		return fmt.Errorf("%w: signature type %q", ErrUnsupportedAlgorithm, limit(h.SignatureType, 40))
	}
	if strings.HasPrefix(h.Signature, probePrefix) {
		return fmt.Errorf("%w: serial %q", ErrProbe, limit(h.Serial, 64))
	}
	ts, err := parseHeaderTimestamp(h.Timestamp)
	if err != nil {
		return fmt.Errorf("%w: %s is not a decimal timestamp", ErrInvalidHeader, HeaderTimestamp)
	}
	now := v.now()
	if err := CheckTimestamp(ts, now, v.MaxSkew); err != nil {
		return err
	}
	k, ok, hook := v.lookup(h.Serial)
	if !ok {
		if hook != nil && !strings.HasPrefix(h.Serial, PublicKeyIDPrefix) {
			hook(h.Serial)
		}
		return fmt.Errorf("%w: %q", ErrUnknownSerial, limit(h.Serial, 64))
	}
	if k.cert != nil && !validAt(k.cert, now) {
		return fmt.Errorf("%w: serial %s valid %s to %s", ErrCertificateExpired, h.Serial,
			k.cert.NotBefore.Format(time.RFC3339), k.cert.NotAfter.Format(time.RFC3339))
	}
	if err := VerifyMessage(k.pub, ResponseMessage(h.Timestamp, h.Nonce, body), h.Signature); err != nil {
		return fmt.Errorf("%w (serial %s)", err, h.Serial)
	}
	return nil
}

// lookup finds a key by serial, exactly or as upper-case hex (certificate
// serials are hex and some senders write them in lower case).
func (v *Verifier) lookup(serial string) (verifyKey, bool, func(string)) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if k, ok := v.keys[serial]; ok {
		return k, true, nil
	}
	k, ok := v.keys[strings.ToUpper(serial)]
	return k, ok, v.onUnknown
}

// PublicKeyIDPrefix starts every WeChat Pay public key id.
const PublicKeyIDPrefix = "PUB_KEY_ID_"

// parseHeaderTimestamp accepts 1 to 18 decimal digits. Leading zeros are
// allowed here (unlike in Authorization) because the message is built from
// the header string itself.
func parseHeaderTimestamp(s string) (int64, error) {
	if s == "" || len(s) > 18 {
		return 0, ErrInvalidHeader
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, ErrInvalidHeader
		}
	}
	return strconv.ParseInt(s, 10, 64)
}
