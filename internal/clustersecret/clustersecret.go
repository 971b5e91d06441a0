// Package clustersecret is a cluster's node identity: one secret, created
// when a cluster is bootstrapped and shared by every member, that the peer
// listener and the cluster-internal HTTP endpoints require. A node keeps it
// in its data directory (mode 0600) so that it restarts without being told
// again; joiners and ctxctl get it from a flag, the environment or a file.
// The secret also derives the key that seals replicated access-key secrets.
package clustersecret

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// FileName is the secret's file inside a node's data directory.
const FileName = "cluster.secret"

// NodeAccessKeyID is the access key id a node presents on its peers'
// native-protocol (peer) listeners; its secret is the cluster secret.
const NodeAccessKeyID = "ctxtier-node"

// MinLen and MaxLen bound a secret's length in bytes.
const (
	MinLen = 16
	MaxLen = 1024
)

// ErrMissing is returned by Load for a file that does not exist.
var ErrMissing = errors.New("clustersecret: no cluster secret")

// Generate draws a new secret: 32 random bytes, URL-safe base64 (43
// characters, pasteable unquoted).
func Generate() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cluster secret: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Validate checks a secret: MinLen..MaxLen bytes of printable ASCII
// without spaces (it travels in an HTTP header).
func Validate(s string) error {
	if len(s) < MinLen || len(s) > MaxLen {
		return fmt.Errorf("%w: cluster secret must be %d..%d bytes, is %d", block.ErrInvalidArgument, MinLen, MaxLen, len(s))
	}
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			return fmt.Errorf("%w: cluster secret must be printable ASCII without spaces", block.ErrInvalidArgument)
		}
	}
	return nil
}

// Load reads a secret file (surrounding white space is ignored). A file
// that does not exist is ErrMissing; a file readable by group or others
// is refused.
func Load(path string) (string, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: %s", ErrMissing, path)
	}
	if err != nil {
		return "", fmt.Errorf("cluster secret: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%w: cluster secret file %s has mode %v: make it 0600", block.ErrInvalidArgument, path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cluster secret: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if err := Validate(s); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Save writes s to path with mode 0600, atomically (temporary file, fsync,
// rename).
func Save(path, s string) error {
	if err := Validate(s); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cluster.secret-*")
	if err != nil {
		return fmt.Errorf("cluster secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("cluster secret: %w", err)
	}
	if _, err := tmp.WriteString(s + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("cluster secret: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("cluster secret: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cluster secret: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cluster secret: %w", err)
	}
	return nil
}

// Source is where a secret may come from, in order of precedence.
type Source struct {
	// Value is the secret itself (a flag or the environment).
	Value string
	// File names a file holding it.
	File string
}

// Read returns the secret of src: Value, else the contents of File, else
// "" (no secret given).
func (src Source) Read() (string, error) {
	if src.Value != "" {
		if err := Validate(src.Value); err != nil {
			return "", err
		}
		return src.Value, nil
	}
	if src.File != "" {
		return Load(src.File)
	}
	return "", nil
}

// SealingKey derives the 32-byte AES key that seals replicated access-key
// secrets from the cluster secret (HKDF-SHA256 with a fixed label), so
// every member can open what any member sealed and Raft never holds it.
func SealingKey(secret string) ([]byte, error) {
	return hkdf.Key(sha256.New, []byte(secret), nil, "ctxtier credential sealing v1", 32)
}

// Resolve settles a node's secret at start. given is what the operator
// passed ("" for none); dir is the node's data directory, where the secret
// is kept. A given secret must match a kept one (a node cannot silently
// move to another cluster) and is kept when none is; with none given the
// kept one is used. With neither, a node that forms a cluster (mayCreate)
// draws a new one, keeps it and reports created; any other node fails with
// ErrMissing.
func Resolve(given, dir string, mayCreate bool) (secret string, created bool, err error) {
	path := filepath.Join(dir, FileName)
	kept, err := Load(path)
	if err != nil && !errors.Is(err, ErrMissing) {
		return "", false, err
	}
	switch {
	case given != "" && kept != "" && given != kept:
		return "", false, fmt.Errorf("%w: the cluster secret given differs from the one this node keeps in %s (remove that file to change it)", block.ErrInvalidArgument, path)
	case given != "":
		if kept == "" {
			if err := Save(path, given); err != nil {
				return "", false, err
			}
		}
		return given, false, nil
	case kept != "":
		return kept, false, nil
	case !mayCreate:
		return "", false, fmt.Errorf("%w: this node joins a cluster and needs its secret: pass --cluster-secret or --cluster-secret-file (the bootstrap node printed it once and keeps it in its DATA_DIR/%s)", ErrMissing, FileName)
	}
	s, err := Generate()
	if err != nil {
		return "", false, err
	}
	if err := Save(path, s); err != nil {
		return "", false, err
	}
	return s, true, nil
}
