"""Rendezvous placement, computed exactly as the cluster computes it.

ctxd places a block's shards on the alive members with the highest
rendezvous scores for its key (``ctxstore/placement``, docs/cluster.md);
the member ranked first is the block's *owner*, the holder of its first
shard. :class:`ctxtier.ClusterClient` sends each block to its owner with
these functions, so the member that takes it writes it into its own tiers
instead of forwarding it to a peer. The shared vectors
``ctxstore/placement/testdata/owners.json`` (written by the Go package)
check them. Needs the optional ``xxhash`` package
(``pip install 'ctxtier[dynamo]'``).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Optional, Sequence



def _xxh3():
    try:
        import xxhash  # type: ignore[import-not-found]
    except ImportError as e:
        raise ImportError("ctxtier.placement (ClusterClient, the connector's nodes) needs the optional 'xxhash' "
                          "package: pip install 'ctxtier[dynamo]'") from e
    return xxhash.xxh3_64_intdigest


@dataclass(frozen=True)
class Member:
    """A placement candidate: an alive member, as GET /v1/cluster/status lists it."""

    id: str
    zone: str = ""
    capacity: int = 0

    @property
    def weight(self) -> float:
        """Its capacity in GiB (placement.CapacityWeight); 0 counts as 1."""
        return self.capacity / float(1 << 30)


def key_hash(namespace: str, hash: int, part: Optional[int] = None) -> int:
    """The key's 64-bit hash that seeds its members' scores (placement.KeyHash)."""
    xxh3 = _xxh3()
    b = struct.pack("<QHB", hash, part or 0, 0 if part is None else 1)
    return xxh3(b, xxh3(namespace.encode("utf-8")))


def _score(kh: int, m: Member) -> float:
    h = _xxh3()(m.id.encode("utf-8"), kh)
    u = (float(h >> 11) + 0.5) / float(1 << 53)
    w = m.weight if m.weight > 0 else 1.0
    return -w / math.log(u)


def rank(namespace: str, hash: int, part: Optional[int], members: Sequence[Member]) -> list:
    """All members, highest score for the key first (ties by id)."""
    kh = key_hash(namespace, hash, part)
    return sorted(members, key=lambda m: (-_score(kh, m), m.id))


def pick(namespace: str, hash: int, part: Optional[int], members: Sequence[Member], n: int) -> list:
    """The n members placement picks for the key's shards, best first: the
    best member of each zone not used yet, in rank order, then the best of
    the rest."""
    if n > len(members):
        raise ValueError(f"placement of {n} shards needs {n} members, {len(members)} given")
    ranked = rank(namespace, hash, part, members)
    out: list = []
    taken = set()
    for i, m in enumerate(ranked):
        if len(out) == n:
            break
        if all(o.zone != m.zone for o in out):
            out.append(m)
            taken.add(i)
    for i, m in enumerate(ranked):
        if len(out) == n:
            break
        if i not in taken:
            out.append(m)
    return out


def owner(namespace: str, hash: int, part: Optional[int], members: Sequence[Member]) -> Optional[Member]:
    """The member ranked first for the key (None without members)."""
    return rank(namespace, hash, part, members)[0] if members else None
