package ctxstore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Tier is what the store needs from a node's tier stack (the DRAM tier alone
// on a bare node; the tier manager once lower tiers exist; the cluster
// backend): block.Storage, whose methods document the contract.
// Implementations must be safe for concurrent use.
type Tier = block.Storage

// TierPut is one block of a BatchPutter's batch: data already verified
// against Sum, and the options Tier.Put would get.
type TierPut struct {
	Key  block.Key
	Data []byte
	Sum  uint32
	Opts block.PutOptions
}

// BatchPutter is a Tier that stores a batch of blocks together: the
// cluster backend writes their shards in parallel and commits their index
// entries in one Raft proposal. PutBatch returns one error per item, with
// Tier.Put's meaning for each.
type BatchPutter interface {
	PutBatch(ctx context.Context, items []TierPut) []error
}

// BatchDeleter is a Tier that deletes a batch of blocks together (the
// cluster backend commits their index deletions in one Raft proposal).
// DeleteBatch returns one error per key, with Tier.Delete's meaning.
type BatchDeleter interface {
	DeleteBatch(ctx context.Context, keys []block.Key) []error
}

// BatchPinner is a Tier that pins a batch of blocks together (one Raft
// proposal in the cluster backend). PinBatch returns one error per key,
// with Tier.Pin's meaning.
type BatchPinner interface {
	PinBatch(ctx context.Context, keys []block.Key, until time.Time) []error
}

// Config configures a Store.
type Config struct {
	// PinMaxTTL caps any pin's TTL, so a forgotten pin cannot hold memory forever.
	PinMaxTTL time.Duration
}

// DefaultConfig returns the defaults: pins last at most 24 h.
func DefaultConfig() Config { return Config{PinMaxTTL: 24 * time.Hour} }

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.PinMaxTTL <= 0 {
		return fmt.Errorf("%w: PinMaxTTL must be positive", block.ErrInvalidArgument)
	}
	return nil
}

// Store is the single entry point of the domain: every wire surface calls it.
type Store struct {
	cfg     Config
	catalog Catalog
	tier    Tier
	log     *slog.Logger
	now     func() time.Time
	traffic *Traffic
}

// New builds a store over a catalog and a tier stack.
func New(cfg Config, catalog Catalog, tier Tier, log *slog.Logger) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Store{cfg: cfg, catalog: catalog, tier: tier, log: log, now: time.Now, traffic: &Traffic{}}, nil
}

// Traffic is the store's per-namespace traffic (see NewTrafficCollector).
func (s *Store) Traffic() *Traffic { return s.traffic }

// Catalog exposes the namespace catalog.
func (s *Store) Catalog() Catalog { return s.catalog }

// Namespace returns a namespace's definition or block.ErrUnknownNamespace.
func (s *Store) Namespace(name string) (block.Namespace, error) { return s.catalog.Namespace(name) }

// CreateNamespace validates and adds a namespace (idempotent for an identical definition).
func (s *Store) CreateNamespace(ctx context.Context, ns block.Namespace) error {
	return s.catalog.CreateNamespace(ctx, ns)
}

// Namespaces lists all namespaces.
func (s *Store) Namespaces() []block.Namespace { return s.catalog.Namespaces() }

// Put stores one block. See Tier.Put for the immutability contract.
func (s *Store) Put(ctx context.Context, key block.Key, data []byte, opts block.PutOptions) error {
	opts, err := s.preparePut(key, data, opts)
	if err != nil {
		return err
	}
	if err := s.tier.Put(ctx, key, data, opts.Sum, opts); err != nil {
		return err
	}
	s.traffic.put(key.Namespace, len(data))
	return nil
}

