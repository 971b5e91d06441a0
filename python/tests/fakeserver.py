"""A scripted native-protocol server for the client's failure tests.

It answers the handshake the way ctxd does (hello reply, challenge, auth
reply) and then hands each request frame to a test's handler, which writes
whatever bytes the test needs: corrupt blocks, half a frame, a wrong id.
"""

from __future__ import annotations

import socket
import threading

from ctxtier import wire

LIMITS = wire.Limits(max_frame_size=(64 << 20) + 4096, max_block_size=64 << 20, max_batch=1024,
                     max_in_flight=64, max_response_size=1 << 30)


def recv_exact(s: socket.socket, n: int) -> bytes:
    b = bytearray()
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            raise ConnectionError("peer closed")
        b += chunk
    return bytes(b)


class FakeServer:
    """Listens on 127.0.0.1; handler(sock, header, body, state) answers each request.

    hello(sock, version, flags) may refuse the handshake by returning False
    after writing its own reply. state is a dict shared by all connections.
    """

    def __init__(self, handler, hello=None, echo_flags: bool = True):
        self.handler = handler
        self.hello = hello
        self.echo_flags = echo_flags
        self.state: dict = {"requests": [], "hellos": []}
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.addr = "127.0.0.1:%d" % self.ls.getsockname()[1]
        self._stop = False
        self._conns = []
        self.t = threading.Thread(target=self._accept, daemon=True)
        self.t.start()

    def _accept(self):
        while not self._stop:
            try:
                s, _ = self.ls.accept()
            except OSError:
                return
            self._conns.append(s)
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s: socket.socket):
        try:
            v, flags = wire.decode_hello(recv_exact(s, wire.HELLO_SIZE))
            self.state["hellos"].append(flags)
            if self.hello is not None and self.hello(s, v, flags) is False:
                return
            s.sendall(wire.encode_hello_reply(wire.HelloReply(v, 0, LIMITS, flags if self.echo_flags else 0)))
            s.sendall(wire.encode_challenge(wire.Challenge(0, bytes(32))))
            n = recv_exact(s, 2)[0]
            recv_exact(s, n + 32)
            s.sendall(wire.encode_auth_reply(0))
            while True:
                h = wire.decode_header(recv_exact(s, wire.HEADER_SIZE), LIMITS.max_frame_size)
                body = recv_exact(s, h.length)
                self.state["requests"].append(h)
                if self.handler(s, h, body, self.state) is False:
                    return
        except (ConnectionError, OSError):
            pass
        finally:
            s.close()

    def close(self):
        self._stop = True
        self.ls.close()
        for s in self._conns:
            try:
                s.close()
            except OSError:
                pass


def get_keys(body: bytes, count: int) -> list:
    """The hashes of a GET/EXISTS/... request body."""
    n = body[0]
    b = body[1 + n:]
    return [int.from_bytes(b[i * 12:i * 12 + 8], "little") for i in range(count)]
