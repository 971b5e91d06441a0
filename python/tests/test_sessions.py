"""Agent sessions (read retain windows, put session ids, END_SESSION) against real ctxd processes."""

from __future__ import annotations

import random

import pytest

import ctxtier
from ctxtier import errors, wire
from fakeserver import FakeServer, LIMITS

MIB = 1 << 20


def rh() -> int:
    return random.getrandbits(64)


def blk(i: int) -> bytes:
    return bytes((i * 31 + j * 7) & 0xFF for j in range(256)) * (MIB // 256)


def test_read_retain_keeps_a_block_through_a_flood(start_ctxd):
    # 16 MiB of DRAM, no NVMe: two equally old 1 MiB blocks are read once,
    # one with a 10-minute retain window; 40 blocks put and read once each
    # then evict the other one, not the re-armed one.
    p = start_ctxd("--dram-capacity", "16MiB", "--nvme-dir", "off")
    c = ctxtier.Client(p.addr)
    try:
        assert c.sessions_accepted
        kept, twin = rh(), rh()
        c.put("default", kept, blk(0))
        c.put("default", twin, blk(1))
        assert c.get("default", kept, retain=600) == blk(0)
        assert c.get_many("default", [twin]) == [blk(1)]
        for i in range(40):
            h = rh()
            c.put("default", h, blk(2 + i))
            assert c.get("default", h) == blk(2 + i)
        assert c.get_many("default", [kept, twin]) == [blk(0), None]
    finally:
        c.close()


def test_a_session_end_releases_its_own_blocks_first(start_ctxd):
    p = start_ctxd("--dram-capacity", "16MiB", "--nvme-dir", "off")
    c = ctxtier.Client(p.addr)
    try:
        for i in range(16):  # a full tier of unhinted blocks
            c.put("default", rh(), blk(i))
        s7, s8, shared = [rh(), rh()], [rh(), rh()], rh()
        for h in s7:
            c.put("default", h, blk(50), reuse="session", retain=600, session=7)
        for h in s8:
            c.put("default", h, blk(51), reuse="session", retain=600, session=8)
        c.put("default", shared, blk(52), reuse="shared", retain=600, session=7)
        assert c.end_session("default", 7) == 2  # its own blocks, not the shared one
        assert c.end_session("default", 7) == 0
        for i in range(14):
            c.put("default", rh(), blk(60 + i))
        # (get, not lookup: an evicted block leaves the cluster's index a moment later)
        assert c.get_many("default", s7) == [None, None]
        assert c.get_many("default", s8 + [shared], retain=60) == [blk(51), blk(51), blk(52)]
        assert c.lookup("default", s8 + [shared], retain=60) == 3
    finally:
        c.close()


@pytest.mark.parametrize("call", [
    lambda c: c.get("default", 1, retain=0),
    lambda c: c.get_many("default", [1], retain=-1),
    lambda c: c.lookup("default", [1], retain="30"),
    lambda c: c.get_into("default", [1], [bytearray(4)], retain=float("nan")),
    lambda c: c.get("default", 1, retain=50 * 86400),
    lambda c: c.route("default", [1], retain=0),
    lambda c: c.route("default", [1], retain=-5),
    lambda c: c.route("default", [1], retain="30s"),
    lambda c: c.route("default", [1], retain=float("nan")),
    lambda c: c.route("default", [1], retain=50 * 86400),
    lambda c: c.put("default", 1, b"x", session=0),
    lambda c: c.put("default", 1, b"x", session=1 << 64),
    lambda c: c.put("default", 1, b"x", session=True),
    lambda c: c.end_session("default", 0),
])
def test_bad_values_are_invalid_argument(ctxd, call):
    c = ctxtier.Client(ctxd.addr)
    try:
        with pytest.raises(errors.InvalidArgument):
            call(c)
        assert c.exists("default", 1) is False
    finally:
        c.close()


@pytest.mark.parametrize("retain,kept", [(600, True), (None, False)])
def test_a_route_read_hint_keeps_the_prefix_through_a_flood(start_ctxd, retain, kept):
    # 16 MiB of DRAM, no NVMe (the Go TestCtxdRouteRetain's setup): 4 prefix
    # blocks put interleaved with 4 unhinted peers of the same age; a route
    # query over the prefix with a 10-minute read hint (retain=600) finds it
    # held and re-arms it, so 20 MiB of puts after it evict the peers and not
    # the prefix. The same query without the hint (the control) leaves the
    # prefix to be evicted with its peers.
    p = start_ctxd("--dram-capacity", "16MiB", "--nvme-dir", "off")
    c = ctxtier.Client(p.addr)
    try:
        assert c.sessions_accepted
        prefix, peers = [rh() for _ in range(4)], [rh() for _ in range(4)]
        for i in range(4):
            c.put("default", prefix[i], blk(i))
            c.put("default", peers[i], blk(10 + i))
        r = c.route("default", prefix, retain=retain)
        assert r.tier_depth == 4
        for i in range(20):
            c.put("default", rh(), blk(20 + i))
        got = c.get_many("default", prefix + peers)
        assert got[:4] == ([blk(i) for i in range(4)] if kept else [None] * 4)
        assert got[4:] == [None] * 4
    finally:
        c.close()


def test_the_server_rejects_a_zero_read_window(ctxd):
    # Bypass the client's checks: a GET whose read hint record says 0 ms is
    # InvalidArgument for the request, and the connection stays usable.
    c = ctxtier.Client(ctxd.addr)
    h = rh()
    c.put("default", h, b"y")
    conn = c._acquire(10)
    try:
        body = wire.encode_namespace("default") + wire.encode_read_hints(0) + wire.encode_key(h, None)
        (resp,) = conn.pipeline([(wire.OP_GET, wire.FLAG_READ_HINTS, 1, [body], None)], False)
        assert resp.header.code == 7  # InvalidArgument
    finally:
        c._release(conn)
    assert c.get("default", h, retain=1) == b"y"
    assert c.end_session("default", 12345) == 0
    c.close()


def test_a_server_without_sessions_gets_no_session_records():
    # A server that knows hello bits 0 and 1 but not 2 refuses the hello; the
    # client dials again without bit 2 only, sends put hints without session
    # ids, reads without the retain record, and end_session is unsupported.
    known = wire.HELLO_VERIFIES_GETS | wire.HELLO_PUT_HINTS

    def hello(s, v, flags):
        if flags & ~known:
            s.sendall(wire.encode_hello_reply(wire.HelloReply(v, 11, LIMITS, 0)))
            return False
        return None

    def answer(s, h, body, st):  # records each frame's opcode, flags and body size
        st.setdefault("ops", []).append((h.op, h.flags, len(body)))
        if h.op == wire.OP_LOOKUP:
            s.sendall(wire.encode_frame(h.op, h.id, 0, b"\x00\x00\x00\x00", flags=wire.FLAG_RESPONSE))
            return
        if h.op == wire.OP_ROUTE:
            s.sendall(wire.encode_frame(h.op, h.id, 0, wire.encode_route_result(wire.RouteResult()), flags=wire.FLAG_RESPONSE))
            return
        s.sendall(wire.encode_frame(h.op, h.id, h.count, wire.encode_status(1) * h.count, flags=wire.FLAG_RESPONSE))

    srv = FakeServer(answer, hello=hello)
    c = ctxtier.Client(srv.addr, verify=True)
    try:
        assert c.hints_accepted and not c.sessions_accepted
        assert srv.state["hellos"][:2] == [known | wire.HELLO_AGENT_SESSIONS, known]
        c.put_many("default", [(7, b"x")], reuse="session", retain=30, session=9)
        assert c.get_many("default", [7], retain=30) == [None]
        assert c.lookup("default", [7], retain=30) == 0
        assert c.route("default", [7], retain=30).tier_depth == 0
        ns = len(wire.encode_namespace("default"))
        assert srv.state["ops"] == [
            (wire.OP_PUT, wire.FLAG_PUT_HINTS, ns + wire.PUT_ITEM_SIZE + wire.PUT_HINTS_SIZE + 1),
            (wire.OP_GET, 0, ns + wire.KEY_SIZE),
            (wire.OP_LOOKUP, 0, ns + wire.KEY_SIZE),
            (wire.OP_ROUTE, 0, len(wire.encode_route_query("default", [7]))),
        ]
        with pytest.raises(NotImplementedError):
            c.end_session("default", 9)
    finally:
        c.close()
        srv.close()


@pytest.mark.parametrize("retain,ms", [(1.5, 1500), (1e-7, 1), (0.0015, 2), (600, 600000)])
def test_read_retain_rounds_up_to_a_millisecond(retain, ms):
    assert wire.retain_ms(retain) == ms
    assert wire.encode_read_hints(ms) == ms.to_bytes(4, "little") + bytes(4)