// preparePut checks a put against its namespace and verifies the sender's
// checksum; it returns the options the tier gets (Sum set).
func (s *Store) preparePut(key block.Key, data []byte, opts block.PutOptions) (block.PutOptions, error) {
	ns, err := s.catalog.Namespace(key.Namespace)
	if err != nil {
		return opts, err
	}
	if len(data) < block.MinBlockSize {
		return opts, fmt.Errorf("%w: %s: empty block", block.ErrInvalidArgument, key)
	}
	if int64(len(data)) > ns.MaxBlockSize {
		return opts, fmt.Errorf("%w: %s: %d bytes exceeds namespace %q max_block_size %d", block.ErrTooLarge, key, len(data), ns.Name, ns.MaxBlockSize)
	}
	sum := block.Checksum(data)
	if opts.HasSum && opts.Sum != sum {
		return opts, fmt.Errorf("%w: %s: sender says %08x, bytes are %08x", block.ErrChecksum, key, opts.Sum, sum)
	}
	if !opts.HasPriority {
		opts.Priority, opts.HasPriority = ns.Priority, true
	}
	if opts.Priority > block.MaxPriority {
		return opts, fmt.Errorf("%w: priority %d above %d", block.ErrInvalidArgument, opts.Priority, block.MaxPriority)
	}
	if opts.PinTTL < 0 {
		return opts, fmt.Errorf("%w: negative pin TTL", block.ErrInvalidArgument)
	}
	if err := opts.ValidateHints(); err != nil {
		return opts, fmt.Errorf("%s: %w", key, err)
	}
	opts.PinTTL = min(opts.PinTTL, s.cfg.PinMaxTTL)
	if ttl := ns.TTL(); ttl > 0 {
		opts.Expires = s.now().Add(ttl)
	}
	opts.Sum, opts.HasSum = sum, true
	opts.WriteThrough = ns.WriteMode == block.WriteThrough
	opts.Namespace = ns
	return opts, nil
}

// Get returns a leased reference to a block's verified bytes; the caller must
// Release it. It is Read with the default options, ReadOptions{}: a local
// read (ReadLocal) that the tier verifies.
func (s *Store) Get(ctx context.Context, key block.Key) (*block.Ref, error) {
	return s.Read(ctx, key, ReadOptions{})
}

// Read returns a leased reference to a block's bytes, read with opts; the
// caller must Release it. The namespace is looked up once (unless
// opts.Namespace is key's) and handed down to the tier with the rest of the
// options; the namespace's traffic counters count the answer.
func (s *Store) Read(ctx context.Context, key block.Key, opts ReadOptions) (*block.Ref, error) {
	if err := s.sync(ctx, opts.Level); err != nil {
		return nil, err
	}
	ns, err := s.resolve(key.Namespace, &opts.Namespace)
	if err != nil {
		return nil, err
	}
	ref, err := s.tier.Get(ctx, key, block.GetOptions{Namespace: ns, ReaderVerifies: opts.ReaderVerifies, Retain: opts.Retain})
	size := 0
	if ref != nil {
		size = len(ref.Data)
	}
	s.traffic.get(key.Namespace, size, err)
	return ref, err
}

// resolve returns namespace name: known, when it is that namespace (the
// caller's), or looked up in the catalog. An empty name is always looked
// up (and refused there): the zero options carry an empty namespace.
func (s *Store) resolve(name string, known *block.Namespace) (block.Namespace, error) {
	if name != "" && known.Name == name {
		return *known, nil
	}
	return s.catalog.Namespace(name)
}

// Stat returns a block's metadata, read at opts.Level (opts.Namespace
// applies; the other options do not).
func (s *Store) Stat(ctx context.Context, key block.Key, opts ReadOptions) (block.Info, error) {
	if err := s.sync(ctx, opts.Level); err != nil {
		return block.Info{}, err
	}
	if _, err := s.resolve(key.Namespace, &opts.Namespace); err != nil {
		return block.Info{}, err
	}
	return s.tier.Stat(ctx, key)
}

// Exists reports whether a block is present in any tier, read at
// opts.Level (opts.Namespace applies; the other options do not).
func (s *Store) Exists(ctx context.Context, key block.Key, opts ReadOptions) (bool, error) {
	if err := s.sync(ctx, opts.Level); err != nil {
		return false, err
	}
	if _, err := s.resolve(key.Namespace, &opts.Namespace); err != nil {
		return false, err
	}
	return s.tier.Contains(key), nil
}

// Delete evicts a block.
func (s *Store) Delete(ctx context.Context, key block.Key) error {
	if _, err := s.catalog.Namespace(key.Namespace); err != nil {
		return err
	}
	return s.tier.Delete(ctx, key)
}

// Pin protects a block from eviction for ttl (capped by Config.PinMaxTTL).
func (s *Store) Pin(ctx context.Context, key block.Key, ttl time.Duration) error {
	if _, err := s.catalog.Namespace(key.Namespace); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: pin TTL must be positive", block.ErrInvalidArgument)
	}
	return s.tier.Pin(ctx, key, s.now().Add(min(ttl, s.cfg.PinMaxTTL)))
}

