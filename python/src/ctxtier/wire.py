"""Codec of ctxtier's native block protocol, version 2 (docs/protocol.md).

This module only turns values into bytes and bytes into values; the sockets
belong to :mod:`ctxtier.conn`. It mirrors the Go codec ``gateway/native/wire``
layout for layout, and the shared test vectors
(``gateway/native/wire/testdata/vectors.json``) check that both write and read
the same bytes. All integers are little-endian.

Response bodies are read through a *reader* (an object with ``read_exact(n)``
returning bytes and ``read_into(view, summing)`` filling a writable memoryview
and returning the CRC-32C of what it read, or 0 when not summing), so GET data
goes straight from the socket into caller memory; :class:`BytesReader` is the
reader over a body already in memory.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import struct
from dataclasses import dataclass, field
from typing import Callable, Optional

from . import errors
from .crc import crc32c

VERSION = 2
VERSION1 = 1
MAGIC = b"CTXN"
HELLO_SIZE = 16
HELLO_REPLY_SIZE = 32
HEADER_SIZE = 24
KEY_SIZE = 12
PUT_ITEM_SIZE = 32
STATUS_SIZE = 4
GET_META_SIZE = 12
MAX_MESSAGE_LEN = 1024
CHALLENGE_SIZE = 36
NONCE_SIZE = 32
PROOF_SIZE = 32
MAX_ACCESS_KEY_ID_LEN = 128
AUTH_REPLY_SIZE = 8
MAX_NAMESPACE_LEN = 63
MAX_SHARD = 127
FRAME_OVERHEAD = 4096

# Opcodes.
OP_PUT, OP_GET, OP_EXISTS, OP_LOOKUP, OP_DELETE, OP_PIN, OP_PING = 1, 2, 3, 4, 5, 6, 7
OP_DESCRIBE, OP_RELEASE, OP_ROUTE = 8, 9, 10
OP_END_SESSION = 11  # agent sessions (HELLO_AGENT_SESSIONS): namespace, u64 session; answers a u32
OP_NAMES = {1: "put", 2: "get", 3: "exists", 4: "lookup", 5: "delete", 6: "pin", 7: "ping",
            8: "describe", 9: "release", 10: "route", 11: "end_session"}

# Frame flags.
FLAG_RESPONSE = 1 << 0
FLAG_LINEARIZABLE = 1 << 1
FLAG_VERIFY_AT_REST = 1 << 2
FLAG_PUT_HINTS = 1 << 3  # PUT only: a hint record follows each item header
FLAG_READ_HINTS = 1 << 4  # GET, LOOKUP, ROUTE: a read hint record follows the namespace
FLAG_PUT_SESSION = 1 << 5  # PUT, with FLAG_PUT_HINTS: each hint record ends with a u64 session id
_FLAGS_KNOWN = (FLAG_RESPONSE | FLAG_LINEARIZABLE | FLAG_VERIFY_AT_REST | FLAG_PUT_HINTS | FLAG_READ_HINTS
                | FLAG_PUT_SESSION)

# Key flags (byte 10 of a key or put item).
KEY_HAS_PART = 1 << 0
KEY_HAS_PRIORITY = 1 << 1
KEY_HAS_PARENT = 1 << 2
KEY_HAS_SHARD = 1 << 3

# Hello flags.
HELLO_VERIFIES_GETS = 1 << 0
HELLO_PUT_HINTS = 1 << 1
HELLO_AGENT_SESSIONS = 1 << 2  # read hints, put session ids, END_SESSION
_HELLO_FLAGS_KNOWN = HELLO_VERIFIES_GETS | HELLO_PUT_HINTS | HELLO_AGENT_SESSIONS

# Agent hints of a put (docs/protocol.md, "Agent hints on PUT"): the reuse
# values of the hint record, and the largest retain window (a u32 of ms).
PUT_HINTS_SIZE = 8
PUT_SESSION_HINTS_SIZE = PUT_HINTS_SIZE + 8  # with FLAG_PUT_SESSION
READ_HINTS_SIZE = 8  # u32 retain_ms (1 and up), 4 zero bytes
REUSE = {"never": 1, "session": 2, "shared": 3}
MAX_RETAIN_MS = 0xFFFFFFFF
# Challenge flags.
CHALLENGE_AUTH_REQUIRED = 1 << 0

# Tier bytes of GET metadata.
TIER_NAMES = {0: "", 1: "dram", 2: "nvme", 3: "s3"}

# ROUTE flags.
ROUTE_COMMIT = 1 << 0
ROUTE_HAS_TEMPERATURE = 1 << 1
ROUTE_TOKEN_IDS = 1 << 2
ROUTE_QUERY_SIZE = 28
ROUTE_RESULT_SIZE = 28
ROUTE_COST_SIZE = 56
ROUTE_WORKER_SIZE = 32 + ROUTE_COST_SIZE
ROUTE_RECOMMENDED = 1 << 0
ROUTE_STALE = 1 << 0
MAX_ROUTE_RESPONSE = 64 << 20

_PROOF_CONTEXT = b"ctxtier-native-auth-v2\x00"
_U64 = (1 << 64) - 1
_U32 = (1 << 32) - 1

_HDR = struct.Struct("<IBBHQII")
_PUT_HINTS = struct.Struct("<B3xI")
_HELLO = struct.Struct("<4sHHQ")
_HELLO_REPLY = struct.Struct("<4sHHIIIIIHH")
_KEY = struct.Struct("<QHBB")
_PUT_ITEM = struct.Struct("<QHBBIIIQ")
_STATUS = struct.Struct("<HH")
_GET_META = struct.Struct("<IIB3x")
_ROUTE_Q = struct.Struct("<BBHIQIII")
_ROUTE_R = struct.Struct("<IIIIIBBHHH")
_COST = struct.Struct("<dddddIIII")
_WORKER = struct.Struct("<HBBIIIqq")


def malformed(msg: str) -> errors.CtxtierError:
    return errors.MalformedFrame(msg)


# ---------------------------------------------------------------- handshake


@dataclass
class Limits:
    """What the server announces in its hello reply."""

    max_frame_size: int = 0
    max_block_size: int = 0
    max_batch: int = 0
    max_in_flight: int = 0
    max_response_size: int = 0


@dataclass
class HelloReply:
    version: int
    code: int
    limits: Limits
    flags: int


def encode_hello(version: int = VERSION, flags: int = 0) -> bytes:
    return _HELLO.pack(MAGIC, version, flags, 0)


def decode_hello(b: bytes) -> tuple[int, int]:
    """Parse a client hello into (version, flags), with the server's checks."""
    if len(b) < HELLO_SIZE:
        raise malformed(f"handshake is {len(b)} bytes, want {HELLO_SIZE}")
    magic, v, f, res = _HELLO.unpack_from(b)
    if magic != MAGIC:
        raise malformed(f"bad handshake magic {magic!r}")
    if f & ~_HELLO_FLAGS_KNOWN:
        raise malformed(f"unknown handshake flags {f:#06x}")
    if res:
        raise malformed("handshake reserved bytes must be zero")
    return v, f


