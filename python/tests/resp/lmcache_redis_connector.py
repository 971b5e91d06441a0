"""Stores and loads real CPU tensors through LMCache's own RedisConnector
(the redis:// remote backend, from the lmcache package) against a ctxd RESP
endpoint. Usage: lmcache_redis_connector.py HOST:PORT

Exits non-zero on any failure. It drives the connector the way LMCache's
storage manager does: allocate a chunk from the LocalCPUBackend, fill it,
put it remotely, then exists / get it back into fresh memory and compare.
"""

import asyncio
import sys
import threading

import torch

from lmcache.utils import CacheEngineKey
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.metadata import LMCacheMetadata
from lmcache.v1.storage_backend.connector import CreateConnector
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend


def main() -> int:
    addr = sys.argv[1]
    url = f"redis://{addr}"
    chunk = 256
    # (num_layer, 2, chunk_size, num_kv_head, head_size): 4*2*256*8*64*2 bytes = 2 MiB of bf16.
    shape = (4, 2, chunk, 8, 64)
    config = LMCacheEngineConfig.from_defaults(
        chunk_size=chunk, local_cpu=False, max_local_cpu_size=0.25, remote_url=url, remote_serde="naive"
    )
    metadata = LMCacheMetadata(
        model_name="ctxtier-test", world_size=1, local_world_size=1, worker_id=0, local_worker_id=0,
        kv_dtype=torch.bfloat16, kv_shape=shape, chunk_size=chunk,
    )
    backend = LocalCPUBackend(config, metadata)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coro):
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=60)

    connector = CreateConnector(url, loop, backend, config, metadata)
    inner = getattr(connector, "connector", None) or getattr(connector, "_connector", None)
    print("connector:", type(connector).__name__, "wrapping", type(inner).__name__)

    torch.manual_seed(16)
    keys, tensors = [], []
    for i in range(8):
        key = CacheEngineKey("ctxtier-test", 1, 0, 0x1000 + i, torch.bfloat16)
        obj = backend.allocate(metadata.get_shapes(), metadata.get_dtypes())
        assert obj is not None, "LocalCPUBackend could not allocate a chunk"
        t = torch.randn(obj.tensor.shape, dtype=torch.bfloat16)
        obj.tensor.copy_(t)
        # put takes over the chunk's reference (LMCache's storage
        # manager hands it over the same way).
        run(connector.put(key, obj))
        keys.append(key)
        tensors.append(t)

    for key, want in zip(keys, tensors):
        assert run(connector.exists(key)), f"{key.to_string()} does not exist after put"
        got = run(connector.get(key))
        assert got is not None, f"{key.to_string()} read back as None"
        assert torch.equal(got.tensor.view(want.shape), want), f"{key.to_string()}: tensor differs after the round trip"
        got.ref_count_down()

    missing = CacheEngineKey("ctxtier-test", 1, 0, 0xDEAD, torch.bfloat16)
    assert not run(connector.exists(missing)), "a key never put exists"
    assert run(connector.get(missing)) is None, "a key never put reads back"

    # Re-putting a chunk (LMCache re-stores the same bytes) keeps it readable.
    obj = backend.allocate(metadata.get_shapes(), metadata.get_dtypes())
    obj.tensor.copy_(tensors[0])
    run(connector.put(keys[0], obj))
    got = run(connector.get(keys[0]))
    assert got is not None and torch.equal(got.tensor.view(tensors[0].shape), tensors[0]), "re-put chunk differs"
    got.ref_count_down()

    # connector.close() is not called: in lmcache 0.5.6 it waits for its
    # priority-queue workers on the loop it runs on and never returns.
    loop.call_soon_threadsafe(loop.stop)
    print(f"OK: {len(keys)} chunks of {tensors[0].numel() * 2} bytes stored and loaded through LMCache's RedisConnector")
    return 0


if __name__ == "__main__":
    sys.exit(main())
