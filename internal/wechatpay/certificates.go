package wechatpay

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"time"
)

// CertificatesPath is the platform certificate download endpoint
// (PARTNER.md §3.1).
const CertificatesPath = "/v3/certificates"

// CertificateAssociatedData is the associated_data WeChat Pay encrypts each
// downloaded certificate with.
const CertificateAssociatedData = "certificate"

// maxCertificates caps how many certificates one download may list: WeChat
// Pay serves one or two (old and new during a rotation).
const maxCertificates = 32

// CertificatesResponse is the body of GET /v3/certificates.
type CertificatesResponse struct {
	Data []DownloadedCertificate `json:"data"`
}

// DownloadedCertificate is one entry of a certificate download: the
// certificate PEM encrypted with the APIv3 key.
type DownloadedCertificate struct {
	SerialNo           string               `json:"serial_no"`
	EffectiveTime      string               `json:"effective_time"` // RFC 3339
	ExpireTime         string               `json:"expire_time"`    // RFC 3339
	EncryptCertificate EncryptedCertificate `json:"encrypt_certificate"`
}

// EncryptedCertificate is the encrypt_certificate object.
type EncryptedCertificate struct {
	Algorithm      string `json:"algorithm"` // AEAD_AES_256_GCM
	Nonce          string `json:"nonce"`
	AssociatedData string `json:"associated_data"` // "certificate"
	Ciphertext     string `json:"ciphertext"`      // base64(ciphertext||tag) of the PEM
}

// EncryptCertificate builds a download entry for cert, as WeChat Pay
// serves it; for sandboxes and tests.
//
// Errors wrap ErrInvalidKey (APIv3 key not 32 bytes, nil certificate).
func EncryptCertificate(apiV3Key []byte, cert *x509.Certificate) (DownloadedCertificate, error) {
	if cert == nil {
		return DownloadedCertificate{}, fmt.Errorf("%w: nil certificate", ErrInvalidKey)
	}
	nonce := RandomAEADNonce()
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	ct, err := EncryptAEAD(apiV3Key, nonce, CertificateAssociatedData, pemBytes)
	if err != nil {
		return DownloadedCertificate{}, err
	}
	cst := time.FixedZone("CST", 8*3600)
	return DownloadedCertificate{
		SerialNo: CertificateSerial(cert), EffectiveTime: cert.NotBefore.In(cst).Format(time.RFC3339),
		ExpireTime: cert.NotAfter.In(cst).Format(time.RFC3339),
		EncryptCertificate: EncryptedCertificate{Algorithm: AlgorithmAEADAES256GCM, Nonce: nonce,
			AssociatedData: CertificateAssociatedData, Ciphertext: ct},
	}, nil
}

// DecryptCertificates parses a GET /v3/certificates body and decrypts every
// certificate with apiV3Key. Each must open (AES-256-GCM authenticates it:
// only WeChat Pay and the merchant know the key, which is what the official
// SDKs trust a first download on, PARTNER.md §3.2), parse as an RSA
// certificate, and carry the serial its entry names. An empty list is not
// an error.
//
// Errors wrap ErrMalformed (not the expected JSON, too many entries),
// ErrUnsupportedAlgorithm, ErrInvalidNonce, ErrDecrypt (wrong APIv3 key or
// tampering), ErrInvalidKey (not an RSA certificate, or its serial differs
// from serial_no).
func DecryptCertificates(apiV3Key, body []byte) ([]*x509.Certificate, error) {
	var resp CertificatesResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("%w: certificate download: %s", ErrMalformed, jsonErr(err))
	}
	if len(resp.Data) > maxCertificates {
		return nil, fmt.Errorf("%w: certificate download lists %d certificates, max %d", ErrMalformed, len(resp.Data), maxCertificates)
	}
	out := make([]*x509.Certificate, 0, len(resp.Data))
	for i, d := range resp.Data {
		e := d.EncryptCertificate
		if e.Algorithm != AlgorithmAEADAES256GCM {
			return nil, fmt.Errorf("%w: certificate %d: algorithm %q", ErrUnsupportedAlgorithm, i, limit(e.Algorithm, 40))
		}
		pt, err := DecryptAEAD(apiV3Key, e.Nonce, e.AssociatedData, e.Ciphertext)
		if err != nil {
			return nil, fmt.Errorf("certificate %d (serial %s): %w", i, limit(d.SerialNo, 64), err)
		}
		cert, err := ParseCertificate(pt)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", i, err)
		}
		if got := CertificateSerial(cert); !strings.EqualFold(got, d.SerialNo) {
			return nil, fmt.Errorf("%w: certificate %d: serial_no %q but the certificate's serial is %s", ErrInvalidKey, i, limit(d.SerialNo, 64), got)
		}
		out = append(out, cert)
	}
	return out, nil
}
