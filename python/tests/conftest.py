"""Fixtures: real ctxd processes built from this repository, and fake servers.

The ctxd and ctxctl binaries come from $CTXTIER_BIN (a directory; `make
py-test` builds ./bin and points here) or are built into a temporary
directory with `go build`. Each ctxd runs on free 127.0.0.1 ports with its own
data directory and is killed at the end of its scope.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "src"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def bins(tmp_path_factory) -> Path:
    d = os.environ.get("CTXTIER_BIN")
    if d:
        p = Path(d).resolve()
        for name in ("ctxd", "ctxctl"):
            if not (p / name).exists():
                pytest.fail(f"$CTXTIER_BIN={d} has no {name}: run `make build`")
        return p
    go = shutil.which("go") or "/usr/local/go/bin/go"
    out = tmp_path_factory.mktemp("bin")
    subprocess.run([go, "build", "-o", str(out) + "/", "./cmd/ctxd", "./cmd/ctxctl"], cwd=REPO, check=True)
    return out


class Ctxd:
    """One real ctxd process."""

    def __init__(self, bins: Path, data_dir: Path, *args: str):
        self.bins = bins
        self.data_dir = data_dir
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.http = f"127.0.0.1:{free_port()}"
        cmd = [str(bins / "ctxd"), "--data-dir", str(data_dir), "--listen", self.addr, "--http-listen", self.http,
               "--raft-listen", f"127.0.0.1:{free_port()}", "--peer-listen", f"127.0.0.1:{free_port()}",
               "--s3-admin-listen", "", "--resp-listen", "", "--dram-capacity", "256MiB", "--log-level", "warn", *args]
        self.log = open(data_dir / "ctxd.log", "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ctxd exited {self.proc.returncode}: {(data_dir / 'ctxd.log').read_text()}")
            try:
                with urllib.request.urlopen(f"http://{self.http}/readyz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("ctxd not ready within 30 s")
            time.sleep(0.05)

    def create_key(self, *namespaces: str) -> tuple[str, str]:
        """`ctxctl keys create` on this node's data directory; returns (access key id, secret)."""
        out = subprocess.run([str(self.bins / "ctxctl"), "keys", "create", "--namespaces", ",".join(namespaces),
                              "--data-dir", str(self.data_dir), "--json"], check=True, capture_output=True)
        j = json.loads(out.stdout)
        return j["access_key_id"], j["secret_access_key"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


@pytest.fixture(scope="session")
def ctxd(bins, tmp_path_factory):
    """A single-node ctxd shared by the tests of a session (tests use random hashes)."""
    p = Ctxd(bins, tmp_path_factory.mktemp("ctxd"))
    yield p
    p.stop()


@pytest.fixture
def start_ctxd(bins, tmp_path_factory):
    """Start ctxd processes with extra flags; all are stopped after the test."""
    procs = []

    def start(*args: str, data_dir: Path | None = None) -> Ctxd:
        p = Ctxd(bins, data_dir or tmp_path_factory.mktemp("ctxd"), *args)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


CLUSTER_TOKEN_HEADER = "X-Ctxtier-Cluster-Token"


def _start_cluster3(bins, tmp_path_factory, *extra: str):
    """Start three ctxd processes forming a cluster (extra flags on each);
    yield ([node dicts], cluster secret) once all are ready, stop them after."""
    secret = secrets.token_urlsafe(32)
    nodes = [dict(id=f"n{i + 1}", native=f"127.0.0.1:{free_port()}", http=f"127.0.0.1:{free_port()}") for i in range(3)]
    joins = ",".join(n["http"] for n in nodes)
    procs = []
    for i, n in enumerate(nodes):
        d = tmp_path_factory.mktemp(n["id"])
        log = open(d / "ctxd.log", "wb")
        procs.append((subprocess.Popen(
            [str(bins / "ctxd"), "--node-id", n["id"], "--data-dir", str(d), "--listen", n["native"],
             "--http-listen", n["http"], "--raft-listen", f"127.0.0.1:{free_port()}",
             "--peer-listen", f"127.0.0.1:{free_port()}", "--s3-admin-listen", "", "--resp-listen", "",
             "--zone", f"zone-{i}", "--dram-capacity", "128MiB", "--log-level", "warn",
             "--join", joins, "--bootstrap-expect", "3", "--cluster-secret", secret, *extra],
            stdout=log, stderr=subprocess.STDOUT), log, d))
    try:
        deadline = time.monotonic() + 60
        while True:
            for p, _, d in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"ctxd exited {p.returncode}: {(d / 'ctxd.log').read_text()[-2000:]}")
            try:
                req = urllib.request.Request(f"http://{nodes[0]['http']}/v1/cluster/status",
                                             headers={CLUSTER_TOKEN_HEADER: secret})
                with urllib.request.urlopen(req, timeout=5) as r:
                    st = json.load(r)
                alive = [m for m in st.get("members", []) if m.get("state") == "alive" and m.get("voter")]
                if st.get("leader") and len(alive) == 3 and all(
                        urllib.request.urlopen(f"http://{n['http']}/readyz", timeout=1).status == 200 for n in nodes):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not form within 60 s")
            time.sleep(0.1)
        yield nodes, secret
    finally:
        for p, log, _ in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
            log.close()


@pytest.fixture
def cluster3(bins, tmp_path_factory):
    """Three ctxd processes forming a cluster: [{id, native, http}]."""
    for nodes, _ in _start_cluster3(bins, tmp_path_factory):
        yield nodes


@pytest.fixture
def cluster3_auth(bins, tmp_path_factory):
    """Three ctxd processes with --auth required: ([{id, native, http}], cluster secret)."""
    yield from _start_cluster3(bins, tmp_path_factory, "--auth", "required")
