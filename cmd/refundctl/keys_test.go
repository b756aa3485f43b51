package main

import (
	"crypto/ed25519"

	"github.com/refundd/refundd/internal/audit"
)

func parseKeyForTest(b []byte) (ed25519.PrivateKey, error) { return audit.ParseSigningKey(b) }
