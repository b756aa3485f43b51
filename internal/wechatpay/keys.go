package wechatpay

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strings"
)

// MinRSABits is the smallest RSA modulus accepted: the scheme is named
// SHA256-RSA2048.
const MinRSABits = 2048

// APIv3KeySize is the length of an APIv3 key, used directly as an AES-256 key.
const APIv3KeySize = 32

// ParsePrivateKey parses the merchant API private key (apiclient_key.pem).
// It accepts a PKCS#8 "PRIVATE KEY" block, as WeChat Pay issues, and a
// PKCS#1 "RSA PRIVATE KEY" block. Only the first PEM block is read.
//
// Errors wrap ErrInvalidKey: no PEM block, another block type, a non-RSA
// key, or a modulus shorter than MinRSABits.
func ParsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, fmt.Errorf("%w: private key: no PEM block", ErrInvalidKey)
	}
	var key *rsa.PrivateKey
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: private key: PKCS#8: %s", ErrInvalidKey, redact(err))
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%w: private key: %T is not RSA", ErrInvalidKey, k)
		}
		key = rk
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: private key: PKCS#1: %s", ErrInvalidKey, redact(err))
		}
		key = k
	default:
		return nil, fmt.Errorf("%w: private key: unexpected PEM type %q", ErrInvalidKey, limit(block.Type, 40))
	}
	if key.N.BitLen() < MinRSABits {
		return nil, fmt.Errorf("%w: private key: %d-bit RSA, want >= %d", ErrInvalidKey, key.N.BitLen(), MinRSABits)
	}
	return key, nil
}

// ParsePublicKey parses a WeChat Pay public key (pub_key.pem): a PKIX
// "PUBLIC KEY" block holding an RSA key.
//
// Errors wrap ErrInvalidKey: no PEM block, another block type, a non-RSA
// key, or a modulus shorter than MinRSABits.
func ParsePublicKey(pemBytes []byte) (*rsa.PublicKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, fmt.Errorf("%w: public key: no PEM block", ErrInvalidKey)
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%w: public key: unexpected PEM type %q", ErrInvalidKey, limit(block.Type, 40))
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %s", ErrInvalidKey, redact(err))
	}
	return checkRSAPublic(k, "public key")
}

// ParseCertificate parses a WeChat Pay platform certificate: a
// "CERTIFICATE" block whose key is RSA. Validity dates are not checked here;
// Verifier checks them at verification time.
//
// Errors wrap ErrInvalidKey: no PEM block, another block type, unparsable
// DER, a non-RSA key or a modulus shorter than MinRSABits.
func ParseCertificate(pemBytes []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, fmt.Errorf("%w: certificate: no PEM block", ErrInvalidKey)
	}
	if block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: certificate: unexpected PEM type %q", ErrInvalidKey, limit(block.Type, 40))
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate: %s", ErrInvalidKey, redact(err))
	}
	if _, err := checkRSAPublic(cert.PublicKey, "certificate"); err != nil {
		return nil, err
	}
	return cert, nil
}

// CertificateSerial returns the certificate's serial number as WeChat Pay
// writes it in Wechatpay-Serial: upper-case hex of the serial's bytes (two
// digits per byte, so a leading zero nibble is kept). It returns "" for a nil
// certificate or serial.
func CertificateSerial(cert *x509.Certificate) string {
	if cert == nil || cert.SerialNumber == nil {
		return ""
	}
	return strings.ToUpper(hex.EncodeToString(cert.SerialNumber.Bytes()))
}

// ParseAPIv3Key returns the APIv3 key from a file's contents: surrounding
// whitespace (a trailing newline) is trimmed, and the rest must be exactly
// APIv3KeySize bytes. The returned slice is a copy.
//
// Errors wrap ErrInvalidKey and state only the length, never the key.
func ParseAPIv3Key(b []byte) ([]byte, error) {
	k := bytes.TrimSpace(b)
	if len(k) != APIv3KeySize {
		return nil, fmt.Errorf("%w: APIv3 key is %d bytes, want %d", ErrInvalidKey, len(k), APIv3KeySize)
	}
	return bytes.Clone(k), nil
}

func checkRSAPublic(k any, what string) (*rsa.PublicKey, error) {
	pub, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s: %T is not RSA", ErrInvalidKey, what, k)
	}
	if pub.N.BitLen() < MinRSABits {
		return nil, fmt.Errorf("%w: %s: %d-bit RSA, want >= %d", ErrInvalidKey, what, pub.N.BitLen(), MinRSABits)
	}
	return pub, nil
}

// redact keeps a parse error's text short. x509/asn1 errors name structures
// and offsets, not key bytes, but they are capped anyway so a future change
// upstream cannot leak much.
func redact(err error) string {
	return limit(err.Error(), 120)
}

// limit truncates s to n bytes for use in error messages.
func limit(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
