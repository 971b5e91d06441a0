"""Stores and loads real CPU tensors through LMCache's own S3Connector (the
s3:// remote backend of the lmcache package, which drives awscrt's native S3
client) against a ctxd S3 endpoint with virtual-hosted addressing.

Usage: lmcache_s3_connector.py s3://BUCKET.DOMAIN:PORT ACCESS_KEY_ID SECRET [LAYERS [CHUNKS]]

A chunk is LAYERS * 512 KiB of bf16 (default 4 layers: 2 MiB, one PUT);
over awscrt's 8 MiB part size (e.g. 24 layers: 12 MiB) awscrt uploads it
as a multipart upload and reads it back in ranged parts. CHUNKS chunks are
stored (default 8).

BUCKET.DOMAIN must resolve to the ctxd S3 endpoint (the Go test runs this
script in a private mount namespace whose /etc/hosts maps it to 127.0.0.1).
Exits non-zero on any failure. It drives the connector the way LMCache's
storage manager does: allocate a chunk from the LocalCPUBackend, fill it,
put it remotely, then exists / get it back into fresh memory and compare.
The loads go through a second connector, whose object-size cache is empty,
so that every exists and get really asks ctxd (HEAD, then GET).
"""

import asyncio
import socket
import sys
import threading
from urllib.parse import urlparse

import awscrt
import lmcache
import torch

from lmcache.utils import CacheEngineKey
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.metadata import LMCacheMetadata
from lmcache.v1.storage_backend.connector import CreateConnector
from lmcache.v1.storage_backend.connector.s3_connector import S3Connector
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend


def main() -> int:
    url, key_id, secret = sys.argv[1], sys.argv[2], sys.argv[3]
    layers = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    chunks = int(sys.argv[5]) if len(sys.argv) > 5 else 8
    host = urlparse(url).hostname
    # The virtual-hosted name must resolve (through /etc/hosts) before
    # awscrt's resolver, which also uses getaddrinfo, is asked for it.
    print("resolves:", host, socket.gethostbyname(host))
    chunk = 256
    # (num_layer, 2, chunk_size, num_kv_head, head_size): 4*2*256*8*64*2 bytes = 2 MiB of bf16.
    shape = (layers, 2, chunk, 8, 64)
    config = LMCacheEngineConfig.from_defaults(
        chunk_size=chunk, local_cpu=False, max_local_cpu_size=max(0.25, 3 * chunks * layers / 2048), remote_url=url, remote_serde="naive",
        extra_config={
            "s3_region": "us-east-1", "disable_tls": True, "s3_prefer_http2": False, "s3_num_io_threads": 4,
            "aws_access_key_id": key_id, "aws_secret_access_key": secret,
        },
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
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=120)

    def connector_of():
        c = CreateConnector(url, loop, backend, config, metadata)
        inner = c
        while not isinstance(inner, S3Connector):
            nxt = getattr(inner, "connector", None) or getattr(inner, "_connector", None)
            assert nxt is not None, f"CreateConnector({url}) built {type(c).__name__}, no S3Connector inside"
            inner = nxt
        return c, inner

    writer, s3w = connector_of()
    print("connector:", type(writer).__name__, "wrapping", type(s3w).__name__,
          f"lmcache {lmcache.__version__} awscrt {awscrt.__version__}")

    torch.manual_seed(17)
    keys, tensors = [], []
    for i in range(chunks):
        key = CacheEngineKey("ctxtier-test", 1, 0, 0x2000 + i, torch.bfloat16)
        obj = backend.allocate(metadata.get_shapes(), metadata.get_dtypes())
        assert obj is not None, "LocalCPUBackend could not allocate a chunk"
        t = torch.randn(obj.tensor.shape, dtype=torch.bfloat16)
        obj.tensor.copy_(t)
        run(writer.put(key, obj))
        # S3Connector logs a failed upload and returns; it records the
        # object's size only after ctxd answered the PUT with 200.
        assert s3w.object_size_cache.get(key.to_string(), 0) == t.numel() * 2, \
            f"PUT of {key.to_string()} did not succeed (see the log above)"
        keys.append(key)
        tensors.append(t)
    assert s3w.connection_failures == 0 and not s3w.connection_disabled, "connection failures while putting"

    reader, s3r = connector_of()
    assert not s3r.object_size_cache, "a fresh connector has cached sizes"
    for key, want in zip(keys, tensors):
        assert run(reader.exists(key)), f"{key.to_string()} does not exist after put (HEAD)"
        got = run(reader.get(key))
        assert got is not None, f"{key.to_string()} read back as None"
        assert torch.equal(got.tensor.view(want.shape), want), f"{key.to_string()}: tensor differs after the round trip"
        got.ref_count_down()

    # The batched path LMCache's prefetch uses: HEADs then concurrent GETs.
    _, s3b = connector_of()
    n = min(4, len(keys))
    got = run(s3b.batched_get(keys[:n]))
    assert len(got) == n and all(g is not None for g in got), f"batched_get: {got}"
    for g, want in zip(got, tensors):
        assert torch.equal(g.tensor.view(want.shape), want), "batched_get: tensor differs"
        g.ref_count_down()

    missing = CacheEngineKey("ctxtier-test", 1, 0, 0xDEAD, torch.bfloat16)
    assert not run(reader.exists(missing)), "a key never put exists"
    assert run(reader.get(missing)) is None, "a key never put reads back"
    assert s3r.connection_failures == 0, "connection failures while loading"

    # connector.close() is not called: in lmcache 0.5.6 it waits for its
    # priority-queue workers on the loop it runs on and never returns.
    loop.call_soon_threadsafe(loop.stop)
    print(f"OK: {len(keys)} chunks of {tensors[0].numel() * 2} bytes stored and loaded through LMCache's S3Connector")
    for k in keys:
        print("key:", k.to_string().replace("/", "_"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
