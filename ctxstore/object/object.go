package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// ErrKeyCollision: the key's slot holds a live record of another key whose
// hash is the same. It wraps block.ErrConflict: nothing was changed.
var ErrKeyCollision = fmt.Errorf("object: key hash collides with another key; %w", block.ErrConflict)

// Config configures a Store.
type Config struct {
	// MaxKeyLen bounds a key's length in bytes.
	MaxKeyLen int
	// MaxBlockSize is the node's own block limit (its tiers'); a record is
	// bounded by the smaller of it and the namespace's max block size.
	// 0 means the namespace's limit alone.
	MaxBlockSize int64
	// ReplaceAttempts bounds the rounds of one Set racing other writers of
	// the same key (each round reads both slots and puts into the free one)
	// before it gives up (Unavailable).
	ReplaceAttempts int
	// ChunkSize is the size of the data blocks an S3 object is cut into
	// (blob.go); also bounded by the namespace's and the node's block limit.
	ChunkSize int64
	// Parallel is how many data blocks one object stream writes or reads
	// ahead at once; a stream holds at most Parallel chunks in memory.
	Parallel int
	// CompletedTTL is how long a completed multipart upload is remembered,
	// so that completing it again answers the same success (completed.go).
	CompletedTTL time.Duration
	// RetireGrace is how long a replaced or deleted object's data blocks
	// outlive it, so that a GET already streaming the old version is served
	// whole; a retire record keeps them until SweepUploads deletes them
	// (retired.go). 0 deletes them at once.
	RetireGrace time.Duration
}

// DefaultConfig returns the defaults: keys up to 64 KiB, 8 replace rounds,
// 8 MiB chunks, 4 in flight per stream, completed uploads remembered 10
// minutes, replaced objects' blocks kept 2 minutes.
func DefaultConfig() Config {
	return Config{MaxKeyLen: 64 << 10, ReplaceAttempts: 8, ChunkSize: 8 << 20, Parallel: 4, CompletedTTL: 10 * time.Minute, RetireGrace: 2 * time.Minute}
}

// Validate checks the configuration; errors wrap block.ErrInvalidArgument.
func (c Config) Validate() error {
	switch {
	case c.MaxKeyLen < 1 || c.MaxKeyLen > 16<<20:
		return fmt.Errorf("%w: object config: MaxKeyLen %d out of range 1..16777216", block.ErrInvalidArgument, c.MaxKeyLen)
	case c.MaxBlockSize < 0:
		return fmt.Errorf("%w: object config: MaxBlockSize %d is negative", block.ErrInvalidArgument, c.MaxBlockSize)
	case c.ReplaceAttempts < 1 || c.ReplaceAttempts > 1000:
		return fmt.Errorf("%w: object config: ReplaceAttempts %d out of range 1..1000", block.ErrInvalidArgument, c.ReplaceAttempts)
	case c.ChunkSize < 1 || c.ChunkSize > block.HardMaxBlockSize:
		return fmt.Errorf("%w: object config: ChunkSize %d out of range 1..%d", block.ErrInvalidArgument, c.ChunkSize, block.HardMaxBlockSize)
	case c.Parallel < 1 || c.Parallel > 64:
		return fmt.Errorf("%w: object config: Parallel %d out of range 1..64", block.ErrInvalidArgument, c.Parallel)
	case c.CompletedTTL < 0:
		return fmt.Errorf("%w: object config: CompletedTTL %v is negative", block.ErrInvalidArgument, c.CompletedTTL)
	case c.RetireGrace < 0:
		return fmt.Errorf("%w: object config: RetireGrace %v is negative", block.ErrInvalidArgument, c.RetireGrace)
	}
	return nil
}

// Store keeps keyed values as records in the blocks of a ctxstore.Store.
// It is safe for concurrent use.
type Store struct {
	cfg    Config
	blocks *ctxstore.Store
	now    func() time.Time
	// hash maps a key to its slot under a namespace's salt; tests replace it
	// to force collisions.
	hash func(salt string, key []byte) uint64
}

