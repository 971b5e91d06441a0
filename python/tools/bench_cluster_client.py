"""Puts and gets of 2 MiB blocks on a three-node cluster: ClusterClient
(each block to its owner) against Client (every block through one node).

    .venv/bin/python python/tools/bench_cluster_client.py --ctxd bin/ctxd --rounds 6

Starts three ctxd processes (a cluster on free 127.0.0.1 ports, 2 GiB of
DRAM each, in a temporary directory it deletes), creates a one-copy
namespace, then alternates the two clients round by round (which one goes
first alternates too). Each round puts --blocks new blocks in batches of
--batch with put_many, then reads them back with get_into into preallocated
buffers, and prints per client: GB/s, the three nodes' CPU seconds per GB
(/proc/PID/stat), and the shard batches the nodes forwarded to each other
(ctxtier_cluster_shard_batches_total). The last lines are the medians and
``ratio_routed_vs_one_node_get=`` / ``_put=``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

import ctxtier


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric(http: str, name: str) -> float:
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines()
               if ln.startswith(name + " ") or ln.startswith(name + "{"))


def start_cluster(ctxd: str, root: str) -> tuple:
    secret = secrets.token_urlsafe(32)
    nodes = [dict(id=f"n{i + 1}", native=f"127.0.0.1:{free_port()}", http=f"127.0.0.1:{free_port()}") for i in range(3)]
    joins = ",".join(n["http"] for n in nodes)
    procs = []
    for i, n in enumerate(nodes):
        d = os.path.join(root, n["id"])
        os.makedirs(d)
        with open(os.path.join(d, "ctxd.log"), "wb") as log:
            procs.append(subprocess.Popen(
                [ctxd, "--node-id", n["id"], "--data-dir", d, "--listen", n["native"], "--http-listen", n["http"],
                 "--raft-listen", f"127.0.0.1:{free_port()}", "--peer-listen", f"127.0.0.1:{free_port()}",
                 "--s3-admin-listen", "", "--resp-listen", "", "--zone", f"zone-{i}", "--dram-capacity", "2GiB",
                 "--log-level", "warn", "--join", joins, "--bootstrap-expect", "3", "--cluster-secret", secret],
                stdout=log, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://{nodes[0]['http']}/v1/cluster/status", timeout=1) as r:
                st = json.load(r)
            if st.get("leader") and sum(m.get("state") == "alive" for m in st["members"]) == 3 and all(
                    urllib.request.urlopen(f"http://{n['http']}/readyz", timeout=1).status == 200 for n in nodes):
                return nodes, procs
        except OSError:
            pass
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError(f"the cluster did not form; logs in {root}")
        time.sleep(0.1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ctxd", default="bin/ctxd")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--blocks", type=int, default=128, help="2 MiB blocks per client and round")
    ap.add_argument("--batch", type=int, default=16)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="ctxtier-cluster-client-")
    nodes, procs = start_cluster(a.ctxd, root)
    try:
        body = json.dumps({"name": "onecopy", "data_shards": 1}).encode()
        urllib.request.urlopen(urllib.request.Request(f"http://{nodes[0]['http']}/v1/namespaces", data=body,
                                                      method="POST", headers={"Content-Type": "application/json"}),
                               timeout=10).close()
        size = 2 << 20
        data = os.urandom(size)
        clients = {"one-node": ctxtier.Client(nodes[0]["native"]),
                   "routed": ctxtier.ClusterClient([(n["native"], n["http"]) for n in nodes])}
        bufs = [bytearray(size) for _ in range(a.batch)]
        res: dict = {k: {"put": [], "get": []} for k in clients}
        nxt = 1
        print(f"load average {os.getloadavg()[0]:.2f}")
        for rnd in range(a.rounds):
            order = list(clients) if rnd % 2 == 0 else list(clients)[::-1]
            for name in order:
                c = clients[name]
                hs = list(range(nxt, nxt + a.blocks))
                nxt += a.blocks
                gb = a.blocks * size / 1e9
                c0 = sum(cpu(p.pid) for p in procs)
                f0 = sum(metric(n["http"], "ctxtier_cluster_shard_batches_total") for n in nodes)
                t0 = time.perf_counter()
                for i in range(0, a.blocks, a.batch):
                    got = c.put_many("onecopy", [(h, data) for h in hs[i:i + a.batch]])
                    if any(e is not None for e in got):
                        raise SystemExit(f"{name}: put failed: {got}")
                tp = time.perf_counter() - t0
                c1 = sum(cpu(p.pid) for p in procs)
                f1 = sum(metric(n["http"], "ctxtier_cluster_shard_batches_total") for n in nodes)
                t0 = time.perf_counter()
                for i in range(0, a.blocks, a.batch):
                    part = hs[i:i + a.batch]
                    if c.get_into("onecopy", part, bufs[:len(part)]) != [size] * len(part) or bufs[0] != data:
                        raise SystemExit(f"{name}: a get returned the wrong size or bytes")
                tg = time.perf_counter() - t0
                c2 = sum(cpu(p.pid) for p in procs)
                res[name]["put"].append(gb / tp)
                res[name]["get"].append(gb / tg)
                print(f"round {rnd + 1} {name:8s} put {gb / tp:.3f} GB/s, nodes {(c1 - c0) / gb:.3f} CPU s/GB, "
                      f"{f1 - f0:.0f} shard batches forwarded | get {gb / tg:.3f} GB/s, nodes {(c2 - c1) / gb:.3f} CPU s/GB"
                      f" | load {os.getloadavg()[0]:.2f}", flush=True)
        for c in clients.values():
            c.close()
        for op in ("put", "get"):
            one, routed = statistics.median(res["one-node"][op]), statistics.median(res["routed"][op])
            print(f"{op}_gb_s one_node={one:.3f} routed={routed:.3f}")
        for op in ("put", "get"):
            print(f"ratio_routed_vs_one_node_{op}="
                  f"{statistics.median(res['routed'][op]) / statistics.median(res['one-node'][op]):.2f}")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
