"""A client of a whole ctxd cluster that sends each block to its owner.

Any member of a cluster takes any block: the one a request reaches writes
the block's shards to the members placement picks for it and forwards
what it does not hold itself. :class:`ClusterClient` keeps a
:class:`~ctxtier.Client` per member and reads the member list from
``GET /v1/cluster/status``; it sends each block of a batch to its owner
(the member :mod:`ctxtier.placement` ranks first for it, as the cluster
does), the owners' parts in parallel, so a one-copy block is written into
its holder's tiers with no hop between members, and reads go to the
holder too. A stale member list, or an owner the client has no address
for, costs a hop and never a block. The Go client's ``client.Cluster``
does the same (docs/cluster.md).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Optional, Sequence

from . import errors, placement, sigv4
from .client import Client


class ClusterClient:
    """Native clients of a cluster's members, each block sent to its owner.

    nodes are the members' ``(native_addr, http_addr)`` pairs ("host:port";
    the HTTP address may be a URL). Credentials and the keyword arguments
    of :class:`~ctxtier.Client` (timeout, pool_size, verify, ...) apply to
    every member's client; the status reads are signed with the same
    access key (SigV4), which a cluster with ``--auth required`` accepts
    there. The member list is read again in the background
    when it is older than refresh seconds, and at once when a member's
    connection fails; a part of a batch that failed that way is sent once
    more through the next node. A member that cannot be dialed at first
    (it is restarting) gets its blocks through the others until a refresh
    reaches it; only when no member can be dialed does the constructor
    raise Unavailable. Needs the optional ``xxhash`` package.
    """

    def __init__(self, nodes: Sequence, access_key_id: Optional[str] = None, secret: Optional[str] = None, *,
                 refresh: float = 5.0, status_timeout: float = 5.0, **client_kwargs):
        nodes = [tuple(n) for n in nodes]
        if not nodes or any(len(n) != 2 or not n[0] or not n[1] for n in nodes):
            raise errors.InvalidArgument("nodes must be (native_addr, http_addr) pairs, at least one")
        if refresh <= 0 or status_timeout <= 0:
            raise errors.InvalidArgument("refresh and status_timeout must be positive")
        placement.key_hash("", 0)  # the optional xxhash package: fail here, not on the first put
        self.refresh_interval = refresh
        self.status_timeout = status_timeout
        self._http = [n[1] if "://" in n[1] else "http://" + n[1] for n in nodes]
        self._ids: list = [None] * len(nodes)
        self._members: list = []
        self._at = 0.0
        self._lock = threading.Lock()
        self._refreshing = False
        self._next = 0
        self._native = [n[0] for n in nodes]
        self._dial_args = (access_key_id, secret, client_kwargs)
        #: each member's Client; None while it could not be dialed (its
        #: blocks go through another member, and the next refresh dials again).
        self.clients: list = [None] * len(nodes)
        try:
            last = self._dial_missing()
            if not self._usable():
                raise errors.Unavailable(f"cluster client: no member could be dialed: {last}")
            self._read_members()  # the members were just dialed
        except BaseException:
            self.close()
            raise
        self._pool = ThreadPoolExecutor(max_workers=max(len(nodes) - 1, 1), thread_name_prefix="ctxtier-cluster")

    # ------------------------------------------------------------ members

    def _dial_missing(self) -> Optional[Exception]:
        """Dial the members without a client; one that cannot be reached
        stays without (other errors, such as bad credentials, raise)."""
        kid, secret, kw = self._dial_args
        last = None
        for i, c in enumerate(self.clients):
            if c is None:
                try:
                    self.clients[i] = Client(self._native[i], kid, secret, **kw)
                except (errors.Unavailable, errors.DeadlineExceeded) as e:
                    last = e
        return last

    def _usable(self) -> list:
        return [i for i, c in enumerate(self.clients) if c is not None]

    def _spare(self, not_this: int = -1) -> int:
        """A member with a client, in turn (another than not_this when there is one)."""
        usable = self._usable() or [not_this]
        self._next = (self._next + 1) % len(self.clients)
        pick = usable[self._next % len(usable)]
        if pick == not_this and len(usable) > 1:
            pick = usable[(self._next + 1) % len(usable)]
        return pick

    def _status(self, i: int) -> dict:
        url = self._http[i] + "/v1/cluster/status"
        req = urllib.request.Request(url)
        key_id, secret, _ = self._dial_args
        if key_id:
            # A node with --auth required answers status to any access key.
            u = urllib.parse.urlsplit(url)
            for k, v in sigv4.sign("GET", u.netloc, u.path, key_id, secret).items():
                req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=self.status_timeout) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            raise errors.Unavailable(f"{self._http[i]}/v1/cluster/status: HTTP {e.code}: {e.read()[:200]!r}") from e
        except (OSError, ValueError) as e:
            raise errors.Unavailable(f"{self._http[i]}/v1/cluster/status: {e}") from e

    def refresh(self) -> None:
        """Read the member list now: from every node whose member ID is not
        known yet, else from one node in turn; raise Unavailable when none
        answers. Members without a client are dialed again."""
        self._dial_missing()
        self._read_members()

    def _read_members(self) -> None:
        ask = [i for i, m in enumerate(self._ids) if m is None]
        if not ask:
            self._next = (self._next + 1) % len(self._ids)
            ask = [self._next]
        last: Exception = errors.Unavailable("no node asked")
        answered = False
        for i in ask:
            try:
                st = self._status(i)
            except errors.Unavailable as e:
                last = e
                continue
            answered = True
            if st.get("node_id"):
                self._ids[i] = st["node_id"]
            members = [placement.Member(m["id"], m.get("zone", ""), int(m.get("capacity", 0)))
                       for m in st.get("members", []) if m.get("state") == "alive"]
            with self._lock:
                self._members, self._at = members, time.monotonic()
        if not answered:
            raise errors.Unavailable(f"cluster client: no node answered its status: {last}")

    def _maybe_refresh(self, stale: bool = False) -> None:
        with self._lock:
            if self._refreshing or (not stale and time.monotonic() - self._at < self.refresh_interval):
                return
            self._refreshing = True

        def run():
            try:
                self.refresh()
            except errors.CtxtierError:
                pass  # the last list stands
            finally:
                with self._lock:
                    self._refreshing = False

        threading.Thread(target=run, name="ctxtier-cluster-refresh", daemon=True).start()

    def owner(self, namespace: str, hash: int, part: Optional[int] = None) -> Optional[str]:
        """The member ID placement ranks first for the key (None: no alive member known)."""
        m = placement.owner(namespace, hash, part, self._members)
        return m.id if m else None

    def _node_of(self, namespace: str, hash: int, part: Optional[int], members, spare: int) -> int:
        m = placement.owner(namespace, hash, part, members)
        if m is not None and m.id in self._ids:
            i = self._ids.index(m.id)
            if self.clients[i] is not None:
                return i
        return spare

    def client_for(self, namespace: str, hash: int, part: Optional[int] = None) -> Client:
        """The native client of the key's owner (another member's when there is none for it)."""
        self._maybe_refresh()
        return self.clients[self._node_of(namespace, hash, part, self._members, self._spare())]

    # ------------------------------------------------------------ batches

    def _split(self, namespace: str, keys: list) -> dict:
        self._maybe_refresh()
        members = self._members
        spare = self._spare()
        groups: dict = {}
        for i, (h, p) in enumerate(keys):
            groups.setdefault(self._node_of(namespace, h, p, members, spare), []).append(i)
        return groups

    def _run(self, groups: dict, send) -> None:
        def one(node: int, idx: list) -> None:
            try:
                send(node, idx)
            except errors.Unavailable:
                other = self._spare(not_this=node)
                if other == node:
                    raise
                self._maybe_refresh(stale=True)
                send(other, idx)

        items = list(groups.items())
        futs = [self._pool.submit(one, node, idx) for node, idx in items[:-1]]
        first: Optional[BaseException] = None
        try:
            if items:
                one(*items[-1])
        except BaseException as e:  # noqa: BLE001 - re-raised below, after the other parts
            first = e
        for f in futs:
            try:
                f.result()
            except BaseException as e:  # noqa: BLE001
                first = first or e
        if first is not None:
            raise first

    def put_many(self, namespace: str, items: Iterable, *, part: Optional[int] = None, **kwargs) -> list:
        """Client.put_many, each item through its owner, the owners' parts in
        parallel; the same return value (None or the item's exception, in
        order). A part whose request failed on its owner and on the next node
        raises."""
        items = list(items)
        keys = [(it[0], it[2] if len(it) > 2 else part) for it in items]
        res: list = [None] * len(items)

        def send(node: int, idx: list) -> None:
            sub = [(items[i][0], items[i][1], keys[i][1]) for i in idx]
            for i, r in zip(idx, self.clients[node].put_many(namespace, sub, **kwargs)):
                res[i] = r

        self._run(self._split(namespace, keys), send)
        return res

    def get_into(self, namespace: str, hashes: Iterable, buffers: Iterable, part: Optional[int] = None,
                 **kwargs) -> list:
        """Client.get_into, each block from its owner, the owners' parts in
        parallel: block sizes, None where absent."""
        hashes, buffers = list(hashes), list(buffers)
        if len(hashes) != len(buffers):
            raise errors.InvalidArgument(f"{len(buffers)} buffers for {len(hashes)} keys")
        keys = [(h, part) for h in hashes]
        res: list = [None] * len(hashes)

        def send(node: int, idx: list) -> None:
            got = self.clients[node].get_into(namespace, [hashes[i] for i in idx], [buffers[i] for i in idx],
                                              part, **kwargs)
            for i, n in zip(idx, got):
                res[i] = n

        self._run(self._split(namespace, keys), send)
        return res

    def lookup(self, namespace: str, hashes: Iterable, part: Optional[int] = None, **kwargs) -> int:
        """Client.lookup through one member in turn: every member's index
        holds every entry, so any answers (linearizable=True for one that
        has applied every acknowledged put)."""
        hashes = list(hashes)
        node = self._spare()
        try:
            return self.clients[node].lookup(namespace, hashes, part, **kwargs)
        except errors.Unavailable:
            other = self._spare(not_this=node)
            if other == node:
                raise
            self._maybe_refresh(stale=True)
            return self.clients[other].lookup(namespace, hashes, part, **kwargs)

    def close(self) -> None:
        """Close every member's client."""
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
        for c in self.clients:
            if c is not None:
                c.close()

    def __enter__(self) -> "ClusterClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
