package merchant

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"

	"github.com/refundd/refundd/internal/wechatpay"
)

// Sources is where LoadCredentials reads secrets and key files: the
// process environment and file system in refundd (os.Getenv, os.ReadFile),
// maps in tests. Both functions are required.
type Sources struct {
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
}

// Credentials are an account's keys, read and parsed, in the types
// internal/wechatpay takes: ClientConfig for requests, and the notification
// handler's verifier and keys. They hold secrets: String, GoString and
// LogValue print the account, never the keys.
type Credentials struct {
	Account string // the account's name
	Kind    AccountKind
	MchID   string // mchid; sp_mchid of a service provider
	BaseURL string
	// Signer signs requests: mchid, API certificate serial, private key.
	Signer wechatpay.Signer
	// Verifier holds the WeChat Pay public key and/or platform
	// certificates that answers and notifications are verified with.
	Verifier *wechatpay.Verifier
	// APIv3Key decrypts notifications (32 bytes).
	APIv3Key []byte
	// APIv2Key checks APIv2 notifications; nil when the account has none.
	APIv2Key []byte
	// FileSerials are the serials of the public key and certificates read
	// from files: what a reload replaces in Verifier (downloaded
	// certificates stay).
	FileSerials []string
}

// ClientConfig returns the account's part of a wechatpay.ClientConfig;
// the caller adds NotifyURL (per merchant), HTTPClient and Logger.
func (c *Credentials) ClientConfig() wechatpay.ClientConfig {
	return wechatpay.ClientConfig{BaseURL: c.BaseURL, MchID: c.MchID, Signer: c.Signer, Verifier: c.Verifier,
		Partner: c.Kind == AccountServiceProvider}
}

func (c Credentials) String() string {
	return fmt.Sprintf("merchant.Credentials{account %q, mchid %s, keys redacted}", c.Account, c.MchID)
}

// GoString keeps %#v from printing the keys.
func (c Credentials) GoString() string { return c.String() }

// LogValue keeps slog from printing the keys.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(slog.String("account", c.Account), slog.String("mchid", c.MchID))
}

// LoadCredentials reads the secrets and keys of every account, reporting
// every problem at once (Errors, each naming the account and the setting;
// never a secret's value). Credentials are returned by account name.
func (r *Registry) LoadCredentials(src Sources) (map[string]*Credentials, error) {
	out := make(map[string]*Credentials, len(r.accounts))
	var all Errors
	for _, a := range r.accounts {
		c, err := a.LoadCredentials(src)
		if es, ok := err.(Errors); ok {
			all = append(all, es...)
			continue
		}
		out[a.Name] = c
	}
	if len(all) > 0 {
		return nil, all
	}
	return out, nil
}

// LoadCredentials reads the account's secrets through src and parses its
// keys. Errors are Errors: each FieldError's Path is `account "NAME":
// SETTING`, and wraps ErrMissing (an empty variable or file), the reader's
// error (a file that cannot be read), or wechatpay.ErrInvalidKey.
func (a *Account) LoadCredentials(src Sources) (*Credentials, error) {
	var ps problems
	path := func(key string) string { return fmt.Sprintf("account %q: %s", a.Name, a.field(key)) }
	c := &Credentials{Account: a.Name, Kind: a.Kind, MchID: a.MchID, BaseURL: a.BaseURL, Verifier: &wechatpay.Verifier{}}

	if pemBytes := readSecret(a.PrivateKey, "private_key", path, src, &ps); pemBytes != nil {
		key, err := wechatpay.ParsePrivateKey(pemBytes)
		if err != nil {
			ps.wrap(path("private_key"), err)
		}
		c.Signer = wechatpay.Signer{MchID: a.MchID, SerialNo: a.Serial, Key: key}
	}
	if b := readSecret(a.APIv3Key, "apiv3_key", path, src, &ps); b != nil {
		k, err := wechatpay.ParseAPIv3Key(b)
		if err != nil {
			ps.wrap(path("apiv3_key"), err)
		}
		c.APIv3Key = k
	}
	if b := readSecret(a.APIv2Key, "apiv2_key", path, src, &ps); b != nil {
		c.APIv2Key = bytes.TrimSpace(b)
	}
	if a.PublicKeyFile != "" {
		if b := readFile(a.PublicKeyFile, "public_key_file", path, src, &ps); b != nil {
			pub, err := wechatpay.ParsePublicKey(b)
			if err == nil {
				err = c.Verifier.AddPublicKey(a.PublicKeyID, pub)
			}
			if err != nil {
				ps.wrap(path("public_key_file"), err)
			}
		}
	}
	for _, f := range a.PlatformCertFiles {
		b := readFile(f, "platform_cert_files", path, src, &ps)
		if b == nil {
			continue
		}
		cert, err := wechatpay.ParseCertificate(b)
		if err == nil {
			err = c.Verifier.AddCertificate(cert)
		}
		if err != nil {
			ps.wrap(path("platform_cert_files"), fmt.Errorf("%s: %w", f, err))
		}
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	c.FileSerials = c.Verifier.Serials()
	return c, nil
}

// readSecret returns the secret's bytes; nil when there is none (no
// reference, or an optional variable unset) or on a problem, added to ps.
func readSecret(s Secret, key string, path func(string) string, src Sources, ps *problems) []byte {
	switch {
	case s.Env != "":
		v := src.Getenv(s.Env)
		if strings.TrimSpace(v) == "" {
			if !s.ifSet {
				ps.add(path(key), ErrMissing, "environment variable %s is empty or not set", s.Env)
			}
			return nil
		}
		return []byte(v)
	case s.File != "":
		return readFile(s.File, key, path, src, ps)
	}
	return nil
}

func readFile(name, key string, path func(string) string, src Sources, ps *problems) []byte {
	b, err := src.ReadFile(name)
	switch {
	case err != nil:
		// The reader's error names the path, not the contents.
		ps.wrap(path(key), err)
		return nil
	case len(bytes.TrimSpace(b)) == 0:
		ps.add(path(key), ErrMissing, "%s is empty", name)
		return nil
	}
	return b
}
