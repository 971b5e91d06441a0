package block

import (
	"fmt"
	"unicode/utf8"
)

// MaxBlockTokens bounds a block's size in tokens, as Namespace.Validate does.
const MaxBlockTokens = 1 << 20

// Chainer turns token sequences into block sequence hashes for one hash
// scheme, block size and tenant salt. Build it once (NewChainer) and reuse
// it: it is a small immutable value, safe for concurrent use.
//
// Tenant salt: an empty salt yields exactly the engine's own hashes. A
// non-empty salt changes every hash of every chain, through each engine's own
// isolation mechanism:
//   - SchemeDynamo: the salt is Dynamo's cache salt (cache_namespace): every
//     block's local-hash seed becomes DynamoBlockSeed(salt). Block 0's
//     sequence hash is its local hash and every later one chains on it, so
//     the whole chain changes.
//   - SchemeVLLM: the salt is vLLM's cache_salt, the extra key of the block
//     starting at token 0; every later block chains on that block's digest.
type Chainer struct {
	scheme      HashScheme
	blockTokens int
	salt        string
	dynamoSeed  uint64
	vllmRoot    VLLMHash
}

// NewChainer validates its arguments and returns a Chainer whose vLLM root is
// VLLMNoneHash(DefaultVLLMHashSeed). Errors wrap ErrInvalidArgument.
func NewChainer(scheme HashScheme, blockTokens int, salt string) (Chainer, error) {
	if blockTokens < 1 || blockTokens > MaxBlockTokens {
		return Chainer{}, fmt.Errorf("%w: block_tokens %d out of range 1..%d", ErrInvalidArgument, blockTokens, MaxBlockTokens)
	}
	c := Chainer{scheme: scheme, blockTokens: blockTokens, salt: salt}
	switch scheme {
	case SchemeDynamo:
		c.dynamoSeed = DynamoBlockSeed(salt)
	case SchemeVLLM:
		if !utf8.ValidString(salt) {
			return Chainer{}, fmt.Errorf("%w: tenant salt is not valid UTF-8, so vLLM cannot carry it as cache_salt", ErrInvalidArgument)
		}
		c.vllmRoot = defaultVLLMNoneHash
	default:
		return Chainer{}, fmt.Errorf("%w: hash_scheme %q is not one of %q, %q", ErrInvalidArgument, scheme, SchemeDynamo, SchemeVLLM)
	}
	return c, nil
}

// WithVLLMHashSeed returns c with the vLLM root set to the NONE_HASH of an
// engine running with PYTHONHASHSEED=seed. It has no effect on other schemes.
func (c Chainer) WithVLLMHashSeed(seed string) Chainer {
	if c.scheme == SchemeVLLM {
		c.vllmRoot = VLLMNoneHash(seed)
	}
	return c
}

// BlockTokens returns the block size in tokens.
func (c Chainer) BlockTokens() int { return c.blockTokens }

// AppendHashes appends to dst the sequence hash of each full block of tokens,
// in order, and returns the extended slice. A trailing partial block is not
// hashed, as engines do not hash it either. With enough capacity in dst it
// does not allocate (blocks up to about 800 tokens for SchemeVLLM).
func (c Chainer) AppendHashes(dst []uint64, tokens []uint32) []uint64 {
	switch c.scheme {
	case SchemeDynamo:
		return appendDynamoChain(dst, c.blockTokens, c.dynamoSeed, tokens)
	case SchemeVLLM:
		return appendVLLMChain(dst, c.blockTokens, c.vllmRoot, c.salt, tokens)
	}
	return dst // the zero Chainer hashes nothing
}

// Hashes returns the sequence hashes of the full blocks of tokens.
func (c Chainer) Hashes(tokens []uint32) []uint64 {
	if c.blockTokens < 1 || len(tokens) < c.blockTokens {
		return []uint64{}
	}
	return c.AppendHashes(make([]uint64, 0, len(tokens)/c.blockTokens), tokens)
}

// ChainHashes returns the sequence hashes of the full blocks of tokens under
// scheme, block size blockTokens and tenant salt (see Chainer); a trailing
// partial block is not hashed. SchemeVLLM assumes PYTHONHASHSEED
// DefaultVLLMHashSeed; use NewChainer(...).WithVLLMHashSeed for another.
// Errors wrap ErrInvalidArgument.
func ChainHashes(scheme HashScheme, blockTokens int, salt string, tokens []uint32) ([]uint64, error) {
	c, err := NewChainer(scheme, blockTokens, salt)
	if err != nil {
		return nil, err
	}
	return c.Hashes(tokens), nil
}

// Chainer returns the namespace's Chainer: its hash scheme, block size and
// tenant salt. Errors wrap ErrInvalidArgument.
func (n Namespace) Chainer() (Chainer, error) {
	c, err := NewChainer(n.HashScheme, n.BlockTokens, n.TenantSalt)
	if err != nil {
		return Chainer{}, fmt.Errorf("namespace %q: %w", n.Name, err)
	}
	if n.VLLMHashSeed != "" {
		c = c.WithVLLMHashSeed(n.VLLMHashSeed)
	}
	return c, nil
}

// ChainHashes returns the sequence hashes of the full blocks of tokens under
// the namespace's hash scheme, block size and tenant salt.
func (n Namespace) ChainHashes(tokens []uint32) ([]uint64, error) {
	c, err := n.Chainer()
	if err != nil {
		return nil, err
	}
	return c.Hashes(tokens), nil
}

// ChainKeys returns the keys, in this namespace, of the full blocks of tokens.
func (n Namespace) ChainKeys(tokens []uint32) ([]Key, error) {
	hashes, err := n.ChainHashes(tokens)
	if err != nil {
		return nil, err
	}
	keys := make([]Key, len(hashes))
	for i, h := range hashes {
		keys[i] = NewKey(n.Name, h)
	}
	return keys, nil
}
