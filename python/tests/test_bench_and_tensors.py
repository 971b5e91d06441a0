"""The benchmark's command line end to end, and tensors as put sources and get_into targets."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ctxtier

SRC = Path(__file__).resolve().parents[1] / "src"


def test_bench_runs_and_prints_the_ratio_last(ctxd):
    env = dict(os.environ, PYTHONPATH=str(SRC))
    out = subprocess.run([sys.executable, "-m", "ctxtier.bench", "--addr", ctxd.addr, "--block-size", "64KiB",
                          "--clients", "2", "--duration", "1s", "--rounds", "2", "--keys", "8",
                          "--server-pid", str(ctxd.proc.pid)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1].startswith("ratio_vs_raw_socket=")
    assert float(lines[-1].split("=")[1]) > 0
    assert any(l.startswith("ctxtier python get_into:") and " 0 errors" in l for l in lines)
    assert any(l.startswith("raw python socket:") for l in lines)
    # The CPU ratio is raw's (client + server) CPU per GB over ctxtier's, as printed.
    assert any(l.startswith("raw python socket from ctxd:") and " 0 errors" in l for l in lines)
    assert lines[-2].startswith("ratio_vs_raw_socket_same_server=")
    assert float(lines[-2].split("=")[1]) > 0
    m = re.fullmatch(r"cpu per GB, clients \+ server: ctxtier ([\d.]+) s/GB, raw ([\d.]+) s/GB, raw from ctxd "
                     r"([\d.]+) s/GB; cpu_ratio_vs_raw_socket=([\d.]+)", lines[-3])
    assert m, lines[-3]
    cc, cr, cs, ratio = map(float, m.groups())
    assert cc > 0 and cr > 0 and cs > 0
    assert ratio == pytest.approx(cr / cc, rel=0.03)


def test_numpy_views_are_sent_and_filled_in_place(ctxd):
    c = ctxtier.Client(ctxd.addr)
    kv = np.random.default_rng(1).standard_normal((2, 16, 64)).astype(np.float16)
    h = random.getrandbits(64)
    c.put("default", h, kv)
    out = np.empty_like(kv)
    assert c.get_into("default", [h], [out]) == [kv.nbytes]
    assert np.array_equal(out, kv)
    # A non-contiguous view cannot be sent without a copy: refused, not copied silently.
    with pytest.raises(ctxtier.InvalidArgument):
        c.put("default", random.getrandbits(64), kv[:, ::2])
    c.close()


def test_cpu_torch_tensors_without_copies(ctxd):
    # torch is the engines' dependency: `make test-engines` installs it (CTXTIER_ENGINES=1 requires it).
    try:
        import torch
    except ImportError:
        if os.environ.get("CTXTIER_ENGINES") == "1":
            pytest.fail("CTXTIER_ENGINES=1 but torch is not installed: run `make engines-venv`")
        pytest.skip("torch not installed (make engines-venv adds it)")
    c = ctxtier.Client(ctxd.addr)
    kv = torch.randn(2, 8, 32, dtype=torch.bfloat16)  # no numpy dtype: sent as its raw bytes
    h = random.getrandbits(64)
    c.put("default", h, kv, part=1)
    dst = torch.empty_like(kv)
    assert c.get_into("default", [(h, 1)], [dst]) == [kv.numel() * kv.element_size()]
    assert torch.equal(dst, kv)
    # The view shares the tensor's memory: writes through it land in the tensor.
    v = ctxtier.as_view(dst, writable=True)
    v[0:2] = b"\0\0"
    assert dst.view(torch.uint8).reshape(-1)[0].item() == 0
    with pytest.raises(ctxtier.InvalidArgument):
        c.put("default", random.getrandbits(64), kv.transpose(0, 2))
    c.close()


def test_put_and_get_into_copy_nothing_into_python_objects(ctxd):
    # tracemalloc sees every bytes/bytearray/numpy allocation: a put that joined
    # its frame into one bytes object, or a get_into that received into a
    # temporary, would allocate at least the block's size.
    import tracemalloc

    c = ctxtier.Client(ctxd.addr)
    block = np.random.default_rng(2).integers(0, 255, size=8 << 20, dtype=np.uint8)
    out = np.empty_like(block)
    h = random.getrandbits(64)
    c.put("default", h, block)  # warm: the pool's connection and caches exist
    tracemalloc.start()
    try:
        c.put("default", h, block)  # idempotent: the same bytes travel again
        _, peak_put = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        assert c.get_into("default", [h], [out]) == [block.nbytes]
        _, peak_get = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.array_equal(out, block)
    assert peak_put < 1 << 20, peak_put
    assert peak_get < 1 << 20, peak_get
    c.close()


def test_get_overhead_tool_runs_and_reports_both_paths(ctxd):
    tool = Path(__file__).resolve().parents[1] / "tools" / "bench_get_overhead.py"
    env = dict(os.environ, PYTHONPATH=str(SRC))
    out = subprocess.run([sys.executable, str(tool), "--addr", ctxd.addr, "--calls", "20", "--rounds", "2"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    per_call = {}
    for l in lines[:2]:
        m = re.match(r"(ctxtier|raw frame): ([\d.]+) us CPU per call", l)
        assert m, l
        per_call[m.group(1)] = float(m.group(2))
    assert set(per_call) == {"ctxtier", "raw frame"}
    m = re.fullmatch(r"ctxtier - raw frame: (-?[\d.]+) us per call = (-?[\d.]+) s/GB at 2097152-byte blocks", lines[2])
    assert m, lines[2]
    assert float(m.group(1)) == pytest.approx(per_call["ctxtier"] - per_call["raw frame"], abs=0.11)
