"""GET throughput of the Python client against a raw Python socket, in one run.

    python -m ctxtier.bench --addr 127.0.0.1:7400 --block-size 2MiB --clients 4 --duration 10s

It puts a working set of --keys distinct blocks into ctxd, then alternates
rounds of three loads with the same block size, clients and total duration:

- ctxtier: each client process GETs random blocks of the working set with
  ``Client.get_into`` into one preallocated buffer, with the client's CRC-32C
  check on (``verify=True``) unless --no-verify;
- raw socket: each client process asks a raw TCP server started by this
  benchmark (Python, the same --keys distinct blocks held in memory, one
  thread per connection, ``sendall``) for a block with an 8-byte request and
  receives it with ``recv_into`` into a preallocated buffer: no protocol, no
  checksum, no server-side storage;
- raw socket from ctxd: each client process sends ctxd a GET frame built
  beforehand on a handshaken socket (the same hello flags as the client) and
  receives the whole response with ``recv_into`` into a preallocated buffer:
  the same server and the same bytes as the client, without parsing,
  checksum or pool. ``ratio_vs_raw_socket_same_server`` is the client
  against it: what the client's own work costs.

Clients are processes (one connection each), so the GIL of one client
process does not limit another. After an uncounted warm-up of each load
(--warmup), the --rounds rounds run the three loads one after another, the
order rotated each round so that no load always goes first; every round
prints its GB/s and ratios. The last line printed is
``ratio_vs_raw_socket=<median over the rounds of ctxtier GB/s / raw GB/s>``
(each round's ctxtier load against the raw load of the same round). With --server-pid the
line before it compares CPU seconds per GB of the clients plus their server
(``cpu_ratio_vs_raw_socket=<raw / ctxtier>``, the median of the rounds'), the figure the GB/s ratio
tends to on a quiet CPU-bound machine. With --go-ctxbench PATH
it also runs the Go client's figure (``ctxbench load --vs-baseline``) against
the same server first and prints its result.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import re
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

from . import crc, wire
from .client import Client
from .conn import Conn, split_addr

_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9}


def parse_size(s: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([kmg]i?b|b)?\s*", s, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"size {s!r}: want bytes or a KiB/MiB/GiB or KB/MB/GB suffix")
    return int(m.group(1)) * _UNITS[(m.group(2) or "").lower()]


def parse_duration(s: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*", s)
    if not m:
        raise argparse.ArgumentTypeError(f"duration {s!r}: want e.g. 10s, 500ms, 1m")
    return float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60, None: 1}[m.group(2)]


# ---------------------------------------------------------------- raw server


def _raw_server(ready, port_out, block_size: int, keys: int) -> None:
    blocks = [os.urandom(block_size) for _ in range(keys)]
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    port_out.value = ls.getsockname()[1]
    ready.set()

    def serve(s: socket.socket) -> None:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with s:
            try:
                while True:
                    req = s.recv(8, socket.MSG_WAITALL)
                    if len(req) < 8:
                        return
                    s.sendall(blocks[struct.unpack("<Q", req)[0] % keys])
            except OSError:
                return

    while True:
        s, _ = ls.accept()
        threading.Thread(target=serve, args=(s,), daemon=True).start()


# ---------------------------------------------------------------- clients


def _worker(conn, addr: str, raw_port: int, ns: str, hashes: list, block_size: int, verify: bool, seed: int):
    rnd = random.Random(seed)
    c = Client(addr, pool_size=1, verify=verify, timeout=60)
    buf = bytearray(block_size)
    view = memoryview(buf)
    raw = socket.create_connection(("127.0.0.1", raw_port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # The raw reader of ctxd's own bytes: a handshaken socket (the same hello
    # flags as the client, so ctxd does the same work), GET frames built
    # beforehand, and the whole response received into one buffer: no
    # parsing, no checksum, no pool.
    host, port = split_addr(addr)
    rc = Conn.dial(host, port, timeout=60, flags=wire.HELLO_VERIFIES_GETS if verify else 0)
    rsock = rc.sock
    rsock.settimeout(None)
    frames = []
    for h in hashes:
        body = wire.key_body(wire.OP_GET, ns, [(h, None)])
        frames.append(wire.encode_frame(wire.OP_GET, 1, 1, body))
    resp_len = wire.HEADER_SIZE + wire.STATUS_SIZE + wire.GET_META_SIZE + block_size
    rbuf = bytearray(resp_len)
    rview = memoryview(rbuf)
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            break
        mode, t_end = msg
        cpu0 = time.process_time()
        n = 0
        nbytes = 0
        lat = []
        errors = 0
        while True:
            t0 = time.perf_counter()
            if t0 >= t_end:
                break
            i = rnd.randrange(len(hashes))
            if mode == "ctxtier":
                try:
                    (size,) = c.get_into(ns, [hashes[i]], [buf])
                except Exception:  # counted, the run goes on
                    errors += 1
                    continue
            elif mode == "raw":
                raw.sendall(struct.pack("<Q", i))
                got = 0
                while got < block_size:
                    k = raw.recv_into(view[got:])
                    if k == 0:
                        raise ConnectionError("raw server closed")
                    got += k
                size = got
            else:  # rawctxd
                rsock.sendall(frames[i])
                got = rsock.recv_into(rview)
                if got < 4 or struct.unpack_from("<I", rbuf)[0] != resp_len - wire.HEADER_SIZE:
                    raise ConnectionError("ctxd did not answer with the whole block")  # NotFound, say
                while got < resp_len:
                    k = rsock.recv_into(rview[got:])
                    if k == 0:
                        raise ConnectionError("ctxd closed")
                    got += k
                size = got - (resp_len - block_size)
            lat.append(time.perf_counter() - t0)
            n += 1
            nbytes += size or 0
        conn.send((n, nbytes, errors, lat, time.process_time() - cpu0))
    raw.close()
    rsock.close()
    c.close()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc), 0 when unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _pct(xs: list, p: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ctxtier.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--addr", default="127.0.0.1:7400", help="ctxd's native protocol address")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--block-size", type=parse_size, default=parse_size("2MiB"))
    ap.add_argument("--clients", type=int, default=4, help="client processes, one connection each")
    ap.add_argument("--duration", type=parse_duration, default=10.0, help="per load, split into --rounds")
    ap.add_argument("--rounds", type=int, default=10, help="alternating rounds of each load (order rotated)")
    ap.add_argument("--warmup", type=parse_duration, default=0.5, help="per load, once before the rounds, not counted")
    ap.add_argument("--keys", type=int, default=64, help="working set: distinct blocks")
    ap.add_argument("--no-verify", action="store_true", help="leave GET verification to the server's tier")
    ap.add_argument("--server-pid", type=int, help="ctxd's pid, to report the server's CPU per GB as well")
    ap.add_argument("--go-ctxbench", metavar="PATH", help="also run the Go client's `ctxbench load --vs-baseline`")
    a = ap.parse_args(argv)
    if a.clients < 1 or a.keys < 1 or a.rounds < 1 or a.block_size < 1 or a.warmup < 0:
        ap.error("--clients, --keys, --rounds and --block-size must be positive, --warmup not negative")
    verify = not a.no_verify

    if a.go_ctxbench:
        cmd = [a.go_ctxbench, "load", "--addr", a.addr, "--block-size", str(a.block_size), "--clients",
               str(a.clients), "--get-ratio", "1", "--duration", f"{a.duration}s", "--keys", str(a.keys),
               "--vs-baseline"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            print(f"go ctxbench failed ({out.returncode}): {out.stderr.strip()}", file=sys.stderr)
            return 1
        for line in out.stdout.strip().splitlines():
            print("go: " + line)
        sys.stdout.flush()

    # The working set.
    rnd = random.Random()  # fresh keys each run: no Conflict with an earlier run's blocks
    hashes = [rnd.getrandbits(64) for _ in range(a.keys)]
    with Client(a.addr, pool_size=1, timeout=60) as c:
        block = bytearray(os.urandom(a.block_size))
        for i, h in enumerate(hashes):
            block[:8] = struct.pack("<Q", i)  # distinct contents
            c.put(a.namespace, h, block)

    ctx = mp.get_context("fork")
    ready, port = ctx.Event(), ctx.Value("i", 0)
    server = ctx.Process(target=_raw_server, args=(ready, port, a.block_size, a.keys), daemon=True)
    server.start()
    ready.wait(30)
    pipes, procs = [], []
    for i in range(a.clients):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(child, a.addr, port.value, a.namespace, hashes, a.block_size, verify,
                                              100 + i), daemon=True)
        p.start()
        pipes.append(parent)
        procs.append(p)
    for pp in pipes:
        assert pp.recv() == "ready"

    modes = ("raw", "rawctxd", "ctxtier")
    server_pid = {"ctxtier": a.server_pid, "rawctxd": a.server_pid, "raw": server.pid}

    def run_load(mode: str, secs: float) -> list:
        """One load for secs on every client: [gets, bytes, errors, latencies, wall s, client cpu s, server cpu s]."""
        t_end = time.perf_counter() + secs
        t0 = time.perf_counter()
        s0 = _cpu_seconds(server_pid[mode]) if server_pid[mode] else 0.0
        for pp in pipes:
            pp.send((mode, t_end))
        out = [0, 0, 0, [], 0.0, 0.0, 0.0]
        for pp in pipes:
            n, nb, errs, lat, cpu = pp.recv()
            out[0] += n
            out[1] += nb
            out[2] += errs
            out[3].extend(lat)
            out[5] += cpu
        out[4] = time.perf_counter() - t0
        if server_pid[mode]:
            out[6] = _cpu_seconds(server_pid[mode]) - s0
        return out

    # Warm-up, not counted: connections, buffers' pages and the server's
    # first allocations are paid before any round is timed.
    if a.warmup > 0:
        for mode in modes:
            run_load(mode, a.warmup)
    # Rounds alternate the loads and rotate their order (round r starts with
    # modes[r % 3]), so no load always runs first or always follows another.
    per_round = a.duration / a.rounds
    rounds = []
    for r in range(a.rounds):
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        rounds.append((order, {mode: run_load(mode, per_round) for mode in order}))
    for pp in pipes:
        pp.send(None)
    for p in procs:
        p.join(10)
    server.kill()

    def gbps(t):
        return t[1] / t[4] / 1e9 if t[4] else 0.0

    def cpu_per_gb(t):
        # Clients plus their server: what the GB/s ratio tends to when the
        # machine is CPU-bound and quiet.
        return (t[5] + t[6]) / (t[1] / 1e9) if t[1] else 0.0

    def ratio(x, y):
        return x / y if y else 0.0

    mode_desc = "processes" if a.clients > 1 else "process"
    check = f"crc32c ({crc.IMPL})" if verify else "off (server verifies at rest)"
    print(f"bench: addr={a.addr} namespace={a.namespace} block={a.block_size} clients={a.clients} ({mode_desc}, "
          f"one connection each) keys={a.keys} duration={a.duration:g}s rounds={a.rounds} warmup={a.warmup:g}s "
          f"get check={check}")
    per = {"ratio": [], "same": [], "cpu": [], "cpu_mode": {m: [] for m in modes}}
    for i, (order, res) in enumerate(rounds, 1):
        g = {m: gbps(res[m]) for m in modes}
        cpu = {m: cpu_per_gb(res[m]) for m in modes}
        per["ratio"].append(ratio(g["ctxtier"], g["raw"]))
        per["same"].append(ratio(g["ctxtier"], g["rawctxd"]))
        for m in modes:
            per["cpu_mode"][m].append(cpu[m])
        line = (f"round {i} ({','.join(order)}): ctxtier {g['ctxtier']:.3f} GB/s, raw {g['raw']:.3f} GB/s, "
                f"raw from ctxd {g['rawctxd']:.3f} GB/s; ratio {per['ratio'][-1]:.3f}, same server "
                f"{per['same'][-1]:.3f}")
        if a.server_pid:
            per["cpu"].append(ratio(cpu["raw"], cpu["ctxtier"]))
            line += (f"; cpu s/GB ctxtier {cpu['ctxtier']:.3f}, raw {cpu['raw']:.3f}, raw from ctxd "
                     f"{cpu['rawctxd']:.3f}, cpu ratio {per['cpu'][-1]:.3f}")
        print(line)
    for mode, label in (("ctxtier", "ctxtier python get_into"), ("raw", "raw python socket"),
                        ("rawctxd", "raw python socket from ctxd")):
        t = [sum(res[mode][k] for _, res in rounds) for k in (0, 1, 2)]
        lat = [x for _, res in rounds for x in res[mode][3]]
        secs, cpu, scpu = (sum(res[mode][k] for _, res in rounds) for k in (4, 5, 6))
        n, nb, errs = t
        print(f"{label}: {n} gets, {errs} errors in {secs:.2f}s: {ratio(nb, secs) / 1e9:.3f} GB/s "
              f"(median of rounds {statistics.median(gbps(res[mode]) for _, res in rounds):.3f}), "
              f"{ratio(n, secs):.0f} gets/s; latency p50={_pct(lat, 0.5) * 1e6:.0f}us p99={_pct(lat, 0.99) * 1e6:.0f}us; "
              f"client cpu {ratio(cpu, nb / 1e9):.3f} s/GB"
              + (f", server cpu {ratio(scpu, nb / 1e9):.3f} s/GB" if server_pid[mode] else ""))
    if a.server_pid:
        # Medians over the rounds; on a machine shared with other jobs the
        # CPU ratio swings less than the GB/s one, which then mostly follows
        # how the scheduler shares the cores.
        med = {m: statistics.median(per["cpu_mode"][m]) for m in modes}
        print(f"cpu per GB, clients + server, median of rounds: ctxtier {med['ctxtier']:.3f} s/GB, raw "
              f"{med['raw']:.3f} s/GB, raw from ctxd {med['rawctxd']:.3f} s/GB; "
              f"cpu_ratio_vs_raw_socket={statistics.median(per['cpu']):.3f}")
    print(f"ratio_vs_raw_socket_same_server={statistics.median(per['same']):.3f}")
    print(f"ratio_vs_raw_socket={statistics.median(per['ratio']):.3f}")
    errors = sum(res[m][2] for _, res in rounds for m in ("ctxtier", "rawctxd"))
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
