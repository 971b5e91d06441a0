"""Real vLLM engines-in-a-test for the connector tests (make test-engines).

An :class:`Engine` is vLLM's own ``Scheduler`` built from a real
``VllmConfig`` (a config-only llama directory: no weights, no hub) whose
kv_transfer_config loads ``ctxtier.vllm.CtxtierConnector`` through vLLM's
connector factory, plus the connector's worker side over real CPU torch KV
tensors: in-process, or with tp=2 one process per tensor-parallel rank, each
in vLLM's own TP group (gloo on CPU) so the connector reads its rank from
vLLM. The one thing not run is the model's forward pass (vLLM's model
runner needs a GPU or vLLM's CPU build, which the PyPI wheel is not):
``Engine.step`` stands in for it by writing, for every token the scheduler
scheduled, KV values that are a pure function of (layer, position, prefix),
as a real model's are. Everything around it (scheduling, prefix caching,
the connector's lookups, loads, saves, vLLM's failed-load recovery) is
vLLM's and ctxtier's own code.
"""

from __future__ import annotations

import importlib.util
import json
import os
import urllib.request
from pathlib import Path

import pytest

if importlib.util.find_spec("vllm") is None or os.environ.get("CTXTIER_ENGINES") != "1":
    if os.environ.get("CTXTIER_ENGINES") == "1":
        raise RuntimeError("CTXTIER_ENGINES=1 but vllm is not installed: run `make test-engines`")
    pytest.skip("vLLM engine tests run under `make test-engines` (CTXTIER_ENGINES=1 with vllm installed)",
                allow_module_level=True)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["PYTHONHASHSEED"] = "0"  # vLLM's NONE_HASH seed; the namespace below says the same

import torch  # noqa: E402
from vllm.config import (  # noqa: E402
    CacheConfig,
    DeviceConfig,
    KVTransferConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import get_hash_fn_by_name  # noqa: E402
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec  # noqa: E402
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402

BLOCK = 16
LAYERS = 2
KV_HEADS = 2
HEAD = 16
EOS = 2

MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": KV_HEADS * 2 * HEAD,
    "intermediate_size": 128,
    "num_attention_heads": KV_HEADS * 2,
    "num_key_value_heads": KV_HEADS,
    "num_hidden_layers": LAYERS,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "float32",
    "bos_token_id": 1,
    "eos_token_id": EOS,
}