def encode_hello_reply(r: HelloReply) -> bytes:
    lim = r.limits
    return _HELLO_REPLY.pack(MAGIC, r.version, r.code, lim.max_frame_size, lim.max_block_size, lim.max_batch,
                             lim.max_in_flight, lim.max_response_size, r.flags, 0)


def decode_hello_reply(b: bytes) -> HelloReply:
    if len(b) < HELLO_REPLY_SIZE:
        raise malformed(f"handshake reply is {len(b)} bytes, want {HELLO_REPLY_SIZE}")
    magic, v, code, mf, mb, mba, mif, mr, flags, _ = _HELLO_REPLY.unpack_from(b)
    if magic != MAGIC:
        raise malformed(f"bad handshake reply magic {magic!r}")
    return HelloReply(v, code, Limits(mf, mb, mba, mif, mr), flags)


@dataclass
class Challenge:
    flags: int
    nonce: bytes

    @property
    def auth_required(self) -> bool:
        return bool(self.flags & CHALLENGE_AUTH_REQUIRED)


def encode_challenge(c: Challenge) -> bytes:
    return struct.pack("<HH", c.flags, 0) + bytes(c.nonce)


def decode_challenge(b: bytes) -> Challenge:
    if len(b) < CHALLENGE_SIZE:
        raise malformed(f"challenge is {len(b)} bytes, want {CHALLENGE_SIZE}")
    flags, res = struct.unpack_from("<HH", b)
    if flags & ~CHALLENGE_AUTH_REQUIRED or res:
        raise malformed(f"challenge flags {flags:#06x} / reserved {res:#06x}")
    return Challenge(flags, bytes(b[4:CHALLENGE_SIZE]))


