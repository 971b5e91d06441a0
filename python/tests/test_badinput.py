"""Bad input and failures: a dead server, a connection cut mid-frame, wrong
credentials, a too-large block, corrupt GET bytes, a malformed response.
Each must give a clear exception quickly, never hang, and store nothing half-written."""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time

import pytest

import ctxtier
from ctxtier import crc, errors, wire
from fakeserver import FakeServer, get_keys
from conftest import free_port


def rh() -> int:
    return random.getrandbits(64)


def test_dead_server_is_unavailable_at_once():
    addr = f"127.0.0.1:{free_port()}"  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(errors.Unavailable) as ei:
        ctxtier.Client(addr)
    assert time.monotonic() - t0 < 2
    assert "refused" in str(ei.value).lower()
    assert ei.value.code == 9
    assert isinstance(ei.value, ConnectionError)


def test_a_server_that_never_answers_times_out():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)  # accepts (the kernel does) but never speaks
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceeded):
        ctxtier.Client("127.0.0.1:%d" % ls.getsockname()[1], connect_timeout=0.5)
    assert time.monotonic() - t0 < 3
    ls.close()


def test_a_call_with_no_answer_times_out():
    srv = FakeServer(lambda s, h, body, st: None)  # reads requests, never answers
    c = ctxtier.Client(srv.addr, timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceeded) as ei:
        c.get("default", 1)
    assert isinstance(ei.value, TimeoutError)
    assert time.monotonic() - t0 < 3
    assert c._open == 0  # the timed-out connection was dropped, not reused
    c.close()
    srv.close()


