"""Block hash schemes of the engines, equal to ctxtier's Go ones.

ctxtier names a block by (namespace, 64-bit sequence hash[, part]). The hash
is the engine's own prefix-cache hash, so an engine, ctxtier and the KV-aware
router (which ingests the engine's KV events) name a block the same way. This
module reproduces the two schemes of ``ctxstore/block`` bit for bit:

``dynamo-xxh3``
    NVIDIA Dynamo: each full block's *local* hash is XXH3-64 with seed 1337
    over the tokens as u32 little-endian; block 0's sequence hash is its local
    hash and block i>0 has XXH3-64(le64(seq[i-1]) || le64(local[i]), 1337).
    A cache salt moves the block seed to 1337 + XXH3-64(salt, seed 1). Needs
    the optional ``xxhash`` package (``pip install ctxtier[dynamo]``).

``vllm-sha256``
    vLLM V1 with ``--prefix-caching-hash-algo sha256_cbor``: a block's digest
    is SHA-256 of canonical CBOR of ``(parent_digest, tuple(tokens),
    extra_keys)``, the parent of block 0 being ``NONE_HASH`` =
    SHA-256(CBOR text of the engine's ``PYTHONHASHSEED``; vLLM 0.33 uses
    ``"vllm-none-hash"`` when it is unset). Extra keys (LoRA, cache salt) are
    vLLM 0.33's tagged tuples. ctxtier's key is
    vLLM's 64-bit KV-event form of the digest: ``int.from_bytes(digest,
    "big") & (2**64 - 1)``, the last 8 bytes read big-endian
    (:func:`vllm_key`). Standard library only: the small CBOR subset is
    encoded here.

A trailing partial block is never hashed, as engines do not hash it either.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, List, Optional, Sequence

__all__ = [
    "DYNAMO_SEED",
    "DEFAULT_VLLM_HASH_SEED",
    "SCHEME_DYNAMO",
    "SCHEME_VLLM",
    "HashError",
    "Chainer",
    "chain_hashes",
    "cbor_canonical",
    "dynamo_block_seed",
    "dynamo_local_hash",
    "dynamo_sequence_hash",
    "dynamo_chain",
    "vllm_none_hash",
    "vllm_block_hash",
    "vllm_chain_digests",
    "vllm_chain",
    "vllm_key",
    "vllm_cache_salt_key",
    "vllm_lora_key",
    "VLLM_UNSET_HASH_SEED",
]

SCHEME_DYNAMO = "dynamo-xxh3"
SCHEME_VLLM = "vllm-sha256"

#: Dynamo's XXH3 seed: the block seed of unsalted requests and the chain seed.
DYNAMO_SEED = 1337
_DYNAMO_SALT_INNER_SEED = 1
_U64 = (1 << 64) - 1

#: PYTHONHASHSEED assumed for vLLM engines when none is given (as in Go).
DEFAULT_VLLM_HASH_SEED = "0"

#: The seed vLLM 0.33 derives NONE_HASH from when PYTHONHASHSEED is unset.
VLLM_UNSET_HASH_SEED = "vllm-none-hash"

#: Largest block in tokens, as the Go Chainer and Namespace.Validate accept.
MAX_BLOCK_TOKENS = 1 << 20


class HashError(ValueError):
    """A bad argument to a hash function (block size, token, salt, scheme)."""


# --------------------------------------------------------------------------
# Canonical CBOR (RFC 8949 section 4.2.1) for the types vLLM's keys contain.

_CBOR_UINT, _CBOR_NINT, _CBOR_BYTES, _CBOR_TEXT, _CBOR_ARRAY = 0, 1, 2, 3, 4
_CBOR_FALSE, _CBOR_TRUE, _CBOR_NULL = 0xF4, 0xF5, 0xF6


def _head(out: bytearray, major: int, v: int) -> None:
    m = major << 5
    if v < 24:
        out.append(m | v)
    elif v <= 0xFF:
        out.append(m | 24)
        out.append(v)
    elif v <= 0xFFFF:
        out.append(m | 25)
        out += v.to_bytes(2, "big")
    elif v <= 0xFFFFFFFF:
        out.append(m | 26)
        out += v.to_bytes(4, "big")
    elif v <= _U64:
        out.append(m | 27)
        out += v.to_bytes(8, "big")
    else:
        raise HashError(f"integer {v} does not fit CBOR's 64-bit argument")


def _encode(out: bytearray, obj: object) -> None:
    if obj is None:
        out.append(_CBOR_NULL)
    elif obj is True:
        out.append(_CBOR_TRUE)
    elif obj is False:
        out.append(_CBOR_FALSE)
    elif isinstance(obj, int):
        if obj >= 0:
            _head(out, _CBOR_UINT, obj)
        else:
            _head(out, _CBOR_NINT, -1 - obj)
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        b = bytes(obj)
        _head(out, _CBOR_BYTES, len(b))
        out += b
    elif isinstance(obj, str):
        b = obj.encode("utf-8")
        _head(out, _CBOR_TEXT, len(b))
        out += b
    elif isinstance(obj, (list, tuple)):
        _head(out, _CBOR_ARRAY, len(obj))
        for item in obj:
            _encode(out, item)
    else:
        raise HashError(f"cannot CBOR-encode {type(obj).__name__} (supported: None, bool, int, bytes, str, list, tuple)")


def cbor_canonical(obj: object) -> bytes:
    """Return canonical CBOR of obj, as ``cbor2.dumps(obj, canonical=True)``.

    Supports None, bool, int (within 64 bits), bytes, str, list and tuple:
    the types vLLM's block-hash inputs are made of (floats, maps and tags
    are refused with :class:`HashError` rather than guessed).
    """
    out = bytearray()
    _encode(out, obj)
    return bytes(out)


# --------------------------------------------------------------------------
# vLLM sha256-CBOR.


def vllm_none_hash(python_hash_seed: str = DEFAULT_VLLM_HASH_SEED) -> bytes:
    """vLLM's NONE_HASH for an engine running with PYTHONHASHSEED=seed.

    It is the parent digest of every request's first block.
    """
    if not isinstance(python_hash_seed, str):
        raise HashError("PYTHONHASHSEED must be a str")
    return hashlib.sha256(cbor_canonical(python_hash_seed)).digest()


def vllm_block_hash(parent: bytes, tokens: Sequence[int], extra_keys: Optional[Sequence[object]] = None) -> bytes:
    """Hash one full block onto its parent's 32-byte digest.

    extra_keys are the block's vLLM extra keys in vLLM's order, each a tagged
    tuple since vLLM 0.33 (:func:`vllm_lora_key`, multimodal keys, then
    :func:`vllm_cache_salt_key` on the block at token 0); None or an empty
    sequence is vLLM's ``extra_keys=None``.
    """
    if len(parent) != 32:
        raise HashError(f"parent digest is {len(parent)} bytes, want 32")
    out = bytearray()
    _head(out, _CBOR_ARRAY, 3)
    _head(out, _CBOR_BYTES, 32)
    out += parent
    _head(out, _CBOR_ARRAY, len(tokens))
    for t in tokens:
        if not isinstance(t, int) or t < 0 or t > 0xFFFFFFFF:
            raise HashError(f"token {t!r} is not an integer in 0..2**32-1")
        _head(out, _CBOR_UINT, t)
    if extra_keys:
        _encode(out, tuple(extra_keys))
    else:
        out.append(_CBOR_NULL)
    return hashlib.sha256(out).digest()


def vllm_cache_salt_key(salt: str) -> tuple:
    """vLLM's extra key for a request's cache_salt: ``("cache_salt", salt)``."""
    return ("cache_salt", salt)


def vllm_lora_key(name: str, path: str = "") -> tuple:
    """vLLM's extra key for a LoRA adapter: ``("lora", name, path)``."""
    return ("lora", name, path)