def auth_proof(secret: str, nonce: bytes, access_key_id: str) -> bytes:
    """HMAC-SHA256(secret, context || nonce || u8(len(id)) || id): the proof of docs/protocol.md."""
    kid = access_key_id.encode("ascii")
    m = hmac.new(secret.encode(), digestmod=hashlib.sha256)
    m.update(_PROOF_CONTEXT)
    m.update(bytes(nonce))
    m.update(bytes([len(kid)]))
    m.update(kid)
    return m.digest()


def encode_auth(access_key_id: str = "", proof: bytes = bytes(PROOF_SIZE)) -> bytes:
    kid = access_key_id.encode("ascii")
    if len(kid) > MAX_ACCESS_KEY_ID_LEN:
        raise errors.InvalidArgument(f"access key id of {len(kid)} bytes (at most {MAX_ACCESS_KEY_ID_LEN})")
    if len(proof) != PROOF_SIZE:
        raise errors.InvalidArgument("proof must be 32 bytes")
    return bytes([len(kid), 0]) + kid + bytes(proof)


def encode_auth_reply(code: int) -> bytes:
    return struct.pack("<HHI", code, 0, 0)


def decode_auth_reply(b: bytes) -> int:
    if len(b) < AUTH_REPLY_SIZE:
        raise malformed(f"auth reply is {len(b)} bytes, want {AUTH_REPLY_SIZE}")
    code, r1, r2 = struct.unpack_from("<HHI", b)
    if r1 or r2:
        raise malformed("auth reply reserved bytes must be zero")
    return code


# ---------------------------------------------------------------- frames


@dataclass
class Header:
    length: int
    op: int
    flags: int
    code: int
    id: int
    count: int


def encode_header(h: Header) -> bytes:
    return _HDR.pack(h.length, h.op, h.flags, h.code, h.id, h.count, 0)


def pack_header_into(buf, length: int, op: int, flags: int, id: int, count: int, code: int = 0) -> None:
    _HDR.pack_into(buf, 0, length, op, flags, code, id, count, 0)


def decode_header(b, max_frame: int) -> Header:
    """Parse a frame header and check it against max_frame (header included).

    Errors are fatal for the connection: MalformedFrame, or TooLarge for a frame over the limit.
    """
    if len(b) < HEADER_SIZE:
        raise malformed(f"header is {len(b)} bytes, want {HEADER_SIZE}")
    length, op, flags, code, id_, count, res = _HDR.unpack_from(b)
    h = Header(length, op, flags, code, id_, count)
    if flags & ~_FLAGS_KNOWN:
        raise malformed(f"unknown header flags {flags:#04x}")
    if res:
        raise malformed(f"reserved header bytes are {res:#010x}, want 0")
    if length + HEADER_SIZE > max_frame:
        raise errors.TooLarge(f"frame of {length + HEADER_SIZE} bytes exceeds the maximum frame size {max_frame}")
    return h


def check_hash(h: int) -> int:
    if not isinstance(h, int) or isinstance(h, bool) or h < 0 or h > _U64:
        raise errors.InvalidArgument(f"block hash {h!r} is not an unsigned 64-bit integer")
    return h


