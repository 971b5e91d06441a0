package block

import (
	"encoding/binary"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// NVIDIA Dynamo's block hashing (SchemeDynamo), matched against ai-dynamo/dynamo:
//
//   - lib/kv-router/src/protocols.rs: XXH3_SEED = 1337; compute_block_hash_for_seq
//     hashes each full block (chunks_exact: a trailing partial block is not
//     hashed) as xxh3_64_with_seed(tokens as u32 little-endian, seed) -- the
//     block's LOCAL hash; compute_seq_hash_for_block / compute_next_seq_hash
//     chain them: the sequence hash of block 0 is its local hash, and block i>0
//     has xxh3_64_with_seed(le64(seq[i-1]) || le64(local[i]), 1337), i.e. the
//     [u64; 2] array [parent, local] as 16 little-endian bytes, seed 1337.
//   - lib/llm/src/tokens.rs tests publish the answers for tokens 1..12, block
//     size 4, salt hash 1337 (reproduced in hash_dynamo_test.go).
//   - lib/kv-hashing/src/salt.rs compute_salt_hash: a request's cache salt
//     (the router's cache_namespace) moves the BLOCK seed to
//     1337 + xxh3_64_with_seed(salt bytes, 1) (wrapping); the chain seed stays
//     1337. DynamoBlockSeed implements exactly that, so a ctxtier tenant salt
//     equals a Dynamo cache_namespace of the same bytes.
//
// xxh3.HashSeed (github.com/zeebo/xxh3) is XXH3_64bits_withSeed; the tests
// check it against the xxHash reference sanity vectors.

// DynamoSeed is Dynamo's XXH3 seed (XXH3_SEED / CHAIN_XXH3_SEED): the block
// seed of unsalted requests and the chain seed of every request.
const DynamoSeed uint64 = 1337

// dynamoSaltInnerSeed is the seed compute_salt_hash hashes a salt string with.
const dynamoSaltInnerSeed uint64 = 1

// DynamoBlockSeed returns the XXH3 seed of local block hashes for requests
// carrying cache salt salt: DynamoSeed when salt is empty, otherwise
// DynamoSeed + XXH3_64(salt, seed 1), wrapping (Dynamo's compute_salt_hash).
func DynamoBlockSeed(salt string) uint64 {
	if salt == "" {
		return DynamoSeed
	}
	return DynamoSeed + xxh3.HashStringSeed(salt, dynamoSaltInnerSeed)
}

// DynamoLocalHash is the local hash of one block: XXH3_64 with seed over the
// tokens as u32 little-endian. seed is DynamoSeed, or DynamoBlockSeed(salt)
// for salted requests. It does not allocate on little-endian machines.
func DynamoLocalHash(tokens []uint32, seed uint64) uint64 {
	if len(tokens) == 0 {
		return xxh3.HashSeed(nil, seed)
	}
	if nativeLittleEndian {
		// The in-memory layout of []uint32 is already the wire encoding.
		b := unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), 4*len(tokens))
		return xxh3.HashSeed(b, seed)
	}
	var stack [2048]byte
	b := stack[:0]
	if 4*len(tokens) > len(stack) {
		b = make([]byte, 0, 4*len(tokens))
	}
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, t)
	}
	return xxh3.HashSeed(b, seed)
}

// DynamoSequenceHash chains a block onto its parent: XXH3_64 with seed
// DynamoSeed over le64(parent) || le64(local). Block 0 has no parent; its
// sequence hash is its local hash.
func DynamoSequenceHash(parent, local uint64) uint64 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], parent)
	binary.LittleEndian.PutUint64(b[8:], local)
	return xxh3.HashSeed(b[:], DynamoSeed)
}

// appendDynamoChain appends the sequence hashes of the full blocks of tokens.
func appendDynamoChain(dst []uint64, blockTokens int, seed uint64, tokens []uint32) []uint64 {
	n := len(tokens) / blockTokens
	var seq uint64
	for i := 0; i < n; i++ {
		local := DynamoLocalHash(tokens[i*blockTokens:(i+1)*blockTokens], seed)
		if i == 0 {
			seq = local
		} else {
			seq = DynamoSequenceHash(seq, local)
		}
		dst = append(dst, seq)
	}
	return dst
}

// nativeLittleEndian reports whether this machine stores integers
// little-endian, so []uint32 can be hashed in place.
var nativeLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
