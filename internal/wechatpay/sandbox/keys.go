package sandbox

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/refundd/refundd/internal/wechatpay"
)

// Keys are the credentials of one sandbox merchant: what the merchant holds
// (its private key and serial, the WeChat Pay public key and id, the APIv3
// and APIv2 keys) plus the platform private key only the sandbox holds.
type Keys struct {
	MchID          string
	MerchantSerial string          // merchant API certificate serial: 40 upper-case hex digits
	MerchantKey    *rsa.PrivateKey // merchant API private key (apiclient_key.pem)
	PublicKeyID    string          // "PUB_KEY_ID_" + 34 digits
	PlatformKey    *rsa.PrivateKey // signs responses and notifications; its public half is pub_key.pem
	APIv3Key       []byte          // 32 characters of [0-9A-Za-z]
	APIv2Key       []byte          // 32 characters of [0-9A-Za-z]
}

// GenerateKeys returns fresh RSA-2048 merchant and platform keys, random
// serials and random APIv3/APIv2 keys for mchID.
//
// Errors wrap ErrInvalidArgument (mchID empty or not header-safe).
func GenerateKeys(mchID string) (Keys, error) {
	if !headerSafe(mchID) || len(mchID) > 32 {
		return Keys{}, fmt.Errorf("%w: mchid must be 1..32 printable characters without quotes, commas or spaces", ErrInvalidArgument)
	}
	merchant, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return Keys{}, fmt.Errorf("sandbox: generate merchant key: %w", err)
	}
	platform, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return Keys{}, fmt.Errorf("sandbox: generate platform key: %w", err)
	}
	serial := make([]byte, 20)
	rand.Read(serial)
	return Keys{
		MchID:          mchID,
		MerchantSerial: strings.ToUpper(hex.EncodeToString(serial)),
		MerchantKey:    merchant,
		PublicKeyID:    "PUB_KEY_ID_" + randomDigits(34),
		PlatformKey:    platform,
		APIv3Key:       []byte(randomAlnum(32)),
		APIv2Key:       []byte(randomAlnum(32)),
	}, nil
}

// Config returns a Config holding these keys, with v2 notifications off and
// every other field zero.
func (k Keys) Config() Config {
	c := Config{
		MchID: k.MchID, MerchantSerial: k.MerchantSerial, PublicKeyID: k.PublicKeyID,
		PlatformKey: k.PlatformKey, APIv3Key: k.APIv3Key, APIv2Key: k.APIv2Key,
	}
	if k.MerchantKey != nil {
		c.MerchantPublicKey = &k.MerchantKey.PublicKey
	}
	return c
}

// Signer returns the merchant's request signer.
func (k Keys) Signer() wechatpay.Signer {
	return wechatpay.Signer{MchID: k.MchID, SerialNo: k.MerchantSerial, Key: k.MerchantKey}
}

// Verifier returns a new Verifier holding the platform public key under
// PublicKeyID, as a merchant configures it.
func (k Keys) Verifier() (*wechatpay.Verifier, error) {
	if k.PlatformKey == nil {
		return nil, fmt.Errorf("%w: no platform key", ErrInvalidArgument)
	}
	v := &wechatpay.Verifier{}
	if err := v.AddPublicKey(k.PublicKeyID, &k.PlatformKey.PublicKey); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return v, nil
}

// MerchantKeyPEM returns the merchant private key as a PKCS#8 "PRIVATE KEY"
// block, the form of apiclient_key.pem.
func (k Keys) MerchantKeyPEM() ([]byte, error) { return privatePEM(k.MerchantKey) }

// PlatformKeyPEM returns the platform private key as PKCS#8. Only a sandbox
// needs it (to restart with the same keys).
func (k Keys) PlatformKeyPEM() ([]byte, error) { return privatePEM(k.PlatformKey) }