def check_part(part: Optional[int]) -> None:
    if part is not None and (not isinstance(part, int) or part < 0 or part > 0xFFFF):
        raise errors.InvalidArgument(f"part {part!r} is not an unsigned 16-bit integer")


def check_namespace(ns: str) -> bytes:
    b = ns.encode("utf-8") if isinstance(ns, str) else bytes(ns)
    if not 1 <= len(b) <= 255:
        raise errors.InvalidArgument(f"namespace {ns!r}: names are 1..63 bytes")
    return b


def encode_key(h: int, part: Optional[int] = None, shard: int = 0) -> bytes:
    f = 0
    if part is not None:
        f |= KEY_HAS_PART
    if shard:
        f |= KEY_HAS_SHARD
    return _KEY.pack(h, part or 0, f, shard)


@functools.lru_cache(maxsize=256)
def encode_namespace(ns: str) -> bytes:
    """u8 length + the name (cached: engines use a handful of namespaces)."""
    b = check_namespace(ns)
    return bytes([len(b)]) + b


def encode_put_item(h: int, size: int, checksum: int, part: Optional[int] = None, priority: Optional[int] = None,
                    pin_ttl_ms: int = 0, parent: Optional[int] = None, shard: int = 0) -> bytes:
    f = 0
    if part is not None:
        f |= KEY_HAS_PART
    if priority is not None:
        f |= KEY_HAS_PRIORITY
    par = 0
    if shard:
        f |= KEY_HAS_SHARD
        par = shard
    elif parent is not None:
        f |= KEY_HAS_PARENT
        par = parent
    ttl = min(max(int(pin_ttl_ms), 0), _U32)
    return _PUT_ITEM.pack(h, part or 0, f, priority or 0, checksum, ttl, size, par)


