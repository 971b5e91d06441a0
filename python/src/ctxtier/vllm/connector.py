"""CtxtierConnector: vLLM v1's KVConnectorBase_V1 backed by ctxtier.

Scheduler side (one per engine):
  * get_num_new_matched_tokens maps the request's own vLLM block hashes
    (``request.block_hashes``) to ctxtier keys (:func:`ctxtier.hashing.vllm_key`)
    and asks ctxtier's LOOKUP how many of the blocks past the locally computed
    ones are present; it answers the tokens in those full blocks, leaving at
    least the prompt's last token to compute, as vLLM requires.
  * update_state_after_alloc records which of the request's block ids those
    blocks were allocated to; build_connector_meta hands the worker the loads
    and, for every scheduled request, the full blocks this step computes
    (saved once each, never the ones that came from a cache).

Worker side (one per tensor-parallel rank):
  * start_load_kv, before the forward pass, receives each matched block into
    a staging buffer (``Client.get_into``) and copies it into the paged KV
    cache only when the whole block arrived with the expected size; any other
    outcome reports the block id in get_block_ids_with_load_errors, and vLLM
    (kv_load_failure_policy "recompute") recomputes it: wrong bytes are never
    used.
  * wait_for_save, after the forward pass, copies the step's new full blocks
    out of the paged cache (so vLLM may reuse the blocks at once) and queues
    them for a background thread that puts them in batches (:class:`Saver`).
  * Each rank reads and writes its own part: the key's part number is the
    tensor-parallel rank when tensor_parallel_size > 1 (whole-block keys
    otherwise).

Nothing is held across steps, so get_finished reports no asynchronous
transfers and request_finished never delays freeing blocks.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

from .. import errors
from ..client import Client
from ..cluster import ClusterClient
from ..hashing import vllm_key
from .config import Config
from .layout import BlockLayout
from .saver import Saver

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

log = logging.getLogger("ctxtier.vllm")

# (vLLM block id, ctxtier hash) pairs.
BlockRefs = List[Tuple[int, int]]


@dataclasses.dataclass
class CtxtierConnectorMetadata(KVConnectorMetadata):
    """What the scheduler tells the workers for one step."""

    loads: Dict[str, BlockRefs] = dataclasses.field(default_factory=dict)
    saves: Dict[str, BlockRefs] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _ReqState:
    """Scheduler-side bookkeeping of one running request."""

    request: Any
    block_ids: List[int] = dataclasses.field(default_factory=list)
    saved_blocks: int = -1  # full blocks not to save again; -1 until first scheduled


class CtxtierConnector(KVConnectorBase_V1):
    """vLLM v1 KV connector storing KV blocks in ctxtier (see the module doc)."""

    def __init__(self, vllm_config: "VllmConfig", role: KVConnectorRole, kv_cache_config: "KVCacheConfig" = None):
        super().__init__(vllm_config, role, kv_cache_config)
        self.cfg = Config.from_extra(self._kv_transfer_config.kv_connector_extra_config)
        cache = vllm_config.cache_config
        self.block_size = cache.block_size
        hbs = getattr(cache, "hash_block_size", None)
        if hbs not in (None, self.block_size):
            raise ValueError(f"ctxtier connector: hash_block_size {hbs} differs from block_size {self.block_size}; "
                             "only models with one KV block size are supported")
        self.tp_size = vllm_config.parallel_config.tensor_parallel_size
        self._client: Optional[Client | ClusterClient] = None
        self._client_lock = threading.Lock()
        self._retry_at = 0.0
        # Scheduler side.
        self._reqs: Dict[str, _ReqState] = {}
        self._lookups: Dict[str, Tuple[int, int]] = {}  # req id -> (first block, blocks present)
        self._loads: Dict[str, BlockRefs] = {}
        # Worker side.
        self._layout: Optional[BlockLayout] = None
        self._load_errors: Set[int] = set()
        self._staging: List[torch.Tensor] = []
        self._saver: Optional[Saver] = None
        self.stats = {"lookups": 0, "lookup_errors": 0, "loaded": 0, "load_failed": 0}
        if role == KVConnectorRole.WORKER:
            self._saver = Saver(self._get_client, self.cfg.namespace, self.cfg.save_batch,
                                self.cfg.save_queue_blocks, self.cfg.timeout)

    # ------------------------------------------------------------------ ctxtier

    def _get_client(self) -> Optional[Client | ClusterClient]:
        """The shared client, dialing it on first use; None while ctxd is unreachable."""
        with self._client_lock:
            if self._client is not None:
                return self._client
            if time.monotonic() < self._retry_at:
                return None
            try:
                kw = dict(timeout=self.cfg.timeout, connect_timeout=self.cfg.connect_timeout,
                          pool_size=self.cfg.pool_size, verify=self.cfg.verify)
                if self.cfg.nodes:
                    self._client = ClusterClient(self.cfg.nodes, self.cfg.access_key_id, self.cfg.secret,
                                                 status_timeout=self.cfg.connect_timeout, **kw)
                else:
                    self._client = Client(self.cfg.addr, self.cfg.access_key_id, self.cfg.secret, **kw)
            except (errors.CtxtierError, OSError) as e:
                self._retry_at = time.monotonic() + self.cfg.retry_after
                log.warning("ctxtier: cannot reach %s (%s); treating the tier as empty for %.0fs",
                            self.cfg.addr or self.cfg.nodes, e, self.cfg.retry_after)
                return None
            return self._client

    def _part(self) -> Optional[int]:
        """This worker's key part: its tensor-parallel rank, or None (whole block) without TP."""
        if self.tp_size <= 1:
            return None
        from vllm.distributed.parallel_state import get_tensor_model_parallel_rank

        return get_tensor_model_parallel_rank()

    # ------------------------------------------------------------ scheduler side

    def on_new_request(self, request: "Request") -> None:
        self._reqs.setdefault(request.request_id, _ReqState(request))

    def _keys(self, request: "Request") -> List[int]:
        hashes = request.block_hashes
        n = getattr(request, "num_publishable_block_hashes", None)
        if n is not None:
            hashes = hashes[:n]
        return [vllm_key(bytes(h)) for h in hashes]

    def get_num_new_matched_tokens(self, request: "Request", num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        self._reqs.setdefault(request.request_id, _ReqState(request))
        # vLLM must compute at least the prompt's last token to sample from it.
        limit = (request.num_prompt_tokens - 1) // self.block_size
        keys = self._keys(request)[:limit]
        first = num_computed_tokens // self.block_size
        if first >= len(keys):
            return 0, False
        client = self._get_client()
        if client is None:
            return 0, False
        self.stats["lookups"] += 1
        try:
            parts = [None] if self.tp_size <= 1 else list(range(self.tp_size))
            present = min(client.lookup(self.cfg.namespace, keys[first:], part) for part in parts)
        except errors.CtxtierError as e:
            self.stats["lookup_errors"] += 1
            log.warning("ctxtier: lookup for %s failed (%s); recomputing", request.request_id, e)
            return 0, False
        self._lookups[request.request_id] = (first, present)
        return present * self.block_size, False

    def update_state_after_alloc(self, request: "Request", blocks: "KVCacheBlocks", num_external_tokens: int):
        st = self._reqs.setdefault(request.request_id, _ReqState(request))
        if num_external_tokens <= 0:
            return
        first, present = self._lookups.get(request.request_id, (0, 0))
        n = min(present, num_external_tokens // self.block_size)
        block_ids = blocks.get_block_ids()[0]
        keys = self._keys(request)
        self._loads[request.request_id] = [(block_ids[first + i], keys[first + i]) for i in range(n)]
        # Loaded blocks are already in ctxtier: never save them again.
        st.saved_blocks = max(st.saved_blocks, first + n)

    def build_connector_meta(self, scheduler_output: "SchedulerOutput") -> KVConnectorMetadata:
        meta = CtxtierConnectorMetadata(loads=self._loads)
        self._loads = {}
        self._lookups.clear()
        for new in scheduler_output.scheduled_new_reqs:
            st = self._reqs.get(new.req_id)
            if st is None:
                continue
            st.block_ids = list(new.block_ids[0])
            if st.saved_blocks < 0:
                # Blocks computed before this step came from vLLM's own prefix
                # cache: some engine computed them, and saved them then.
                st.saved_blocks = new.num_computed_tokens // self.block_size
            self._plan_saves(meta, new.req_id, st, new.num_computed_tokens, scheduler_output)
        cached = scheduler_output.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            st = self._reqs.get(req_id)
            if st is None:
                continue
            new_ids = cached.new_block_ids[i]
            if req_id in cached.resumed_req_ids:
                st.block_ids = list(new_ids[0]) if new_ids is not None else []
            elif new_ids is not None:
                st.block_ids.extend(new_ids[0])
            self._plan_saves(meta, req_id, st, cached.num_computed_tokens[i], scheduler_output)
        for req_id in scheduler_output.finished_req_ids:
            self._reqs.pop(req_id, None)
        return meta

    def _plan_saves(self, meta: CtxtierConnectorMetadata, req_id: str, st: _ReqState, num_computed: int,
                    scheduler_output: "SchedulerOutput") -> None:
        done = num_computed + scheduler_output.num_scheduled_tokens.get(req_id, 0)
        keys = self._keys(st.request)
        full = min(done // self.block_size, len(keys), len(st.block_ids))
        start = max(st.saved_blocks, 0)
        if full > start:
            meta.saves[req_id] = [(st.block_ids[i], keys[i]) for i in range(start, full)]
            st.saved_blocks = full

    def request_finished(self, request: "Request", block_ids: List[int]) -> Tuple[bool, Optional[dict]]:
        # Saves were copied out of the paged cache in the step that computed
        # them, so the blocks can be freed now.
        self._reqs.pop(request.request_id, None)
        return False, None

    # --------------------------------------------------------------- worker side

    def register_kv_caches(self, kv_caches: Dict[str, torch.Tensor]):
        num_blocks = self._kv_cache_config.num_blocks if self._kv_cache_config is not None else None
        if num_blocks is None:
            num_blocks = self._vllm_config.cache_config.num_gpu_blocks
        self._layout = BlockLayout(kv_caches, num_blocks)
        log.info("ctxtier: %d layers, %d bytes per block, namespace %s at %s",
                 len(kv_caches), self._layout.block_bytes, self.cfg.namespace, self.cfg.addr or self.cfg.nodes)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        meta = self._get_connector_metadata()
        if not isinstance(meta, CtxtierConnectorMetadata) or not meta.loads:
            return
        for req_id, refs in meta.loads.items():
            self._load(req_id, refs)

    def _load(self, req_id: str, refs: BlockRefs) -> None:
        lay = self._layout
        if lay is None:
            raise RuntimeError("ctxtier connector: start_load_kv before register_kv_caches")
        n = self.cfg.load_batch
        for lo in range(0, len(refs), n):
            self._load_batch(req_id, refs[lo : lo + n])

    def _load_batch(self, req_id: str, refs: BlockRefs) -> None:
        lay = self._layout
        # Staging buffers are reused from step to step: their pages are
        # already mapped, so receiving into them costs no page faults.
        while len(self._staging) < len(refs):
            self._staging.append(lay.alloc())
        bufs = self._staging[: len(refs)]
        client = self._get_client()
        sizes: List[Optional[int]] = [None] * len(refs)
        if client is not None:
            try:
                sizes = client.get_into(self.cfg.namespace, [h for _, h in refs], bufs, self._part(),
                                        timeout=self.cfg.timeout)
            except errors.CtxtierError as e:
                log.warning("ctxtier: loading %d blocks of %s failed (%s); vLLM recomputes them", len(refs), req_id, e)
        for (block_id, h), buf, size in zip(refs, bufs, sizes):
            if size == lay.block_bytes:
                lay.scatter(block_id, buf)
                self.stats["loaded"] += 1
                continue
            if size is not None:
                log.warning("ctxtier: block %016x is %d bytes, this model's blocks are %d; recomputing",
                            h, size, lay.block_bytes)
            self.stats["load_failed"] += 1
            self._load_errors.add(block_id)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # start_load_kv loads every layer before the forward pass

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor, attn_metadata: Any, **kwargs: Any) -> None:
        return  # wait_for_save copies whole blocks (all layers) after the forward pass

    def wait_for_save(self):
        if not self.has_connector_metadata():
            return
        meta = self._get_connector_metadata()
        if not isinstance(meta, CtxtierConnectorMetadata) or not meta.saves or self._layout is None:
            return
        part = self._part()
        items = []
        for refs in meta.saves.values():
            for block_id, h in refs:
                items.append((h, part, self._layout.gather(block_id, self._layout.alloc())))
        self._saver.submit(items)

    def get_finished(self, finished_req_ids: Set[str]) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        return None, None

    def get_block_ids_with_load_errors(self) -> Set[int]:
        out, self._load_errors = self._load_errors, set()
        return out

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until every queued save was put (or failed); False on timeout."""
        return True if self._saver is None else self._saver.flush(timeout)

    def save_stats(self) -> Dict[str, int]:
        """Counts of blocks saved, already present, failed and dropped."""
        return dict(self._saver.stats) if self._saver is not None else {}

    def shutdown(self):
        if self._saver is not None:
            self._saver.close(self.cfg.timeout * 2)
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None
