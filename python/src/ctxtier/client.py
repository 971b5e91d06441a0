"""The ctxtier client: a thread-safe pool of native-protocol connections.

>>> import ctxtier
>>> c = ctxtier.Client("127.0.0.1:7400")
>>> c.put("default", 0x1234, b"kv bytes")
>>> bytes(c.get("default", 0x1234))
b'kv bytes'

Hashes are Python ints (unsigned 64-bit); an item of a batch may also be a
``(hash, part)`` pair, part being the tensor-parallel rank. Every call that
fails raises a :class:`ctxtier.errors.CtxtierError` subclass whose ``code`` is
the wire code. Batch calls send as few frames as the server's limits allow and
pipeline them on one connection.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import Iterable, Optional

from . import crc, errors, wire
from .conn import Conn, HelloFlagsRefused, split_addr
from .direct import DirectReads


def as_view(obj, writable: bool = False) -> memoryview:
    """A flat byte view of obj's memory, without copying.

    obj is anything with the buffer protocol (bytes, bytearray, memoryview,
    mmap, numpy arrays) or a CPU torch tensor; it must be C-contiguous.
    """
    mod = type(obj).__module__ or ""
    if mod.startswith("torch") and hasattr(obj, "is_contiguous"):
        torch = sys.modules["torch"]
        if obj.device.type != "cpu":
            raise errors.InvalidArgument(f"a tensor on {obj.device} has no host memory to read or write; "
                                         "copy it to the CPU (pinned) first")
        if not obj.is_contiguous():
            raise errors.InvalidArgument("tensor is not contiguous")
        t = obj.detach().reshape(-1)
        if t.dtype != torch.uint8:
            t = t.view(torch.uint8)  # reinterpret the bytes (works for bfloat16 too)
        obj = t.numpy()
    try:
        mv = memoryview(obj)
    except TypeError as e:
        raise errors.InvalidArgument(f"{type(obj).__name__} does not expose its memory (buffer protocol)") from e
    if not mv.c_contiguous:
        raise errors.InvalidArgument("buffer is not C-contiguous")
    if writable and mv.readonly:
        raise errors.InvalidArgument("buffer is read-only")
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def _keys(hashes, part: Optional[int]) -> list:
    out = []
    for x in hashes:
        if isinstance(x, tuple):
            h, p = x
        else:
            h, p = x, part
        wire.check_hash(h)
        wire.check_part(p)
        out.append((h, p))
    return out


def _ttl_ms(ttl: Optional[float]) -> int:
    if ttl is None:
        return 0
    if ttl < 0:
        raise errors.InvalidArgument(f"negative TTL {ttl}")
    return math.ceil(ttl * 1000)


class Client(DirectReads):
    """A native-protocol client of ctxd, safe to share between threads.

    addr: "HOST:PORT" of ctxd's --listen.
    access_key_id, secret: credentials from ``ctxctl keys create`` for a
        server started with ``--auth required``; the secret never crosses the
        wire (an HMAC of a server nonce proves it).
    timeout: seconds any socket operation of a call may wait (sending,
        receiving, a free pooled connection) before the call fails with
        :class:`~ctxtier.errors.DeadlineExceeded`; each call may override it.
    connect_timeout: bounds dialing plus the handshake.
    pool_size: most connections open at once (one per concurrent call).
    verify: True checks the CRC-32C of every GET block and declares so in the
        handshake (hello flag bit 0), which lets the server's DRAM tier skip
        its own pass; a block that fails is read again with "verify at rest"
        and never returned. False leaves the check to the server's tier.
        None (the default) verifies when a native CRC-32C package is installed
        (:data:`ctxtier.crc.FAST`), else leaves it to the server.
    """

    def __init__(self, addr: str, access_key_id: Optional[str] = None, secret: Optional[str] = None, *,
                 timeout: float = 30.0, connect_timeout: float = 5.0, pool_size: int = 4,
                 verify: Optional[bool] = None):
        if bool(access_key_id) != bool(secret):
            raise errors.InvalidArgument("access_key_id and secret go together")
        if access_key_id and len(access_key_id) > wire.MAX_ACCESS_KEY_ID_LEN:
            raise errors.InvalidArgument("access key id longer than 128 bytes")
        if not 1 <= pool_size <= 1024:
            raise errors.InvalidArgument(f"pool_size {pool_size} out of range 1..1024")
        if timeout is not None and timeout <= 0 or connect_timeout <= 0:
            raise errors.InvalidArgument("timeouts must be positive")
        self.addr = addr
        self._host, self._port = split_addr(addr)
        self._kid = access_key_id or ""
        self._secret = secret or ""
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.pool_size = pool_size
        self.verify = crc.FAST if verify is None else bool(verify)
        self._no_hello_flags = False
        self._no_put_hints = False
        self._no_sessions = False
        self._hints = False  # the last connection dialed: the server echoed HELLO_PUT_HINTS
        self._sessions = False  # ... and HELLO_AGENT_SESSIONS
        self._cv = threading.Condition()
        self._idle: list[Conn] = []
        self._open = 0
        self._closed = False
        self._direct_init()
        # Dial one connection now: a dead server or bad credentials fail here,
        # and the limits are known from the start.
        c = self._dial()
        self.limits: wire.Limits = c.limits
        self._open = 1
        self._idle.append(c)

    # ------------------------------------------------------------ pool

    def _hello_flags(self) -> int:
        if self._no_hello_flags:
            return 0
        flags = wire.HELLO_VERIFIES_GETS if self.verify else 0
        if not self._no_put_hints:
            flags |= wire.HELLO_PUT_HINTS | (0 if self._no_sessions else wire.HELLO_AGENT_SESSIONS)
        return flags

    def _dial(self) -> Conn:
        kw = dict(timeout=self.connect_timeout, access_key_id=self._kid, secret=self._secret)
        flags = self._hello_flags()
        while True:
            try:
                c = Conn.dial(self._host, self._port, flags=flags, **kw)
                self._hints = c.hints
                self._sessions = c.sessions
                return c
            except HelloFlagsRefused:
                if not flags:
                    raise
                # A server older than a hello flag: first go without put
                # hints (its puts are stored unhinted), then without any
                # (it verifies at rest itself).
                if flags & wire.HELLO_AGENT_SESSIONS and flags != wire.HELLO_AGENT_SESSIONS:
                    self._no_sessions = True  # older than agent sessions: put hints may still go
                elif flags & wire.HELLO_PUT_HINTS and flags != wire.HELLO_PUT_HINTS:
                    self._no_put_hints = True
                else:
                    self._no_hello_flags = True
                flags = self._hello_flags()

    @property
    def hints_accepted(self) -> bool:
        """Whether the server reads the agent hints of puts (it echoed hello flag bit 1)."""
        return self._hints

    @property
    def sessions_accepted(self) -> bool:
        """Whether the server reads agent sessions (hello flag bit 2): session ids on puts, read retain
        windows on gets and lookups, :meth:`end_session`."""
        return self._sessions

    def _acquire(self, timeout: Optional[float]) -> Conn:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                if self._closed:
                    raise errors.Closed("client is closed")
                if self._idle:
                    return self._idle.pop()
                if self._open < self.pool_size:
                    self._open += 1
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise errors.DeadlineExceeded(f"no free connection within {timeout}s (pool_size {self.pool_size})")
                self._cv.wait(left)
        try:
            return self._dial()
        except BaseException:
            with self._cv:
                self._open -= 1
                self._cv.notify()
            raise

    def _release(self, c: Conn) -> None:
        with self._cv:
            if c.broken or self._closed:
                self._open -= 1
                c.close()
            else:
                self._idle.append(c)
            self._cv.notify()

    def close(self) -> None:
        """Close every idle connection; connections in use close when their call ends."""
        with self._cv:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._cv.notify_all()
        for c in idle:
            c.close()
        self._close_direct()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, build, timeout, summing: bool = False) -> list:
        """Run the frames build(conn) returns on one pooled connection; return their responses."""
        t = self.timeout if timeout is None else timeout
        c = self._acquire(t)
        try:
            c.settimeout(t)
            return c.pipeline(build(c), summing)
        finally:
            self._release(c)

    def _chunks(self, n: int, size=None) -> list:
        """Cut n items into frames that respect max_batch and max_frame_size."""
        out = []
        max_batch = max(self.limits.max_batch, 1)
        room = self.limits.max_frame_size - wire.HEADER_SIZE - 1 - wire.MAX_NAMESPACE_LEN - 8
        lo, used = 0, 0
        for i in range(n):
            sz = wire.KEY_SIZE if size is None else size(i)
            if i > lo and (i - lo >= max_batch or used + sz > room):
                out.append((lo, i))
                lo, used = i, 0
            used += sz
        if n > lo:
            out.append((lo, n))
        return out

    @staticmethod
    def _raise_request(resp: wire.Response) -> None:
        if resp.header.code:
            raise errors.from_code(resp.header.code, resp.message)

    # ------------------------------------------------------------ ops

    def ping(self, timeout: Optional[float] = None) -> None:
        """Round-trip an empty frame."""
        (r,) = self._call(lambda c: [(wire.OP_PING, 0, 0, [], None)], timeout)
        self._raise_request(r)

    def put(self, namespace: str, hash: int, data, part: Optional[int] = None, *, priority: Optional[int] = None,
            pin_ttl: Optional[float] = None, parent: Optional[int] = None, reuse: Optional[str] = None,
            retain: Optional[float] = None, session: Optional[int] = None,
            timeout: Optional[float] = None) -> None:
        """Store one block (idempotent: the same bytes again succeed, different bytes are Conflict).

        data is any buffer (bytes, bytearray, memoryview, numpy array, CPU
        torch tensor); it is sent from its own memory. pin_ttl pins it for
        that many seconds; priority is the eviction class 0..7; parent the
        previous block's hash in the chain.

        reuse and retain are agent hints for the server's eviction: reuse is
        "never" (reasoning tokens, output: evicted first), "session" (the
        session comes back) or "shared" (a prefix shared across sessions);
        retain is the window in seconds within which the harness expects to
        read the block again (a soft pin, restarted by each read). Invalid
        values raise InvalidArgument; a server older than hints stores the
        block without them (:attr:`hints_accepted`). session is the agent
        session id (1..2**64-1) whose end (:meth:`end_session`) releases the
        block; a server older than agent sessions stores it without
        (:attr:`sessions_accepted`).
        """
        (err,) = self.put_many(namespace, [(hash, data)], part=part, priority=priority, pin_ttl=pin_ttl,
                               parent=parent, reuse=reuse, retain=retain, session=session, timeout=timeout)
        if err is not None:
            raise err

    def put_many(self, namespace: str, items: Iterable, *, part: Optional[int] = None,
                 priority: Optional[int] = None, pin_ttl: Optional[float] = None, parent: Optional[int] = None,
                 reuse: Optional[str] = None, retain: Optional[float] = None, session: Optional[int] = None,
                 timeout: Optional[float] = None) -> list:
        """Store blocks; items are (hash, data) or (hash, data, part).

        priority, pin_ttl, parent and the agent hints reuse, retain and
        session (see :meth:`put`) apply to every item.

        Returns one entry per item: None when stored, else its exception. A
        request-level failure (unknown namespace, a broken connection) raises.
        Blocks over the server's max_block_size fail locally with TooLarge
        and are not sent.
        """
        ns = wire.encode_namespace(namespace)
        if priority is not None and not 0 <= priority <= 7:
            raise errors.InvalidArgument(f"priority {priority} out of range 0..7")
        ttl = _ttl_ms(pin_ttl)
        hint = wire.put_hints(reuse, retain)
        sid = 0 if session is None else wire.check_session(session)
        if parent is not None:
            wire.check_hash(parent)
        prepared = []
        for it in items:
            h, data = it[0], it[1]
            p = it[2] if len(it) > 2 else part
            wire.check_hash(h)
            wire.check_part(p)
            prepared.append((h, p, as_view(data)))
        res: list = [None] * len(prepared)
        send = []
        for i, (h, p, v) in enumerate(prepared):
            if len(v) > self.limits.max_block_size:
                res[i] = errors.TooLarge(f"block {h:016x}: {len(v)} bytes exceeds the server's maximum block "
                                         f"size {self.limits.max_block_size}")
            elif len(v) == 0:
                res[i] = errors.InvalidArgument(f"block {h:016x}: empty block")
            else:
                send.append(i)
        if not send:
            return res
        hinted = hint != (0, 0) or sid != 0
        item_head = wire.PUT_ITEM_SIZE + (wire.PUT_SESSION_HINTS_SIZE if sid else wire.PUT_HINTS_SIZE if hinted else 0)
        chunks = self._chunks(len(send), lambda j: item_head + len(prepared[send[j]][2]))
        record = wire.encode_put_hints(*hint)
        session_record = record + wire.encode_put_session(sid)

        def build(c: Conn) -> list:
            # The hint records go only to a server that echoed the hello flag,
            # the session ids only to one that echoed agent sessions.
            with_hints = hinted and c.hints
            with_session = with_hints and c.sessions and sid != 0
            flags = (wire.FLAG_PUT_HINTS if with_hints else 0) | (wire.FLAG_PUT_SESSION if with_session else 0)
            frames = []
            for lo, hi in chunks:
                segs = [ns]
                for j in range(lo, hi):
                    h, p, v = prepared[send[j]]
                    segs.append(wire.encode_put_item(h, len(v), crc.crc32c(v), part=p, priority=priority,
                                                     pin_ttl_ms=ttl, parent=parent))
                    if with_hints:
                        segs.append(session_record if with_session else record)
                    segs.append(v)
                frames.append((wire.OP_PUT, flags, hi - lo, segs, None))
            return frames

        resps = self._call(build, timeout)
        for (lo, hi), r in zip(chunks, resps):
            self._raise_request(r)
            for j, it in zip(range(lo, hi), r.items):
                if it.code:
                    res[send[j]] = errors.from_code(it.code, it.message)
        return res

    def _key_frames(self, op: int, ns: str, keys: list, flags: int = 0, ttl_ms: int = 0, dests=None,
                    retain_ms: int = 0):
        chunks = self._chunks(len(keys))
        frames = []
        if retain_ms:
            flags |= wire.FLAG_READ_HINTS
        for lo, hi in chunks:
            body = wire.key_body(op, ns, keys[lo:hi], ttl_ms, retain_ms)
            dest = dests(lo) if dests else None
            frames.append((op, flags, hi - lo, [body], dest))
        return chunks, frames

    def _get(self, namespace: str, keys: list, bufs, linearizable: bool, timeout, retain_ms: int = 0) -> list:
        """GET keys (into bufs[i] when given); returns per-item results: the ItemResult, or an exception.

        With verify, a block whose bytes do not match the CRC-32C recorded at
        put is read once more with FLAG_VERIFY_AT_REST (the server's tier then
        drops a block corrupt at rest); a second mismatch is ChecksumMismatch.
        Bytes that failed are never returned.
        """
        wire.encode_namespace(namespace)  # checks the name (cached)
        flags = wire.FLAG_LINEARIZABLE if linearizable else 0

        def run(idx: list, at_rest: bool) -> list:
            sub = [keys[i] for i in idx]
            if len(sub) <= self.limits.max_batch:
                # One frame (the common case): the lean path, no pipeline bookkeeping.
                views = [bufs[i] for i in idx] if bufs is not None else None
                t = self.timeout if timeout is None else timeout
                c = self._acquire(t)
                try:
                    if not c.orphans:
                        c.settimeout(t)
                        rms = retain_ms if c.sessions else 0
                        body = wire.key_body(wire.OP_GET, namespace, sub, retain_ms=rms)
                        f = flags | (wire.FLAG_VERIFY_AT_REST if at_rest and c.declared else 0)
                        f |= wire.FLAG_READ_HINTS if rms else 0
                        return c.get_frame(body, len(sub), f, views, self.verify)
                finally:
                    self._release(c)

            def dests(lo):
                if bufs is None:
                    return None
                return lambda j, size: bufs[idx[lo + j]]

            def build(c):
                f = flags | (wire.FLAG_VERIFY_AT_REST if at_rest and c.declared else 0)
                chunks, frames = self._key_frames(wire.OP_GET, namespace, sub, f, dests=dests,
                                                  retain_ms=retain_ms if c.sessions else 0)
                build.chunks = chunks
                return frames

            resps = self._call(build, timeout, summing=self.verify)
            out = []
            for (lo, hi), r in zip(build.chunks, resps):
                self._raise_request(r)
                out.extend(r.items)
            return out

        items = run(list(range(len(keys))), False)
        res: list = []
        bad = []
        for i, it in enumerate(items):
            res.append(self._item(keys[i], it, bufs[i] if bufs is not None else None))
            if self.verify and it.code == 0 and not it.skipped and it.data_sum != it.sum:
                bad.append(i)
        if bad:
            again = run(bad, True)
            for i, it in zip(bad, again):
                res[i] = self._item(keys[i], it, bufs[i] if bufs is not None else None)
        return res

    def _item(self, key, it: wire.ItemResult, buf):
        h = key[0]
        if it.code:
            return errors.from_code(it.code, it.message)
        if it.skipped:
            return errors.TooLarge(f"block {h:016x}: block is {it.size} bytes, buffer {len(buf)}")
        if self.verify and it.data_sum != it.sum:
            return errors.ChecksumMismatch(f"block {h:016x}: received bytes are {it.data_sum:08x}, "
                                           f"server says {it.sum:08x}")
        return it

    def get(self, namespace: str, hash: int, part: Optional[int] = None, *, linearizable: bool = False,
            retain: Optional[float] = None, timeout: Optional[float] = None) -> bytearray:
        """Fetch one block into a new bytearray (NotFound if absent).

        retain (seconds) is a read's agent hint: the caller comes back for the
        block within that window (a tool call runs), so the server re-arms its
        retain window. A server older than agent sessions is read without it.
        """
        (r,) = self._get(namespace, _keys([hash], part), None, linearizable, timeout, wire.retain_ms(retain))
        if isinstance(r, Exception):
            raise r
        return r.data.obj

    def get_many(self, namespace: str, hashes: Iterable, part: Optional[int] = None, *,
                 linearizable: bool = False, retain: Optional[float] = None,
                 timeout: Optional[float] = None) -> list:
        """Fetch blocks into new bytearrays; None where a block is absent.

        Any other per-item error (a checksum that fails twice, a permission)
        raises the first one after the whole batch was read. retain: see :meth:`get`.
        """
        rs = self._get(namespace, _keys(hashes, part), None, linearizable, timeout, wire.retain_ms(retain))
        out = []
        for r in rs:
            if isinstance(r, errors.NotFound):
                out.append(None)
            elif isinstance(r, Exception):
                raise r
            else:
                out.append(r.data.obj)
        return out

    def get_into(self, namespace: str, hashes: Iterable, buffers: Iterable, part: Optional[int] = None, *,
                 linearizable: bool = False, retain: Optional[float] = None,
                 timeout: Optional[float] = None) -> list:
        """Receive block i straight into buffers[i] (recv_into: no intermediate copy).

        buffers are writable, C-contiguous buffers: bytearray, memoryview,
        numpy arrays, CPU torch tensors. Returns the block sizes, None where a
        block is absent. A block larger than its buffer raises TooLarge (its
        bytes are read past; the connection stays usable). Where an item
        failed its buffer may hold any bytes.
        """
        keys = _keys(hashes, part)
        views = [as_view(b, writable=True) for b in buffers]
        if len(views) != len(keys):
            raise errors.InvalidArgument(f"{len(views)} buffers for {len(keys)} keys")
        rs = self._get(namespace, keys, views, linearizable, timeout, wire.retain_ms(retain))
        out = []
        for r in rs:
            if isinstance(r, errors.NotFound):
                out.append(None)
            elif isinstance(r, Exception):
                raise r
            else:
                out.append(r.size)
        return out

    def _simple(self, op: int, namespace: str, keys: list, timeout, flags: int = 0, ttl_ms: int = 0) -> list:
        wire.check_namespace(namespace)
        _, frames = self._key_frames(op, namespace, keys, flags, ttl_ms)
        resps = self._call(lambda c: frames, timeout)
        out = []
        for r in resps:
            self._raise_request(r)
            out.extend(r.items)
        return out

    def exists(self, namespace: str, hash: int, part: Optional[int] = None, *, linearizable: bool = False,
               timeout: Optional[float] = None) -> bool:
        """Whether a block is present."""
        return self.exists_many(namespace, [hash], part, linearizable=linearizable, timeout=timeout)[0]

    def exists_many(self, namespace: str, hashes: Iterable, part: Optional[int] = None, *,
                    linearizable: bool = False, timeout: Optional[float] = None) -> list:
        """Presence of each block (per-item errors raise)."""
        flags = wire.FLAG_LINEARIZABLE if linearizable else 0
        out = []
        for it in self._simple(wire.OP_EXISTS, namespace, _keys(hashes, part), timeout, flags):
            if it.code:
                raise errors.from_code(it.code, it.message)
            out.append(it.present)
        return out

    def delete(self, namespace: str, hash: int, part: Optional[int] = None, *,
               timeout: Optional[float] = None) -> None:
        """Evict a block (NotFound if absent)."""
        (err,) = self.delete_many(namespace, [hash], part, timeout=timeout)
        if err is not None:
            raise err

    def delete_many(self, namespace: str, hashes: Iterable, part: Optional[int] = None, *,
                    timeout: Optional[float] = None) -> list:
        """Evict blocks; one entry per item, None or its exception."""
        return [errors.from_code(it.code, it.message) if it.code else None
                for it in self._simple(wire.OP_DELETE, namespace, _keys(hashes, part), timeout)]

    def pin(self, namespace: str, hashes, ttl: float, part: Optional[int] = None, *,
            timeout: Optional[float] = None):
        """Protect blocks from eviction for ttl seconds (millisecond resolution, capped by the server).

        hashes is one hash (errors raise) or an iterable (returns one entry
        per item, None or its exception).
        """
        ms = _ttl_ms(ttl)
        if ms < 1:
            raise errors.InvalidArgument("pin TTL must be positive")
        single = isinstance(hashes, int)
        items = self._simple(wire.OP_PIN, namespace, _keys([hashes] if single else hashes, part), timeout,
                             ttl_ms=ms)
        res = [errors.from_code(it.code, it.message) if it.code else None for it in items]
        if single:
            if res[0] is not None:
                raise res[0]
            return None
        return res

    def lookup(self, namespace: str, hashes: Iterable, part: Optional[int] = None, *, linearizable: bool = False,
               retain: Optional[float] = None, timeout: Optional[float] = None) -> int:
        """How many leading blocks are present, stopping at the first miss: the prefix to fetch.

        Keys past the server's max_batch are looked up in further frames only
        while every key so far was present. retain: see :meth:`get` (the
        present prefix is re-armed).
        """
        wire.check_namespace(namespace)
        keys = _keys(hashes, part)
        flags = wire.FLAG_LINEARIZABLE if linearizable else 0
        rms = wire.retain_ms(retain)
        total = 0
        for lo, hi in self._chunks(len(keys)):
            def build(c, lo=lo, hi=hi):
                r_ms = rms if c.sessions else 0
                body = wire.key_body(wire.OP_LOOKUP, namespace, keys[lo:hi], retain_ms=r_ms)
                return [(wire.OP_LOOKUP, flags | (wire.FLAG_READ_HINTS if r_ms else 0), hi - lo, [body], None)]
            (r,) = self._call(build, timeout)
            self._raise_request(r)
            if r.present > hi - lo:
                raise errors.MalformedFrame(f"lookup answered {r.present} present of {hi - lo} keys")
            total += r.present
            if r.present < hi - lo:
                break
        return total

    def end_session(self, namespace: str, session: int, *, timeout: Optional[float] = None) -> int:
        """End agent session `session` (the id its puts carried): its blocks lose their retain windows and
        are evicted first, except those hinted "shared". Returns how many blocks the server released.

        A server older than agent sessions (:attr:`sessions_accepted` false) raises NotImplementedError.
        """
        body = wire.end_session_body(namespace, session)

        def build(c):
            if not c.sessions:
                raise NotImplementedError("the server does not read agent sessions")
            return [(wire.OP_END_SESSION, 0, 0, [body], None)]

        (r,) = self._call(build, timeout)
        self._raise_request(r)
        return r.present

    def route(self, namespace: str = "default", block_hashes: Optional[Iterable[int]] = None,
              token_ids: Optional[Iterable[int]] = None, *, commit: bool = False,
              temperature: Optional[float] = None, priority: int = 0, max_workers: int = 0,
              expected_output_tokens: int = 0, pin_ttl: Optional[float] = None,
              retain: Optional[float] = None, timeout: Optional[float] = None) -> wire.RouteResult:
        """Ask ctxd's KV-aware router which worker should take a request (the ROUTE opcode).

        Give block_hashes (the namespace's chained hashes, prefix order) or
        token_ids (the server hashes whole blocks with the namespace's scheme).
        retain (seconds) is the read hint, as on :meth:`get`: the harness
        will send this context again within it, so the prefix the tier holds
        (the result's tier_depth) has its retain window re-armed. Like the
        reads' hint it is checked here (a positive number of seconds up to
        about 49.7 days, else InvalidArgument) and sent only to a server
        that accepted agent sessions (:attr:`sessions_accepted`).
        """
        if not 0 <= priority <= 7:
            raise errors.InvalidArgument(f"priority {priority} out of range 0..7")
        if max_workers < 0 or expected_output_tokens < 0:
            raise errors.InvalidArgument("negative max_workers or expected_output_tokens")
        if temperature is not None and not (temperature >= 0 and math.isfinite(temperature)):
            raise errors.InvalidArgument(f"temperature {temperature}")
        hs = [wire.check_hash(h) for h in block_hashes] if block_hashes is not None else None
        toks = list(token_ids) if token_ids is not None else None
        if toks is not None and any(not 0 <= t <= 0xFFFFFFFF for t in toks):
            raise errors.InvalidArgument("token ids are unsigned 32-bit integers")
        ms = _ttl_ms(pin_ttl)
        rms = wire.retain_ms(retain)

        def build(c):
            r_ms = rms if c.sessions else 0  # an older server: the query goes without its read hint
            body = wire.encode_route_query(namespace, hs, toks, commit, temperature, priority, max_workers,
                                           expected_output_tokens, ms, r_ms)
            if len(body) + wire.HEADER_SIZE > self.limits.max_frame_size:
                raise errors.TooLarge(f"a route query of {len(body) + wire.HEADER_SIZE} bytes exceeds the server's "
                                      f"maximum frame size {self.limits.max_frame_size}")
            return [(wire.OP_ROUTE, wire.route_frame_flags(r_ms), 0, [body], None)]

        (r,) = self._call(build, timeout)
        self._raise_request(r)
        return r.route
