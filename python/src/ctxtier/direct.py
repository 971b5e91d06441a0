"""Direct reads for a client on the same machine as ctxd: DESCRIBE leases a
block where it lives, the client copies it out of the DRAM tier's memory file
(mapped read-only) itself and checks the copy, then RELEASE ends the lease
(docs/protocol.md, "Direct reads: DESCRIBE and RELEASE").

Checks, as in the Go client (gateway/client/direct.go):

- ``verify="checksum"`` (default): the CRC-32C of the copy, computed chunk by
  chunk while it is in cache, must equal the descriptor's.
- ``verify="version"``: a plain copy, then the block's version word (a
  seqlock the server bumps before the block's pages can be reused) must still
  hold the descriptor's generation. Python cannot issue a load fence, so this
  mode is used only on x86-64, whose total store order keeps the copy's loads
  before the version word's loads and the server's version bump before its
  overwrite of the pages: a version word that still reads the generation
  proves the copy read the block's own bytes. Elsewhere the checksum is used.

A block that is not in DRAM (an NVMe extent), whose file this process cannot
open (not co-located), whose lease ended first, or whose copy fails its check
is read with GET instead (which verifies at rest and drops a corrupt block).
"""

from __future__ import annotations

import mmap
import os
import platform
import struct
import threading
import time
from dataclasses import dataclass
from typing import Iterable, Optional

from . import errors, wire
from .crc import crc32c

DESCRIBE_FLAG_VERSION = 1
CHUNK = 256 << 10
VERSION_READS = platform.machine().lower() in ("x86_64", "amd64")


@dataclass
class DirectStats:
    direct: int = 0  # blocks copied through a descriptor
    fallbacks: int = 0  # blocks read with GET instead
    mismatches: int = 0  # copies that failed their check (then read with GET)