// PlatformPublicKeyPEM returns the platform public key as a PKIX "PUBLIC
// KEY" block, the form of WeChat Pay's pub_key.pem.
func (k Keys) PlatformPublicKeyPEM() ([]byte, error) {
	if k.PlatformKey == nil {
		return nil, fmt.Errorf("%w: no platform key", ErrInvalidArgument)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PlatformKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("sandbox: marshal public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func privatePEM(key *rsa.PrivateKey) ([]byte, error) {
	if key == nil {
		return nil, fmt.Errorf("%w: nil private key", ErrInvalidArgument)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("sandbox: marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// File names WriteDir uses inside its directory.
const (
	ManifestFile       = "wxpaysim.json"
	MerchantKeyFile    = "apiclient_key.pem"        // merchant private key, PKCS#8
	PublicKeyFile      = "pub_key.pem"              // WeChat Pay (platform) public key, PKIX
	APIv3KeyFile       = "apiv3_key"                // 32 bytes, no newline
	APIv2KeyFile       = "apiv2_key"                // 32 bytes, no newline
	PlatformKeyFile    = "sandbox_platform_key.pem" // sandbox only: platform private key
	manifestFormatVers = 1
)

// Manifest describes a key directory, so a merchant (refundd) can be
// pointed at a standalone sandbox. File names are relative to the directory.
type Manifest struct {
	Version        int    `json:"version"`
	MchID          string `json:"mchid"`
	MerchantSerial string `json:"merchant_serial"`
	PublicKeyID    string `json:"public_key_id"`
	BaseURL        string `json:"base_url,omitempty"`
	Files          struct {
		MerchantPrivateKey string `json:"merchant_private_key"`
		WechatpayPublicKey string `json:"wechatpay_public_key"`
		APIv3Key           string `json:"apiv3_key"`
		APIv2Key           string `json:"apiv2_key"`
		PlatformPrivateKey string `json:"platform_private_key"`
	} `json:"files"`
}

// WriteDir writes the keys into dir (created 0700 if missing): the merchant
// private key, the platform public key, the APIv3 and APIv2 key files, the
// platform private key, and a Manifest naming them with baseURL (may be
// empty). Secret files are 0600. Each file is replaced atomically.
func (k Keys) WriteDir(dir, baseURL string) (Manifest, error) {
	var m Manifest
	merchant, err := k.MerchantKeyPEM()
	if err != nil {
		return m, err
	}
	platform, err := k.PlatformKeyPEM()
	if err != nil {
		return m, err
	}
	pub, err := k.PlatformPublicKeyPEM()
	if err != nil {
		return m, err
	}
	if len(k.APIv3Key) != wechatpay.APIv3KeySize || len(k.APIv2Key) == 0 {
		return m, fmt.Errorf("%w: APIv3 key must be %d bytes and APIv2 key non-empty", ErrInvalidArgument, wechatpay.APIv3KeySize)
	}
	m = Manifest{Version: manifestFormatVers, MchID: k.MchID, MerchantSerial: k.MerchantSerial, PublicKeyID: k.PublicKeyID, BaseURL: baseURL}
	m.Files.MerchantPrivateKey = MerchantKeyFile
	m.Files.WechatpayPublicKey = PublicKeyFile
	m.Files.APIv3Key = APIv3KeyFile
	m.Files.APIv2Key = APIv2KeyFile
	m.Files.PlatformPrivateKey = PlatformKeyFile
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, fmt.Errorf("sandbox: marshal manifest: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return m, fmt.Errorf("sandbox: key dir: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{MerchantKeyFile, merchant, 0o600}, {PlatformKeyFile, platform, 0o600}, {PublicKeyFile, pub, 0o644},
		{APIv3KeyFile, k.APIv3Key, 0o600}, {APIv2KeyFile, k.APIv2Key, 0o600},
		{ManifestFile, append(manifest, '\n'), 0o644},
	} {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return m, err
		}
	}
	return m, nil
}

// LoadKeys reads a directory written by WriteDir. A directory without a
// manifest gives an error wrapping os.ErrNotExist, so callers can generate
// keys instead.
//
// Errors wrap os.ErrNotExist or ErrKeyFiles (a missing or malformed file,
// an unknown manifest version).
func LoadKeys(dir string) (Keys, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Keys{}, fmt.Errorf("sandbox: no %s in %s: %w", ManifestFile, dir, os.ErrNotExist)
		}
		return Keys{}, fmt.Errorf("%w: %v", ErrKeyFiles, err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return Keys{}, fmt.Errorf("%w: %s: %v", ErrKeyFiles, ManifestFile, err)
	}
	if m.Version != manifestFormatVers {
		return Keys{}, fmt.Errorf("%w: %s has version %d, want %d", ErrKeyFiles, ManifestFile, m.Version, manifestFormatVers)
	}
	read := func(name string) ([]byte, error) {
		if name == "" || filepath.Base(name) != name {
			return nil, fmt.Errorf("%w: manifest names a bad file %q", ErrKeyFiles, name)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrKeyFiles, err)
		}
		return b, nil
	}
	k := Keys{MchID: m.MchID, MerchantSerial: m.MerchantSerial, PublicKeyID: m.PublicKeyID}
	b, err := read(m.Files.MerchantPrivateKey)
	if err != nil {
		return Keys{}, err
	}
	if k.MerchantKey, err = wechatpay.ParsePrivateKey(b); err != nil {
		return Keys{}, fmt.Errorf("%w: %s: %w", ErrKeyFiles, m.Files.MerchantPrivateKey, err)
	}
	if b, err = read(m.Files.PlatformPrivateKey); err != nil {
		return Keys{}, err
	}
	if k.PlatformKey, err = wechatpay.ParsePrivateKey(b); err != nil {
		return Keys{}, fmt.Errorf("%w: %s: %w", ErrKeyFiles, m.Files.PlatformPrivateKey, err)
	}
	if b, err = read(m.Files.WechatpayPublicKey); err != nil {
		return Keys{}, err
	}
	pub, err := wechatpay.ParsePublicKey(b)
	if err != nil {
		return Keys{}, fmt.Errorf("%w: %s: %w", ErrKeyFiles, m.Files.WechatpayPublicKey, err)
	}
	if !pub.Equal(&k.PlatformKey.PublicKey) {
		return Keys{}, fmt.Errorf("%w: %s does not match %s", ErrKeyFiles, m.Files.WechatpayPublicKey, m.Files.PlatformPrivateKey)
	}
	if b, err = read(m.Files.APIv3Key); err != nil {
		return Keys{}, err
	}
	if k.APIv3Key, err = wechatpay.ParseAPIv3Key(b); err != nil {
		return Keys{}, fmt.Errorf("%w: %s: %w", ErrKeyFiles, m.Files.APIv3Key, err)
	}
	if b, err = read(m.Files.APIv2Key); err != nil {
		return Keys{}, err
	}
	if k.APIv2Key = []byte(strings.TrimSpace(string(b))); len(k.APIv2Key) == 0 {
		return Keys{}, fmt.Errorf("%w: %s is empty", ErrKeyFiles, m.Files.APIv2Key)
	}
	if !headerSafe(k.MchID) || !headerSafe(k.MerchantSerial) || !headerSafe(k.PublicKeyID) {
		return Keys{}, fmt.Errorf("%w: manifest mchid, merchant_serial or public_key_id is empty or malformed", ErrKeyFiles)
	}
	return k, nil
}

// writeFileAtomic replaces path with data: a temporary file in the same
// directory, fsynced, renamed over path, then the directory fsynced, so a
// crash leaves either the old or the new file, never a torn one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("sandbox: write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(mode)
	}
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
		return fmt.Errorf("sandbox: write %s: %w", path, werr)
	}
	// The rename is durable only once the directory is.
	d, err := os.Open(filepath.Dir(path))
	if err == nil {
		err = d.Sync()
		d.Close()
	}
	if err != nil {
		return fmt.Errorf("sandbox: write %s: sync directory: %w", path, err)
	}
	return nil
}