def vllm_key(digest: bytes) -> int:
    """ctxtier's 64-bit key of a vLLM block digest (vLLM's KV-event form).

    ``int.from_bytes(digest, "big") & (2**64 - 1)``: the last 8 bytes read
    big-endian. It is what vLLM puts in KV events with
    VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1 (the default), so the router's
    index and ctxtier's keys agree.
    """
    if len(digest) < 8:
        raise HashError(f"digest is {len(digest)} bytes, want at least 8")
    return int.from_bytes(bytes(digest[-8:]), "big")


def _check_block_tokens(block_tokens: int) -> None:
    if not isinstance(block_tokens, int) or not 1 <= block_tokens <= MAX_BLOCK_TOKENS:
        raise HashError(f"block_tokens {block_tokens!r} out of range 1..{MAX_BLOCK_TOKENS}")


def vllm_chain_digests(
    tokens: Sequence[int],
    block_tokens: int,
    salt: str = "",
    python_hash_seed: str = DEFAULT_VLLM_HASH_SEED,
) -> List[bytes]:
    """Return the 32-byte digests of the full blocks of tokens.

    A non-empty salt is vLLM's ``cache_salt``: the extra key
    ``("cache_salt", salt)`` of the block starting at token 0 only; every
    later block chains on that digest.
    """
    _check_block_tokens(block_tokens)
    h = vllm_none_hash(python_hash_seed)
    digests = []
    for i in range(len(tokens) // block_tokens):
        blk = tokens[i * block_tokens : (i + 1) * block_tokens]
        h = vllm_block_hash(h, blk, [vllm_cache_salt_key(salt)] if (i == 0 and salt) else None)
        digests.append(h)
    return digests


def vllm_chain(
    tokens: Sequence[int],
    block_tokens: int,
    salt: str = "",
    python_hash_seed: str = DEFAULT_VLLM_HASH_SEED,
) -> List[int]:
    """Return ctxtier's 64-bit keys of the full blocks of tokens (vLLM scheme)."""
    return [vllm_key(d) for d in vllm_chain_digests(tokens, block_tokens, salt, python_hash_seed)]


# --------------------------------------------------------------------------
# Dynamo xxh3.


def _xxh3():
    try:
        import xxhash  # type: ignore[import-not-found]
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "the dynamo hash scheme needs the optional 'xxhash' package: pip install 'ctxtier[dynamo]'"
        ) from e
    return xxhash.xxh3_64_intdigest