class _Map:
    def __init__(self, path: str, need: int):
        fd = os.open(path, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            if st.st_size < need:
                raise errors.ChecksumMismatch(f"{path} is {st.st_size} bytes, the descriptor needs {need}")
            self.mm = mmap.mmap(fd, st.st_size, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        self.view = memoryview(self.mm)
        self.dev, self.ino = st.st_dev, st.st_ino

    def close(self):
        self.view.release()
        self.mm.close()


class DirectReads:
    """The descriptor path of :class:`ctxtier.Client` (mixed in)."""

    def _direct_init(self) -> None:
        self._maps: dict[str, _Map] = {}
        self._maps_lock = threading.Lock()
        self._no_versions = False
        self.direct_stats = DirectStats()

    def _mapping(self, path: str, need: int) -> _Map:
        with self._maps_lock:
            m = self._maps.get(path)
            if m is None or len(m.mm) < need:
                if m is not None:
                    m.close()
                m = self._maps[path] = _Map(path, need)
            return m

    def _drop_if_replaced(self, path: str) -> None:
        """Unmap path when it names another file now (the server restarted with a new memory file)."""
        try:
            st = os.stat(path)
            key = (st.st_dev, st.st_ino)
        except OSError:
            key = None
        with self._maps_lock:
            m = self._maps.get(path)
            if m is not None and key != (m.dev, m.ino):
                m.close()
                del self._maps[path]

    def _close_direct(self) -> None:
        with self._maps_lock:
            for m in self._maps.values():
                m.close()
            self._maps.clear()

    def _copy(self, lease: dict, dst: memoryview, versioned: bool) -> bool:
        """Copy the leased DRAM block into dst; True when the copy checks out."""
        off, n = lease["offset"], lease["length"]
        vo = lease["version_offset"]
        m = self._mapping(lease["path"], max(off + n, vo + 8 if vo else 0))
        src = m.view
        if versioned:
            dst[:n] = src[off:off + n]
            # Read the version word after the copy (see the module docstring for why this is enough on x86-64).
            return struct.unpack_from("<Q", m.mm, vo)[0] == lease["generation"]
        s = 0
        for a in range(0, n, CHUNK):
            b = min(a + CHUNK, n)
            dst[a:b] = src[off + a:off + b]
            s = crc32c(dst[a:b], s)
        return s == lease["checksum"]

    def read_direct(self, namespace: str, hashes: Iterable, buffers: Iterable, part: Optional[int] = None, *,
                    verify: str = "checksum", timeout: Optional[float] = None) -> list:
        """Read blocks into buffers through descriptors, as :meth:`get_into` does over the socket.

        Returns the sizes, None where a block is absent; blocks that cannot be
        read directly are read with GET (counted in ``direct_stats``).
        """
        from .client import _keys, as_view  # the client module imports this one

        if verify not in ("checksum", "version"):
            raise errors.InvalidArgument(f"verify {verify!r}: want 'checksum' or 'version'")
        keys = _keys(hashes, part)
        views = [as_view(b, writable=True) for b in buffers]
        if len(views) != len(keys):
            raise errors.InvalidArgument(f"{len(views)} buffers for {len(keys)} keys")
        want_versions = verify == "version" and VERSION_READS and not self._no_versions
        out: list = [None] * len(keys)
        retry: list[int] = []
        t = self.timeout if timeout is None else timeout
        c = self._acquire(t)
        try:
            c.settimeout(t)
            chunks = self._chunks(len(keys))

            def frames(flags: int) -> list:
                fs = []
                for lo, hi in chunks:
                    body = wire.key_body(wire.OP_DESCRIBE, namespace, keys[lo:hi])
                    if flags:
                        body += struct.pack("<I", flags)
                    fs.append((wire.OP_DESCRIBE, 0, hi - lo, [body], None))
                return fs

            sent = time.monotonic()
            resps = c.pipeline(frames(DESCRIBE_FLAG_VERSION if want_versions else 0))
            if want_versions and any(r.header.code == 11 for r in resps):
                # A server older than version words refuses the flags word and keeps the connection.
                self._no_versions = want_versions = False
                sent = time.monotonic()
                resps = c.pipeline(frames(0))
            leases = []
            for (lo, hi), r in zip(chunks, resps):
                self._raise_request(r)
                for i, it in zip(range(lo, hi), r.items):
                    if it.code == 1:
                        continue  # NotFound: None
                    if it.code == 9:
                        retry.append(i)  # no descriptor for this block: GET
                        continue
                    if it.code:
                        raise errors.from_code(it.code, it.message)
                    leases.append((i, it.lease))
            try:
                for i, lease in leases:
                    if lease["tier"] != 1 or time.monotonic() >= sent + lease["ttl_ms"] / 1000:
                        retry.append(i)  # NVMe extents (O_DIRECT) and ended leases: GET
                        continue
                    if len(views[i]) < lease["length"]:
                        raise errors.TooLarge(f"block {keys[i][0]:016x}: block is {lease['length']} bytes, "
                                              f"buffer {len(views[i])}")
                    try:
                        ok = self._copy(lease, views[i], want_versions and lease["version_offset"] != 0)
                    except OSError:
                        retry.append(i)  # not co-located (or the file is gone): GET
                        continue
                    except errors.ChecksumMismatch:
                        ok = False
                    if ok and time.monotonic() < sent + lease["ttl_ms"] / 1000:
                        out[i] = lease["length"]
                        self.direct_stats.direct += 1
                    else:
                        if not ok:
                            self.direct_stats.mismatches += 1
                            self._drop_if_replaced(lease["path"])
                        retry.append(i)
            finally:
                ids = [lease["id"] for _, lease in leases]
                for a in range(0, len(ids), max(self.limits.max_batch, 1)):
                    part_ids = ids[a:a + self.limits.max_batch]
                    c.send_nowait(wire.OP_RELEASE, len(part_ids), [struct.pack(f"<{len(part_ids)}Q", *part_ids)])
        finally:
            self._release(c)
        if retry:
            retry.sort()
            self.direct_stats.fallbacks += len(retry)
            sizes = self.get_into(namespace, [keys[i] for i in retry], [views[i] for i in retry], timeout=timeout)
            for i, n in zip(retry, sizes):
                out[i] = n
        return out
