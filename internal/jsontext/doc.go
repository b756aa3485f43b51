// Package jsontext holds helpers that write and read JSON text byte for
// byte as encoding/json does, for hot paths that encode or decode by hand
// instead of paying for encoding/json's reflection and allocations. Callers
// that store or hash the bytes (the journal, the provider's idempotency
// check) rely on the output being exactly encoding/json's, so each helper
// is tested against encoding/json itself.
package jsontext
