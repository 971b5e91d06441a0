"""The descriptor path: DESCRIBE, copy out of the DRAM memory file, check, RELEASE."""

from __future__ import annotations

import os
import random
import struct

import pytest

import ctxtier
from ctxtier import crc, direct, errors, wire
from fakeserver import FakeServer, get_keys


def rh() -> int:
    return random.getrandbits(64)


@pytest.mark.parametrize("verify", ["checksum", "version"])
def test_direct_reads_copy_the_blocks_from_ctxd_memory(ctxd, verify):
    c = ctxtier.Client(ctxd.addr)
    hs = [rh() for _ in range(5)]
    blobs = [os.urandom(random.randint(1, 1 << 20)) for _ in hs]
    c.put_many("default", list(zip(hs, blobs)))
    bufs = [bytearray(1 << 20) for _ in range(6)]
    sizes = c.read_direct("default", hs + [rh()], bufs, verify=verify)
    assert sizes == [len(b) for b in blobs] + [None]
    for buf, b in zip(bufs, blobs):
        assert bytes(buf[:len(b)]) == b
    assert c.direct_stats.direct == 5 and c.direct_stats.fallbacks == 0 and c.direct_stats.mismatches == 0
    c.close()


def test_direct_reads_release_their_leases(ctxd):
    # ctxd grants a connection at most 4096 leases (then DESCRIBE answers
    # Unavailable and the client falls back to GET): more reads than that on
    # one connection stay direct only if every lease was released.
    c = ctxtier.Client(ctxd.addr, pool_size=1)
    h = rh()
    c.put("default", h, b"leased block")
    buf = bytearray(64)
    for _ in range(4200):
        assert c.read_direct("default", [h], [buf]) == [12]
    assert c.direct_stats.direct == 4200 and c.direct_stats.fallbacks == 0
    assert c._open == 1
    c.close()


def test_a_too_small_buffer_is_too_large(ctxd):
    c = ctxtier.Client(ctxd.addr)
    h = rh()
    c.put("default", h, os.urandom(1000))
    with pytest.raises(errors.TooLarge):
        c.read_direct("default", [h], [bytearray(10)])
    assert c.get("default", h) is not None  # the connection goes on (its RELEASE was sent)
    c.close()


class _DescribingServer:
    """DESCRIBE answers a lease on a file the test wrote; GET answers the true bytes."""

    def __init__(self, path: str, data: bytes, lease_sum: int, tier: int = 1):
        self.path, self.data, self.lease_sum, self.tier = path, data, lease_sum, tier
        self.released: list = []

    def __call__(self, s, h, body, st):
        if h.op == wire.OP_DESCRIBE:
            out = b""
            for _ in get_keys(body, h.count):
                p = self.path.encode()
                out += wire.encode_status(0) + struct.pack("<QIIQQQQQBBH", 99, 30000, self.lease_sum, 0, len(self.data),
                                                            0, len(self.data), 0, self.tier, 0, len(p)) + p
        elif h.op == wire.OP_RELEASE:
            self.released += list(struct.unpack(f"<{h.count}Q", body))
            out = wire.encode_status(0) * h.count
        else:
            out = b"".join(wire.encode_status(0) + wire.encode_get_meta(crc.crc32c(self.data), len(self.data), 1)
                           + self.data for _ in range(h.count))
        s.sendall(wire.encode_frame(h.op, h.id, h.count, out, flags=wire.FLAG_RESPONSE))


@pytest.mark.parametrize("case", ["wrong-bytes", "not-colocated", "nvme"])
def test_direct_reads_that_cannot_be_trusted_are_read_with_get(tmp_path, case):
    data = os.urandom(5000)
    f = tmp_path / "memfile"
    f.write_bytes(bytes(len(data)) if case == "wrong-bytes" else data)
    path = str(f) if case != "not-colocated" else str(tmp_path / "no-such-file")
    handler = _DescribingServer(path, data, crc.crc32c(data), tier=2 if case == "nvme" else 1)
    srv = FakeServer(handler)
    c = ctxtier.Client(srv.addr)
    buf = bytearray(len(data))
    assert c.read_direct("default", [5], [buf]) == [len(data)]
    assert buf == data
    assert c.direct_stats.fallbacks == 1 and c.direct_stats.direct == 0
    assert c.direct_stats.mismatches == (1 if case == "wrong-bytes" else 0)
    ops = [r.op for r in srv.state["requests"]]
    assert ops == [wire.OP_DESCRIBE, wire.OP_RELEASE, wire.OP_GET]
    assert handler.released == [99]
    c.close()
    srv.close()


@pytest.mark.skipif(not direct.VERSION_READS, reason="version words are read only on x86-64")
@pytest.mark.parametrize("word,direct_reads", [(7, 1), (8, 0)])
def test_version_mode_trusts_the_copy_only_while_the_word_holds(tmp_path, word, direct_reads):
    data = os.urandom(4096)
    f = tmp_path / "memfile"
    f.write_bytes(data + struct.pack("<Q", word))  # the version word right after the payload
    p = str(f).encode()
    seen = []

    def handler(s, h, body, st):
        if h.op == wire.OP_DESCRIBE:
            seen.append(len(body) - (1 + body[0]) - 12 * h.count)  # bytes after the keys: the flags word
            out = wire.encode_status(0) + struct.pack("<QIIQQQQQBBH", 1, 30000, 0, 0, len(data), 0, len(data), 7, 1, 1,
                                                      len(p)) + struct.pack("<Q", len(data)) + p
        elif h.op == wire.OP_RELEASE:
            out = wire.encode_status(0) * h.count
        else:
            out = wire.encode_status(0) + wire.encode_get_meta(crc.crc32c(data), len(data), 1) + data
        s.sendall(wire.encode_frame(h.op, h.id, h.count, out, flags=wire.FLAG_RESPONSE))

    srv = FakeServer(handler)
    c = ctxtier.Client(srv.addr)
    buf = bytearray(len(data))
    assert c.read_direct("default", [1], [buf], verify="version") == [len(data)]
    assert buf == data
    assert seen == [4]  # the client asked for version words
    assert c.direct_stats.direct == direct_reads  # generation 7: the copy stands; 8: pages reused, read with GET
    assert c.direct_stats.mismatches == 1 - direct_reads
    c.close()
    srv.close()
