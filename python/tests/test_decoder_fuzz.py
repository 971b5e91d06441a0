"""Mutation fuzzing of the Python decoders, seeded from the shared vectors.

Invariants: a decoder given any bytes either returns a value consistent with
the bytes it read (every GET item holds exactly `size` bytes, a LOOKUP count,
a route result whose worker count matches) or raises MalformedFrame/TooLarge;
never another exception (IndexError, struct.error, UnicodeDecodeError...),
never a read past the frame.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from ctxtier import errors, wire

VECTORS = Path(__file__).resolve().parents[2] / "gateway" / "native" / "wire" / "testdata" / "vectors.json"
ALL = json.loads(VECTORS.read_text())["vectors"]
ITERATIONS = int(os.environ.get("CTXTIER_FUZZ_ITERATIONS", "4000"))


def mutate(r: random.Random, b: bytes) -> bytes:
    b = bytearray(b)
    for _ in range(r.randint(1, 4)):
        k = r.randrange(4)
        if k == 0 and b:  # flip a byte
            b[r.randrange(len(b))] = r.randrange(256)
        elif k == 1 and b:  # truncate
            del b[r.randrange(len(b)):]
        elif k == 2:  # insert random bytes
            i = r.randrange(len(b) + 1)
            b[i:i] = os.urandom(r.randint(1, 8))
        elif k == 3 and len(b) > 4:  # small integer in a length-looking place
            i = r.randrange(len(b) - 1)
            b[i] = r.choice([0, 1, 0xFF, 0x7F, 0x80])
    return bytes(b)


def decode_frame(raw: bytes):
    h = wire.decode_header(raw[:wire.HEADER_SIZE], 1 << 20)
    rd = wire.BytesReader(raw[wire.HEADER_SIZE:])
    before = rd.remaining
    resp = wire.read_response(rd, h, summing=True)
    assert before - rd.remaining == h.length  # consumed exactly the body
    return h, resp


def test_mutated_responses_fail_cleanly():
    r = random.Random(20261201)
    seeds = [bytes.fromhex(v["hex"]) for v in ALL if v["kind"] == "response"]
    decoded = failed = 0
    for _ in range(ITERATIONS):
        raw = mutate(r, r.choice(seeds))
        try:
            if len(raw) < wire.HEADER_SIZE:
                with pytest.raises(errors.MalformedFrame):
                    wire.decode_header(raw, 1 << 20)
                failed += 1
                continue
            h, resp = decode_frame(raw)
        except (errors.MalformedFrame, errors.TooLarge):
            failed += 1
            continue
        decoded += 1
        if h.code:
            assert resp.items == []
        for it in resp.items:
            assert it.message == "" or it.code != 0
            if it.data is not None:
                assert len(it.data) == it.size
        if resp.route is not None:
            assert all(w.name for w in resp.route.workers)
    assert decoded > 0 and failed > 0  # the mutations reached both outcomes


def test_mutated_handshakes_fail_cleanly():
    r = random.Random(7)
    decoders = {
        "hello": wire.decode_hello,
        "hello_reply": wire.decode_hello_reply,
        "challenge": wire.decode_challenge,
        "auth_reply": wire.decode_auth_reply,
    }
    for _ in range(ITERATIONS):
        v = r.choice([v for v in ALL if v["kind"] in decoders])
        raw = mutate(r, bytes.fromhex(v["hex"]))
        try:
            decoders[v["kind"]](raw)
        except errors.MalformedFrame:
            pass


def test_mutated_route_results_fail_cleanly():
    r = random.Random(11)
    seeds = [bytes.fromhex(v["hex"])[wire.HEADER_SIZE:] for v in ALL
             if v["kind"] == "response" and v["response"]["route"] is not None]
    for _ in range(ITERATIONS):
        raw = mutate(r, r.choice(seeds))
        try:
            res = wire.decode_route_result(raw)
        except errors.MalformedFrame:
            continue
        # A result that decodes re-encodes to the same bytes (no field dropped or
        # invented), unless a string was not UTF-8 (decoded with replacement characters).
        text = res.tier_error + res.pin_error + res.recommended + "".join(w.name for w in res.workers)
        if "\ufffd" not in text:
            assert wire.encode_route_result(res) == raw