// List returns up to limit blocks of a namespace in object-name order (an
// administrative scan, for S3 listings and ctxctl), read at opts.Level
// (opts.Namespace applies; the other options do not).
func (s *Store) List(ctx context.Context, ns, prefix, after string, limit int, opts ReadOptions) ([]block.Info, error) {
	if err := s.sync(ctx, opts.Level); err != nil {
		return nil, err
	}
	if _, err := s.resolve(ns, &opts.Namespace); err != nil {
		return nil, err
	}
	return s.tier.List(ctx, ns, prefix, after, limit)
}

// DeleteNamespace removes an empty namespace; block.ErrNamespaceNotEmpty while
// it holds blocks.
func (s *Store) DeleteNamespace(ctx context.Context, name string) error {
	if _, err := s.catalog.Namespace(name); err != nil {
		return err
	}
	if infos, err := s.tier.List(ctx, name, "", "", 1); err != nil {
		return err
	} else if len(infos) > 0 {
		return fmt.Errorf("%w: %q still holds blocks", block.ErrNamespaceNotEmpty, name)
	}
	return s.catalog.DeleteNamespace(ctx, name)
}

// UpdateNamespace changes a namespace's policy knobs (not its key-defining fields).
func (s *Store) UpdateNamespace(ctx context.Context, ns block.Namespace) error {
	return s.catalog.UpdateNamespace(ctx, ns)
}

// Lookup returns how many leading keys are present, stopping at the first
// miss: the prefix an engine can fetch instead of recompute. All keys must be
// in known namespaces. opts.Level, opts.Namespace and opts.Retain (which
// re-arms the retain windows of the present prefix) apply;
// opts.ReaderVerifies does not (no bytes are read).
func (s *Store) Lookup(ctx context.Context, keys []block.Key, opts ReadOptions) (int, error) {
	if err := s.sync(ctx, opts.Level); err != nil {
		return 0, err
	}
	last, checked := "", false
	for i, k := range keys {
		if !checked || k.Namespace != last {
			if _, err := s.resolve(k.Namespace, &opts.Namespace); err != nil {
				return 0, err
			}
			last, checked = k.Namespace, true
		}
		if !s.tier.Contains(k) {
			s.retain(opts.Retain, keys[:i])
			return i, nil
		}
	}
	s.retain(opts.Retain, keys)
	return len(keys), nil
}

// Retainer is implemented by tiers that can re-arm a block's retain window
// without reading it (a LOOKUP's read hint, ReadOptions.Retain); Retain
// reports whether the block was resident where hints are kept.
type Retainer interface {
	Retain(key block.Key, d time.Duration) bool
}

// retain re-arms the retain windows of keys to d when d > 0.
func (s *Store) retain(d time.Duration, keys []block.Key) {
	r, ok := s.tier.(Retainer)
	if d <= 0 || !ok {
		return
	}
	for _, k := range keys {
		r.Retain(k, d)
	}
}

// PutItem is one element of a batch put.
type PutItem struct {
	Key  block.Key
	Data []byte
	Opts block.PutOptions
}

// PutBatch puts each item and returns one error (or nil) per item. Every
// item is checked as Put checks it; on a tier that is a BatchPutter (the
// cluster backend) the valid items then go down together, so that their
// index entries commit as one Raft proposal, not one each.
func (s *Store) PutBatch(ctx context.Context, items []PutItem) []error {
	errs := make([]error, len(items))
	bt, batched := s.tier.(BatchPutter)
	if !batched || len(items) < 2 {
		for i, it := range items {
			if err := ctx.Err(); err != nil {
				errs[i] = err
				continue
			}
			errs[i] = s.Put(ctx, it.Key, it.Data, it.Opts)
		}
		return errs
	}
	puts := make([]TierPut, 0, len(items))
	at := make([]int, 0, len(items))
	for i, it := range items {
		opts, err := s.preparePut(it.Key, it.Data, it.Opts)
		if err != nil {
			errs[i] = err
			continue
		}
		puts = append(puts, TierPut{Key: it.Key, Data: it.Data, Sum: opts.Sum, Opts: opts})
		at = append(at, i)
	}
	if len(puts) == 0 {
		return errs
	}
	if err := ctx.Err(); err != nil {
		for _, i := range at {
			errs[i] = err
		}
		return errs
	}
	for j, err := range bt.PutBatch(ctx, puts) {
		errs[at[j]] = err
		if err == nil {
			s.traffic.put(puts[j].Key.Namespace, len(puts[j].Data))
		}
	}
	return errs
}

