"""One native-protocol connection: the handshake, scatter-gather sends and
pipelined, buffered receives straight into caller memory.

A :class:`Conn` is used by one thread at a time (the client's pool hands it
out); within one call it pipelines every frame of a batch, keeping at most a
window of requests unanswered so that neither side can block the other
(docs/protocol.md, "Pipelining"). Any socket error, timeout or malformed
response breaks the connection: it is closed and never reused.
"""

from __future__ import annotations

import errno
import socket
import struct
import sys
from typing import Callable, Optional

from . import errors, wire
from .crc import crc32c

READ_BUF = 64 << 10  # the receive buffer for headers, statuses and small blocks (bytes of a
# large block that land in it are copied out once; the rest go straight to the caller)
SUM_CHUNK = 1 << 20  # block data is summed chunk by chunk, while it is still in cache
IOV_MAX = 1024


class HelloFlagsRefused(errors.MalformedFrame):
    """The server refused the hello flags: a server older than them."""


class Conn:
    """A handshaken connection. Not thread-safe: one call at a time."""

    def __init__(self, sock: socket.socket, limits: wire.Limits, declared: bool):
        self.sock = sock
        self.limits = limits
        #: the server echoed HELLO_VERIFIES_GETS, so it also knows FLAG_VERIFY_AT_REST
        self.declared = declared
        #: the server echoed HELLO_PUT_HINTS: it reads PUT hint records (FLAG_PUT_HINTS)
        self.hints = False
        #: the server echoed HELLO_AGENT_SESSIONS: read hints, put session ids, END_SESSION
        self.sessions = False
        self._buf = bytearray(READ_BUF)
        self._view = memoryview(self._buf)
        self._lo = 0
        self._hi = 0
        self._next_id = 0
        self._timeout: object = _UNSET  # the timeout settimeout last applied
        self.broken = False
        #: ids of frames sent without waiting (RELEASE): their answers are read and dropped
        self.orphans: set[int] = set()

    # ------------------------------------------------------------ dialing

    @classmethod
    def dial(cls, host: str, port: int, *, timeout: float, flags: int, access_key_id: str = "",
             secret: str = "", version: int = wire.VERSION) -> "Conn":
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except socket.timeout as e:
            raise errors.Unavailable(f"dial {host}:{port}: timed out after {timeout}s") from e
        except OSError as e:
            raise errors.Unavailable(f"dial {host}:{port}: {e.strerror or e}") from e
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return cls._handshake(sock, flags, access_key_id, secret, version)
        except BaseException:
            sock.close()
            raise

    @classmethod
    def _handshake(cls, sock: socket.socket, flags: int, kid: str, secret: str, version: int) -> "Conn":
        c = cls(sock, wire.Limits(), False)
        try:
            c._sendall(wire.encode_hello(version, flags))
            r = wire.decode_hello_reply(c._read_exact(wire.HELLO_REPLY_SIZE))
        except errors.CtxtierError:
            raise
        except Exception as e:
            raise c._io_error("handshake", e) from e
        if r.code != 0:
            msg = (f"handshake refused: {errors.name_of(r.code)} (client version {version}, server version "
                   f"{r.version}, hello flags {flags:#06x})")
            if r.code == 11 and flags:
                raise HelloFlagsRefused(msg)
            raise errors.from_code(r.code, msg)
        if r.version != version:
            raise errors.VersionMismatch(f"server speaks protocol version {r.version}, client {version}")
        lim = r.limits
        if lim.max_frame_size < wire.HEADER_SIZE or lim.max_response_size < wire.HEADER_SIZE or lim.max_batch == 0:
            raise errors.MalformedFrame("handshake reply announces unusable limits")
        c.limits = lim
        c.declared = bool(flags & r.flags & wire.HELLO_VERIFIES_GETS)
        c.hints = bool(flags & r.flags & wire.HELLO_PUT_HINTS)
        c.sessions = bool(flags & r.flags & wire.HELLO_AGENT_SESSIONS)
        if version == wire.VERSION1:
            return c
        try:
            ch = wire.decode_challenge(c._read_exact(wire.CHALLENGE_SIZE))
            if ch.auth_required and not kid:
                raise errors.Unauthenticated(
                    "the server requires credentials; pass access_key_id and secret (from `ctxctl keys create`)")
            proof = wire.auth_proof(secret, ch.nonce, kid) if kid else bytes(wire.PROOF_SIZE)
            c._sendall(wire.encode_auth(kid, proof))
            code = wire.decode_auth_reply(c._read_exact(wire.AUTH_REPLY_SIZE))
        except errors.CtxtierError:
            raise
        except Exception as e:
            raise c._io_error("handshake auth", e) from e
        if code != 0:
            raise errors.from_code(code, f"authentication refused for access key {kid!r}: {errors.name_of(code)}")
        return c

    # ------------------------------------------------------------ I/O

    def close(self) -> None:
        self.broken = True
        try:
            self.sock.close()
        except OSError:
            pass

    def settimeout(self, t: Optional[float]) -> None:
        """Bound every later socket operation by t seconds (None: no bound).

        Where the kernel can (Linux), the bound is SO_RCVTIMEO/SO_SNDTIMEO on
        a socket left in blocking mode: Python then calls recv/send at once,
        where a Python-level timeout polls the socket before each one (a
        second system call per recv, about a third of a GET's calls). A
        kernel timeout ends the call with EAGAIN, mapped to DeadlineExceeded
        like Python's. Setting the same bound again costs nothing.
        """
        if t == self._timeout:
            return
        if _KERNEL_TIMEOUTS:
            tv = _timeval(t)
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
                self.sock.settimeout(None)
                self._timeout = t
                return
            except OSError:
                pass
        self.sock.settimeout(t)
        self._timeout = t

    def _io_error(self, what: str, e: BaseException) -> errors.CtxtierError:
        self.close()
        if isinstance(e, socket.timeout) or isinstance(e, OSError) and e.errno in _TIMED_OUT:
            return errors.DeadlineExceeded(f"{what}: no answer within the call's timeout")
        if isinstance(e, errors.CtxtierError):
            return e
        return errors.Unavailable(f"{what}: connection to {self._peer()} broken: {e}")

    def _peer(self) -> str:
        try:
            h, p = self.sock.getpeername()[:2]
            return f"{h}:{p}"
        except OSError:
            return "server"

    def _sendall(self, b) -> None:
        self.sock.sendall(b)

    def sendv(self, segs: list) -> None:
        """Send buffers with scatter-gather (sendmsg), no copy into one bytes object."""
        segs = [memoryview(s).cast("B") for s in segs if len(s)]
        i = 0
        while i < len(segs):
            n = self.sock.sendmsg(segs[i:i + IOV_MAX])
            while n:
                if n >= len(segs[i]):
                    n -= len(segs[i])
                    i += 1
                else:
                    segs[i] = segs[i][n:]
                    n = 0

    def _fill(self, most: int = READ_BUF) -> None:
        """Read more into the buffer: at least one byte, at most most bytes."""
        if self._lo == self._hi:
            self._lo = self._hi = 0
        elif self._hi == len(self._buf):
            n = self._hi - self._lo
            self._buf[:n] = self._buf[self._lo:self._hi]
            self._lo, self._hi = 0, n
        n = self.sock.recv_into(self._view[self._hi:self._hi + most])
        if n == 0:
            raise ConnectionResetError("server closed the connection")
        self._hi += n

    def _need(self, n: int) -> None:
        while self._hi - self._lo < n:
            self._fill()

    def _need_upto(self, n: int, most: int) -> None:
        """Like _need, but buffer no more than most bytes: the GET path's fixed fields.

        The block that follows them then goes from the socket straight to
        the caller's buffer instead of up to READ_BUF of it landing here
        first and being copied out. Only n bytes are waited for (an error
        response may be shorter than most).
        """
        while self._hi - self._lo < n:
            self._fill(most - (self._hi - self._lo))

    def _read_exact(self, n: int) -> bytes:
        while self._hi - self._lo < n:
            self._fill()
        out = bytes(self._view[self._lo:self._lo + n])
        self._lo += n
        return out

    # The reader interface of wire.read_response.
    read_exact = _read_exact

    def read_into(self, view: memoryview, summing: bool) -> int:
        """Fill view: first from the buffer, then straight from the socket (recv_into)."""
        n = len(view)
        off = 0
        s = 0
        have = min(self._hi - self._lo, n)
        if have:
            view[:have] = self._view[self._lo:self._lo + have]
            self._lo += have
            off = have
            if summing:
                s = crc32c(view[:have])
        recv_into = self.sock.recv_into
        while off < n:
            end = min(off + SUM_CHUNK, n) if summing else n
            while off < end:
                k = recv_into(view[off:end])
                if k == 0:
                    raise ConnectionResetError("server closed the connection in the middle of a block")
                if summing:
                    s = crc32c(view[off:off + k], s)
                off += k
        return s

    def skip(self, n: int) -> None:
        while n:
            if self._lo == self._hi:
                self._fill()
            k = min(n, self._hi - self._lo)
            self._lo += k
            n -= k

    # ------------------------------------------------------------ calls

    def send_nowait(self, op: int, count: int, segs: list) -> None:
        """Send a frame whose answer nobody waits for; the next call reads and drops it."""
        try:
            self._next_id += 1
            hdr = bytearray(wire.HEADER_SIZE)
            wire.pack_header_into(hdr, sum(len(s) for s in segs), op, 0, self._next_id, count)
            self.orphans.add(self._next_id)
            self.sendv([hdr, *segs])
        except OSError as e:
            raise self._io_error("native call", e) from e

    def get_frame(self, body: bytes, count: int, flags: int, views, summing: bool) -> list:
        """One GET frame, sent and answered whole: the hot path of get/get_into.

        It checks what wire.read_response checks (the shared vectors and the
        failure tests run through both), reading the small fields straight
        out of the receive buffer. Returns one wire.ItemResult per key; a
        request-level error raises (the connection stays usable).
        """
        try:
            self._next_id += 1
            fid = self._next_id
            self.sock.sendall(_HDR.pack(len(body), wire.OP_GET, flags, 0, fid, count, 0) + body)
            # The header and, for a block, the first item's status and metadata.
            self._need_upto(wire.HEADER_SIZE, _GET_FIXED + wire.HEADER_SIZE)
            h = wire.decode_header(self._view[self._lo:self._lo + wire.HEADER_SIZE], self.limits.max_response_size)
            self._lo += wire.HEADER_SIZE
            if h.id != fid:
                msg = f"response for unknown request id {h.id} (code {errors.name_of(h.code)})"
                if h.code:
                    raise errors.from_code(h.code, msg)
                raise errors.MalformedFrame(msg)
            if h.op != wire.OP_GET:
                raise errors.MalformedFrame(f"response opcode {wire.OP_NAMES.get(h.op, h.op)} for a get request")
            if not h.flags & wire.FLAG_RESPONSE:
                raise errors.MalformedFrame("response without the response flag")
            if h.code:  # the whole frame is read: the connection stays usable
                req_err = errors.from_code(h.code, wire.read_response(self, h).message)
            else:
                return self._get_items(h, count, views, summing)
        except errors.CtxtierError:
            self.close()
            raise
        except (OSError, struct.error) as e:
            raise self._io_error("native call", e) from e
        except BaseException:
            self.close()
            raise
        raise req_err

    def _get_items(self, h: wire.Header, count: int, views, summing: bool) -> list:
        if h.count != count:
            raise errors.MalformedFrame(f"{h.count} results for {count} items")
        buf = self._buf
        need = self._need_upto
        left = h.length
        out = []
        for i in range(count):
            if left < wire.STATUS_SIZE:
                raise errors.MalformedFrame("response body ends early")
            need(wire.STATUS_SIZE, _GET_FIXED)
            code, n = _STATUS.unpack_from(buf, self._lo)
            self._lo += wire.STATUS_SIZE
            left -= wire.STATUS_SIZE
            if n > wire.MAX_MESSAGE_LEN or (code == 0 and n) or n > left:
                raise errors.MalformedFrame(f"item {i}: message of {n} bytes with code {code}")
            if code:
                out.append(wire.ItemResult(code=code, message=self._read_exact(n).decode("utf-8", "replace")))
                left -= n
                continue
            if left < wire.GET_META_SIZE:
                raise errors.MalformedFrame("response body ends early")
            need(wire.GET_META_SIZE, wire.GET_META_SIZE)
            csum, size, tier = _GET_META.unpack_from(buf, self._lo)
            self._lo += wire.GET_META_SIZE
            left -= wire.GET_META_SIZE
            if size > left:
                raise errors.MalformedFrame(f"item {i}: block of {size} bytes past the body end ({left} left)")
            it = wire.ItemResult(sum=csum, size=size, tier=tier)
            dst = views[i] if views is not None else memoryview(bytearray(size))
            if len(dst) < size:
                it.skipped = True
                self.skip(size)
            else:
                it.data = dst[:size]
                it.data_sum = self.read_into(it.data, summing)
            left -= size
            out.append(it)
        if left:
            raise errors.MalformedFrame(f"{left} trailing bytes in the response body")
        return out

    def pipeline(self, frames: list, summing: bool = False) -> list:
        """Send frames and return their responses in order.

        Each frame is (op, flags, count, segments, dest): segments are the
        body's buffers (sent with sendmsg, the header is added here), dest the
        GET destination chooser or None. At most a window of frames is
        unanswered at any time.
        """
        window = max(1, min(self.limits.max_in_flight or 1, 16))
        out: list = [None] * len(frames)
        pending: dict[int, int] = {}
        sent = 0
        got = 0
        try:
            while got < len(frames):
                while sent < len(frames) and sent - got < window:
                    op, flags, count, segs, _ = frames[sent]
                    self._next_id += 1
                    fid = self._next_id
                    length = sum(len(s) for s in segs)
                    hdr = bytearray(wire.HEADER_SIZE)
                    wire.pack_header_into(hdr, length, op, flags, fid, count)
                    pending[fid] = sent
                    self.sendv([hdr, *segs])
                    sent += 1
                h = wire.decode_header(self._read_exact(wire.HEADER_SIZE), self.limits.max_response_size)
                if h.id in self.orphans:
                    self.orphans.discard(h.id)
                    wire.read_response(self, h, _skip_all)
                    continue
                idx = pending.pop(h.id, None)
                if idx is None:
                    msg = f"response for unknown request id {h.id} (code {errors.name_of(h.code)})"
                    if h.code:
                        try:
                            msg = wire.read_response(self, h).message or msg
                        except errors.CtxtierError:
                            pass
                        raise errors.from_code(h.code, msg)
                    raise errors.MalformedFrame(msg)
                op, _, count, _, dest = frames[idx]
                if h.op != op:
                    raise errors.MalformedFrame(f"response opcode {wire.OP_NAMES.get(h.op, h.op)} for a "
                                                f"{wire.OP_NAMES.get(op, op)} request")
                resp = wire.read_response(self, h, dest, summing)
                if h.code == 0 and resp.items and len(resp.items) != count:
                    raise errors.MalformedFrame(f"{len(resp.items)} results for {count} items")
                if h.code == 0 and op not in (wire.OP_LOOKUP, wire.OP_PING, wire.OP_ROUTE) and \
                        len(resp.items) != count:
                    raise errors.MalformedFrame(f"{len(resp.items)} results for {count} items")
                out[idx] = resp
                got += 1
        except errors.CtxtierError:
            self.close()
            raise
        except (OSError, struct.error) as e:
            raise self._io_error("native call", e) from e
        except BaseException:
            self.close()  # interrupted mid-frame: the stream cannot be trusted
            raise
        return out


_HDR = struct.Struct("<IBBHQII")
_STATUS = struct.Struct("<HH")
_GET_META = struct.Struct("<IIB3x")
_GET_FIXED = wire.STATUS_SIZE + wire.GET_META_SIZE  # what precedes a block in a GET response


# Kernel socket timeouts (see Conn.settimeout): Linux, where struct timeval is two C longs.
_KERNEL_TIMEOUTS = sys.platform.startswith("linux") and hasattr(socket, "SO_RCVTIMEO")
_TIMED_OUT = {errno.EAGAIN, errno.EWOULDBLOCK}
_UNSET = object()


def _timeval(t: Optional[float]) -> bytes:
    """t seconds as a struct timeval; None (no bound) is zero, and a positive t is at least 1 us."""
    if t is None:
        return struct.pack("@ll", 0, 0)
    us = max(1, round(t * 1e6))
    return struct.pack("@ll", us // 1_000_000, us % 1_000_000)


def _skip_all(i: int, size: int) -> memoryview:
    return memoryview(b"")


def split_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise errors.InvalidArgument(f"address {addr!r} is not HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


DestFn = Callable[[int, int], Optional[memoryview]]
