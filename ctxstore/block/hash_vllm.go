package block

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// vLLM's prefix-cache block hashing (SchemeVLLM) with
// --prefix-caching-hash-algo sha256_cbor, matched against the vllm 0.33.0
// package (testdata/vllm_vectors.json holds digests that package computed for
// real requests; python/tools/gen_vllm_vectors.py regenerates it):
//
//   - vllm/v1/core/kv_cache_utils.py hash_block_tokens: a block's hash is
//     sha256_cbor((parent_block_hash, tuple(block_token_ids), extra_keys)),
//     where parent_block_hash is the parent's full 32-byte digest, or NONE_HASH
//     for the first block of a request.
//   - vllm/utils/hashing.py sha256_cbor: SHA-256 of cbor2.dumps(obj,
//     canonical=True). For this fixed shape the encoding is: array(3);
//     byte string(32) parent; array(n) of the token ids as unsigned integers
//     in shortest form; then extra_keys, which is CBOR null when the block has
//     none, else an array of the keys.
//   - init_none_hash: NONE_HASH = sha256_cbor(os.getenv("PYTHONHASHSEED")),
//     the seed hashed as a CBOR text string. vLLM 0.33 uses "vllm-none-hash"
//     when PYTHONHASHSEED is unset (older versions drew random bytes).
//     ctxtier takes the seed explicitly (VLLMNoneHash, a namespace's
//     vllm_hash_seed; default DefaultVLLMHashSeed, i.e. engines started with
//     PYTHONHASHSEED=0).
//   - generate_block_hash_extra_keys: extra_keys = LoRA key + multimodal keys
//     + cache-salt key (on the block starting at token 0 only) + prompt-embeds
//     keys, or None when empty. Since vLLM 0.33 each key is a tagged tuple:
//     ("lora", lora_name, lora_path) and ("cache_salt", salt). ctxtier
//     supports keys that are tuples of strings (VLLMExtraKey; LoRA, cache
//     salt); a tenant salt is passed as vLLM's cache_salt.
//   - init_none_hash (vLLM 0.33): the seed is PYTHONHASHSEED when set, else
//     "vllm-none-hash" for sha256/sha256_cbor (VLLMUnsetHashSeed).
//   - maybe_convert_block_hash: with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES (the
//     default, "1") KV events carry int.from_bytes(digest, "big") & (2**64-1):
//     the last 8 digest bytes read big-endian. VLLMHash.Uint64 is that
//     reduction; it is the block's ctxtier key.
//
// vLLM before the bytes-valued BlockHash (e.g. sha256_cbor_64bit, which chained
// the 64-bit integer instead of the digest) is NOT matched. Because vLLM chains
// the full digest, a child's hash cannot be recomputed from an event's 64-bit
// parent_block_hash alone: recompute from the request's tokens from block 0.

// DefaultVLLMHashSeed is the PYTHONHASHSEED assumed for vLLM engines when a
// caller sets none: "0", the value vLLM deployments commonly pin.
const DefaultVLLMHashSeed = "0"

// VLLMUnsetHashSeed is the seed vLLM 0.33 derives NONE_HASH from for
// sha256/sha256_cbor when PYTHONHASHSEED is unset.
const VLLMUnsetHashSeed = "vllm-none-hash"

// VLLMExtraKey is one of a block's vLLM extra keys: a tagged tuple of strings,
// CBOR-encoded as an array of text strings.
type VLLMExtraKey []string

// VLLMCacheSalt is vLLM's extra key for a request's cache_salt.
func VLLMCacheSalt(salt string) VLLMExtraKey { return VLLMExtraKey{"cache_salt", salt} }

// VLLMLoRA is vLLM's extra key for a LoRA adapter.
func VLLMLoRA(name, path string) VLLMExtraKey { return VLLMExtraKey{"lora", name, path} }

// VLLMHash is a vLLM block hash: the full SHA-256 digest that chains.
type VLLMHash [sha256.Size]byte

// Uint64 reduces the digest to vLLM's 64-bit event form (and ctxtier's key):
// the last 8 bytes, big-endian.
func (h VLLMHash) Uint64() uint64 { return binary.BigEndian.Uint64(h[sha256.Size-8:]) }

// String renders the digest in hex.
func (h VLLMHash) String() string { return hex.EncodeToString(h[:]) }