// New builds a Store over blocks.
func New(cfg Config, blocks *ctxstore.Store) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if blocks == nil {
		return nil, fmt.Errorf("%w: object: nil block store", block.ErrInvalidArgument)
	}
	return &Store{cfg: cfg, blocks: blocks, now: time.Now, hash: slotHash}, nil
}

// slotHash is xxh3-64 of key seeded by a hash of the namespace's salt.
func slotHash(salt string, key []byte) uint64 {
	return xxh3.HashSeed(key, saltSeed(salt))
}

// seeds caches each salt's seed (a handful of namespaces, for ever).
var seeds sync.Map

func saltSeed(salt string) uint64 {
	if v, ok := seeds.Load(salt); ok {
		return v.(uint64)
	}
	seed := xxh3.HashString("ctxtier/object\x00" + salt)
	seeds.Store(salt, seed)
	return seed
}

// Blocks returns the block store under s.
func (s *Store) Blocks() *ctxstore.Store { return s.blocks }

// SlotKey returns the first of the two blocks that may hold key in
// namespace ns (the one records written before generations are in); the
// other is its hash with the lowest bit flipped (slots.go).
func (s *Store) SlotKey(ns block.Namespace, key []byte) block.Key {
	return s.slotKeys(ns, key)[0]
}

// maxBlock is the largest record namespace ns may hold on this node.
func (s *Store) maxBlock(ns block.Namespace) int64 {
	if s.cfg.MaxBlockSize > 0 {
		return min(ns.MaxBlockSize, s.cfg.MaxBlockSize)
	}
	return ns.MaxBlockSize
}

// MaxValueSize is the largest value key may hold in namespace ns: the max
// block size (the namespace's, or the node's if smaller) less the record's
// header and the key.
func (s *Store) MaxValueSize(ns block.Namespace, keyLen int) int64 {
	return max(s.maxBlock(ns)-HeaderSize-int64(keyLen), 0)
}

// Value is a leased view of a stored value; Release it when done. Data must
// not be modified nor used after Release.
type Value struct {
	Key  []byte
	Data []byte
	// Expires is when the key lapses; zero for never.
	Expires time.Time
	ref     *block.Ref
}

// Release ends the lease on the value's bytes.
func (v *Value) Release() {
	if v != nil {
		v.ref.Release()
	}
}

func (s *Store) namespace(ns string, key []byte) (block.Namespace, error) {
	if len(key) > s.cfg.MaxKeyLen {
		return block.Namespace{}, fmt.Errorf("%w: key of %d bytes exceeds the limit of %d", block.ErrInvalidKey, len(key), s.cfg.MaxKeyLen)
	}
	return s.blocks.Namespace(ns)
}

// kvNamespace is namespace for the key-value calls (Get, Set, Delete,
// SetExpiry: what the RESP server uses), which may not name an object
// namespace's own records (see checkKVKey).
func (s *Store) kvNamespace(ns string, key []byte) (block.Namespace, error) {
	n, err := s.namespace(ns, key)
	if err != nil {
		return n, err
	}
	return n, checkKVKey(n, key)
}

// checkKVKey refuses, in an object namespace, a key that starts with NUL:
// there those keys are the S3 side's records (uploads, parts, completions,
// retirements naming the data blocks a sweep deletes), so a RESP client
// whose database maps to the bucket could otherwise read them or forge one
// and have another object's blocks deleted.
func checkKVKey(n block.Namespace, key []byte) error {
	if n.IsObject() && bytes.HasPrefix(key, []byte(reservedPrefix)) {
		return fmt.Errorf("%w: keys starting with NUL are reserved in object namespace %q", block.ErrInvalidKey, n.Name)
	}
	return nil
}

