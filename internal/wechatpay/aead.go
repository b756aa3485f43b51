package wechatpay

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"fmt"
)

// AlgorithmAEADAES256GCM is the only resource algorithm WeChat Pay uses for
// APIv3 notifications and certificate downloads.
const AlgorithmAEADAES256GCM = "AEAD_AES_256_GCM"

// AEADNonceSize is the nonce length AEAD_AES_256_GCM requires.
const AEADNonceSize = 12

// gcmTagSize is the GCM tag appended to every ciphertext.
const gcmTagSize = 16

// DecryptAEAD decrypts an AEAD_AES_256_GCM resource: ciphertextB64 is the
// standard base64 of ciphertext||16-byte tag, nonce and associatedData are
// used as their raw bytes. associatedData may be empty.
//
// Lengths are checked before crypto/cipher is used (GCM panics on a wrong
// nonce length), so arbitrary input never panics. Errors wrap ErrInvalidKey
// (key not exactly 32 bytes), ErrInvalidNonce (nonce not exactly 12 bytes) or
// ErrDecrypt (not base64, shorter than a tag, or failing authentication: a
// wrong key, nonce or associated data, or tampering).
func DecryptAEAD(apiV3Key []byte, nonce, associatedData, ciphertextB64 string) ([]byte, error) {
	if len(apiV3Key) != APIv3KeySize {
		return nil, fmt.Errorf("%w: APIv3 key is %d bytes, want %d", ErrInvalidKey, len(apiV3Key), APIv3KeySize)
	}
	return aeadOpen(apiV3Key, nonce, associatedData, ciphertextB64)
}

// EncryptAEAD is DecryptAEAD's inverse, for sandboxes and tests: it returns
// base64(ciphertext||tag). The caller supplies the nonce and must never reuse
// one with the same key (RandomAEADNonce gives a fresh one).
//
// Errors wrap ErrInvalidKey or ErrInvalidNonce as for DecryptAEAD.
func EncryptAEAD(apiV3Key []byte, nonce, associatedData string, plaintext []byte) (string, error) {
	if len(apiV3Key) != APIv3KeySize {
		return "", fmt.Errorf("%w: APIv3 key is %d bytes, want %d", ErrInvalidKey, len(apiV3Key), APIv3KeySize)
	}
	gcm, err := newGCM(apiV3Key, nonce)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plaintext, []byte(associatedData))), nil
}

// RandomAEADNonce returns 12 random characters from [0-9A-Za-z], the form of
// WeChat Pay's resource nonces.
func RandomAEADNonce() string { return randomAlnum(AEADNonceSize) }

// aeadOpen is DecryptAEAD without the 32-byte key rule, so the published
// AES-128 vectors of WeChat Pay's SDK tests can exercise the same code.
func aeadOpen(key []byte, nonce, associatedData, ciphertextB64 string) ([]byte, error) {
	gcm, err := newGCM(key, nonce)
	if err != nil {
		return nil, err
	}
	ct, err := base64.StdEncoding.DecodeString(ciphertextB64)
	if err != nil {
		return nil, fmt.Errorf("%w: ciphertext is not base64", ErrDecrypt)
	}
	if len(ct) < gcmTagSize {
		return nil, fmt.Errorf("%w: ciphertext is %d bytes, shorter than the tag", ErrDecrypt, len(ct))
	}
	pt, err := gcm.Open(nil, []byte(nonce), ct, []byte(associatedData))
	if err != nil {
		return nil, fmt.Errorf("%w: message authentication failed (wrong APIv3 key, nonce or associated data)", ErrDecrypt)
	}
	return pt, nil
}

func newGCM(key []byte, nonce string) (cipher.AEAD, error) {
	if len(nonce) != AEADNonceSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrInvalidNonce, len(nonce), AEADNonceSize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: AES key is %d bytes", ErrInvalidKey, len(key))
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidKey, redact(err))
	}
	return gcm, nil
}
