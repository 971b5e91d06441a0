"""Agent hints on puts (reuse, retain) against real ctxd processes."""

from __future__ import annotations

import random

import pytest

import ctxtier
from ctxtier import crc, errors, wire
from fakeserver import FakeServer, LIMITS


def rh() -> int:
    return random.getrandbits(64)


@pytest.mark.parametrize("kw", [
    dict(reuse="never"),
    dict(reuse="session", retain=30),
    dict(reuse="shared", retain=600),
    dict(retain=1.5),
    dict(reuse="session"),
])
def test_hinted_puts_are_stored(ctxd, kw):
    c = ctxtier.Client(ctxd.addr)
    assert c.hints_accepted  # ctxd echoed hello flag bit 1
    h = rh()
    c.put("default", h, b"hinted block", **kw)
    assert c.get("default", h) == b"hinted block"
    errs = c.put_many("default", [(rh(), b"a"), (rh(), b"b")], **kw)
    assert errs == [None, None]
    c.close()


@pytest.mark.parametrize("kw", [
    dict(reuse="always"),
    dict(reuse="Session"),
    dict(reuse=""),
    dict(retain=-1),
    dict(retain="30"),
    dict(retain=True),
    dict(retain=float("nan")),
    dict(retain=50 * 86400),
    dict(reuse="never", retain=10),
])
def test_invalid_hints_are_invalid_argument_and_store_nothing(ctxd, kw):
    c = ctxtier.Client(ctxd.addr)
    h = rh()
    with pytest.raises(errors.InvalidArgument):
        c.put("default", h, b"x", **kw)
    assert c.exists("default", h) is False
    c.close()


def test_the_server_rejects_a_bad_hint_record(ctxd):
    # Bypass the client's checks: a raw frame with an undefined reuse value
    # fails that item alone with InvalidArgument; the other item is stored.
    c = ctxtier.Client(ctxd.addr)
    conn = c._acquire(10)
    try:
        good, bad = rh(), rh()
        segs = [wire.encode_namespace("default")]
        for h, reuse in ((good, wire.REUSE["shared"]), (bad, 9)):
            segs += [wire.encode_put_item(h, 1, crc.crc32c(b"z")), wire.encode_put_hints(reuse, 0), b"z"]
        (resp,) = conn.pipeline([(wire.OP_PUT, wire.FLAG_PUT_HINTS, 2, segs, None)], False)
        assert resp.header.code == 0
        assert [it.code for it in resp.items] == [0, 7]  # OK, InvalidArgument
    finally:
        c._release(conn)
    assert c.exists("default", good) is True
    assert c.exists("default", bad) is False
    c.close()


def test_a_server_without_hints_gets_plain_puts():
    # A server that knows hello flag bit 0 but not bit 1 refuses the hello;
    # the client dials again with bit 0 alone and sends no hint records.
    def hello(s, v, flags):
        if flags & ~wire.HELLO_VERIFIES_GETS:
            s.sendall(wire.encode_hello_reply(wire.HelloReply(v, 11, LIMITS, 0)))
            return False
        return None

    def answer(s, h, body, st):  # records each frame's opcode and flags
        st.setdefault("ops", []).append((h.op, h.flags))
        s.sendall(wire.encode_frame(h.op, h.id, h.count, wire.encode_status(0) * h.count, flags=wire.FLAG_RESPONSE))

    srv = FakeServer(answer, hello=hello)
    c = ctxtier.Client(srv.addr, verify=True)
    try:
        assert not c.hints_accepted
        vg, ph = wire.HELLO_VERIFIES_GETS, wire.HELLO_PUT_HINTS
        assert srv.state["hellos"][:3] == [vg | ph | wire.HELLO_AGENT_SESSIONS, vg | ph, vg]
        assert c._idle[0].declared
        c.put("default", 7, b"x", reuse="session", retain=30)
        assert srv.state["ops"] == [(wire.OP_PUT, 0)]
    finally:
        c.close()
        srv.close()


@pytest.mark.parametrize("retain,ms", [(None, 0), (0, 0), (1.5, 1500), (0.57, 570), (1e-7, 1), (0.0015, 2), (30, 30000)])
def test_retain_rounds_up_to_a_millisecond(retain, ms):
    assert wire.put_hints("session", retain) == (wire.REUSE["session"], ms)