def write_model_dir(d: Path) -> Path:
    """A config-only local model directory (no weights, no tokenizer)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(MODEL_CONFIG))
    return d


def create_namespace(http_addr: str, name: str) -> None:
    """POST /v1/namespaces: vLLM's hashing, vLLM's block size, PYTHONHASHSEED 0."""
    body = json.dumps({"name": name, "hash_scheme": "vllm-sha256", "block_tokens": BLOCK,
                       "vllm_hash_seed": "0"}).encode()
    req = urllib.request.Request(f"http://{http_addr}/v1/namespaces", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 201, r.status


def fake_kv(layer: int, kv: int, tokens, pos: int, rank: int = 0) -> torch.Tensor:
    """The KV 'a model' writes for position pos: a function of the whole prefix
    (and of the tensor-parallel rank, whose heads differ)."""
    sig = 0
    for t in tokens[: pos + 1]:
        sig = (sig * 1000003 + int(t)) % (1 << 20)
    base = float((sig + 7 * layer + 3 * kv) % (1 << 20) + rank * (1 << 20))
    return torch.arange(KV_HEADS * HEAD, dtype=torch.float32).reshape(KV_HEADS, HEAD) + base


LAYER_NAMES = [f"model.layers.{i}.self_attn.attn" for i in range(LAYERS)]


def make_config(model_dir, addr: str, namespace: str, num_blocks: int, tp: int = 1, batch_tokens: int = 512,
                **extra):
    """A real VllmConfig loading CtxtierConnector, and the matching KVCacheConfig."""
    model = ModelConfig(model=str(model_dir), skip_tokenizer_init=True, dtype="float32", seed=0,
                        max_model_len=1024)
    cfg = VllmConfig(
        model_config=model,
        scheduler_config=SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=batch_tokens, max_model_len=1024,
                                         is_encoder_decoder=False, enable_chunked_prefill=True),
        cache_config=CacheConfig(block_size=BLOCK, enable_prefix_caching=True,
                                 prefix_caching_hash_algo="sha256_cbor"),
        parallel_config=ParallelConfig(tensor_parallel_size=tp),
        kv_transfer_config=KVTransferConfig(
            kv_connector="CtxtierConnector",
            kv_connector_module_path="ctxtier.vllm",
            kv_role="kv_both",
            kv_load_failure_policy="recompute",
            kv_connector_extra_config={"addr": addr, "namespace": namespace, "timeout": 5.0, **extra},
        ),
        device_config=DeviceConfig("cpu"),
    )
    kv_cfg = KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(LAYER_NAMES, FullAttentionSpec(
            block_size=BLOCK, num_kv_heads=KV_HEADS, head_size=HEAD, dtype=torch.float32))],
    )
    cfg.cache_config.num_gpu_blocks = num_blocks
    return cfg, kv_cfg


class Worker:
    """The connector's worker side over CPU KV tensors, and the stand-in forward pass."""

    def __init__(self, cfg, kv_cfg, rank: int = 0):
        self.rank = rank
        self.connector = KVConnectorFactory.create_connector(cfg, KVConnectorRole.WORKER, kv_cfg)
        # The flash-attention layout: (K/V, blocks, block size, kv heads, head size).
        self.kv = {n: torch.zeros(2, kv_cfg.num_blocks, BLOCK, KV_HEADS, HEAD) for n in LAYER_NAMES}
        self.connector.register_kv_caches(self.kv)

    def execute(self, meta, work):
        """One step as vLLM's model runner drives a connector; work is
        [(tokens, first position, count, block ids)]. Returns the failed block ids."""
        w = self.connector
        w.bind_connector_metadata(meta)
        w.start_load_kv(None)
        for toks, start, n, blocks in work:
            for pos in range(start, start + n):
                blk, off = blocks[pos // BLOCK], pos % BLOCK
                for li, name in enumerate(LAYER_NAMES):
                    for kvi in range(2):
                        self.kv[name][kvi, blk, off] = fake_kv(li, kvi, toks, pos, self.rank)
        w.wait_for_save()
        invalid = w.get_block_ids_with_load_errors()
        w.clear_connector_metadata()
        return invalid

    def block_bytes(self, block_id: int) -> bytes:
        """One block of every layer, as raw bytes (layers in name order)."""
        return b"".join(self.kv[n][:, block_id].contiguous().numpy().tobytes() for n in sorted(self.kv))


def _tp_worker_main(rank, port, model_dir, addr, namespace, num_blocks, tp, inq, outq):
    os.environ["PYTHONHASHSEED"] = "0"
    from vllm.config import set_current_vllm_config
    from vllm.distributed.parallel_state import ensure_model_parallel_initialized, init_distributed_environment

    cfg, kv_cfg = make_config(model_dir, addr, namespace, num_blocks, tp)
    with set_current_vllm_config(cfg):
        init_distributed_environment(world_size=tp, rank=rank, distributed_init_method=f"tcp://127.0.0.1:{port}",
                                     local_rank=rank, backend="gloo")
        ensure_model_parallel_initialized(tp, 1)
        w = Worker(cfg, kv_cfg, rank)
        outq.put(("ready", rank))
        while True:
            msg = inq.get()
            if msg is None:
                w.connector.shutdown()
                outq.put(("bye", rank))
                return
            meta, work, want = msg
            invalid = w.execute(meta, work)
            ok = w.connector.flush(10)
            outq.put((invalid, {b: w.block_bytes(b) for b in want}, w.connector.save_stats(), ok,
                      dict(w.connector.stats)))


class TPWorkers:
    """tp worker processes, each a vLLM tensor-parallel rank (gloo on CPU) with its own Worker."""

    def __init__(self, model_dir, addr: str, namespace: str, num_blocks: int, tp: int):
        import socket
        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.inqs = [ctx.Queue() for _ in range(tp)]
        self.outqs = [ctx.Queue() for _ in range(tp)]
        self.procs = [ctx.Process(target=_tp_worker_main, args=(r, port, str(model_dir), addr, namespace, num_blocks,
                                                                tp, self.inqs[r], self.outqs[r]), daemon=True)
                      for r in range(tp)]
        for p in self.procs:
            p.start()
        for r, q in enumerate(self.outqs):
            assert q.get(timeout=180) == ("ready", r)
        self.last = None

    def execute(self, meta, work, want=()):
        for q in self.inqs:
            q.put((meta, work, list(want)))
        self.last = [q.get(timeout=120) for q in self.outqs]
        invalid = set()
        for res in self.last:
            invalid |= res[0]
        return invalid

    def close(self) -> None:
        for q in self.inqs:
            q.put(None)
        for p, q in zip(self.procs, self.outqs):
            try:
                q.get(timeout=30)
            except Exception:
                pass
            p.join(30)
            if p.is_alive():
                p.kill()


class Engine:
    """vLLM's scheduler + the connector's worker side (in-process, or TPWorkers)."""

    def __init__(self, model_dir: Path, addr: str, namespace: str, num_blocks: int = 64, tp: int = 1,
                 batch_tokens: int = 512, **extra):
        cfg, kv_cfg = make_config(model_dir, addr, namespace, num_blocks, tp, batch_tokens, **extra)
        self.config = cfg
        self.hash_fn = get_hash_fn_by_name(cfg.cache_config.prefix_caching_hash_algo)
        init_none_hash(self.hash_fn)  # what EngineCore does at start-up
        self.sched = Scheduler(vllm_config=cfg, kv_cache_config=kv_cfg,
                               structured_output_manager=StructuredOutputManager(cfg), block_size=BLOCK,
                               log_stats=True)
        if tp == 1:
            self.local = Worker(cfg, kv_cfg)
            self.workers = self.local
            self.worker = self.local.connector
            self.kv = self.local.kv
        else:
            self.local = None
            self.workers = TPWorkers(model_dir, addr, namespace, num_blocks, tp)
        self.last = None

    @property
    def connector(self):
        return self.sched.connector

    def request(self, rid: str, tokens, max_tokens: int = 2) -> Request:
        sp = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
        sp.update_from_generation_config({}, EOS)
        return Request(request_id=rid, prompt_token_ids=list(tokens), sampling_params=sp, pooling_params=None,
                       block_hasher=get_request_block_hasher(BLOCK, self.hash_fn))

    def add(self, req: Request) -> None:
        self.sched.add_request(req)

    def step(self, before_load=None, want=()):
        """One engine step; returns (scheduler output, failed block ids)."""
        so = self.sched.schedule()
        self.last = so
        if before_load is not None:
            before_load(so)
        starts = {r.req_id: r.num_computed_tokens for r in so.scheduled_new_reqs}
        c = so.scheduled_cached_reqs
        starts.update({rid: c.num_computed_tokens[i] for i, rid in enumerate(c.req_ids)})
        work = []
        for rid, start in starts.items():
            req = self.sched.requests[rid]
            blocks = self.sched.kv_cache_manager.get_block_ids(rid)[0]
            work.append((list(req.all_token_ids), start, so.num_scheduled_tokens[rid], list(blocks)))
        if self.local is not None:
            invalid = self.local.execute(so.kv_connector_metadata, work)
        else:
            invalid = self.workers.execute(so.kv_connector_metadata, work, want)
        sampled = list(starts)
        # As vLLM's model runner: a request still in (chunked) prefill samples nothing.
        tokens = []
        for (toks, start, n, _), rid in zip(work, sampled):
            tokens.append([1000 + len(toks)] if start + n >= len(toks) else [])
        out = ModelRunnerOutput(
            req_ids=sampled,
            req_id_to_index={r: i for i, r in enumerate(sampled)},
            sampled_token_ids=tokens,
            kv_connector_output=KVConnectorOutput(invalid_block_ids=invalid) if invalid else None,
        )
        self.sched.update_from_output(so, out)
        return so, invalid

    def run(self, max_steps: int = 20) -> None:
        for _ in range(max_steps):
            if not self.sched.has_unfinished_requests():
                return
            self.step()
        raise AssertionError("requests did not finish")

    def block_bytes(self, block_id: int) -> bytes:
        return self.local.block_bytes(block_id)

    def close(self) -> None:
        if self.local is not None:
            self.worker.shutdown()
        else:
            self.workers.close()
        self.sched.shutdown()