// Get returns key's value, or block.ErrNotFound when it is absent or expired
// (or its slots hold other keys), read at lvl.
func (s *Store) Get(ctx context.Context, ns string, key []byte, lvl ctxstore.ReadLevel) (*Value, error) {
	n, err := s.kvNamespace(ns, key)
	if err != nil {
		return nil, err
	}
	p, err := s.readPair(ctx, n, s.slotKeys(n, key), lvl)
	if err != nil {
		return nil, err
	}
	return s.take(&p, key)
}

// GetIn is Get in namespace n, which the caller looked up itself (the RESP
// server resolves its database's namespace once per batch of requests).
func (s *Store) GetIn(ctx context.Context, n block.Namespace, key []byte, lvl ctxstore.ReadLevel) (*Value, error) {
	if len(key) > s.cfg.MaxKeyLen {
		return nil, fmt.Errorf("%w: key of %d bytes exceeds the limit of %d", block.ErrInvalidKey, len(key), s.cfg.MaxKeyLen)
	}
	if err := checkKVKey(n, key); err != nil {
		return nil, err
	}
	return s.getIn(ctx, n, key, lvl)
}

// getIn reads key in n, reserved keys included (the object side's own
// records), at lvl.
func (s *Store) getIn(ctx context.Context, n block.Namespace, key []byte, lvl ctxstore.ReadLevel) (*Value, error) {
	p, err := s.readPair(ctx, n, s.slotKeys(n, key), lvl)
	if err != nil {
		return nil, err
	}
	return s.take(&p, key)
}

