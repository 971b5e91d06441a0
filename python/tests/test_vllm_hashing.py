"""ctxtier.hashing and the committed vectors file against the installed vllm.

Run by `make test-engines` (CTXTIER_ENGINES=1, vllm installed); skipped
elsewhere.
"""

import os
import random
import sys
from pathlib import Path

import pytest

import engines_fixtures  # noqa: F401  (skips the module without vllm)
from ctxtier import hashing

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gen_vllm_vectors  # noqa: E402

from vllm.lora.request import LoRARequest  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import sha256_cbor  # noqa: E402
from vllm.v1.core import kv_cache_utils as kcu  # noqa: E402
from vllm.v1.request import Request  # noqa: E402


def test_vectors_file_is_what_vllm_computes():
    """ctxstore/block/testdata/vllm_vectors.json equals a fresh run of vLLM's hasher."""
    want = gen_vllm_vectors.render(gen_vllm_vectors.generate())
    assert gen_vllm_vectors.OUT.read_text(encoding="utf-8") == want


def _vllm_block_hashes(tokens, block, salt=None, lora=None):
    req = Request(
        request_id="r",
        prompt_token_ids=tokens,
        sampling_params=SamplingParams(max_tokens=1),
        pooling_params=None,
        cache_salt=salt,
        lora_request=LoRARequest(lora_name=lora[0], lora_int_id=1, lora_path=lora[1]) if lora else None,
        block_hasher=kcu.get_request_block_hasher(block, sha256_cbor),
    )
    return [bytes(h) for h in req.block_hashes]


@pytest.mark.parametrize("seed", ["0", "1234", None])
def test_random_prompts_equal_vllm(seed, monkeypatch):
    if seed is None:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    else:
        monkeypatch.setenv("PYTHONHASHSEED", seed)
    kcu.init_none_hash(sha256_cbor)
    ours_seed = kcu.get_none_hash_seed()
    assert ours_seed == (seed if seed is not None else hashing.VLLM_UNSET_HASH_SEED)
    rng = random.Random(15)
    for _ in range(20):
        block = rng.choice([1, 3, 16, 32, 64])
        tokens = [rng.randrange(0, 1 << rng.choice([8, 16, 17, 31])) for _ in range(rng.randrange(0, 300))]
        salt = rng.choice([None, "", "tenant-a", "ñ-salt"])
        lora = rng.choice([None, ("adapter", "/a/b")])
        digests = _vllm_block_hashes(tokens, block, salt, lora)
        h = hashing.vllm_none_hash(ours_seed)
        for i, want in enumerate(digests):
            extra = []
            if lora:
                extra.append(hashing.vllm_lora_key(*lora))
            if i == 0 and salt:
                extra.append(hashing.vllm_cache_salt_key(salt))
            h = hashing.vllm_block_hash(h, tokens[i * block : (i + 1) * block], extra)
            assert h == want
        if not lora:
            got = hashing.vllm_chain(tokens, block, salt or "", ours_seed)
            assert got == [kcu.maybe_convert_block_hash(d) for d in digests]
    os.environ["PYTHONHASHSEED"] = "0"
    kcu.init_none_hash(sha256_cbor)