def put_hints(reuse: Optional[str] = None, retain: Optional[float] = None) -> tuple[int, int]:
    """Check a put's agent hints and return them as the record's (reuse, retain_ms).

    reuse is "never", "session" or "shared" (None: no hint); retain is the
    retain window in seconds (None or 0: none), rounded up to a millisecond.
    Anything else, or a retain window on a "never" block, is InvalidArgument.
    """
    r = 0
    if reuse is not None:
        if reuse not in REUSE:
            raise errors.InvalidArgument(f"reuse hint {reuse!r} (want never, session or shared)")
        r = REUSE[reuse]
    ms = 0
    if retain is not None:
        if isinstance(retain, bool) or not isinstance(retain, (int, float)) or retain != retain or retain < 0:
            raise errors.InvalidArgument(f"retain window {retain!r} must be a number of seconds >= 0")
        us = round(retain * 1_000_000) or (1 if retain > 0 else 0)  # a positive window is never lost
        ms = -(-us // 1000)  # rounded up to a millisecond, as the Go client does
        if ms > MAX_RETAIN_MS:
            raise errors.InvalidArgument(f"retain window {retain}s above the maximum {MAX_RETAIN_MS / 1000}s")
    if r == REUSE["never"] and ms:
        raise errors.InvalidArgument("a retain window on a block hinted reuse never")
    return r, ms


def encode_put_hints(reuse: int = 0, retain_ms: int = 0) -> bytes:
    """A put item's 8-byte hint record (sent with FLAG_PUT_HINTS): u8 reuse, 3 zero bytes, u32 retain_ms."""
    return _PUT_HINTS.pack(reuse, retain_ms)


def retain_ms(retain: Optional[float]) -> int:
    """Check a read's retain window (seconds; None: none) and return it in ms, rounded up.

    A window that is not a positive number of seconds up to MAX_RETAIN_MS is InvalidArgument.
    """
    if retain is None:
        return 0
    if isinstance(retain, bool) or not isinstance(retain, (int, float)) or retain != retain or retain <= 0:
        raise errors.InvalidArgument(f"read retain window {retain!r} must be a positive number of seconds")
    ms = -(-(round(retain * 1_000_000) or 1) // 1000)
    if ms > MAX_RETAIN_MS:
        raise errors.InvalidArgument(f"read retain window {retain}s above the maximum {MAX_RETAIN_MS / 1000}s")
    return ms


def encode_read_hints(retain_ms: int) -> bytes:
    """A GET's or LOOKUP's read hint record (sent with FLAG_READ_HINTS)."""
    return struct.pack("<I4x", min(max(int(retain_ms), 0), _U32))


def encode_put_session(session: int) -> bytes:
    """The u64 session id that follows a put item's hint record under FLAG_PUT_SESSION."""
    return struct.pack("<Q", session)


def check_session(session) -> int:
    """Check an agent session id: an int in 1..2**64-1 (InvalidArgument otherwise)."""
    if isinstance(session, bool) or not isinstance(session, int) or not 0 < session <= _U64:
        raise errors.InvalidArgument(f"session {session!r} must be an integer from 1 to {_U64}")
    return session


def end_session_body(ns: str, session: int) -> bytes:
    """An END_SESSION request body: namespace, u64 session id."""
    return encode_namespace(ns) + struct.pack("<Q", check_session(session))


def key_body(op: int, ns: str, keys, ttl_ms: int = 0, retain_ms: int = 0) -> bytes:
    """A key-only request body (GET, EXISTS, LOOKUP, DELETE, PIN, DESCRIBE): namespace, [TTL], keys.

    keys are (hash, part) pairs, part None for none. retain_ms > 0 (GET and
    LOOKUP, sent with FLAG_READ_HINTS) adds the read hint record.
    """
    out = bytearray(encode_namespace(ns))
    if retain_ms > 0:
        out += encode_read_hints(retain_ms)
    if op == OP_PIN:
        out += struct.pack("<Q", ttl_ms)
    for h, part in keys:
        out += encode_key(h, part)
    return bytes(out)


# ---------------------------------------------------------------- responses


@dataclass
class ItemResult:
    code: int = 0
    message: str = ""
    present: bool = False
    sum: int = 0
    size: int = 0
    tier: int = 0
    data: Optional[memoryview] = None
    skipped: bool = False
    data_sum: int = 0
    lease: Optional[dict] = None


@dataclass
class Response:
    header: Header
    message: str = ""
    items: list = field(default_factory=list)
    present: int = 0
    route: Optional["RouteResult"] = None


#: chooses where GET item i's size bytes go: a writable memoryview of at least
#: size bytes is filled in place; None allocates; a shorter view skips the bytes.
Dest = Callable[[int, int], Optional[memoryview]]


class BytesReader:
    """A reader over bytes already in memory (test vectors, fake servers)."""

    def __init__(self, b):
        self._b = memoryview(b)
        self._off = 0

    def read_exact(self, n: int) -> bytes:
        if self._off + n > len(self._b):
            raise malformed("reading response: unexpected end of data")
        out = bytes(self._b[self._off:self._off + n])
        self._off += n
        return out

    def read_into(self, view: memoryview, summing: bool) -> int:
        n = len(view)
        if self._off + n > len(self._b):
            raise malformed("reading response: unexpected end of data")
        view[:] = self._b[self._off:self._off + n]
        self._off += n
        return crc32c(view) if summing else 0

    def skip(self, n: int) -> None:
        self.read_exact(n)

    @property
    def remaining(self) -> int:
        return len(self._b) - self._off


class _Body:
    """Reads one frame body through a reader, never past its end."""

    def __init__(self, r, length: int):
        self.r = r
        self.left = length

    def take(self, n: int) -> bytes:
        if n > self.left:
            raise malformed(f"response body ends {n - self.left} bytes early")
        b = self.r.read_exact(n)
        self.left -= n
        return b

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return struct.unpack("<H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def text(self, n: int) -> str:
        return self.take(n).decode("utf-8", "replace") if n else ""

    def finish(self) -> None:
        if self.left:
            raise malformed(f"{self.left} trailing bytes in the response body")


def read_response(r, h: Header, dest: Optional[Dest] = None, summing: bool = False) -> Response:
    """Decode the body of response frame h (accepted by decode_header) from reader r.

    GET data goes into the views dest picks; with summing, each item's data_sum
    is the CRC-32C of the bytes received. Any error means the stream is broken.
    """
    b = _Body(r, h.length)
    resp = Response(h)
    if not h.flags & FLAG_RESPONSE:
        raise malformed("response without the response flag")
    if h.code != 0:
        if h.count:
            raise malformed(f"failed request carries {h.count} items")
        resp.message = b.text(b.u16())
        b.finish()
        return resp
    op = h.op
    if op == OP_PING:
        if h.count:
            raise malformed("ping response carries items")
        b.finish()
        return resp
    if op in (OP_LOOKUP, OP_END_SESSION):
        if h.count:
            raise malformed(f"{OP_NAMES[op]} response carries items")
        resp.present = b.u32()
        b.finish()
        return resp
    if op == OP_ROUTE:
        if h.count:
            raise malformed("route response carries items")
        if b.left > MAX_ROUTE_RESPONSE:
            raise malformed(f"route result of {b.left} bytes exceeds {MAX_ROUTE_RESPONSE}")
        resp.route = decode_route_result(b.take(b.left))
        return resp
    if op not in (OP_PUT, OP_DELETE, OP_PIN, OP_GET, OP_EXISTS, OP_DESCRIBE, OP_RELEASE):
        raise malformed(f"response for unknown opcode {op}")
    if h.count * STATUS_SIZE > h.length:
        raise malformed(f"{h.count} items cannot fit in {h.length} bytes")
    items = []
    for i in range(h.count):
        code, n = _STATUS.unpack(b.take(STATUS_SIZE))
        if n > MAX_MESSAGE_LEN or (code == 0 and n):
            raise malformed(f"item {i}: message of {n} bytes with code {code}")
        it = ItemResult(code=code, message=b.text(n))
        items.append(it)
        if code:
            continue
        if op == OP_EXISTS:
            p = b.u8()
            if p > 1:
                raise malformed(f"item {i}: presence byte {p}")
            it.present = p == 1
        elif op == OP_GET:
            _get_item(b, i, it, dest, summing)
        elif op == OP_DESCRIBE:
            _describe_item(b, i, it)
    resp.items = items
    b.finish()
    return resp


def _get_item(b: _Body, i: int, it: ItemResult, dest: Optional[Dest], summing: bool) -> None:
    it.sum, it.size, it.tier = _GET_META.unpack(b.take(GET_META_SIZE))
    if it.size > b.left:
        raise malformed(f"item {i}: block of {it.size} bytes past the body end ({b.left} left)")
    dst = dest(i, it.size) if dest is not None else None
    if dst is None:
        dst = memoryview(bytearray(it.size))
    elif len(dst) < it.size:
        it.skipped = True
        b.r.skip(it.size)
        b.left -= it.size
        return
    view = dst[:it.size]
    it.data_sum = b.r.read_into(view, summing)
    b.left -= it.size
    it.data = view


_DESC = struct.Struct("<QIIQQQQQBBH")


def _describe_item(b: _Body, i: int, it: ItemResult) -> None:
    lease_id, ttl_ms, csum, off, rlen, doff, length, gen, tier, flags, plen = _DESC.unpack(b.take(60))
    if tier not in (1, 2) or flags & ~1 or not 1 <= plen <= 4096:
        raise malformed(f"item {i}: descriptor tier {tier}, flags {flags:#x}, path of {plen} bytes")
    vo = 0
    if flags & 1:
        vo = struct.unpack("<Q", b.take(8))[0]
        if tier != 1 or vo == 0 or vo % 8 or doff <= vo < doff + length:
            raise malformed(f"item {i}: bad version word offset {vo}")
    if not (off <= doff and doff + length <= off + rlen):
        raise malformed(f"item {i}: payload outside the descriptor's range")
    it.lease = dict(id=lease_id, ttl_ms=ttl_ms, checksum=csum, offset=off, read_length=rlen, data_offset=doff,
                    length=length, generation=gen, tier=tier, version_offset=vo, path=b.text(plen))


# Response encoders (the server's side; used by test servers and the shared vectors).


def encode_status(code: int, msg: str = "") -> bytes:
    m = b"" if code == 0 else msg.encode()[:MAX_MESSAGE_LEN]
    return _STATUS.pack(code, len(m)) + m


def encode_get_meta(checksum: int, size: int, tier: int) -> bytes:
    return _GET_META.pack(checksum, size, tier)


def encode_error_body(msg: str) -> bytes:
    m = msg.encode()[:MAX_MESSAGE_LEN]
    return struct.pack("<H", len(m)) + m


def encode_frame(op: int, id: int, count: int, body: bytes, flags: int = 0, code: int = 0) -> bytes:
    return encode_header(Header(len(body), op, flags, code, id, count)) + body


# ---------------------------------------------------------------- ROUTE


@dataclass
class Cost:
    seconds: float = 0.0
    recompute_seconds: float = 0.0
    local_load_seconds: float = 0.0
    fetch_seconds: float = 0.0
    queue_seconds: float = 0.0
    cached_blocks: int = 0
    local_blocks: int = 0
    fetch_blocks: int = 0
    recompute_blocks: int = 0


@dataclass
class Worker:
    name: str
    stale: bool
    device: int
    host: int
    disk: int
    active_prefill_blocks: int
    active_decode_blocks: int
    cost: Cost


@dataclass
class RouteResult:
    blocks: int = 0
    block_tokens: int = 0
    tier_depth: int = 0
    pinned: int = 0
    tier_error: str = ""
    pin_error: str = ""
    recommended: str = ""
    cost: Optional[Cost] = None
    workers: list = field(default_factory=list)


def _sat32(v: int) -> int:
    return 0 if v <= 0 else min(int(v), _U32)


def encode_route_query(ns: str, block_hashes=None, token_ids=None, commit: bool = False,
                       temperature: Optional[float] = None, priority: int = 0, max_workers: int = 0,
                       expected_output_tokens: int = 0, pin_ttl_ms: int = 0, retain_ms: int = 0) -> bytes:
    """A ROUTE request body. Hashes win when both are given, as in the Go codec.

    retain_ms > 0 adds the read hint record after the namespace; the frame
    then carries FLAG_READ_HINTS (route_frame_flags).
    """
    tokens = not block_hashes and token_ids is not None
    f = 0
    if commit:
        f |= ROUTE_COMMIT
    temp = 0
    if temperature is not None:
        f |= ROUTE_HAS_TEMPERATURE
        temp = struct.unpack("<Q", struct.pack("<d", float(temperature)))[0]
    if tokens:
        f |= ROUTE_TOKEN_IDS
    items = list(token_ids) if tokens else list(block_hashes or [])
    hint = encode_read_hints(retain_ms) if retain_ms > 0 else b""
    head = encode_namespace(ns) + hint + _ROUTE_Q.pack(f, priority, 0, _sat32(max_workers), temp,
                                                _sat32(expected_output_tokens), _sat32(pin_ttl_ms), len(items))
    return head + struct.pack(f"<{len(items)}{'I' if tokens else 'Q'}", *items)


def route_frame_flags(retain_ms: int) -> int:
    """The frame flags of a ROUTE request: FLAG_READ_HINTS when it carries a read hint."""
    return FLAG_READ_HINTS if retain_ms > 0 else 0


def _cost(b, off: int) -> Cost:
    return Cost(*_COST.unpack_from(b, off))


def decode_route_result(b: bytes) -> RouteResult:
    def bad(msg):
        return malformed("route result: " + msg)

    if len(b) < ROUTE_RESULT_SIZE:
        raise bad(f"{len(b)} bytes, the fixed part needs {ROUTE_RESULT_SIZE}")
    blocks, bt, depth, pinned, nw, f, res, tl, pl, rl = _ROUTE_R.unpack_from(b)
    if f & ~ROUTE_RECOMMENDED or res:
        raise bad(f"flags {f:#04x}, reserved {res:#04x}")
    if tl > MAX_MESSAGE_LEN or pl > MAX_MESSAGE_LEN:
        raise bad(f"error strings of {tl} and {pl} bytes")
    if bool(f & ROUTE_RECOMMENDED) != (rl > 0):
        raise bad(f"recommended name of {rl} bytes with flags {f:#04x}")
    off = ROUTE_RESULT_SIZE
    need = tl + pl + rl + (ROUTE_COST_SIZE if f & ROUTE_RECOMMENDED else 0)
    if len(b) - off < need:
        raise bad(f"strings and cost need {need} bytes, {len(b) - off} left")
    r = RouteResult(blocks, bt, depth, pinned)
    r.tier_error = b[off:off + tl].decode("utf-8", "replace")
    off += tl
    r.pin_error = b[off:off + pl].decode("utf-8", "replace")
    off += pl
    r.recommended = b[off:off + rl].decode("utf-8", "replace")
    off += rl
    if f & ROUTE_RECOMMENDED:
        r.cost = _cost(b, off)
        off += ROUTE_COST_SIZE
    if nw * ROUTE_WORKER_SIZE > len(b) - off:
        raise bad(f"{nw} worker lines cannot fit in {len(b) - off} bytes")
    for i in range(nw):
        if len(b) - off < ROUTE_WORKER_SIZE:
            raise bad(f"worker {i}: {len(b) - off} bytes left, the line needs {ROUTE_WORKER_SIZE}")
        n, wf, wres, dev, host, disk, pre, dec = _WORKER.unpack_from(b, off)
        if n == 0 or wf & ~ROUTE_STALE or wres:
            raise bad(f"worker {i}: name of {n} bytes, flags {wf:#04x}, reserved {wres:#04x}")
        if len(b) - off < ROUTE_WORKER_SIZE + n:
            raise bad(f"worker {i}: name of {n} bytes past the end")
        name = b[off + ROUTE_WORKER_SIZE:off + ROUTE_WORKER_SIZE + n].decode("utf-8", "replace")
        r.workers.append(Worker(name, bool(wf & ROUTE_STALE), dev, host, disk, pre, dec, _cost(b, off + 32)))
        off += ROUTE_WORKER_SIZE + n
    if off != len(b):
        raise bad(f"{len(b) - off} trailing bytes")
    return r


def encode_route_result(r: RouteResult) -> bytes:
    te, pe = r.tier_error.encode()[:MAX_MESSAGE_LEN], r.pin_error.encode()[:MAX_MESSAGE_LEN]
    rc = r.cost is not None and r.recommended != ""
    rec = r.recommended.encode()[:0xFFFF] if rc else b""
    out = bytearray(_ROUTE_R.pack(_sat32(r.blocks), _sat32(r.block_tokens), _sat32(r.tier_depth), _sat32(r.pinned),
                                  len(r.workers), ROUTE_RECOMMENDED if rc else 0, 0, len(te), len(pe), len(rec)))
    out += te + pe + rec
    if rc:
        out += _pack_cost(r.cost)
    for w in r.workers:
        name = w.name.encode()[:0xFFFF]
        out += _WORKER.pack(len(name), ROUTE_STALE if w.stale else 0, 0, _sat32(w.device), _sat32(w.host),
                            _sat32(w.disk), w.active_prefill_blocks, w.active_decode_blocks)
        out += _pack_cost(w.cost) + name
    return bytes(out)


def _pack_cost(c: Cost) -> bytes:
    return _COST.pack(c.seconds, c.recompute_seconds, c.local_load_seconds, c.fetch_seconds, c.queue_seconds,
                      _sat32(c.cached_blocks), _sat32(c.local_blocks), _sat32(c.fetch_blocks),
                      _sat32(c.recompute_blocks))
