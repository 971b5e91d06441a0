"""CPU cost of one Client.get_into call beyond the bytes it moves.

    .venv/bin/python python/tools/bench_get_overhead.py --addr 127.0.0.1:7400

Puts one small block (--size, 16 bytes by default) and, in one process on one
connection each, alternates --rounds rounds of --calls calls of

* ctxtier: ``Client.get_into`` of that block into a preallocated buffer
  (CRC-32C check on, as in ctxtier.bench);
* raw frame: the same GET frame, built once, sent on a handshaken socket and
  its whole response received with ``recv_into``: no parsing, no checksum.

A small block makes the per-call work (Python, the request, the response's
fixed fields) the whole cost. It prints the CPU microseconds per call of
each (the median over rounds, process CPU time) and what the difference
adds per GB when blocks are --block-size (2 MiB) each.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

from ctxtier import Client, wire
from ctxtier.bench import parse_size
from ctxtier.conn import Conn, split_addr


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--addr", default="127.0.0.1:7400")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--size", type=parse_size, default=16, help="the block fetched")
    ap.add_argument("--block-size", type=parse_size, default=parse_size("2MiB"), help="for the per-GB figure")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args(argv)
    if min(a.size, a.calls, a.rounds, a.block_size) < 1:
        ap.error("--size, --calls, --rounds and --block-size must be positive")

    c = Client(a.addr, pool_size=1, verify=True, timeout=60)
    h = random.getrandbits(64)
    c.put(a.namespace, h, os.urandom(a.size))
    buf = bytearray(a.size)

    host, port = split_addr(a.addr)
    rc = Conn.dial(host, port, timeout=60, flags=wire.HELLO_VERIFIES_GETS)
    s = rc.sock
    s.settimeout(None)
    frame = wire.encode_frame(wire.OP_GET, 1, 1, wire.key_body(wire.OP_GET, a.namespace, [(h, None)]))
    n = wire.HEADER_SIZE + wire.STATUS_SIZE + wire.GET_META_SIZE + a.size
    rbuf = bytearray(n)
    rview = memoryview(rbuf)

    def ctxtier_call():
        if c.get_into(a.namespace, [h], [buf]) != [a.size]:
            raise RuntimeError("get_into did not return the block")

    def raw_call():
        s.sendall(frame)
        got = 0
        while got < n:
            k = s.recv_into(rview[got:])
            if k == 0:
                raise ConnectionError("ctxd closed the connection")
            got += k
        if int.from_bytes(rbuf[:4], "little") != n - wire.HEADER_SIZE:
            raise RuntimeError("ctxd did not answer with the block")

    us = {"ctxtier": [], "raw frame": []}
    for _ in range(a.rounds):
        for name, f in (("raw frame", raw_call), ("ctxtier", ctxtier_call)):
            t0 = time.process_time()
            for _ in range(a.calls):
                f()
            us[name].append((time.process_time() - t0) / a.calls * 1e6)
    c.close()
    rc.close()
    med = {k: statistics.median(v) for k, v in us.items()}
    for k, v in us.items():
        print(f"{k}: {med[k]:.1f} us CPU per call (median of {a.rounds} rounds, min {min(v):.1f}, max {max(v):.1f})")
    extra = med["ctxtier"] - med["raw frame"]
    print(f"ctxtier - raw frame: {extra:.1f} us per call = {extra * 1e-6 * 1e9 / a.block_size:.4f} s/GB "
          f"at {a.block_size}-byte blocks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
