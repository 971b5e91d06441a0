package block

import (
	"fmt"
	"time"
)

// DefaultNamespace is the name of the namespace every fresh node has.
const DefaultNamespace = "default"

// HashScheme names how token ids become block sequence hashes. A namespace
// fixes one, so engines, routers and ctxtier agree on every key.
type HashScheme string

const (
	// SchemeDynamo is NVIDIA Dynamo's: xxh3-64 seed 1337 over each block's
	// tokens as u32 little-endian, chained into a sequence hash.
	SchemeDynamo HashScheme = "dynamo-xxh3"
	// SchemeVLLM is vLLM's sha256 chained block hash (CBOR-encoded
	// (parent, tokens, extra_keys) tuples) reduced to 64 bits.
	SchemeVLLM HashScheme = "vllm-sha256"
)

// WriteMode chooses when a block reaches the tier below DRAM.
type WriteMode string

const (
	// WriteBack moves a block down only when DRAM evicts it.
	WriteBack WriteMode = "write-back"
	// WriteThrough writes a block down at put time, before the put is acknowledged.
	WriteThrough WriteMode = "write-through"
)

// Kind says what a namespace's keys are.
type Kind string

const (
	// KindBlock (also the empty Kind) is an engine's namespace: keys are
	// 64-bit sequence hashes, blocks immutable and content-checked.
	KindBlock Kind = "block"
	// KindObject is an S3 object namespace: keys are arbitrary S3 object
	// keys, an object is replaced by a PUT, and large objects span many
	// blocks (ctxstore/object). Buckets created through S3 are of this kind.
	KindObject Kind = "object"
)

// Maximum sizes accepted anywhere in the system.
const (
	MinBlockSize        = 1
	DefaultMaxBlockSize = 64 << 20
	// HardMaxBlockSize is the largest block any namespace may allow.
	HardMaxBlockSize = 1 << 30
	MaxPriority      = 7
)

// Namespace is a tenant's keyspace. It fixes the model, the KV layout's block
// size in tokens, the hash scheme and a tenant salt, so two tenants never share
// or probe each other's blocks, plus the policy knobs of the tiers.
type Namespace struct {
	Name string `json:"name" yaml:"name"`
	// Kind is KindBlock (empty: the default) or KindObject; it cannot change.
	Kind        Kind       `json:"kind,omitempty" yaml:"kind,omitempty"`
	Model       string     `json:"model,omitempty" yaml:"model,omitempty"`
	BlockTokens int        `json:"block_tokens" yaml:"block_tokens"`
	HashScheme  HashScheme `json:"hash_scheme" yaml:"hash_scheme"`
	// TenantSalt, when set, is mixed into the first block of every chain
	// computed from tokens, so the same prompt yields different keys per tenant.
	TenantSalt string `json:"tenant_salt,omitempty" yaml:"tenant_salt,omitempty"`
	// VLLMHashSeed is the PYTHONHASHSEED the vLLM engines run with; it fixes
	// the parent hash of block 0 (vLLM's NONE_HASH). Empty means "0".
	VLLMHashSeed string `json:"vllm_hash_seed,omitempty" yaml:"vllm_hash_seed,omitempty"`
	// MaxBlockSize bounds one block's bytes (default 64 MiB).
	MaxBlockSize int64 `json:"max_block_size" yaml:"max_block_size"`
	// Priority is the eviction class: lower classes are evicted first.
	Priority uint8 `json:"priority" yaml:"priority"`
	// TTLSeconds, when non-zero, expires blocks that long after their put.
	TTLSeconds int64 `json:"ttl_seconds,omitempty" yaml:"ttl_seconds,omitempty"`
	// WriteMode chooses write-back or write-through to the tier below DRAM.
	WriteMode WriteMode `json:"write_mode,omitempty" yaml:"write_mode,omitempty"`
	// DataShards (k) and ParityShards (m) set the erasure code in a cluster:
	// k=1,m=0 is one copy; k=1,m=2 is three replicas.
	DataShards   int `json:"data_shards,omitempty" yaml:"data_shards,omitempty"`
	ParityShards int `json:"parity_shards,omitempty" yaml:"parity_shards,omitempty"`
	// S3Disabled keeps the namespace's blocks out of the S3 tier: blocks
	// that NVMe drops are gone. The zero value lets them reach S3.
	S3Disabled bool `json:"s3_disabled,omitempty" yaml:"s3_disabled,omitempty"`
	// S3TTLSeconds, when non-zero, is how long a block stays in S3 after it
	// reaches it; zero means TTLSeconds (if set), else no limit.
	S3TTLSeconds int64 `json:"s3_ttl_seconds,omitempty" yaml:"s3_ttl_seconds,omitempty"`
	// Quota bounds the namespace's bytes in each tier of every node (0:
	// unlimited), so one tenant cannot evict everyone else's blocks.
	Quota Quota `json:"quota,omitzero" yaml:"quota,omitempty"`
}

