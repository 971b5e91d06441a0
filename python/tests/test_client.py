"""The client against a real ctxd process: round trips, batches, lookup, parts, concurrency."""

from __future__ import annotations

import os
import random
import threading

import numpy as np
import pytest

import ctxtier
from ctxtier import errors


def rh() -> int:
    return random.getrandbits(64)


@pytest.fixture
def client(ctxd):
    c = ctxtier.Client(ctxd.addr, pool_size=4, timeout=20)
    yield c
    c.close()


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "numpy-u8", "numpy-f16-2d"])
def test_put_get_round_trip(client, kind):
    raw = os.urandom(64 << 10)
    data = {
        "bytes": raw,
        "bytearray": bytearray(raw),
        "memoryview": memoryview(raw),
        "numpy-u8": np.frombuffer(raw, dtype=np.uint8),
        "numpy-f16-2d": np.frombuffer(raw, dtype=np.float16).reshape(64, -1),
    }[kind]
    h = rh()
    client.put("default", h, data)
    got = client.get("default", h)
    assert isinstance(got, bytearray)
    assert got == raw
    assert client.exists("default", h)


def test_put_is_idempotent_and_conflict_keeps_the_block(client):
    h = rh()
    client.put("default", h, b"first")
    client.put("default", h, b"first")  # same bytes: fine
    with pytest.raises(errors.Conflict) as ei:
        client.put("default", h, b"second")
    assert ei.value.code == 2
    assert client.get("default", h) == b"first"


def test_batches_span_frames_and_keep_order(client):
    # More items than max_batch (1024): several pipelined frames on one connection.
    n = client.limits.max_batch + 300
    hs = [rh() for _ in range(n)]
    blobs = [os.urandom(random.randint(1, 300)) for _ in range(n)]
    assert client.put_many("default", list(zip(hs, blobs))) == [None] * n
    got = client.get_many("default", hs)
    assert got == blobs
    missing = rh()
    assert client.exists_many("default", hs[:5] + [missing]) == [True] * 5 + [False]
    assert client.get_many("default", [hs[0], missing, hs[1]]) == [blobs[0], None, blobs[1]]


def test_lookup_counts_the_leading_present_run(client):
    hs = [rh() for _ in range(6)]
    client.put_many("default", [(h, b"x%d" % i) for i, h in enumerate(hs[:3] + hs[4:])])
    assert client.lookup("default", hs) == 3  # hs[3] missing stops the run
    assert client.lookup("default", hs[:3]) == 3
    assert client.lookup("default", [rh()] + hs) == 0
    assert client.lookup("default", []) == 0


def test_lookup_past_max_batch(client):
    n = client.limits.max_batch * 2 + 5
    hs = [rh() for _ in range(n)]
    client.put_many("default", [(h, b"b") for h in hs])
    assert client.lookup("default", hs) == n
    assert client.lookup("default", hs[:1500] + [rh()] + hs[1500:]) == 1500


def test_get_into_numpy_and_bytearray_buffers(client):
    a, b = os.urandom(1 << 20), os.urandom(1000)
    ha, hb, hm = rh(), rh(), rh()
    client.put_many("default", [(ha, a), (hb, b)])
    bufa = np.zeros(1 << 20, dtype=np.uint8)
    bufb = bytearray(4096)
    bufm = bytearray(10)
    assert client.get_into("default", [ha, hb, hm], [bufa, bufb, bufm]) == [1 << 20, 1000, None]
    assert bufa.tobytes() == a
    assert bytes(bufb[:1000]) == b and bufb[1000:] == bytearray(3096)


def test_get_into_a_too_small_buffer_is_too_large_and_the_connection_stays(ctxd):
    c = ctxtier.Client(ctxd.addr, pool_size=1)
    h = rh()
    c.put("default", h, os.urandom(5000))
    with pytest.raises(errors.TooLarge):
        c.get_into("default", [h], [bytearray(100)])
    # The same (only) connection goes on.
    assert len(c.get("default", h)) == 5000
    assert c._open == 1
    c.close()


def test_get_into_rejects_read_only_and_mismatched_buffers(client):
    with pytest.raises(errors.InvalidArgument):
        client.get_into("default", [rh()], [b"read-only"])
    with pytest.raises(errors.InvalidArgument):
        client.get_into("default", [rh(), rh()], [bytearray(1)])


def test_parts_are_distinct_blocks(client):
    h = rh()
    client.put("default", h, b"rank0", part=0)
    client.put("default", h, b"rank1", part=1)
    assert client.get("default", h, part=0) == b"rank0"
    assert client.get("default", h, part=1) == b"rank1"
    assert not client.exists("default", h)  # no part is another key
    assert client.get_many("default", [(h, 1), (h, 0)]) == [b"rank1", b"rank0"]


def test_delete_and_pin(client):
    h, missing = rh(), rh()
    client.put("default", h, b"to delete")
    res = client.pin("default", [h, missing], ttl=5)
    assert res[0] is None and isinstance(res[1], errors.NotFound)
    client.delete("default", h)
    assert not client.exists("default", h)
    with pytest.raises(errors.NotFound):
        client.delete("default", h)
    with pytest.raises(errors.NotFound):
        client.get("default", h)
    with pytest.raises(errors.NotFound):
        client.pin("default", missing, ttl=1)


def test_unknown_namespace_is_a_request_level_error(client):
    with pytest.raises(errors.UnknownNamespace):
        client.put("no-such-namespace", rh(), b"x")
    with pytest.raises(errors.UnknownNamespace):
        client.lookup("no-such-namespace", [rh()])


def test_route_answers_the_query(client):
    hs = [rh() for _ in range(4)]
    client.put_many("default", [(h, b"r") for h in hs[:2]])
    r = client.route("default", hs)
    assert r.blocks == 4
    assert r.tier_depth == 2
    assert r.block_tokens > 0
    r = client.route("default", token_ids=list(range(r.block_tokens * 2 + 3)))
    assert r.blocks == 2  # whole blocks only


def test_verify_is_declared_only_when_the_client_checks(ctxd):
    on = ctxtier.Client(ctxd.addr, verify=True)
    off = ctxtier.Client(ctxd.addr, verify=False)
    assert on._idle[0].declared  # ctxd echoed hello flag bit 0
    assert not off._idle[0].declared
    h = rh()
    on.put("default", h, b"both read it")
    assert off.get("default", h) == on.get("default", h) == b"both read it"
    on.close()
    off.close()


def test_concurrent_callers_share_the_pool(ctxd):
    c = ctxtier.Client(ctxd.addr, pool_size=3)
    failures = []

    def worker(seed):
        r = random.Random(seed)
        for _ in range(20):
            h = r.getrandbits(64)
            d = r.randbytes(r.randint(1, 200_000))
            c.put("default", h, d)
            if c.get("default", h) != d:
                failures.append(h)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert failures == []
    assert c._open <= 3
    c.close()


def test_bad_arguments_are_refused_before_sending(client):
    for bad in (-1, 1 << 64, "12", 1.5):
        with pytest.raises(errors.InvalidArgument):
            client.put("default", bad, b"x")
    with pytest.raises(errors.InvalidArgument):
        client.put("default", rh(), b"")
    with pytest.raises(errors.InvalidArgument):
        client.put("default", rh(), b"x", part=70000)
    with pytest.raises(errors.InvalidArgument):
        client.get("x" * 300, rh())
    with pytest.raises(errors.InvalidArgument):
        client.put("default", rh(), object())
