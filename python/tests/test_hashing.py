"""ctxtier.hashing against Go's keys, Dynamo's and vLLM's published answers.

The vectors files under ctxstore/block/testdata are shared with the Go tests:
chain_vectors.json is written by the Go implementation, vllm_vectors.json by
vLLM's own code (python/tools/gen_vllm_vectors.py). Nothing here derives an
expected value from ctxtier.hashing itself.
"""

import hashlib
import json
import os
import pathlib

import pytest

from ctxtier import hashing

TESTDATA = pathlib.Path(__file__).resolve().parents[2] / "ctxstore" / "block" / "testdata"


def _need_xxhash():
    try:
        import xxhash  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("xxhash is not installed: CI must install it (the dynamo scheme's dependency)")
        pytest.skip("xxhash not installed")


def _load(name):
    with open(TESTDATA / name, encoding="utf-8") as f:
        return json.load(f)


def _chain_cases():
    return [pytest.param(c, id=f"{c['scheme']}: {c['name']}") for c in _load("chain_vectors.json")["cases"]]


@pytest.mark.parametrize("case", _chain_cases())
def test_chain_equals_go(case):
    if case["scheme"] == hashing.SCHEME_DYNAMO:
        _need_xxhash()
    ch = hashing.Chainer(
        case["scheme"],
        case["block_tokens"],
        case["salt"],
        case.get("python_hash_seed") or hashing.DEFAULT_VLLM_HASH_SEED,
    )
    got = [f"{k:016x}" for k in ch.hashes(case["tokens"])]
    assert got == case["keys"]
    assert len(got) == len(case["tokens"]) // case["block_tokens"]


def test_dynamo_published_answers():
    # ai-dynamo/dynamo lib/llm/src/tokens.rs: HASH_1_4, HASH_5_8, HASH_9_12,
    # SEQ_HASH_5_8 and SEQ_HASH_9_12 for tokens 1..12, blocks of 4, seed 1337.
    _need_xxhash()
    assert hashing.dynamo_local_hash([1, 2, 3, 4]) == 14643705804678351452
    assert hashing.dynamo_local_hash([5, 6, 7, 8]) == 16777012769546811212
    assert hashing.dynamo_local_hash([9, 10, 11, 12]) == 483935686894639516
    assert hashing.dynamo_sequence_hash(14643705804678351452, 16777012769546811212) == 4945711292740353085
    assert hashing.dynamo_chain(list(range(1, 13)), 4) == [
        14643705804678351452,
        4945711292740353085,
        12583592247330656132,
    ]


def test_xxh3_reference_sanity_vectors():
    # xxHash's own sanity vectors (XSUM_XXH3_testdata), the buffer built as
    # cli/xsum_sanity_check.c does: the xxh3 primitive the dynamo scheme uses.
    _need_xxhash()
    import xxhash

    prime32, prime64 = 2654435761, 11400714785074694797
    buf, gen = bytearray(2367), prime32
    for i in range(len(buf)):
        buf[i] = gen >> 56
        gen = (gen * prime64) & ((1 << 64) - 1)
    for n, seed, want in [
        (0, 0, 0x2D06800538D394C2),
        (1, prime64, 0x032BE332DD766EF8),
        (80, 0, 0xBCDEFBBB2C47C90A),
        (512, prime64, 0x3CE457DE14C27708),
        (2367, 0, 0xCB37AEB9E5D361ED),
    ]:
        assert xxhash.xxh3_64_intdigest(bytes(buf[:n]), seed) == want


NONE_HASH_0 = "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e"


def test_vllm_none_hash_known_answer():
    assert hashing.vllm_none_hash("0").hex() == NONE_HASH_0
    assert hashlib.sha256(bytes.fromhex("6130")).hexdigest() == NONE_HASH_0
    assert hashing.vllm_none_hash("42") == hashlib.sha256(bytes.fromhex("623432")).digest()


