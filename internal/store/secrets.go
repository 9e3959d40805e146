package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

// newSecret returns 32 random bytes as 64 lowercase hex characters: the form of
// every API key and session token. Only its SHA-256 is ever stored.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// hashToken is what the database keeps of a key or token: a high-entropy secret
// needs no salt or slow hash, and a fixed hash lets a lookup use the unique index.
func hashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}
