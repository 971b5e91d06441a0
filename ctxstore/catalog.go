package ctxstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Catalog holds the namespace definitions. The store consumes it; a single
// node uses FileCatalog, a cluster a Raft-backed one.
type Catalog interface {
	Namespace(name string) (block.Namespace, error)
	Namespaces() []block.Namespace
	CreateNamespace(ctx context.Context, ns block.Namespace) error
	UpdateNamespace(ctx context.Context, ns block.Namespace) error
	DeleteNamespace(ctx context.Context, name string) error
}

// FileCatalog keeps namespaces in memory and persists them atomically to a
// JSON file (write temp, fsync, rename). It always contains "default".
type FileCatalog struct {
	path string
	mu   sync.RWMutex
	ns   map[string]block.Namespace
}

// OpenFileCatalog loads path (creating it with the default namespace if it
// does not exist). An empty path keeps the catalog in memory only.
func OpenFileCatalog(path string) (*FileCatalog, error) {
	c := &FileCatalog{path: path, ns: map[string]block.Namespace{}}
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("catalog: %w", err)
		default:
			var list []block.Namespace
			if err := json.Unmarshal(b, &list); err != nil {
				return nil, fmt.Errorf("catalog %s: %w", path, err)
			}
			for _, n := range list {
				n = n.WithDefaults()
				if err := n.Validate(); err != nil {
					return nil, fmt.Errorf("catalog %s: %w", path, err)
				}
				c.ns[n.Name] = n
			}
		}
	}
	if _, ok := c.ns[block.DefaultNamespace]; !ok {
		c.ns[block.DefaultNamespace] = block.DefaultNamespaceConfig()
		if err := c.persistLocked(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Namespace returns the named namespace or ErrUnknownNamespace.
func (c *FileCatalog) Namespace(name string) (block.Namespace, error) {
	c.mu.RLock()
	n, ok := c.ns[name]
	c.mu.RUnlock()
	if !ok {
		return block.Namespace{}, fmt.Errorf("%w: %q", block.ErrUnknownNamespace, name)
	}
	return n, nil
}

// Namespaces lists all namespaces sorted by name.
func (c *FileCatalog) Namespaces() []block.Namespace {
	c.mu.RLock()
	out := make([]block.Namespace, 0, len(c.ns))
	for _, n := range c.ns {
		out = append(out, n)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CreateNamespace adds ns. Creating an identical namespace again succeeds
// (idempotent); a different definition under the same name is ErrNamespaceExists.
func (c *FileCatalog) CreateNamespace(_ context.Context, ns block.Namespace) error {
	ns = ns.WithDefaults()
	if err := ns.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.ns[ns.Name]; ok {
		if old == ns {
			return nil
		}
		return fmt.Errorf("%w: %q", block.ErrNamespaceExists, ns.Name)
	}
	c.ns[ns.Name] = ns
	if err := c.persistLocked(); err != nil {
		delete(c.ns, ns.Name)
		return err
	}
	return nil
}

// UpdateNamespace replaces an existing namespace's policy. The identity fields
// (block size in tokens, hash scheme, salt) cannot change: they define the keys.
func (c *FileCatalog) UpdateNamespace(_ context.Context, ns block.Namespace) error {
	ns = ns.WithDefaults()
	if err := ns.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.ns[ns.Name]
	if !ok {
		return fmt.Errorf("%w: %q", block.ErrUnknownNamespace, ns.Name)
	}
	if err := checkIdentity(old, ns); err != nil {
		return err
	}
	c.ns[ns.Name] = ns
	if err := c.persistLocked(); err != nil {
		c.ns[ns.Name] = old
		return err
	}
	return nil
}

// checkIdentity refuses changes to the fields that determine block keys.
func checkIdentity(old, ns block.Namespace) error {
	if old.BlockTokens != ns.BlockTokens || old.HashScheme != ns.HashScheme || old.TenantSalt != ns.TenantSalt || old.IsObject() != ns.IsObject() || old.VLLMHashSeed != ns.VLLMHashSeed || old.Model != ns.Model {
		return fmt.Errorf("%w: namespace %q: model, kind, block_tokens, hash_scheme, tenant_salt and vllm_hash_seed cannot change", block.ErrInvalidArgument, ns.Name)
	}
	return nil
}

// DeleteNamespace removes a namespace. The caller (the store) checks it is empty.
func (c *FileCatalog) DeleteNamespace(_ context.Context, name string) error {
	if name == block.DefaultNamespace {
		return fmt.Errorf("%w: the default namespace cannot be deleted", block.ErrInvalidArgument)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.ns[name]
	if !ok {
		return fmt.Errorf("%w: %q", block.ErrUnknownNamespace, name)
	}
	delete(c.ns, name)
	if err := c.persistLocked(); err != nil {
		c.ns[name] = old
		return err
	}
	return nil
}

func (c *FileCatalog) persistLocked() error {
	if c.path == "" {
		return nil
	}
	list := make([]block.Namespace, 0, len(c.ns))
	for _, n := range c.ns {
		list = append(list, n)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	tmp := c.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("catalog: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("catalog: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	return nil
}
