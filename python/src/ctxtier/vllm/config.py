"""The connector's settings, read from vLLM's ``kv_connector_extra_config``."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional


@dataclasses.dataclass
class Config:
    """Settings of :class:`~ctxtier.vllm.CtxtierConnector`.

    addr: "HOST:PORT" of ctxd's native listener (--listen).
    nodes: instead of addr, a cluster's members as ["NATIVE_HOST:PORT",
        "HTTP_HOST:PORT"] pairs: each block is saved to and loaded from its
        owner, the member placement ranks first for it
        (:class:`ctxtier.ClusterClient`; needs the optional xxhash package).
    namespace: the ctxtier namespace the blocks live in; create it with
        hash_scheme vllm-sha256 and block_tokens equal to vLLM's block size.
    access_key_id, secret: credentials for a ctxd running --auth required.
    timeout: seconds a ctxtier call may take; a lookup or load past it is a
        miss (vLLM recomputes), a save past it is dropped.
    connect_timeout: seconds to dial and handshake.
    retry_after: seconds to wait before dialing again after ctxd could not
        be reached (meanwhile every lookup is a miss and saves are dropped).
    pool_size: connections per process.
    verify: check the CRC-32C of every loaded block in the client (None: when
        a native CRC-32C package is installed; otherwise the server verifies).
    save_batch: most blocks per PUT batch.
    save_queue_blocks: most blocks waiting to be saved; past it new saves
        are dropped (counted) rather than stalling the forward pass.
    load_batch: most blocks per GET batch; also the number of block-sized
        staging buffers a worker keeps for loads.
    """

    addr: str = ""
    nodes: Optional[list] = None
    namespace: str = "default"
    access_key_id: Optional[str] = None
    secret: Optional[str] = None
    timeout: float = 5.0
    connect_timeout: float = 2.0
    retry_after: float = 5.0
    pool_size: int = 4
    verify: Optional[bool] = None
    save_batch: int = 16
    save_queue_blocks: int = 256
    load_batch: int = 32

    def validate(self) -> None:
        """Raise ValueError naming the first bad setting."""
        if self.nodes is not None:
            if self.addr:
                raise ValueError("ctxtier connector: set addr or nodes, not both")
            if not isinstance(self.nodes, (list, tuple)) or not self.nodes or any(
                    not isinstance(n, (list, tuple)) or len(n) != 2
                    or not all(isinstance(a, str) and ":" in a for a in n) for n in self.nodes):
                raise ValueError(f"ctxtier connector: nodes {self.nodes!r} must be [NATIVE_HOST:PORT, HTTP_HOST:PORT] pairs")
            try:
                import xxhash  # noqa: F401  # type: ignore[import-not-found]
            except ImportError:
                raise ValueError("ctxtier connector: nodes needs the optional xxhash package: "
                                 "pip install 'ctxtier[dynamo]'") from None
        elif not self.addr or ":" not in self.addr:
            raise ValueError(f"ctxtier connector: addr {self.addr!r} is not HOST:PORT")
        if not self.namespace or len(self.namespace) > 63:
            raise ValueError(f"ctxtier connector: namespace {self.namespace!r} must be 1..63 characters")
        if bool(self.access_key_id) != bool(self.secret):
            raise ValueError("ctxtier connector: access_key_id and secret go together")
        for name in ("timeout", "connect_timeout", "retry_after"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ctxtier connector: {name} must be positive")
        if not 1 <= self.pool_size <= 1024:
            raise ValueError(f"ctxtier connector: pool_size {self.pool_size} out of range 1..1024")
        if self.save_batch < 1:
            raise ValueError("ctxtier connector: save_batch must be at least 1")
        if self.load_batch < 1:
            raise ValueError("ctxtier connector: load_batch must be at least 1")
        if self.save_queue_blocks < 1:
            raise ValueError("ctxtier connector: save_queue_blocks must be at least 1")

    @classmethod
    def from_extra(cls, extra: Optional[Mapping[str, Any]]) -> "Config":
        """Build and validate a Config from kv_connector_extra_config.

        Unknown keys are an error, so a misspelt setting is not silently
        ignored.
        """
        extra = dict(extra or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(extra) - names)
        if unknown:
            raise ValueError(f"ctxtier connector: unknown kv_connector_extra_config keys {unknown}; known: {sorted(names)}")
        c = cls(**extra)
        c.validate()
        return c


def DefaultConfig() -> Config:  # noqa: N802 - the project's Config/DefaultConfig convention
    """The defaults; addr must still be set."""
    return Config()
