"""The benchmark's command line end to end, and tensors as put sources and get_into targets."""

from __future__ import annotations

import os
import random
import re
import statistics
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
                          "--clients", "2", "--duration", "1.5s", "--rounds", "3", "--warmup", "100ms", "--keys",
                          "8", "--server-pid", str(ctxd.proc.pid)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1].startswith("ratio_vs_raw_socket=")
    assert float(lines[-1].split("=")[1]) > 0
    assert any(l.startswith("ctxtier python get_into:") and " 0 errors" in l for l in lines)
    assert any(l.startswith("raw python socket:") for l in lines)
    assert any(l.startswith("raw python socket from ctxd:") and " 0 errors" in l for l in lines)
    assert lines[-2].startswith("ratio_vs_raw_socket_same_server=")
    assert float(lines[-2].split("=")[1]) > 0
    # One line per round; the order of the loads rotates, and each round's
    # ratios are its own GB/s figures divided.
    rounds = [re.fullmatch(r"round (\d) \(([a-z,]+)\): ctxtier ([\d.]+) GB/s, raw ([\d.]+) GB/s, raw from ctxd "
                           r"([\d.]+) GB/s; ratio ([\d.]+), same server ([\d.]+); cpu s/GB ctxtier ([\d.]+), "
                           r"raw ([\d.]+), raw from ctxd ([\d.]+), cpu ratio ([\d.]+)", l)
              for l in lines if l.startswith("round ")]
    assert len(rounds) == 3 and all(rounds), lines
    assert [m.group(2).split(",")[0] for m in rounds] == ["raw", "rawctxd", "ctxtier"]
    for m in rounds:
        ct, raw, rawctxd, r, same = (float(m.group(k)) for k in (3, 4, 5, 6, 7))
        assert ct > 0 and raw > 0 and rawctxd > 0
        assert r == pytest.approx(ct / raw, rel=0.02, abs=0.002)
        assert same == pytest.approx(ct / rawctxd, rel=0.02, abs=0.002)
        cc, cr, cpu_ratio = float(m.group(8)), float(m.group(9)), float(m.group(11))
        assert cpu_ratio == pytest.approx(cr / cc, rel=0.02, abs=0.002)
    # The printed ratios are the medians of the rounds'.
    assert float(lines[-1].split("=")[1]) == pytest.approx(statistics.median(float(m.group(6)) for m in rounds), abs=0.001)
    assert float(lines[-2].split("=")[1]) == pytest.approx(statistics.median(float(m.group(7)) for m in rounds), abs=0.001)
    m = re.fullmatch(r"cpu per GB, clients \+ server, median of rounds: ctxtier ([\d.]+) s/GB, raw ([\d.]+) s/GB, "
                     r"raw from ctxd ([\d.]+) s/GB; cpu_ratio_vs_raw_socket=([\d.]+)", lines[-3])
    assert m, lines[-3]
    assert float(m.group(4)) == pytest.approx(statistics.median(float(r.group(11)) for r in rounds), abs=0.001)


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
