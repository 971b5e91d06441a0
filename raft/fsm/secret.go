package fsm

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Secret protection. Raft replicates credentials to every node and keeps them
// in logs and snapshots on disk, so a plaintext secret must never enter a
// command: callers store either a hash (to check bearer secrets) or a sealed
// copy (where the server must sign with the secret, as S3 SigV4 requires).

const (
	hashIter = 100_000
	saltLen  = 16
	hashLen  = 32
)

// HashSecret returns a Secret blob for SecretHashed: iteration count (4 bytes
// little-endian), a random 16-byte salt, and PBKDF2-SHA256(secret).
func HashSecret(secret string) ([]byte, error) {
	if secret == "" {
		return nil, fmt.Errorf("%w: empty secret", block.ErrInvalidArgument)
	}
	out := binary.LittleEndian.AppendUint32(nil, hashIter)
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	out = append(out, salt...)
	h, err := pbkdf2.Key(sha256.New, secret, salt, hashIter, hashLen)
	if err != nil {
		return nil, err
	}
	return append(out, h...), nil
}

// VerifySecret reports whether secret matches a HashSecret blob, in constant
// time with respect to the stored hash.
func VerifySecret(blob []byte, secret string) bool {
	if len(blob) != 4+saltLen+hashLen {
		return false
	}
	iter := int(binary.LittleEndian.Uint32(blob))
	if iter < 1 || iter > 10_000_000 {
		return false
	}
	h, err := pbkdf2.Key(sha256.New, secret, blob[4:4+saltLen], iter, hashLen)
	if err != nil {
		return false
	}
	return hmac.Equal(h, blob[4+saltLen:])
}

// SealSecret encrypts secret with AES-256-GCM under key (32 bytes, held
// outside Raft, e.g. in a file or KMS), binding it to accessKeyID so a sealed
// secret cannot be moved to another key id. Output: nonce || ciphertext.
func SealSecret(key []byte, accessKeyID, secret string) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, []byte(secret), []byte(accessKeyID)), nil
}

// OpenSecret decrypts a SealSecret blob.
func OpenSecret(key []byte, accessKeyID string, blob []byte) (string, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return "", err
	}
	if len(blob) < aead.NonceSize()+aead.Overhead() {
		return "", fmt.Errorf("%w: sealed secret too short", block.ErrUnauthenticated)
	}
	n := aead.NonceSize()
	pt, err := aead.Open(nil, blob[:n], blob[n:], []byte(accessKeyID))
	if err != nil {
		return "", fmt.Errorf("%w: sealed secret does not open", block.ErrUnauthenticated)
	}
	return string(pt), nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("%w: sealing key must be 32 bytes, is %d", block.ErrInvalidArgument, len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}
