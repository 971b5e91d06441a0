"""Write ctxstore/block/testdata/vllm_vectors.json from vLLM's own hashing.

Run with the engines virtual environment (``make test-engines`` installs it):

    .venv/bin/python python/tools/gen_vllm_vectors.py            # rewrite the file
    .venv/bin/python python/tools/gen_vllm_vectors.py --check    # compare, exit 1 on a difference

Every digest comes from the installed ``vllm`` package: a real
``vllm.v1.request.Request`` built with vLLM's block hasher
(``get_request_block_hasher`` over ``sha256_cbor``), its NONE_HASH from
``init_none_hash`` under the case's PYTHONHASHSEED, and each 64-bit key from
``maybe_convert_block_hash`` (the form vLLM's KV events carry). No ctxtier
code is imported, so the file is an outside known answer for the Go and the
Python implementations.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parents[2] / "ctxstore" / "block" / "testdata" / "vllm_vectors.json"


def _cases():
    wide = [[0, 23, 24, 255, 256, 65535, 65536, 151643][i % 8] + i // 8 for i in range(37)]
    long = [(i * 7919 + 13) % 152064 for i in range(16 * 5 + 3)]
    return [
        # name, PYTHONHASHSEED (None: unset), block size, tokens, cache_salt, (lora name, lora path)
        ("tokens 1..12 by 4, seed 0", "0", 4, list(range(1, 13)), None, None),
        ("partial tail unhashed, seed 0", "0", 4, list(range(1, 11)), None, None),
        ("PYTHONHASHSEED unset", None, 4, list(range(1, 13)), None, None),
        ("PYTHONHASHSEED 42", "42", 4, list(range(1, 9)), None, None),
        ("wide token values, 8-token blocks", "0", 8, wide, None, None),
        ("16-token blocks", "0", 16, long, None, None),
        ("cache_salt", "0", 4, list(range(1, 13)), "tenant-a", None),
        ("utf-8 cache_salt", "0", 3, list(range(100, 109)), "équipe-β", None),
        ("lora adapter", "0", 4, list(range(1, 9)), None, ("sql-lora", "/adapters/sql")),
        ("lora and cache_salt", "0", 4, list(range(1, 9)), "tenant-a", ("sql-lora", "/adapters/sql")),
    ]


def generate() -> dict:
    import vllm
    from vllm.lora.request import LoRARequest
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256_cbor
    from vllm.v1.core import kv_cache_utils as kcu
    from vllm.v1.request import Request

    out = {
        "comment": "Written by python/tools/gen_vllm_vectors.py from the installed vllm package; do not edit.",
        "vllm_version": vllm.__version__,
        "hash_algo": "sha256_cbor",
        "cases": [],
    }
    saved = os.environ.get("PYTHONHASHSEED")
    try:
        for i, (name, seed, bs, tokens, salt, lora) in enumerate(_cases()):
            if seed is None:
                os.environ.pop("PYTHONHASHSEED", None)
            else:
                os.environ["PYTHONHASHSEED"] = seed
            kcu.init_none_hash(sha256_cbor)
            lora_req = LoRARequest(lora_name=lora[0], lora_int_id=1, lora_path=lora[1]) if lora else None
            req = Request(
                request_id=f"vec-{i}",
                prompt_token_ids=tokens,
                sampling_params=SamplingParams(max_tokens=1),
                pooling_params=None,
                lora_request=lora_req,
                cache_salt=salt,
                block_hasher=kcu.get_request_block_hasher(bs, sha256_cbor),
            )
            digests = list(req.block_hashes)
            out["cases"].append(
                {
                    "name": name,
                    "python_hash_seed": kcu.get_none_hash_seed(),
                    "pythonhashseed_env": seed,
                    "block_tokens": bs,
                    "cache_salt": salt or "",
                    "lora_name": lora[0] if lora else "",
                    "lora_path": lora[1] if lora else "",
                    "tokens": tokens,
                    "none_hash": bytes(kcu.NONE_HASH).hex(),
                    "digests": [bytes(d).hex() for d in digests],
                    "event_keys": [kcu.maybe_convert_block_hash(d) for d in digests],
                }
            )
    finally:
        if saved is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = saved
    return out


def render(doc: dict) -> str:
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    args = ap.parse_args(argv)
    text = render(generate())
    if args.check:
        have = args.out.read_text(encoding="utf-8")
        if have != text:
            print(f"{args.out} differs from what vllm computes now", file=sys.stderr)
            return 1
        print(f"{args.out}: equal to vllm's hashes")
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