def _half_get_response(s, h, body, st):
    data = os.urandom(100_000)
    item = wire.encode_status(0) + wire.encode_get_meta(crc.crc32c(data), len(data), 1) + data
    frame = wire.encode_frame(wire.OP_GET, h.id, 1, item, flags=wire.FLAG_RESPONSE)
    s.sendall(frame[:len(frame) // 2])
    return False  # close the connection mid-frame


def test_connection_closed_mid_frame_is_unavailable_and_the_client_recovers():
    srv = FakeServer(_half_get_response)
    c = ctxtier.Client(srv.addr, timeout=5, pool_size=1)
    buf = bytearray(100_000)
    for _ in range(2):  # a fresh connection is dialed for the second call
        t0 = time.monotonic()
        with pytest.raises(errors.Unavailable) as ei:
            c.get_into("default", [7], [buf])
        assert time.monotonic() - t0 < 3
        assert "closed" in str(ei.value)
    assert len(srv.state["hellos"]) == 2
    c.close()
    srv.close()


def test_a_put_frame_cut_in_the_middle_stores_nothing(ctxd):
    h = rh()
    data = os.urandom(200_000)
    s = socket.create_connection(("127.0.0.1", ctxd.port))
    s.sendall(wire.encode_hello(2, 0))
    assert wire.decode_hello_reply(s.recv(wire.HELLO_REPLY_SIZE, socket.MSG_WAITALL)).code == 0
    s.recv(wire.CHALLENGE_SIZE, socket.MSG_WAITALL)
    s.sendall(wire.encode_auth())
    assert wire.decode_auth_reply(s.recv(wire.AUTH_REPLY_SIZE, socket.MSG_WAITALL)) == 0
    body = wire.encode_namespace("default") + wire.encode_put_item(h, len(data), crc.crc32c(data)) + data
    frame = wire.encode_frame(wire.OP_PUT, 1, 1, body)
    s.sendall(frame[: len(frame) - 1000])
    s.close()
    c = ctxtier.Client(ctxd.addr)
    time.sleep(0.2)
    assert not c.exists("default", h)
    c.put("default", h, data)  # the key is free: nothing half-written blocks it
    assert c.get("default", h) == data
    c.close()


def test_wrong_credentials_are_unauthenticated(start_ctxd):
    p = start_ctxd("--auth", "required")
    kid, secret = p.create_key("default")
    other_kid, other_secret = p.create_key("other-*")
    time.sleep(1.2)  # ctxd picks up new keys within a second
    with pytest.raises(errors.Unauthenticated) as ei:
        ctxtier.Client(p.addr)  # anonymous
    assert "credentials" in str(ei.value)
    with pytest.raises(errors.Unauthenticated):
        ctxtier.Client(p.addr, kid, other_secret)  # wrong secret
    with pytest.raises(errors.Unauthenticated):
        ctxtier.Client(p.addr, "AKNOSUCHKEY", secret)
    ok = ctxtier.Client(p.addr, kid, secret)
    h = rh()
    ok.put("default", h, b"authenticated")
    assert ok.get("default", h) == b"authenticated"
    other = ctxtier.Client(p.addr, other_kid, other_secret)
    with pytest.raises(errors.PermissionDenied):
        other.get("default", h)
    with pytest.raises(errors.PermissionDenied):
        other.lookup("default", [h])
    assert isinstance(other.put_many("default", [(rh(), b"x")])[0], errors.PermissionDenied)
    ok.close()
    other.close()


def test_a_too_large_block_is_refused_and_nothing_is_stored(start_ctxd):
    p = start_ctxd("--max-block-size", "1MiB")
    c = ctxtier.Client(p.addr)
    assert c.limits.max_block_size == 1 << 20
    big = os.urandom((1 << 20) + 1)
    h1, h2, h3 = rh(), rh(), rh()
    # Refused by the client before sending.
    with pytest.raises(errors.TooLarge):
        c.put("default", h1, big)
    # Refused by the server (the client's own check bypassed): per item, the other item is stored.
    c.limits.max_block_size = 2 << 20
    res = c.put_many("default", [(h2, big), (h3, b"small")])
    assert isinstance(res[0], errors.TooLarge) and res[0].code == 5
    assert res[1] is None
    assert c.exists_many("default", [h1, h2, h3]) == [False, False, True]
    c.close()


class _Corrupting:
    """GET handler: serves one block, corrupting it on the first n reads."""

    def __init__(self, data: bytes, bad_reads: int):
        self.data = data
        self.bad_reads = bad_reads
        self.reads = 0

    def __call__(self, s, h, body, st):
        out = bytearray()
        for _ in get_keys(body, h.count):
            d = bytearray(self.data)
            if self.reads < self.bad_reads:
                d[len(d) // 2] ^= 0x40
            self.reads += 1
            out += wire.encode_status(0) + wire.encode_get_meta(crc.crc32c(self.data), len(d), 1) + d
        s.sendall(wire.encode_frame(h.op, h.id, h.count, bytes(out), flags=wire.FLAG_RESPONSE))


def test_corrupt_get_bytes_are_read_again_verified_at_rest():
    data = os.urandom(300_000)
    srv = FakeServer(_Corrupting(data, bad_reads=1))
    c = ctxtier.Client(srv.addr, verify=True)
    buf = bytearray(len(data))
    assert c.get_into("default", [5], [buf]) == [len(data)]
    assert buf == data
    flags = [r.flags for r in srv.state["requests"]]
    assert flags == [0, wire.FLAG_VERIFY_AT_REST]  # the retry asked the tier to verify
    assert srv.state["hellos"] == [wire.HELLO_VERIFIES_GETS | wire.HELLO_PUT_HINTS | wire.HELLO_AGENT_SESSIONS]
    c.close()
    srv.close()


def test_corrupt_twice_is_a_checksum_mismatch_and_never_returned():
    data = os.urandom(10_000)
    srv = FakeServer(_Corrupting(data, bad_reads=2))
    c = ctxtier.Client(srv.addr, verify=True)
    with pytest.raises(errors.ChecksumMismatch) as ei:
        c.get("default", 5)
    assert ei.value.code == 3
    c.close()
    srv.close()


def test_pure_python_crc_also_catches_corruption(monkeypatch):
    # verify=True works without the C package too (slowly); force the fallback.
    from ctxtier import conn as conn_mod, wire as wire_mod
    monkeypatch.setattr(conn_mod, "crc32c", crc.crc32c_py)
    monkeypatch.setattr(wire_mod, "crc32c", crc.crc32c_py)
    data = os.urandom(5000)
    srv = FakeServer(_Corrupting(data, bad_reads=2))
    c = ctxtier.Client(srv.addr, verify=True)
    with pytest.raises(errors.ChecksumMismatch):
        c.get("default", 5)
    c.close()
    srv.close()


def test_without_verify_the_flag_is_not_declared():
    data = os.urandom(1000)
    srv = FakeServer(_Corrupting(data, bad_reads=0))
    c = ctxtier.Client(srv.addr, verify=False)
    assert c.get("default", 1) == data
    assert srv.state["hellos"] == [wire.HELLO_PUT_HINTS | wire.HELLO_AGENT_SESSIONS]  # asks for hints, declares nothing
    c.close()
    srv.close()


def test_an_old_server_refusing_hello_flags_gets_a_connection_without_them():
    def refuse_flags(s, v, flags):
        if flags:
            s.sendall(wire.encode_hello_reply(wire.HelloReply(v, 11, wire.Limits(), 0)))
            return False
        return True

    data = os.urandom(1000)
    srv = FakeServer(_Corrupting(data, bad_reads=0), hello=refuse_flags)
    c = ctxtier.Client(srv.addr, verify=True)
    assert c.get("default", 1) == data
    # Without the session flag first, then without put hints, then without any.
    vg, ph = wire.HELLO_VERIFIES_GETS, wire.HELLO_PUT_HINTS
    assert srv.state["hellos"] == [vg | ph | wire.HELLO_AGENT_SESSIONS, vg | ph, vg, 0]
    assert not c._idle[0].declared
    assert not c.hints_accepted
    c.close()
    srv.close()


@pytest.mark.parametrize("call", ["delete_many", "get_many"])  # the pipelined path and GET's one-frame path
@pytest.mark.parametrize("mutate", ["unknown-id", "wrong-op", "bad-flags", "no-response-flag", "trailing-bytes",
                                    "too-many-items", "block-past-the-end", "message-on-ok"])
def test_malformed_responses_break_the_connection(mutate, call):
    def handler(s, h, body, st):
        if h.op == wire.OP_GET:
            items = (wire.encode_status(0) + wire.encode_get_meta(crc.crc32c(b"abc"), 3, 1) + b"abc") * h.count
        else:
            items = wire.encode_status(0) * h.count
        op, fid, count, flags = h.op, h.id, h.count, wire.FLAG_RESPONSE
        if mutate == "unknown-id":
            fid += 1000
        elif mutate == "wrong-op":
            op = wire.OP_EXISTS
        elif mutate == "bad-flags":
            flags |= 0x80
        elif mutate == "trailing-bytes":
            items += b"\0\0"
        elif mutate == "too-many-items":
            count += 1
            items += wire.encode_status(1, "x")
        elif mutate == "no-response-flag":
            flags = 0
        elif mutate == "block-past-the-end":
            items = items[:-1]
        elif mutate == "message-on-ok":
            items = struct.pack("<HH", 0, 1) + b"!" + items[4:]
        s.sendall(struct.pack("<IBBHQII", len(items), op, flags, 0, fid, count, 0) + items)

    srv = FakeServer(handler)
    c = ctxtier.Client(srv.addr, timeout=3)
    with pytest.raises(errors.MalformedFrame):
        getattr(c, call)("default", [1, 2])
    assert c._open == 0
    c.close()
    srv.close()


def test_request_level_error_message_reaches_the_caller():
    def handler(s, h, body, st):
        s.sendall(wire.encode_frame(h.op, h.id, 0, wire.encode_error_body("namespace gone"),
                                    flags=wire.FLAG_RESPONSE, code=4))

    srv = FakeServer(handler)
    c = ctxtier.Client(srv.addr)
    with pytest.raises(errors.UnknownNamespace, match="namespace gone"):
        c.get("default", 1)
    # A request-level error keeps the connection.
    assert c._open == 1 and len(c._idle) == 1
    c.close()
    srv.close()


def test_every_wire_code_has_its_own_class():
    assert sorted(errors.BY_CODE) == list(range(1, 21))
    assert len(set(errors.BY_CODE.values())) == 20
    for code, cls in errors.BY_CODE.items():
        e = errors.from_code(code, "m")
        assert type(e) is cls and e.code == code and issubclass(cls, errors.CtxtierError)
    unknown = errors.from_code(99, "future")
    assert isinstance(unknown, errors.Internal) and unknown.code == 99


def test_closed_client_refuses_calls(ctxd):
    c = ctxtier.Client(ctxd.addr)
    c.close()
    with pytest.raises(errors.Closed):
        c.get("default", 1)


def test_pool_wait_times_out_when_every_connection_is_busy():
    gate = threading.Event()

    def slow(s, h, body, st):
        gate.wait(5)
        s.sendall(wire.encode_frame(h.op, h.id, 0, b"", flags=wire.FLAG_RESPONSE))

    srv = FakeServer(slow)
    c = ctxtier.Client(srv.addr, pool_size=1, timeout=10)
    t = threading.Thread(target=c.ping)
    t.start()
    time.sleep(0.2)
    with pytest.raises(errors.DeadlineExceeded, match="no free connection"):
        c.ping(timeout=0.3)
    gate.set()
    t.join()
    c.close()
    srv.close()
