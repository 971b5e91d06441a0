"""Throughput of CtxtierConnector's load and save paths against the bare client.

    .venv/bin/python python/tools/bench_vllm_connector.py --addr 127.0.0.1:7400 --duration 10

Builds a real VllmConfig (a config-only llama directory written to a temp
dir) loading the connector, a worker-side connector over CPU KV tensors of a
Llama-3-8B-shaped layer set (32 layers, 8 KV heads of 128, fp16, 16-token
blocks: 2 MiB per ctxtier block), and measures, against one ctxd:

* save: wait_for_save of BLOCKS new blocks (copy out of the paged cache,
  queued PUT batches) until the queue is flushed;
* load: start_load_kv of the same blocks (get_into a staging buffer, then a
  copy into the paged cache), repeated for --duration;
* baseline, in the same run: Client.get_into of the same keys straight into
  preallocated buffers (no paged cache).

The last line is ``ratio_load_vs_get_into=``: the connector's load rate over
the bare client's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PYTHONHASHSEED", "0")

LAYERS, KV_HEADS, HEAD, BLOCK = 32, 8, 128, 16


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--addr", required=True)
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--blocks", type=int, default=32)
    ap.add_argument("--duration", type=float, default=10.0)
    args = ap.parse_args(argv)

    import torch
    from vllm.config import CacheConfig, DeviceConfig, KVTransferConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    import ctxtier
    from ctxtier.vllm import CtxtierConnectorMetadata

    model_dir = tempfile.mkdtemp(prefix="ctxtier-bench-model-")
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                   "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": KV_HEADS,
                   "num_hidden_layers": LAYERS, "vocab_size": 128256, "max_position_embeddings": 8192,
                   "rms_norm_eps": 1e-5, "torch_dtype": "float16"}, f)
    n = args.blocks
    cfg = VllmConfig(
        model_config=ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="float16", max_model_len=4096),
        scheduler_config=SchedulerConfig(max_num_batched_tokens=4096, max_model_len=4096, is_encoder_decoder=False),
        cache_config=CacheConfig(block_size=BLOCK, enable_prefix_caching=True, prefix_caching_hash_algo="sha256_cbor"),
        kv_transfer_config=KVTransferConfig(
            kv_connector="CtxtierConnector", kv_connector_module_path="ctxtier.vllm", kv_role="kv_both",
            kv_connector_extra_config={"addr": args.addr, "namespace": args.namespace, "timeout": 30.0,
                                       "save_queue_blocks": n}),
        device_config=DeviceConfig("cpu"),
    )
    names = [f"model.layers.{i}.self_attn.attn" for i in range(LAYERS)]
    kv_cfg = KVCacheConfig(num_blocks=n, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(
        names, FullAttentionSpec(block_size=BLOCK, num_kv_heads=KV_HEADS, head_size=HEAD, dtype=torch.float16))])
    cfg.cache_config.num_gpu_blocks = n
    w = KVConnectorFactory.create_connector(cfg, KVConnectorRole.WORKER, kv_cfg)
    kv = {nm: torch.randn(2, n, BLOCK, KV_HEADS, HEAD).to(torch.float16) for nm in names}
    w.register_kv_caches(kv)
    block_bytes = w._layout.block_bytes
    rng = random.Random(time.time_ns())
    refs = [(i, rng.getrandbits(64)) for i in range(n)]
    total = n * block_bytes

    w.bind_connector_metadata(CtxtierConnectorMetadata(saves={"r": refs}))
    t0 = time.perf_counter()
    w.wait_for_save()
    assert w.flush(120), "saves did not finish"
    save_s = time.perf_counter() - t0
    w.clear_connector_metadata()
    assert w.save_stats()["saved"] == n, w.save_stats()

    def rate(fn):
        loops, t0 = 0, time.perf_counter()
        while True:
            fn()
            loops += 1
            el = time.perf_counter() - t0
            if el >= args.duration:
                return loops * total / el / 1e9

    meta = CtxtierConnectorMetadata(loads={"r": refs})

    def load():
        w.bind_connector_metadata(meta)
        w.start_load_kv(None)
        w.clear_connector_metadata()
        assert not w.get_block_ids_with_load_errors()

    client = ctxtier.Client(args.addr, timeout=30.0)
    bufs = [torch.empty(block_bytes, dtype=torch.uint8) for _ in refs]
    keys = [h for _, h in refs]

    def get_into():
        sizes = client.get_into(args.namespace, keys, bufs)
        assert sizes == [block_bytes] * n

    base = rate(get_into)
    conn = rate(load)
    base2 = rate(get_into)
    print(f"block_bytes={block_bytes} blocks={n} verify={client.verify}")
    print(f"save_gbps={total / save_s / 1e9:.3f}")
    print(f"get_into_gbps={base:.3f} (again after: {base2:.3f})")
    print(f"connector_load_gbps={conn:.3f}")
    w.shutdown()
    client.close()
    print(f"ratio_load_vs_get_into={conn / ((base + base2) / 2):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
