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
var ErrKeyCollision = fmt.Errorf("key hash collides with another key; %w", block.ErrConflict)

// Config configures a Store.
type Config struct {
	// MaxKeyLen bounds a key's length in bytes.
	MaxKeyLen int
	// MaxBlockSize is the node's own block limit (its tiers'); a record is
	// bounded by the smaller of it and the namespace's max block size.
	// 0 means the namespace's limit alone.
	MaxBlockSize int64
	// ReplaceAttempts bounds the delete-then-put rounds of one Set racing
	// other writers of the same key before it gives up (Unavailable).
	ReplaceAttempts int
	// ChunkSize is the size of the data blocks an S3 object is cut into
	// (blob.go); also bounded by the namespace's and the node's block limit.
	ChunkSize int64
	// Parallel is how many data blocks one object stream writes or reads
	// ahead at once; a stream holds at most Parallel chunks in memory.
	Parallel int
}

// DefaultConfig returns the defaults: keys up to 64 KiB, 8 replace rounds,
// 8 MiB chunks, 4 in flight per stream.
func DefaultConfig() Config {
	return Config{MaxKeyLen: 64 << 10, ReplaceAttempts: 8, ChunkSize: 8 << 20, Parallel: 4}
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

// SlotKey returns the block key that holds key in namespace ns.
func (s *Store) SlotKey(ns block.Namespace, key []byte) block.Key {
	return block.NewKey(ns.Name, s.hash(ns.TenantSalt, key))
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

// Get returns key's value, or block.ErrNotFound when it is absent or expired
// (or its slot holds another key).
func (s *Store) Get(ctx context.Context, ns string, key []byte) (*Value, error) {
	n, err := s.namespace(ns, key)
	if err != nil {
		return nil, err
	}
	v, _, err := s.read(ctx, s.SlotKey(n, key), key)
	return v, err
}

// GetIn is Get in namespace n, which the caller looked up itself (the RESP
// server resolves its database's namespace once per batch of requests).
func (s *Store) GetIn(ctx context.Context, n block.Namespace, key []byte) (*Value, error) {
	if len(key) > s.cfg.MaxKeyLen {
		return nil, fmt.Errorf("%w: key of %d bytes exceeds the limit of %d", block.ErrInvalidKey, len(key), s.cfg.MaxKeyLen)
	}
	v, _, err := s.read(ctx, s.SlotKey(n, key), key)
	return v, err
}

// read fetches the record in slot bk. It returns the value when the slot
// holds a live record of key; otherwise block.ErrNotFound, with other set
// when the slot holds a live record of another key.
// Every caller has resolved bk's namespace (s.namespace) in this request.
func (s *Store) read(ctx context.Context, bk block.Key, key []byte) (v *Value, other bool, err error) {
	ref, err := s.blocks.GetResolved(ctx, bk)
	if err != nil {
		return nil, false, err
	}
	r, err := decodeRecord(ref.Data)
	switch {
	case err != nil:
		ref.Release()
		// An engine's block in this namespace: not a key of ours, and not ours to replace.
		return nil, true, fmt.Errorf("%w: %s", block.ErrNotFound, bk)
	case !r.expires.IsZero() && !r.live(s.now()):
		// (The clock is read only for a record that can expire.)
		ref.Release()
		return nil, false, fmt.Errorf("%w: %s expired", block.ErrNotFound, bk)
	case !bytes.Equal(r.key, key):
		ref.Release()
		return nil, true, fmt.Errorf("%w: %s holds another key", block.ErrNotFound, bk)
	}
	return &Value{Key: r.key, Data: r.value, Expires: r.expires, ref: ref}, false, nil
}

// Exists reports whether key holds a live value.
func (s *Store) Exists(ctx context.Context, ns string, key []byte) (bool, error) {
	n, err := s.namespace(ns, key)
	if err != nil {
		return false, err
	}
	bk := s.SlotKey(n, key)
	if ok, err := s.blocks.Exists(ctx, bk); err != nil || !ok {
		return false, err
	}
	v, _, err := s.read(ctx, bk, key)
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
// block.ErrTooLarge; a key whose slot holds another live key is
// ErrKeyCollision. See the package comment for what replacing means.
func (s *Store) Set(ctx context.Context, ns string, key, value []byte, opts SetOptions) (bool, error) {
	n, err := s.namespace(ns, key)
	if err != nil {
		return false, err
	}
	if limit := s.MaxValueSize(n, len(key)); int64(len(value)) > limit {
		return false, fmt.Errorf("%w: value of %d bytes exceeds the limit of %d bytes for namespace %q (max block size %d less a %d-byte header and the key)",
			block.ErrTooLarge, len(value), limit, n.Name, s.maxBlock(n), HeaderSize)
	}
	bk := s.SlotKey(n, key)
	expires := opts.Expires
	if opts.Cond != Always || opts.KeepTTL {
		// A condition is checked against the cluster's current state.
		cur, other, err := s.read(ctxstore.WithReadLevel(ctx, ctxstore.ReadLinearizable), bk, key)
		switch {
		case err == nil:
			if opts.KeepTTL {
				expires = cur.Expires
			}
			cur.Release()
			if opts.Cond == IfAbsent {
				return false, nil
			}
		case !errors.Is(err, block.ErrNotFound):
			return false, err
		case other:
			return false, fmt.Errorf("%w: %q in namespace %q", ErrKeyCollision, key, n.Name)
		case opts.Cond == IfPresent:
			return false, nil
		}
	}
	rec := encodeRecord(key, value, expires)
	return s.replace(ctx, n, bk, key, rec, expires, opts.Cond == IfAbsent, nil)
}

// replace puts rec in slot bk, retiring whatever record of key (or expired
// record of any key) is there first. retired, when not nil, is handed a copy
// of the value of every record this call deleted (the S3 layer frees the
// data blocks an old manifest names).
func (s *Store) replace(ctx context.Context, n block.Namespace, bk block.Key, key, rec []byte, expires time.Time, ifAbsent bool, retired func(value []byte)) (bool, error) {
	opts := block.PutOptions{Expires: expires}
	lin := ctxstore.WithReadLevel(ctx, ctxstore.ReadLinearizable)
	for range s.cfg.ReplaceAttempts {
		err := s.blocks.Put(ctx, bk, rec, opts)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, block.ErrConflict) {
			return false, err
		}
		// The slot holds other bytes: the key's previous value, an expired
		// record, or another key. Replacing is rare: it reads and, after
		// the delete, syncs with the cluster's leader, so the next put does
		// not find the retired record still in this node's index.
		ref, err := s.blocks.Get(lin, bk)
		if errors.Is(err, block.ErrNotFound) {
			continue // retired meanwhile
		}
		if err != nil {
			return false, err
		}
		r, derr := decodeRecord(ref.Data)
		live, same := derr == nil && r.live(s.now()), derr == nil && bytes.Equal(r.key, key)
		var old []byte
		if retired != nil && same {
			old = bytes.Clone(r.value)
		}
		ref.Release()
		switch {
		case derr != nil:
			return false, fmt.Errorf("%w: %q in namespace %q: its slot %s holds a block that is not an object record", ErrKeyCollision, key, n.Name, bk)
		case live && !same:
			return false, fmt.Errorf("%w: %q in namespace %q", ErrKeyCollision, key, n.Name)
		case live && ifAbsent:
			return false, nil // a concurrent Set won
		}
		err = s.blocks.Delete(ctx, bk)
		if err != nil && !errors.Is(err, block.ErrNotFound) {
			return false, err
		}
		if err == nil && old != nil {
			retired(old)
		}
		if _, err := s.blocks.Linearize(lin); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("%w: %q in namespace %q: concurrent writers kept replacing it", block.ErrUnavailable, key, n.Name)
}

// Delete removes key; it reports whether there was a live value to remove.
func (s *Store) Delete(ctx context.Context, ns string, key []byte) (bool, error) {
	n, err := s.namespace(ns, key)
	if err != nil {
		return false, err
	}
	bk := s.SlotKey(n, key)
	if ok, err := s.blocks.Exists(ctx, bk); err != nil || !ok {
		return false, err
	}
	v, other, err := s.read(ctx, bk, key)
	if err != nil {
		if errors.Is(err, block.ErrNotFound) {
			if !other {
				// An expired record of key: retire it, but it was not live.
				if derr := s.blocks.Delete(ctx, bk); derr != nil && !errors.Is(derr, block.ErrNotFound) {
					return false, derr
				}
			}
			return false, nil
		}
		return false, err
	}
	v.Release()
	if err := s.blocks.Delete(ctx, bk); err != nil {
		if errors.Is(err, block.ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// SetExpiry changes key's expiry to at (zero: never) and reports whether the
// key held a live value. An at not after now deletes the key. Like Set, it
// rewrites the record (see the package comment).
func (s *Store) SetExpiry(ctx context.Context, ns string, key []byte, at time.Time) (bool, error) {
	n, err := s.namespace(ns, key)
	if err != nil {
		return false, err
	}
	bk := s.SlotKey(n, key)
	v, _, err := s.read(ctx, bk, key)
	if errors.Is(err, block.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !at.IsZero() && !at.After(s.now()) {
		v.Release()
		return s.Delete(ctx, ns, key)
	}
	if v.Expires.Equal(at) {
		v.Release()
		return true, nil
	}
	rec := encodeRecord(key, v.Data, at)
	v.Release()
	ok, err := s.replace(ctx, n, bk, key, rec, at, false, nil)
	return ok, err
}

// Scan lists up to count slots of namespace ns from cursor (0 to start) and
// returns the live keys among them for which match (nil: all) is true, and
// the cursor to continue from (0 when the namespace is done). Like Redis's
// SCAN, a call may return fewer keys than count, even none, before the end.
func (s *Store) Scan(ctx context.Context, ns string, cursor uint64, count int, match func(key []byte) bool) ([][]byte, uint64, error) {
	if count < 1 {
		return nil, 0, fmt.Errorf("%w: scan count %d must be positive", block.ErrInvalidArgument, count)
	}
	after := ""
	if cursor > 0 {
		after = block.FormatHash(cursor - 1)
	}
	infos, err := s.blocks.List(ctx, ns, "", after, count)
	if err != nil {
		return nil, 0, err
	}
	now := s.now()
	var keys [][]byte
	for _, in := range infos {
		if in.Key.HasPart {
			continue
		}
		ref, err := s.blocks.Get(ctx, in.Key)
		if errors.Is(err, block.ErrNotFound) {
			continue // deleted or evicted since the listing
		}
		if err != nil {
			return nil, 0, err
		}
		r, derr := decodeRecord(ref.Data)
		if derr == nil && r.live(now) && (match == nil || match(r.key)) {
			keys = append(keys, bytes.Clone(r.key))
		}
		ref.Release()
	}
	if len(infos) < count {
		return keys, 0, nil
	}
	last := infos[len(infos)-1].Key.Hash
	if last == math.MaxUint64 {
		return keys, 0, nil
	}
	return keys, last + 1, nil
}

// Count returns how many live keys namespace ns holds (a full scan).
func (s *Store) Count(ctx context.Context, ns string) (int64, error) {
	var n int64
	cursor := uint64(0)
	for {
		keys, next, err := s.Scan(ctx, ns, cursor, 1000, nil)
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
