package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
)

// Checkpoint keys are Ed25519, stored as PEM: the private key as PKCS#8
// ("PRIVATE KEY", what `openssl genpkey -algorithm ed25519` writes), the
// public key as PKIX ("PUBLIC KEY", `openssl pkey -pubout`).

// GenerateKey returns a new checkpoint signing key and its public key, as
// PEM.
func GenerateKey() (privatePEM, publicPEM []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: encode key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}

// ParseSigningKey parses a PKCS#8 PEM Ed25519 private key. The error never
// contains key material.
func ParseSigningKey(b []byte) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: not a PEM \"PRIVATE KEY\" block", ErrInvalid)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: not a PKCS#8 private key", ErrInvalid)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: the private key is %T, not Ed25519", ErrInvalid, k)
	}
	return key, nil
}

// ParsePublicKey parses a PKIX PEM Ed25519 public key.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%w: not a PEM \"PUBLIC KEY\" block", ErrInvalid)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: not a PKIX public key", ErrInvalid)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: the public key is %T, not Ed25519", ErrInvalid, k)
	}
	return pub, nil
}