def test_vllm_block_cbor_by_hand():
    parent = bytes([0xAA]) * 32
    head = "835820" + parent.hex()
    cases = [
        ([0, 23, 24, 255, 256, 65535, 65536, 0xFFFFFFFF], None,
         head + "88" + "00" + "17" + "1818" + "18ff" + "190100" + "19ffff" + "1a00010000" + "1affffffff" + "f6"),
        ([7], [hashing.vllm_lora_key("lora-x", "/p"), hashing.vllm_cache_salt_key("s")],
         head + "8107" + "82" + "83" + "646c6f7261" + "666c6f72612d78" + "622f70" + "82" + "6a63616368655f73616c74" + "6173"),
        ([7], [("é",)], head + "8107" + "81" + "81" + "62c3a9"),
        ([1] * 24, None, head + "9818" + "01" * 24 + "f6"),
        ([1] * 512, [], head + "990200" + "01" * 512 + "f6"),
    ]
    for tokens, extra, want in cases:
        assert hashing.vllm_block_hash(parent, tokens, extra) == hashlib.sha256(bytes.fromhex(want)).digest()


def test_vllm_key_is_low_64_bits_big_endian():
    digest = bytes(range(1, 33))
    assert hashing.vllm_key(digest) == 0x191A1B1C1D1E1F20
    assert hashing.vllm_key(digest) == int.from_bytes(digest, "big") & (2**64 - 1)


def _vllm_cases():
    return [pytest.param(c, id=c["name"]) for c in _load("vllm_vectors.json")["cases"]]


@pytest.mark.parametrize("case", _vllm_cases())
def test_vllm_vectors_from_vllm(case):
    """Digests and KV-event keys computed by the vllm package itself."""
    assert hashing.vllm_none_hash(case["python_hash_seed"]).hex() == case["none_hash"]
    h = hashing.vllm_none_hash(case["python_hash_seed"])
    bt = case["block_tokens"]
    toks = case["tokens"]
    assert len(case["digests"]) == len(toks) // bt
    for i, want in enumerate(case["digests"]):
        extra = []
        if case["lora_name"]:
            extra.append(hashing.vllm_lora_key(case["lora_name"], case["lora_path"]))
        if i == 0 and case["cache_salt"]:
            extra.append(hashing.vllm_cache_salt_key(case["cache_salt"]))
        h = hashing.vllm_block_hash(h, toks[i * bt : (i + 1) * bt], extra)
        assert h.hex() == want, f"block {i}"
        assert hashing.vllm_key(h) == case["event_keys"][i], f"block {i}"
    if not case["lora_name"]:
        got = hashing.vllm_chain(toks, bt, case["cache_salt"], case["python_hash_seed"])
        assert got == case["event_keys"]


@pytest.mark.parametrize(
    "call",
    [
        lambda: hashing.Chainer("md5", 4),
        lambda: hashing.Chainer(hashing.SCHEME_VLLM, 0),
        lambda: hashing.Chainer(hashing.SCHEME_VLLM, (1 << 20) + 1),
        lambda: hashing.vllm_chain([1, -2, 3, 4], 4),
        lambda: hashing.vllm_chain([1, 2, 3, 1 << 32], 4),
        lambda: hashing.vllm_block_hash(b"short", [1]),
        lambda: hashing.vllm_key(b"1234567"),
        lambda: hashing.cbor_canonical(1.5),
        lambda: hashing.cbor_canonical(1 << 64),
    ],
    ids=["scheme", "zero block", "huge block", "negative token", "token > u32", "parent", "digest", "float", "big int"],
)
def test_bad_input_is_a_clear_error(call):
    with pytest.raises(hashing.HashError):
        call()


def test_cbor_canonical_matches_rfc8949_examples():
    # RFC 8949 Appendix A.
    for obj, want in [
        (0, "00"), (23, "17"), (24, "1818"), (1000000, "1a000f4240"),
        (18446744073709551615, "1bffffffffffffffff"), (-1, "20"), (-1000, "3903e7"),
        (b"", "40"), (bytes.fromhex("01020304"), "4401020304"), ("", "60"), ("a", "6161"),
        ("\u00fc", "62c3bc"), ([], "80"), ([1, [2, 3], [4, 5]], "8301820203820405"),
        (None, "f6"), (True, "f5"), (False, "f4"),
    ]:
        assert hashing.cbor_canonical(obj).hex() == want, obj