// Quota is a namespace's byte quota per tier, on each node; 0 is unlimited.
// A put that would take the namespace over its quota in a tier first
// evicts (demotes) the namespace's own least recently used blocks there; a
// block larger than the quota is refused with ErrQuotaExceeded.
type Quota struct {
	DRAM int64 `json:"dram,omitempty" yaml:"dram,omitempty"`
	NVMe int64 `json:"nvme,omitempty" yaml:"nvme,omitempty"`
	S3   int64 `json:"s3,omitempty" yaml:"s3,omitempty"`
}

// IsZero reports whether no tier has a quota.
func (q Quota) IsZero() bool { return q == Quota{} }

// Of returns the quota of tier t (0 for an unknown tier or none).
func (q Quota) Of(t Tier) int64 {
	switch t {
	case TierDRAM:
		return q.DRAM
	case TierNVMe:
		return q.NVMe
	case TierS3:
		return q.S3
	}
	return 0
}

// Validate checks that no quota is negative.
func (q Quota) Validate() error {
	if q.DRAM < 0 || q.NVMe < 0 || q.S3 < 0 {
		return fmt.Errorf("%w: quota %+v: a quota must not be negative (0 is unlimited)", ErrInvalidArgument, q)
	}
	return nil
}

// DefaultNamespaceConfig returns the definition of the "default" namespace:
// Dynamo hashing, 512-token blocks (Mooncake's), 64 MiB max block, one copy.
func DefaultNamespaceConfig() Namespace {
	return Namespace{
		Name:         DefaultNamespace,
		BlockTokens:  512,
		HashScheme:   SchemeDynamo,
		MaxBlockSize: DefaultMaxBlockSize,
		WriteMode:    WriteBack,
		DataShards:   1,
	}
}

// WithDefaults fills zero fields with the defaults, keeping what is set.
func (n Namespace) WithDefaults() Namespace {
	d := DefaultNamespaceConfig()
	if n.Kind == KindBlock {
		n.Kind = "" // one spelling, so identical definitions compare equal
	}
	if n.BlockTokens == 0 {
		n.BlockTokens = d.BlockTokens
	}
	if n.HashScheme == "" {
		n.HashScheme = d.HashScheme
	}
	if n.MaxBlockSize == 0 {
		n.MaxBlockSize = d.MaxBlockSize
	}
	if n.WriteMode == "" {
		n.WriteMode = d.WriteMode
	}
	if n.DataShards == 0 {
		n.DataShards = d.DataShards
	}
	return n
}

// Validate checks every field; the error wraps ErrInvalidArgument.
func (n Namespace) Validate() error {
	if err := ValidNamespaceName(n.Name); err != nil {
		return err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: namespace %q: %s", ErrInvalidArgument, n.Name, fmt.Sprintf(format, a...))
	}
	switch {
	case n.Kind != "" && n.Kind != KindBlock && n.Kind != KindObject:
		return bad("kind %q is not %q or %q", n.Kind, KindBlock, KindObject)
	case n.BlockTokens < 1 || n.BlockTokens > 1<<20:
		return bad("block_tokens %d out of range 1..1048576", n.BlockTokens)
	case n.HashScheme != SchemeDynamo && n.HashScheme != SchemeVLLM:
		return bad("hash_scheme %q is not one of %q, %q", n.HashScheme, SchemeDynamo, SchemeVLLM)
	case n.MaxBlockSize < MinBlockSize || n.MaxBlockSize > HardMaxBlockSize:
		return bad("max_block_size %d out of range 1..%d", n.MaxBlockSize, HardMaxBlockSize)
	case n.Priority > MaxPriority:
		return bad("priority %d above %d", n.Priority, MaxPriority)
	case n.TTLSeconds < 0:
		return bad("ttl_seconds %d is negative", n.TTLSeconds)
	case n.S3TTLSeconds < 0:
		return bad("s3_ttl_seconds %d is negative", n.S3TTLSeconds)
	case n.WriteMode != WriteBack && n.WriteMode != WriteThrough:
		return bad("write_mode %q is not %q or %q", n.WriteMode, WriteBack, WriteThrough)
	case n.DataShards < 1 || n.ParityShards < 0 || n.DataShards+n.ParityShards > 32:
		return bad("data_shards %d / parity_shards %d: need k>=1, m>=0, k+m<=32", n.DataShards, n.ParityShards)
	case len(n.VLLMHashSeed) > 64:
		return bad("vllm_hash_seed longer than 64 bytes")
	case len(n.TenantSalt) > 256:
		return bad("tenant_salt longer than 256 bytes")
	case n.Quota.Validate() != nil:
		return bad("quota %+v: a quota must not be negative (0 is unlimited)", n.Quota)
	}
	return nil
}

// IsObject reports whether n is an object namespace (KindObject).
func (n Namespace) IsObject() bool { return n.Kind == KindObject }

// TTL returns the namespace's block lifetime, 0 for none.
func (n Namespace) TTL() time.Duration { return time.Duration(n.TTLSeconds) * time.Second }
