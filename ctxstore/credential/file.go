package credential

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// File names inside the data directory.
const (
	// FileName holds the keys, secrets sealed.
	FileName = "credentials.json"
	// NodeKeyFile holds the 32-byte AES-256 key that seals the secrets (mode 0600).
	NodeKeyFile = "node.key"
	lockFile    = "credentials.lock"
	fileVersion = 1
)

// Config configures a FileStore.
type Config struct {
	// Dir is the data directory holding credentials.json and node.key.
	Dir string
	// ReloadInterval bounds how often Lookup checks the file for changes made
	// by another process (ctxctl keys); 0 checks on every Lookup.
	ReloadInterval time.Duration
}

// DefaultConfig returns a one-second reload check.
func DefaultConfig(dir string) Config { return Config{Dir: dir, ReloadInterval: time.Second} }

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Dir == "" {
		return fmt.Errorf("%w: credential store needs a directory", block.ErrInvalidArgument)
	}
	if c.ReloadInterval < 0 {
		return fmt.Errorf("%w: negative reload interval", block.ErrInvalidArgument)
	}
	return nil
}

// record is one key as stored on disk.
type record struct {
	AccessKeyID  string    `json:"access_key_id"`
	SealedSecret string    `json:"sealed_secret"` // base64(nonce || AES-GCM ciphertext)
	Namespaces   []string  `json:"namespaces"`
	Description  string    `json:"description,omitempty"`
	Created      time.Time `json:"created"`
}

type fileData struct {
	Version int      `json:"version"`
	Keys    []record `json:"keys"`
}

// fileStamp identifies one version of the file.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
	ok   bool
}

// FileStore keeps keys in <Dir>/credentials.json with secrets sealed by
// AES-256-GCM under <Dir>/node.key. Writers (ctxctl) take an flock and
// replace the file atomically; readers (ctxd) notice a changed file by its
// mtime, size and inode and reload it, so no restart is needed.
type FileStore struct {
	cfg  Config
	path string
	now  func() time.Time

	mu        sync.RWMutex
	keys      map[string]Credential
	stamp     fileStamp
	lastCheck time.Time
	aead      cipher.AEAD // nil until a node key exists
}

// OpenFile opens (without creating anything) the store in cfg.Dir. A
// directory with no credentials file simply has no keys.
func OpenFile(cfg Config) (*FileStore, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &FileStore{cfg: cfg, path: filepath.Join(cfg.Dir, FileName), now: time.Now, keys: map[string]Credential{}}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Lookup returns the credential of id, secret included.
func (s *FileStore) Lookup(id string) (Credential, error) {
	s.maybeReload()
	s.mu.RLock()
	c, ok := s.keys[id]
	s.mu.RUnlock()
	if !ok {
		return Credential{}, fmt.Errorf("%w: unknown access key %q", block.ErrUnauthenticated, id)
	}
	return c, nil
}

// List returns all keys without secrets, sorted by id.
func (s *FileStore) List(_ context.Context) ([]Credential, error) {
	if err := s.reload(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]Credential, 0, len(s.keys))
	for _, c := range s.keys {
		c.Secret = ""
		out = append(out, c)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].AccessKeyID < out[j].AccessKeyID })
	return out, nil
}

// Create issues a key scoped to namespaces.
func (s *FileStore) Create(_ context.Context, namespaces []string, description string) (Credential, error) {
	if err := ValidateScope(namespaces); err != nil {
		return Credential{}, err
	}
	if len(description) > 256 {
		return Credential{}, fmt.Errorf("%w: description longer than 256 bytes", block.ErrInvalidArgument)
	}
	id, secret, err := NewKeyPair()
	if err != nil {
		return Credential{}, err
	}
	c := Credential{AccessKeyID: id, Secret: secret, Namespaces: append([]string(nil), namespaces...),
		Description: description, Created: s.now().UTC().Truncate(time.Second)}
	err = s.mutate(func(keys map[string]Credential) error {
		if _, dup := keys[id]; dup {
			return fmt.Errorf("%w: access key id collision, retry", block.ErrConflict)
		}
		keys[id] = c
		return nil
	})
	if err != nil {
		return Credential{}, err
	}
	return c, nil
}

// Revoke deletes a key.
func (s *FileStore) Revoke(_ context.Context, id string) error {
	return s.mutate(func(keys map[string]Credential) error {
		if _, ok := keys[id]; !ok {
			return fmt.Errorf("%w: access key %q", block.ErrNotFound, id)
		}
		delete(keys, id)
		return nil
	})
}

// maybeReload reloads the file if the reload interval has passed and the
// file changed. A file that fails to load keeps the previous keys in force
// (and the next check retries).
func (s *FileStore) maybeReload() {
	now := s.now()
	s.mu.RLock()
	due := now.Sub(s.lastCheck) >= s.cfg.ReloadInterval
	s.mu.RUnlock()
	if !due {
		return
	}
	_ = s.reload()
}

func statFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return fileStamp{}, nil
	}
	if err != nil {
		return fileStamp{}, fmt.Errorf("credentials: %w", err)
	}
	st := fileStamp{mod: fi.ModTime(), size: fi.Size(), ok: true}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st, nil
}

// reload re-reads the file when its stamp changed.
func (s *FileStore) reload() error {
	st, err := statFile(s.path)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.lastCheck = s.now()
	same := st == s.stamp
	s.mu.Unlock()
	if same {
		return nil
	}
	keys, aead, err := s.load()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.keys, s.stamp = keys, st
	if aead != nil {
		s.aead = aead
	}
	s.mu.Unlock()
	return nil
}

// load reads and opens every record. It needs the node key only when the
// file has keys.
func (s *FileStore) load() (map[string]Credential, cipher.AEAD, error) {
	keys := map[string]Credential{}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return keys, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("credentials: %w", err)
	}
	var fd fileData
	if err := json.Unmarshal(b, &fd); err != nil {
		return nil, nil, fmt.Errorf("%w: credentials %s: %v", block.ErrInvalidArgument, s.path, err)
	}
	if fd.Version != fileVersion {
		return nil, nil, fmt.Errorf("%w: credentials %s: version %d, want %d", block.ErrInvalidArgument, s.path, fd.Version, fileVersion)
	}
	if len(fd.Keys) == 0 {
		return keys, nil, nil
	}
	aead, err := loadNodeKey(s.cfg.Dir, false)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range fd.Keys {
		secret, err := open(aead, r)
		if err != nil {
			return nil, nil, fmt.Errorf("credentials %s: key %s: %w", s.path, r.AccessKeyID, err)
		}
		keys[r.AccessKeyID] = Credential{AccessKeyID: r.AccessKeyID, Secret: secret, Namespaces: r.Namespaces,
			Description: r.Description, Created: r.Created}
	}
	return keys, aead, nil
}

// mutate applies fn to the current keys under an exclusive flock and writes
// the result atomically.
func (s *FileStore) mutate(fn func(map[string]Credential) error) error {
	if err := os.MkdirAll(s.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(s.cfg.Dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("credentials: lock: %w", err)
	}
	defer func() { _ = unix.Flock(int(lf.Fd()), unix.LOCK_UN) }()

	keys, _, err := s.load()
	if err != nil {
		return err
	}
	if err := fn(keys); err != nil {
		return err
	}
	aead, err := loadNodeKey(s.cfg.Dir, true)
	if err != nil {
		return err
	}
	fd := fileData{Version: fileVersion, Keys: make([]record, 0, len(keys))}
	for _, c := range keys {
		r := record{AccessKeyID: c.AccessKeyID, Namespaces: c.Namespaces, Description: c.Description, Created: c.Created}
		if r.SealedSecret, err = seal(aead, c.AccessKeyID, c.Secret); err != nil {
			return err
		}
		fd.Keys = append(fd.Keys, r)
	}
	sort.Slice(fd.Keys, func(i, j int) bool { return fd.Keys[i].AccessKeyID < fd.Keys[j].AccessKeyID })
	b, err := json.MarshalIndent(fd, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(s.path, b, 0o600); err != nil {
		return err
	}
	st, err := statFile(s.path)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.keys, s.stamp, s.aead, s.lastCheck = keys, st, aead, s.now()
	s.mu.Unlock()
	return nil
}

// loadNodeKey reads the node key, creating it (32 random bytes, mode 0600)
// when create is set and it does not exist.
func loadNodeKey(dir string, create bool) (cipher.AEAD, error) {
	path := filepath.Join(dir, NodeKeyFile)
	key, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("credentials: random: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("credentials: node key: %w", err)
		}
		if _, err := f.Write(key); err != nil {
			f.Close()
			return nil, fmt.Errorf("credentials: node key: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("credentials: node key: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("credentials: node key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("credentials: node key %s (needed to open the sealed secrets): %w", path, err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("%w: node key %s is %d bytes, want 32", block.ErrInvalidArgument, path, len(key))
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(blk)
}

// aad binds a sealed secret to its access key id, so swapping two records'
// ciphertexts in the file fails to open.
func aad(id string) []byte { return []byte("ctxtier-credential-v1:" + id) }

func seal(aead cipher.AEAD, id, secret string) (string, error) {
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(secret)+aead.Overhead())
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		return "", fmt.Errorf("credentials: random: %w", err)
	}
	return base64.StdEncoding.EncodeToString(aead.Seal(nonce, nonce, []byte(secret), aad(id))), nil
}

func open(aead cipher.AEAD, r record) (string, error) {
	b, err := base64.StdEncoding.DecodeString(r.SealedSecret)
	if err != nil || len(b) < aead.NonceSize() {
		return "", fmt.Errorf("%w: sealed secret is not valid base64", block.ErrInvalidArgument)
	}
	pt, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], aad(r.AccessKeyID))
	if err != nil {
		return "", fmt.Errorf("%w: sealed secret does not open with this node key", block.ErrChecksum)
	}
	return string(pt), nil
}

func writeAtomic(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("credentials: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("credentials: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	return nil
}
