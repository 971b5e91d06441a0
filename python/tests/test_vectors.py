"""Byte compatibility with the Go codec: the shared vectors of
gateway/native/wire/testdata/vectors.json (written by the Go encoder, read
back by the Go decoder in TestSharedVectors) must be what the Python encoder
writes, and the Python decoder must read them back to the same fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ctxtier
from ctxtier import crc, wire
from fakeserver import FakeServer

VECTORS = Path(__file__).resolve().parents[2] / "gateway" / "native" / "wire" / "testdata" / "vectors.json"
ALL = json.loads(VECTORS.read_text())["vectors"]


def cases(*kinds):
    return [pytest.param(v, id=v["name"]) for v in ALL if v["kind"] in kinds]


def test_the_vectors_cover_every_kind_and_opcode():
    kinds = {v["kind"] for v in ALL}
    assert kinds == {"hello", "hello_reply", "challenge", "auth", "auth_reply", "request", "response"}
    req_ops = {v["request"]["op"] for v in ALL if v["kind"] == "request"}
    resp_ops = {v["response"]["op"] for v in ALL if v["kind"] == "response"}
    assert req_ops == {1, 2, 3, 4, 5, 6, 7, 10, 11}
    assert resp_ops == {1, 2, 3, 4, 6, 7, 10, 11}


def _key_list(keys):
    return [(k["hash"], k["part"]) for k in keys]


def encode_request(r: dict) -> bytes:
    """What the Python client writes for the request (its encoders, as client.py calls them)."""
    op = r["op"]
    count = 0
    if op == wire.OP_PING:
        body = b""
    elif op == wire.OP_ROUTE:
        q = r["route"]
        body = wire.encode_route_query(r["namespace"], q["block_hashes"], q["token_ids"], q["commit"], q["temperature"],
                                       q["priority"], q["max_workers"], q["expected_output_tokens"], q["pin_ttl_ms"],
                                       r.get("retain_ms", 0))
        assert wire.route_frame_flags(r.get("retain_ms", 0)) == r["flags"]
    elif op == wire.OP_PUT:
        body = wire.encode_namespace(r["namespace"])
        for it in r["items"]:
            data = bytes.fromhex(it["data"])
            assert crc.crc32c(data) == it["checksum"]
            body += wire.encode_put_item(it["hash"], len(data), crc.crc32c(data), part=it["part"],
                                         priority=it["priority"], pin_ttl_ms=it["pin_ttl_ms"], parent=it["parent"])
            if r["flags"] & wire.FLAG_PUT_HINTS:
                body += wire.encode_put_hints(it.get("reuse", 0), it.get("retain_ms", 0))
            if r["flags"] & wire.FLAG_PUT_SESSION:
                body += wire.encode_put_session(it.get("session", 0))
            body += data
        count = len(r["items"])
    elif op == wire.OP_END_SESSION:
        body = wire.end_session_body(r["namespace"], r["session"])
    else:
        body = wire.key_body(op, r["namespace"], _key_list(r["keys"]), r["pin_ttl_ms"], r.get("retain_ms", 0))
        count = len(r["keys"])
    return wire.encode_frame(op, r["id"], count, body, flags=r["flags"])


@pytest.mark.parametrize("v", cases("hello"))
def test_hello(v):
    f = v["hello"]
    assert wire.encode_hello(f["version"], f["flags"]).hex() == v["hex"]
    assert wire.decode_hello(bytes.fromhex(v["hex"])) == (f["version"], f["flags"])


@pytest.mark.parametrize("v", cases("hello_reply"))
def test_hello_reply(v):
    f = v["hello_reply"]
    r = wire.decode_hello_reply(bytes.fromhex(v["hex"]))
    assert (r.version, r.code, r.flags) == (f["version"], f["code"], f["flags"])
    lim = r.limits
    assert (lim.max_frame_size, lim.max_block_size, lim.max_batch, lim.max_in_flight, lim.max_response_size) == (
        f["max_frame_size"], f["max_block_size"], f["max_batch"], f["max_in_flight"], f["max_response_size"])
    assert wire.encode_hello_reply(r).hex() == v["hex"]


@pytest.mark.parametrize("v", cases("challenge"))
def test_challenge(v):
    f = v["challenge"]
    c = wire.decode_challenge(bytes.fromhex(v["hex"]))
    assert (c.flags, c.nonce.hex()) == (f["flags"], f["nonce"])
    assert wire.encode_challenge(c).hex() == v["hex"]


@pytest.mark.parametrize("v", cases("auth"))
def test_auth_proof_and_message(v):
    f = v["auth"]
    kid = f["access_key_id"]
    proof = wire.auth_proof(f["secret"], bytes.fromhex(f["nonce"]), kid) if kid else bytes(32)
    assert wire.encode_auth(kid, proof).hex() == v["hex"]


@pytest.mark.parametrize("v", cases("auth_reply"))
def test_auth_reply(v):
    assert wire.decode_auth_reply(bytes.fromhex(v["hex"])) == v["auth_reply_code"]
    assert wire.encode_auth_reply(v["auth_reply_code"]).hex() == v["hex"]


@pytest.mark.parametrize("v", cases("request"))
def test_request_encoding_equals_go(v):
    assert encode_request(v["request"]).hex() == v["hex"]


def _answer(s, h, body, st):
    """Record the raw request and answer it plausibly."""
    st["raw"] = wire.encode_header(h) + body
    if h.op in (wire.OP_LOOKUP, wire.OP_END_SESSION):
        out = b"\0\0\0\0"
    elif h.op == wire.OP_ROUTE:
        out = wire.encode_route_result(wire.RouteResult())
    elif h.op == wire.OP_EXISTS:
        out = (wire.encode_status(0) + b"\0") * h.count
    elif h.op == wire.OP_GET:
        out = wire.encode_status(1, "not found") * h.count
    else:
        out = wire.encode_status(0) * h.count
    s.sendall(wire.encode_frame(h.op, h.id, 0 if h.op in (wire.OP_LOOKUP, wire.OP_ROUTE, wire.OP_END_SESSION) else h.count, out,
                                flags=wire.FLAG_RESPONSE))


def _client_call(c: ctxtier.Client, r: dict):
    op, ns = r["op"], r["namespace"]
    keys = _key_list(r.get("keys") or [])
    lin = bool(r["flags"] & wire.FLAG_LINEARIZABLE)
    retain = r["retain_ms"] / 1000 if r.get("retain_ms") else None
    if op == wire.OP_GET:
        c.get_many(ns, keys, linearizable=lin, retain=retain)
    elif op == wire.OP_EXISTS:
        c.exists_many(ns, keys, linearizable=lin)
    elif op == wire.OP_LOOKUP:
        c.lookup(ns, keys, linearizable=lin, retain=retain)
    elif op == wire.OP_END_SESSION:
        c.end_session(ns, r["session"])
    elif op == wire.OP_DELETE:
        c.delete_many(ns, keys)
    elif op == wire.OP_PIN:
        c.pin(ns, keys, ttl=r["pin_ttl_ms"] / 1000)
    elif op == wire.OP_PING:
        c.ping()
    elif op == wire.OP_ROUTE:
        q = r["route"]
        c.route(ns, q["block_hashes"], q["token_ids"], commit=q["commit"], temperature=q["temperature"],
                priority=q["priority"], max_workers=q["max_workers"],
                expected_output_tokens=q["expected_output_tokens"], pin_ttl=q["pin_ttl_ms"] / 1000, retain=retain)


CLIENT_PATH = [p for p in cases("request")
               if p.values[0]["request"]["op"] != wire.OP_PUT  # per-item options: put_many sets them per call
               and not p.values[0]["request"]["flags"] & wire.FLAG_VERIFY_AT_REST]  # only sent on a retry


@pytest.mark.parametrize("v", CLIENT_PATH)
def test_the_client_writes_the_go_bytes(v):
    # The whole client path (argument handling, chunking, framing) on a socket.
    srv = FakeServer(_answer)
    c = ctxtier.Client(srv.addr)
    c._idle[0]._next_id = v["request"]["id"] - 1  # frame ids are per connection; align with the vector's
    _client_call(c, v["request"])
    assert srv.state["raw"].hex() == v["hex"]
    c.close()
    srv.close()


def test_a_single_put_from_the_client_decodes_as_go_expects():
    # Put with options through the client, compared with the vector encoder's bytes for the same fields.
    srv = FakeServer(_answer)
    c = ctxtier.Client(srv.addr)
    c.put("default", 0x8000000000000001, b"world!", part=3, priority=5, pin_ttl=60, parent=0xFEDCBA9876543210)
    item = next(v for v in ALL if v["name"] == "put two items with options")["request"]
    one = dict(item, id=1, items=item["items"][1:])
    assert srv.state["raw"].hex() == encode_request(one).hex()
    c.close()
    srv.close()


def test_a_hinted_put_from_the_client_decodes_as_go_expects():
    # Each hinted item of the vector, put through the client to a server that
    # echoes the hello flags, is the vector encoder's bytes for that item.
    item = next(v for v in ALL if v["name"] == "put with agent hints")["request"]
    srv = FakeServer(_answer)
    c = ctxtier.Client(srv.addr)
    assert c.hints_accepted
    for i, it in enumerate(item["items"]):
        reuse = {v: k for k, v in wire.REUSE.items()}.get(it.get("reuse", 0))  # 0: None
        retain = it.get("retain_ms", 0) / 1000 or None
        c.put("default", it["hash"], bytes.fromhex(it["data"]), parent=it["parent"], reuse=reuse, retain=retain)
        # An item without hints goes in a frame without the flag.
        flags = item["flags"] if reuse or retain else 0
        one = dict(item, id=i + 1, flags=flags, items=[it])
        assert srv.state["raw"].hex() == encode_request(one).hex(), it
    c.close()
    srv.close()


def _item_fields(it: wire.ItemResult, op: int) -> dict:
    return {
        "code": it.code,
        "message": it.message,
        "present": it.present,
        "checksum": it.sum,
        "size": it.size,
        "tier": it.tier,
        "data": bytes(it.data).hex() if it.data is not None else "",
    }


def _route_fields(r: wire.RouteResult) -> dict:
    def cost(c):
        return None if c is None else dict(c.__dict__)

    return {
        "blocks": r.blocks, "block_tokens": r.block_tokens, "tier_depth": r.tier_depth, "pinned": r.pinned,
        "tier_error": r.tier_error, "pin_error": r.pin_error, "recommended": r.recommended, "cost": cost(r.cost),
        "workers": [{"name": w.name, "stale": w.stale, "device": w.device, "host": w.host, "disk": w.disk,
                     "active_prefill_blocks": w.active_prefill_blocks,
                     "active_decode_blocks": w.active_decode_blocks, "cost": cost(w.cost)} for w in r.workers],
    }


@pytest.mark.parametrize("v", cases("response"))
def test_response_decodes_to_the_go_fields(v):
    raw = bytes.fromhex(v["hex"])
    h = wire.decode_header(raw[:wire.HEADER_SIZE], 1 << 30)
    resp = wire.read_response(wire.BytesReader(raw[wire.HEADER_SIZE:]), h, summing=True)
    want = v["response"]
    got = {"op": h.op, "id": h.id, "code": h.code, "message": resp.message,
           "items": [_item_fields(it, h.op) for it in resp.items] or None, "present": resp.present,
           "route": _route_fields(resp.route) if resp.route else None}
    assert got == want
    for it in resp.items:
        if it.data is not None:
            assert it.data_sum == it.sum


@pytest.mark.parametrize("v", cases("response"))
def test_response_encoding_equals_go(v):
    r = v["response"]
    if r["code"]:
        body, count = wire.encode_error_body(r["message"]), 0
    elif r["op"] in (wire.OP_LOOKUP, wire.OP_END_SESSION):
        body, count = r["present"].to_bytes(4, "little"), 0
    elif r["op"] == wire.OP_ROUTE:
        q = r["route"]
        rr = wire.RouteResult(q["blocks"], q["block_tokens"], q["tier_depth"], q["pinned"], q["tier_error"],
                              q["pin_error"], q["recommended"], wire.Cost(**q["cost"]) if q["cost"] else None,
                              [wire.Worker(w["name"], w["stale"], w["device"], w["host"], w["disk"],
                                           w["active_prefill_blocks"], w["active_decode_blocks"],
                                           wire.Cost(**w["cost"])) for w in q["workers"]])
        body, count = wire.encode_route_result(rr), 0
    else:
        body = b""
        for it in r["items"] or []:
            body += wire.encode_status(it["code"], it["message"])
            if it["code"]:
                continue
            if r["op"] == wire.OP_EXISTS:
                body += bytes([it["present"]])
            elif r["op"] == wire.OP_GET:
                body += wire.encode_get_meta(it["checksum"], it["size"], it["tier"]) + bytes.fromhex(it["data"])
        count = len(r["items"] or [])
    got = wire.encode_frame(r["op"], r["id"], count, body, flags=wire.FLAG_RESPONSE, code=r["code"])
    assert got.hex() == v["hex"]


@pytest.mark.parametrize("v", [p for p in cases("response") if len(p.values[0]["hex"]) > 2 * wire.HEADER_SIZE])
def test_truncated_responses_are_malformed(v):
    raw = bytes.fromhex(v["hex"])
    h = wire.decode_header(raw[:wire.HEADER_SIZE], 1 << 30)
    with pytest.raises(ctxtier.MalformedFrame):
        wire.read_response(wire.BytesReader(raw[wire.HEADER_SIZE:-1]), h)


def test_the_client_reads_the_go_get_response():
    # GET's one-frame path on a socket, fed the Go codec's bytes.
    v = next(v for v in ALL if v["name"] == "get data and a miss")
    raw = bytes.fromhex(v["hex"])

    def handler(s, h, body, st):
        s.sendall(raw[:8] + h.id.to_bytes(8, "little") + raw[16:])  # the vector's frame with this request's id

    srv = FakeServer(handler)
    c = ctxtier.Client(srv.addr, verify=True)
    assert c.get_many("default", [1, 2]) == [b"kv bytes", None]
    buf = bytearray(16)
    assert c.get_into("default", [1, 2], [buf, bytearray(1)]) == [8, None]
    assert bytes(buf[:8]) == b"kv bytes"
    c.close()
    srv.close()


def test_a_put_with_a_session_from_the_client_decodes_as_go_expects():
    # Each item of the session vector, put through the client to a server that
    # echoes the hello flags, is the vector encoder's bytes for that item; an
    # item with neither hints nor a session goes without either flag.
    item = next(v for v in ALL if v["name"] == "put with agent sessions")["request"]
    srv = FakeServer(_answer)
    c = ctxtier.Client(srv.addr)
    assert c.sessions_accepted
    for i, it in enumerate(item["items"]):
        reuse = {v: k for k, v in wire.REUSE.items()}.get(it.get("reuse", 0))
        retain = it.get("retain_ms", 0) / 1000 or None
        session = it.get("session") or None
        c.put("default", it["hash"], bytes.fromhex(it["data"]), parent=it["parent"], reuse=reuse, retain=retain,
              session=session)
        flags = item["flags"] if session else 0
        one = dict(item, id=i + 1, flags=flags, items=[it])
        assert srv.state["raw"].hex() == encode_request(one).hex(), it
    c.close()
    srv.close()