// GetBatch reads each key with opts (one sync for the whole batch at
// ReadLinearizable); refs[i] is nil where errs[i] is not. The caller
// releases every non-nil ref.
func (s *Store) GetBatch(ctx context.Context, keys []block.Key, opts ReadOptions) ([]*block.Ref, []error) {
	refs := make([]*block.Ref, len(keys))
	errs := make([]error, len(keys))
	opts, err := s.Linearize(ctx, opts)
	for i, k := range keys {
		if err != nil {
			errs[i] = err
			continue
		}
		refs[i], errs[i] = s.Read(ctx, k, opts)
	}
	return refs, errs
}

// ExistsBatch reports presence of each key, read at opts.Level (one sync
// for the whole batch at ReadLinearizable; opts.Namespace applies, the
// other options do not).
func (s *Store) ExistsBatch(ctx context.Context, keys []block.Key, opts ReadOptions) ([]bool, []error) {
	out := make([]bool, len(keys))
	errs := make([]error, len(keys))
	opts, err := s.Linearize(ctx, opts)
	for i, k := range keys {
		if err != nil {
			errs[i] = err
			continue
		}
		out[i], errs[i] = s.Exists(ctx, k, opts)
	}
	return out, errs
}

// DeleteBatch deletes each key. On a tier that is a BatchDeleter (the
// cluster backend) the keys of known namespaces go down together, so their
// index deletions commit as one Raft proposal.
func (s *Store) DeleteBatch(ctx context.Context, keys []block.Key) []error {
	errs := make([]error, len(keys))
	bt, batched := s.tier.(BatchDeleter)
	if !batched || len(keys) < 2 {
		for i, k := range keys {
			errs[i] = s.Delete(ctx, k)
		}
		return errs
	}
	ok, at := s.knownKeys(keys, errs)
	for j, err := range bt.DeleteBatch(ctx, ok) {
		errs[at[j]] = err
	}
	return errs
}

// PinBatch pins each key for ttl (capped by Config.PinMaxTTL). On a tier
// that is a BatchPinner the pins commit as one Raft proposal.
func (s *Store) PinBatch(ctx context.Context, keys []block.Key, ttl time.Duration) []error {
	errs := make([]error, len(keys))
	bt, batched := s.tier.(BatchPinner)
	if !batched || len(keys) < 2 || ttl <= 0 {
		for i, k := range keys {
			errs[i] = s.Pin(ctx, k, ttl)
		}
		return errs
	}
	ok, at := s.knownKeys(keys, errs)
	for j, err := range bt.PinBatch(ctx, ok, s.now().Add(min(ttl, s.cfg.PinMaxTTL))) {
		errs[at[j]] = err
	}
	return errs
}

// knownKeys returns the keys whose namespace exists, and their positions;
// the others get the catalog's error in errs.
func (s *Store) knownKeys(keys []block.Key, errs []error) (ok []block.Key, at []int) {
	for i, k := range keys {
		if _, err := s.catalog.Namespace(k.Namespace); err != nil {
			errs[i] = err
			continue
		}
		ok = append(ok, k)
		at = append(at, i)
	}
	return ok, at
}

// ReleaseSession ends an agent session of namespace ns: the blocks put with
// that session id (block.PutOptions.Session) lose their retain windows and
// become the first eviction candidates, except those hinted shared. It
// returns how many blocks were released (0 on a tier that keeps no hints).
func (s *Store) ReleaseSession(ctx context.Context, ns string, session uint64) (int, error) {
	if session == 0 {
		return 0, fmt.Errorf("%w: session 0 is no session", block.ErrInvalidArgument)
	}
	if _, err := s.catalog.Namespace(ns); err != nil {
		return 0, err
	}
	r, ok := s.tier.(block.SessionReleaser)
	if !ok {
		return 0, nil
	}
	return r.ReleaseSession(ctx, ns, session)
}
