"""The connection's GET fast path: kernel socket timeouts, and a receive buffer
that holds only a response's fixed fields (the block goes straight to the
caller), checked against responses of every shape and pace a server may send."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest

import ctxtier
from ctxtier import conn as conn_mod
from ctxtier import crc, errors, wire
from fakeserver import LIMITS, FakeServer, get_keys, recv_exact


def _block(h: int, size: int) -> bytes:
    return (h.to_bytes(8, "little") * (size // 8 + 1))[:size]


def _dribble(s: socket.socket, b: bytes, step: int) -> None:
    """Send b in pieces of step bytes, each its own segment (TCP_NODELAY, a pause between)."""
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for i in range(0, len(b), step):
        s.sendall(b[i:i + step])
        time.sleep(0.001)


def _get_handler(sizes: dict, step: int = 0, short_error: bool = False):
    """Answers GETs: block h of sizes[h] bytes, NotFound (no message) for an unknown h.

    step > 0 sends the response in pieces of step bytes; short_error answers
    the whole request with a 28-byte request-level error instead.
    """

    def handler(s, h, body, st):
        if short_error:
            frame = wire.encode_frame(h.op, h.id, 0, wire.encode_error_body(""), flags=wire.FLAG_RESPONSE, code=7)
        else:
            out = b""
            for k in get_keys(body, h.count):
                if k in sizes:
                    d = _block(k, sizes[k])
                    out += wire.encode_status(0) + wire.encode_get_meta(crc.crc32c(d), len(d), 1) + d
                else:
                    out += wire.encode_status(1)  # NotFound, no message: 4 bytes
            frame = wire.encode_frame(h.op, h.id, h.count, out, flags=wire.FLAG_RESPONSE)
        if step:
            _dribble(s, frame, step)
        else:
            s.sendall(frame)

    return handler


# name, blocks the server has, keys asked, pace of the response (0: all at once)
CASES = [
    ("one block", {1: 100_000}, [1], 0),
    ("one block, a byte at a time at first", {1: 300}, [1], 1),
    ("header split mid-field", {1: 1000}, [1], 7),
    ("missing last item: a 4-byte status ends the frame", {1: 1000}, [1, 2], 0),
    ("missing last item, dribbled", {1: 1000}, [1, 2], 3),
    ("missing first item", {2: 1000}, [1, 2], 0),
    ("empty block between two", {1: 64, 2: 0, 3: 1500}, [1, 2, 3], 5),
    ("nothing found", {}, [1, 2, 3], 0),
]


@pytest.mark.parametrize("name,sizes,keys,step", CASES, ids=[c[0] for c in CASES])
def test_get_responses_of_every_shape_and_pace(name, sizes, keys, step):
    srv = FakeServer(_get_handler(sizes, step))
    c = ctxtier.Client(srv.addr, timeout=10, verify=True)
    try:
        bufs = [bytearray(sizes.get(k, 16)) for k in keys]
        got = c.get_into("default", keys, bufs)
        assert got == [sizes.get(k) for k in keys]
        for k, b in zip(keys, bufs):
            if k in sizes:
                assert bytes(b) == _block(k, sizes[k])
        # The same connection answers the next call: nothing of this response was left unread.
        assert c.get_many("default", keys) == [_block(k, sizes[k]) if k in sizes else None for k in keys]
        assert c._open == 1
    finally:
        c.close()
        srv.close()


def test_a_short_request_level_error_does_not_wait_for_more_bytes():
    # 28 bytes in all, fewer than the header and first item's fields the GET path reads at most.
    srv = FakeServer(_get_handler({}, short_error=True))
    c = ctxtier.Client(srv.addr, timeout=10)
    t0 = time.monotonic()
    with pytest.raises(errors.InvalidArgument):
        c.get("default", 1)
    assert time.monotonic() - t0 < 5  # answered, not timed out
    assert c._open == 1  # a request-level error keeps the connection
    c.close()
    srv.close()


def test_the_block_goes_straight_to_the_callers_buffer():
    # Only the header and the item's fixed fields pass through the connection's
    # own buffer; the block's bytes never do.
    size = 1 << 20
    srv = FakeServer(_get_handler({1: size}))
    c = ctxtier.Client(srv.addr, timeout=10)
    try:
        cn = c._idle[0]
        buf = bytearray(size)
        for _ in range(3):
            cn._buf[:] = bytes(len(cn._buf))
            assert c.get_into("default", [1], [buf]) == [size]
            assert bytes(buf) == _block(1, size)
            assert cn._hi <= wire.HEADER_SIZE + wire.STATUS_SIZE + wire.GET_META_SIZE
            assert not any(cn._buf[wire.HEADER_SIZE + wire.STATUS_SIZE + wire.GET_META_SIZE:])
    finally:
        c.close()
        srv.close()


@pytest.mark.parametrize("t,want", [
    (None, (0, 0)),
    (30.0, (30, 0)),
    (0.25, (0, 250_000)),
    (1.5, (1, 500_000)),
    (1e-9, (0, 1)),  # a positive bound never becomes "no bound"
])
def test_timeval(t, want):
    assert struct.unpack("@ll", conn_mod._timeval(t)) == want


@pytest.mark.skipif(not conn_mod._KERNEL_TIMEOUTS, reason="kernel socket timeouts are used on Linux only")
def test_calls_use_kernel_timeouts_on_a_blocking_socket():
    srv = FakeServer(_get_handler({1: 10}))
    c = ctxtier.Client(srv.addr, timeout=7)
    try:
        c.get("default", 1)
        s = c._idle[0].sock
        assert s.gettimeout() is None  # blocking: recv is called at once, not after a poll
        for opt in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
            assert struct.unpack("@ll", s.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("@ll"))) == (7, 0)
        c.get("default", 1, timeout=2.5)
        assert struct.unpack("@ll", s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                                                 struct.calcsize("@ll"))) == (2, 500_000)
    finally:
        c.close()
        srv.close()


def test_a_per_call_timeout_shorter_than_the_clients_fires():
    silent = {"on": False}

    def handler(s, h, body, st):
        if silent["on"]:
            return None  # reads the request, never answers
        _get_handler({1: 10})(s, h, body, st)

    srv = FakeServer(handler)
    c = ctxtier.Client(srv.addr, timeout=60)
    try:
        assert c.get("default", 1) == _block(1, 10)  # the connection's bound is now 60 s
        silent["on"] = True
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceeded) as ei:
            c.get("default", 1, timeout=0.3)
        assert isinstance(ei.value, TimeoutError)
        assert time.monotonic() - t0 < 5
        assert c._open == 0  # the timed-out connection was dropped
    finally:
        c.close()
        srv.close()


def test_a_kernel_timeout_while_sending_is_deadline_exceeded():
    # The server completes the handshake and then never reads: the request's
    # bytes fill both socket buffers and the send itself must give up, as
    # DeadlineExceeded, not hang.
    done = threading.Event()

    def hello(s, v, flags):
        s.sendall(wire.encode_hello_reply(wire.HelloReply(v, 0, LIMITS, flags)))
        s.sendall(wire.encode_challenge(wire.Challenge(0, bytes(32))))
        n = recv_exact(s, 2)[0]
        recv_exact(s, n + 32)
        s.sendall(wire.encode_auth_reply(0))
        done.wait(30)
        return False

    srv = FakeServer(None, hello=hello)
    c = ctxtier.Client(srv.addr, timeout=0.5)
    try:
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceeded):
            c.put("default", 1, bytes(48 << 20))
        assert time.monotonic() - t0 < 10
        assert c._open == 0
    finally:
        done.set()
        c.close()
        srv.close()
