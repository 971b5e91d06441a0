"""ctxtier.weights into torch tensors: a checkpoint of the dtypes numpy cannot
hold (BF16, FP8) beside ordinary ones, written by safetensors' own torch
writer and pushed with `ctxctl weights push` to a real ctxd, loads through the
S3 endpoint into tensors equal bit for bit to safetensors' own torch load of
the same file. Runs where torch is installed (make test-engines)."""

from __future__ import annotations

import os

import pytest

try:
    import torch
    import safetensors.torch as safetensors_torch
except ImportError:
    if os.environ.get("CTXTIER_ENGINES") == "1":
        raise RuntimeError("CTXTIER_ENGINES=1 but torch is not installed: run `make engines-venv`")
    pytest.skip("the loader's torch path runs under `make test-engines` (torch installed)", allow_module_level=True)

from ctxtier.weights import load_safetensors  # noqa: E402
from test_weights import push, s3node  # noqa: E402,F401  (s3node is a fixture)


def synthetic(path):
    g = torch.Generator().manual_seed(11)
    tensors = {
        "embed.bf16": torch.randn(1024, 1536, generator=g).to(torch.bfloat16),  # 3 MiB
        "up.f16": torch.randn(777, 1031, generator=g).to(torch.float16),
        "norm.f32": torch.randn(4096, generator=g),
        "ids.i64": torch.arange(-5000, 5000, dtype=torch.int64),
        "mask.bool": torch.rand(999, generator=g) > 0.5,
        "scalar.bf16": torch.tensor(3.5, dtype=torch.bfloat16),
        "empty.i32": torch.zeros(0, 16, dtype=torch.int32),
    }
    if hasattr(torch, "float8_e4m3fn"):
        tensors["w.fp8e4m3"] = (torch.randn(300, 257, generator=g) * 8).to(torch.float8_e4m3fn)
        tensors["w.fp8e5m2"] = (torch.randn(64, 33, generator=g) * 8).to(torch.float8_e5m2)
    safetensors_torch.save_file(tensors, str(path), metadata={"format": "pt"})
    return tensors


@pytest.mark.parametrize("parallel", [1, 4])
def test_torch_load_equals_safetensors(s3node, tmp_path, parallel):  # noqa: F811
    node, s3, key, secret = s3node
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    synthetic(ckpt / "model.safetensors")
    push(node, s3, key, secret, ckpt, "synthetic/torch")
    want = safetensors_torch.load_file(str(ckpt / "model.safetensors"))
    got = load_safetensors(s3, "synthetic/torch", "model.safetensors", access_key=key, secret=secret,
                           parallel=parallel, framework="torch")
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        g = got[name]
        assert isinstance(g, torch.Tensor), name
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), (name, g.dtype, w.dtype, g.shape, w.shape)
        # Bit for bit: the raw bytes (NaN-safe, and defined for FP8).
        assert torch.equal(g.reshape(-1).view(torch.uint8), w.reshape(-1).view(torch.uint8)), name
