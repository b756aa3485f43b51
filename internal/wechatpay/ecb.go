package wechatpay

import (
	"crypto/aes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
)

// AES-256-ECB with PKCS#7 padding, which APIv2 uses for the refund
// notification's req_info. The standard library has no ECB mode (it is
// unsafe for general use: no IV, no integrity), so blocks are processed one
// by one here. Nothing outside APIv2 should use it.

// v2ReqInfoKey derives the req_info key: the lower-case hex MD5 of the APIv2
// key, whose 32 ASCII characters are used directly as the AES-256 key.
func v2ReqInfoKey(apiV2Key []byte) []byte {
	sum := md5.Sum(apiV2Key)
	k := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(k, sum[:]) // lower case
	return k
}

// ecbEncrypt pads plaintext with PKCS#7 and encrypts it block by block.
func ecbEncrypt(key, plaintext []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: AES key is %d bytes", ErrInvalidKey, len(key))
	}
	buf := pkcs7Pad(plaintext, aes.BlockSize)
	for i := 0; i < len(buf); i += aes.BlockSize {
		block.Encrypt(buf[i:i+aes.BlockSize], buf[i:i+aes.BlockSize])
	}
	return buf, nil
}

// ecbDecrypt decrypts block by block and strictly removes PKCS#7 padding.
//
// Errors wrap ErrInvalidKey or ErrBadPadding (empty input, a length that is
// not a multiple of 16, or invalid padding).
func ecbDecrypt(key, ciphertext []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: AES key is %d bytes", ErrInvalidKey, len(key))
	}
	if len(ciphertext) == 0 || len(ciphertext)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("%w: ciphertext is %d bytes, not a positive multiple of %d", ErrBadPadding, len(ciphertext), aes.BlockSize)
	}
	buf := make([]byte, len(ciphertext))
	for i := 0; i < len(buf); i += aes.BlockSize {
		block.Decrypt(buf[i:i+aes.BlockSize], ciphertext[i:i+aes.BlockSize])
	}
	return pkcs7Unpad(buf, aes.BlockSize)
}

// pkcs7Pad returns a copy of b followed by n bytes of value n, 1 <= n <= size.
func pkcs7Pad(b []byte, size int) []byte {
	n := size - len(b)%size
	out := make([]byte, len(b), len(b)+n)
	copy(out, b)
	for range n {
		out = append(out, byte(n))
	}
	return out
}

// pkcs7Unpad strips strict PKCS#7 padding: the length is a positive multiple
// of size, the last byte n is 1..size, and the last n bytes all equal n.
//
// Errors wrap ErrBadPadding.
func pkcs7Unpad(b []byte, size int) ([]byte, error) {
	if len(b) == 0 || len(b)%size != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a positive multiple of %d", ErrBadPadding, len(b), size)
	}
	n := int(b[len(b)-1])
	if n == 0 || n > size {
		return nil, fmt.Errorf("%w: pad length %d", ErrBadPadding, n)
	}
	for _, c := range b[len(b)-n:] {
		if int(c) != n {
			return nil, fmt.Errorf("%w: inconsistent pad bytes", ErrBadPadding)
		}
	}
	return b[:len(b)-n], nil
}
