package storage

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// sealer encrypts reasoning at rest with AES-256-GCM. The additional data
// binds each ciphertext to its row, so a ciphertext copied onto another
// row does not decrypt.
type sealer struct{ aead cipher.AEAD }

// ParseKey reads a base64 key of 32 bytes (ALICIA_STORAGE_KEY).
func ParseKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("storage key: %w", err)
	}
	if len(k) != 32 {
		return nil, fmt.Errorf("storage key: %d bytes, want 32 (AES-256)", len(k))
	}
	return k, nil
}

func newSealer(key []byte) (*sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(plain []byte, rowID string) []byte {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("storage: no randomness: " + err.Error())
	}
	return s.aead.Seal(nonce, nonce, plain, []byte(rowID))
}

func (s *sealer) open(sealed []byte, rowID string) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("storage: ciphertext too short")
	}
	return s.aead.Open(nil, sealed[:n], sealed[n:], []byte(rowID))
}