// Exists reports whether key holds a live value, read at lvl.
func (s *Store) Exists(ctx context.Context, ns string, key []byte, lvl ctxstore.ReadLevel) (bool, error) {
	v, err := s.Get(ctx, ns, key, lvl)
	if errors.Is(err, block.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	v.Release()
	return true, nil
}

// Condition restricts a Set.
type Condition uint8

// The conditions.
const (
	// Always sets the value whether or not the key exists.
	Always Condition = iota
	// IfAbsent sets it only when the key holds no live value (Redis NX).
	IfAbsent
	// IfPresent sets it only when the key holds a live value (Redis XX).
	IfPresent
)

// SetOptions are a Set's options.
type SetOptions struct {
	Cond Condition
	// Expires is when the key lapses; zero for never (or, with KeepTTL,
	// whatever the existing value had).
	Expires time.Time
	// KeepTTL keeps the existing value's expiry.
	KeepTTL bool
}

// Set stores value under key; it reports false (and changes nothing) when
// opts.Cond is not met. A value over the namespace's limit is
// block.ErrTooLarge; a key whose slots hold another live key is
// ErrKeyCollision. See the package comment for what replacing means.
func (s *Store) Set(ctx context.Context, ns string, key, value []byte, opts SetOptions) (bool, error) {
	n, err := s.kvNamespace(ns, key)
	if err != nil {
		return false, err
	}
	if limit := s.MaxValueSize(n, len(key)); int64(len(value)) > limit {
		return false, fmt.Errorf("%w: value of %d bytes exceeds the limit of %d bytes for namespace %q (max block size %d less a %d-byte header and the key)",
			block.ErrTooLarge, len(value), limit, n.Name, s.maxBlock(n), HeaderSize)
	}
	same := false
	ok, err := s.replace(ctx, n, key, func(cur *record) ([]byte, time.Time, bool, error) {
		expires := opts.Expires
		if cur != nil && opts.KeepTTL {
			expires = cur.expires
		}
		switch {
		case cur != nil && opts.Cond == IfAbsent, cur == nil && opts.Cond == IfPresent:
			return nil, time.Time{}, false, nil
		case cur != nil && bytes.Equal(cur.value, value) && cur.expires.Equal(expires):
			// The key holds this value already (LMCache re-putting a
			// chunk): nothing to write.
			same = true
			return nil, time.Time{}, false, nil
		}
		return value, expires, true, nil
	}, nil, opts.Cond != Always || opts.KeepTTL)
	return ok || (same && err == nil), err
}

// Delete removes key; it reports whether there was a live value to remove.
// The lower generation goes first (see deleteKey), and an expired record of
// key is removed too.
func (s *Store) Delete(ctx context.Context, ns string, key []byte) (bool, error) {
	n, err := s.kvNamespace(ns, key)
	if err != nil {
		return false, err
	}
	return s.deleteKey(ctx, n, key, nil)
}

// SetExpiry changes key's expiry to at (zero: never) and reports whether the
// key held a live value. An at not after now deletes the key. Like Set, it
// writes the key's next record (see the package comment).
func (s *Store) SetExpiry(ctx context.Context, ns string, key []byte, at time.Time) (bool, error) {
	n, err := s.kvNamespace(ns, key)
	if err != nil {
		return false, err
	}
	if !at.IsZero() && !at.After(s.now()) {
		return s.deleteKey(ctx, n, key, nil)
	}
	found := false
	_, err = s.replace(ctx, n, key, func(cur *record) ([]byte, time.Time, bool, error) {
		found = cur != nil
		if cur == nil || cur.expires.Equal(at) {
			return nil, time.Time{}, false, nil
		}
		return cur.value, at, true, nil
	}, nil, true)
	return found && err == nil, err
}

// Scan lists up to count slots of namespace ns from cursor (0 to start) and
// returns the live keys among them (not, in an object namespace, its own
// records: see checkKVKey) (each key's winning record, read with
// the other slot of its pair, so a key in the middle of a replace is
// returned once) for which match (nil: all) is true, and
// the cursor to continue from (0 when the namespace is done). Like Redis's
// SCAN, a call may return fewer keys than count, even none, before the end.
// It reads at lvl (one sync per call at ctxstore.ReadLinearizable).
func (s *Store) Scan(ctx context.Context, ns string, cursor uint64, count int, match func(key []byte) bool, lvl ctxstore.ReadLevel) ([][]byte, uint64, error) {
	if count < 1 {
		return nil, 0, fmt.Errorf("%w: scan count %d must be positive", block.ErrInvalidArgument, count)
	}
	after := ""
	if cursor > 0 {
		after = pastSlot(cursor - 1)
	}
	n, err := s.blocks.Namespace(ns)
	if err != nil {
		return nil, 0, err
	}
	if lvl, err = s.linearize(ctx, lvl); err != nil {
		return nil, 0, err
	}
	infos, err := s.blocks.List(ctx, ns, "", after, count, ctxstore.ReadOptions{Level: lvl, Namespace: n})
	if err != nil {
		return nil, 0, err
	}
	var keys [][]byte
	lastRead, err := s.eachWinner(ctx, n, infos, s.now(), func(r record) error {
		if checkKVKey(n, r.key) != nil {
			return nil //nolint:nilerr // an object namespace's own record: skip it
		}
		if match == nil || match(r.key) {
			keys = append(keys, bytes.Clone(r.key))
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if len(infos) < count {
		return keys, 0, nil
	}
	last := infos[len(infos)-1].Key.Hash
	if lastRead {
		last |= 1 // the pair's second slot was read with its first
	}
	if last == math.MaxUint64 {
		return keys, 0, nil
	}
	return keys, last + 1, nil
}

// Count returns how many live keys namespace ns holds (a full scan), read
// at lvl (one sync at ctxstore.ReadLinearizable).
func (s *Store) Count(ctx context.Context, ns string, lvl ctxstore.ReadLevel) (int64, error) {
	lvl, err := s.linearize(ctx, lvl)
	if err != nil {
		return 0, err
	}
	var n int64
	cursor := uint64(0)
	for {
		keys, next, err := s.Scan(ctx, ns, cursor, 1000, nil, lvl)
		if err != nil {
			return 0, err
		}
		n += int64(len(keys))
		if next == 0 {
			return n, nil
		}
		cursor = next
	}
}