def _le32(tokens: Sequence[int]) -> bytes:
    out = bytearray(4 * len(tokens))
    for i, t in enumerate(tokens):
        if not isinstance(t, int) or t < 0 or t > 0xFFFFFFFF:
            raise HashError(f"token {t!r} is not an integer in 0..2**32-1")
        out[4 * i : 4 * i + 4] = t.to_bytes(4, "little")
    return bytes(out)


def dynamo_block_seed(salt: str = "") -> int:
    """The XXH3 seed of local block hashes for requests with cache salt salt.

    DYNAMO_SEED when salt is empty, else DYNAMO_SEED + XXH3-64(salt, seed 1)
    wrapping at 64 bits (Dynamo's compute_salt_hash).
    """
    if not salt:
        return DYNAMO_SEED
    return (DYNAMO_SEED + _xxh3()(salt.encode("utf-8"), _DYNAMO_SALT_INNER_SEED)) & _U64


def dynamo_local_hash(tokens: Sequence[int], seed: int = DYNAMO_SEED) -> int:
    """XXH3-64 with seed over the tokens as u32 little-endian."""
    return _xxh3()(_le32(tokens), seed)


def dynamo_sequence_hash(parent: int, local: int) -> int:
    """Chain a block onto its parent: XXH3-64(le64(parent) || le64(local), 1337)."""
    b = (parent & _U64).to_bytes(8, "little") + (local & _U64).to_bytes(8, "little")
    return _xxh3()(b, DYNAMO_SEED)


def dynamo_chain(tokens: Sequence[int], block_tokens: int, salt: str = "") -> List[int]:
    """Return the Dynamo sequence hashes of the full blocks of tokens."""
    _check_block_tokens(block_tokens)
    seed = dynamo_block_seed(salt)
    out: List[int] = []
    seq = 0
    for i in range(len(tokens) // block_tokens):
        local = dynamo_local_hash(tokens[i * block_tokens : (i + 1) * block_tokens], seed)
        seq = local if i == 0 else dynamo_sequence_hash(seq, local)
        out.append(seq)
    return out


# --------------------------------------------------------------------------
# One entry point per namespace definition.


class Chainer:
    """Turns token sequences into ctxtier keys for one namespace's scheme.

    The same contract as Go's ``block.Chainer``: scheme ``"dynamo-xxh3"`` or
    ``"vllm-sha256"`` (the Go HashScheme names), a block size in tokens, a tenant salt (Dynamo's cache
    namespace, vLLM's cache_salt; empty means the engine's own hashes) and,
    for vLLM, the engines' PYTHONHASHSEED.
    """

    __slots__ = ("scheme", "block_tokens", "salt", "vllm_hash_seed")

    def __init__(
        self,
        scheme: str,
        block_tokens: int,
        salt: str = "",
        vllm_hash_seed: str = DEFAULT_VLLM_HASH_SEED,
    ) -> None:
        if scheme not in (SCHEME_DYNAMO, SCHEME_VLLM):
            raise HashError(f"hash scheme {scheme!r} is not one of {SCHEME_DYNAMO!r}, {SCHEME_VLLM!r}")
        _check_block_tokens(block_tokens)
        if not isinstance(salt, str):
            raise HashError("salt must be a str")
        self.scheme = scheme
        self.block_tokens = block_tokens
        self.salt = salt
        self.vllm_hash_seed = vllm_hash_seed

    def hashes(self, tokens: Iterable[int]) -> List[int]:
        """The 64-bit keys of the full blocks of tokens."""
        toks = tokens if isinstance(tokens, Sequence) else list(tokens)
        if self.scheme == SCHEME_DYNAMO:
            return dynamo_chain(toks, self.block_tokens, self.salt)
        return vllm_chain(toks, self.block_tokens, self.salt, self.vllm_hash_seed)

    def __repr__(self) -> str:
        return f"Chainer({self.scheme!r}, {self.block_tokens}, salt={self.salt!r})"


def chain_hashes(scheme: str, block_tokens: int, tokens: Iterable[int], salt: str = "") -> List[int]:
    """Keys of the full blocks of tokens under scheme (vLLM: PYTHONHASHSEED "0")."""
    return Chainer(scheme, block_tokens, salt).hashes(tokens)

