package wechatpay

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// Scheme is the Authorization scheme and Wechatpay-Signature-Type this
// package implements: SHA256withRSA, PKCS#1 v1.5, base64 signature.
const Scheme = "WECHATPAY2-SHA256-RSA2048"

// probePrefix marks WeChat Pay's deliberately wrong "probe" signatures.
const probePrefix = "WECHATPAY/SIGNTEST/"

// maxSignatureLen bounds a base64 signature before decoding: 8192-bit RSA
// is 1368 characters, WeChat Pay's 2048-bit keys give 344.
const maxSignatureLen = 1400

// Signer signs APIv3 requests as a merchant. All fields are required. A
// Signer is an immutable value and safe for concurrent use.
type Signer struct {
	MchID    string          // merchant id (mchid)
	SerialNo string          // serial of the merchant API certificate, not of a WeChat Pay key
	Key      *rsa.PrivateKey // merchant API private key (apiclient_key.pem)
}

// Authorization signs one request and returns the Authorization header
// value:
//
//	WECHATPAY2-SHA256-RSA2048 mchid="..",nonce_str="..",timestamp="..",serial_no="..",signature=".."
//
// over RequestMessage(method, urlPathAndQuery, timestamp, nonce, body).
// urlPathAndQuery is the request target exactly as sent (url.URL.RequestURI:
// escaped path plus "?query" if any); body is the exact bytes sent, empty for
// GET. timestamp is Unix seconds; nonce is typically NewNonce().
//
// Errors wrap ErrInvalidKey (nil key) or ErrInvalidArgument (an empty field,
// a method that is not upper-case letters, a target not starting with "/" or
// containing spaces, control or non-ASCII bytes, a timestamp <= 0, or a
// value that would break the header: quotes, commas, backslashes, spaces).
func (s Signer) Authorization(method, urlPathAndQuery string, body []byte, timestamp int64, nonce string) (string, error) {
	if s.Key == nil {
		return "", fmt.Errorf("%w: signer has no private key", ErrInvalidKey)
	}
	if err := checkRequestLine(method, urlPathAndQuery); err != nil {
		return "", err
	}
	if timestamp <= 0 {
		return "", fmt.Errorf("%w: timestamp %d", ErrInvalidArgument, timestamp)
	}
	for _, f := range []struct{ name, v string }{{"mchid", s.MchID}, {"serial_no", s.SerialNo}, {"nonce", nonce}} {
		if !headerSafe(f.v) {
			return "", fmt.Errorf("%w: %s is empty or contains characters not allowed in the header", ErrInvalidArgument, f.name)
		}
	}
	sig, err := SignMessage(s.Key, RequestMessage(method, urlPathAndQuery, timestamp, nonce, body))
	if err != nil {
		return "", err
	}
	return Authorization{MchID: s.MchID, Nonce: nonce, Timestamp: timestamp, SerialNo: s.SerialNo, Signature: sig}.String(), nil
}

// RequestMessage returns the string a merchant signs for a request:
// METHOD\nURL\ntimestamp\nnonce\nbody\n. Every line ends in "\n", so an empty
// body gives "...nonce\n\n" and a body ending in "\n" still gets its own
// terminating "\n".
func RequestMessage(method, urlPathAndQuery string, timestamp int64, nonce string, body []byte) []byte {
	ts := strconv.FormatInt(timestamp, 10)
	m := make([]byte, 0, len(method)+len(urlPathAndQuery)+len(ts)+len(nonce)+len(body)+5)
	m = append(m, method...)
	m = append(m, '\n')
	m = append(m, urlPathAndQuery...)
	m = append(m, '\n')
	m = append(m, ts...)
	m = append(m, '\n')
	m = append(m, nonce...)
	m = append(m, '\n')
	m = append(m, body...)
	return append(m, '\n')
}

// SignMessage signs msg with SHA256withRSA (PKCS#1 v1.5) and returns the
// standard base64 signature. The result is deterministic for a given key and
// message.
//
// Errors wrap ErrInvalidKey: a nil key or one crypto/rsa refuses.
func SignMessage(key *rsa.PrivateKey, msg []byte) (string, error) {
	if key == nil {
		return "", fmt.Errorf("%w: nil private key", ErrInvalidKey)
	}
	sum := sha256.Sum256(msg)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("%w: sign: %s", ErrInvalidKey, redact(err))
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifyMessage checks a base64 SHA256withRSA (PKCS#1 v1.5) signature over
// msg.
//
// Errors wrap ErrInvalidKey (nil key), ErrProbe (the signature starts with
// "WECHATPAY/SIGNTEST/"; it is rejected without further checks) or
// ErrBadSignature (not base64, too long, or not matching).
func VerifyMessage(pub *rsa.PublicKey, msg []byte, signature string) error {
	if pub == nil {
		return fmt.Errorf("%w: nil public key", ErrInvalidKey)
	}
	if strings.HasPrefix(signature, probePrefix) {
		return ErrProbe
	}
	if len(signature) > maxSignatureLen {
		return fmt.Errorf("%w: signature is %d characters", ErrBadSignature, len(signature))
	}
	sig, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return fmt.Errorf("%w: signature is not base64", ErrBadSignature)
	}
	sum := sha256.Sum256(msg)
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return ErrBadSignature
	}
	return nil
}

// NewNonce returns 32 random characters from [0-9A-Za-z], the form WeChat
// Pay's SDKs send as nonce_str.
func NewNonce() string { return randomAlnum(32) }

const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func randomAlnum(n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/2)
	for len(out) < n {
		rand.Read(buf) // never fails since Go 1.24
		for _, b := range buf {
			// 248 = 4*62: rejecting larger bytes keeps the choice uniform.
			if b < 248 && len(out) < n {
				out = append(out, alnum[b%62])
			}
		}
	}
	return string(out)
}

// checkRequestLine validates the method and request target that go into
// the signed message.
func checkRequestLine(method, target string) error {
	if method == "" {
		return fmt.Errorf("%w: empty method", ErrInvalidArgument)
	}
	for i := 0; i < len(method); i++ {
		if method[i] < 'A' || method[i] > 'Z' {
			return fmt.Errorf("%w: method must be upper-case letters", ErrInvalidArgument)
		}
	}
	if !strings.HasPrefix(target, "/") {
		return fmt.Errorf("%w: request target must start with /", ErrInvalidArgument)
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%w: request target must be escaped ASCII (use url.URL.RequestURI)", ErrInvalidArgument)
		}
	}
	return nil
}

// headerSafe reports whether v can be written inside a quoted Authorization
// parameter and read back by any parser: non-empty printable ASCII without
// quote, comma, backslash or space.
func headerSafe(v string) bool {
	if v == "" || len(v) > 256 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == ',' || c == '\\' {
			return false
		}
	}
	return true
}