// VLLMNoneHash returns vLLM's NONE_HASH, the parent of every request's first
// block, for an engine running with PYTHONHASHSEED=pythonHashSeed.
func VLLMNoneHash(pythonHashSeed string) VLLMHash {
	var stack [64]byte
	b := appendCBORHead(stack[:0], cborText, uint64(len(pythonHashSeed)))
	b = append(b, pythonHashSeed...)
	return sha256.Sum256(b)
}

// defaultVLLMNoneHash is VLLMNoneHash(DefaultVLLMHashSeed), computed once.
var defaultVLLMNoneHash = VLLMNoneHash(DefaultVLLMHashSeed)

// VLLMBlockHash hashes one full block onto its parent's digest (VLLMNoneHash
// for a request's first block). extraKeys are the block's vLLM extra keys in
// vLLM's order (VLLMLoRA, then VLLMCacheSalt on the first block only); none
// means extra_keys=None. Strings must be valid UTF-8, as Python strings are.
// It does not allocate for blocks up to about 800 tokens.
func VLLMBlockHash(parent VLLMHash, tokens []uint32, extraKeys ...VLLMExtraKey) VLLMHash {
	var stack [4096]byte
	b := stack[:0]
	if n := vllmBlockCBORLen(tokens, extraKeys); n > len(stack) {
		b = make([]byte, 0, n)
	}
	return sha256.Sum256(appendVLLMBlockCBOR(b, &parent, tokens, extraKeys))
}

// appendVLLMChain appends the 64-bit keys of the full blocks of tokens, the
// first block chained onto root and carrying salt as vLLM's cache_salt.
func appendVLLMChain(dst []uint64, blockTokens int, root VLLMHash, salt string, tokens []uint32) []uint64 {
	n := len(tokens) / blockTokens
	h := root
	for i := 0; i < n; i++ {
		blk := tokens[i*blockTokens : (i+1)*blockTokens]
		if i == 0 && salt != "" {
			h = VLLMBlockHash(h, blk, VLLMCacheSalt(salt))
		} else {
			h = VLLMBlockHash(h, blk)
		}
		dst = append(dst, h.Uint64())
	}
	return dst
}

// CBOR major types used by the block encoding (RFC 8949 section 3.1).
const (
	cborUint  = 0
	cborBytes = 2
	cborText  = 3
	cborArray = 4
	cborNull  = 0xf6
)

// appendVLLMBlockCBOR appends cbor2.dumps((parent, tuple(tokens), extra),
// canonical=True), extra being None when extraKeys is empty.
func appendVLLMBlockCBOR(b []byte, parent *VLLMHash, tokens []uint32, extraKeys []VLLMExtraKey) []byte {
	b = appendCBORHead(b, cborArray, 3)
	b = appendCBORHead(b, cborBytes, uint64(len(parent)))
	b = append(b, parent[:]...)
	b = appendCBORHead(b, cborArray, uint64(len(tokens)))
	for _, t := range tokens {
		b = appendCBORHead(b, cborUint, uint64(t))
	}
	if len(extraKeys) == 0 {
		return append(b, cborNull)
	}
	b = appendCBORHead(b, cborArray, uint64(len(extraKeys)))
	for _, k := range extraKeys {
		b = appendCBORHead(b, cborArray, uint64(len(k)))
		for _, f := range k {
			b = appendCBORHead(b, cborText, uint64(len(f)))
			b = append(b, f...)
		}
	}
	return b
}

// vllmBlockCBORLen bounds the length of appendVLLMBlockCBOR's output.
func vllmBlockCBORLen(tokens []uint32, extraKeys []VLLMExtraKey) int {
	n := 1 + 2 + sha256.Size + 9 + 5*len(tokens) + 9
	for _, k := range extraKeys {
		n += 9
		for _, f := range k {
			n += 9 + len(f)
		}
	}
	return n
}

// appendCBORHead appends a CBOR item head of major type major and argument v
// in its shortest form, as canonical CBOR requires.
func appendCBORHead(b []byte, major byte, v uint64) []byte {
	m := major << 5
	switch {
	case v < 24:
		return append(b, m|byte(v))
	case v <= 0xff:
		return append(b, m|24, byte(v))
	case v <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(v))
	case v <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, m|27), v)
	}
}
