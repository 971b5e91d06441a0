"""ctxtier.weights: a safetensors checkpoint pushed with `ctxctl weights push`
to a real ctxd loads, through its S3 endpoint, into arrays equal bit for bit to
the safetensors package's own load of the same file."""

from __future__ import annotations

import json
import struct
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from conftest import free_port
from ctxtier import errors
from ctxtier.weights import S3Reader, load_safetensors, parse_header


@pytest.fixture
def s3node(start_ctxd, bins, tmp_path_factory):
    # The S3 key is made in the data directory before ctxd starts (what an
    # operator does with `ctxctl keys create --data-dir`).
    data = tmp_path_factory.mktemp("ctxd")
    r = subprocess.run([str(bins / "ctxctl"), "keys", "create", "--namespaces", "*", "--data-dir", str(data), "--json"],
                       check=True, capture_output=True)
    k = json.loads(r.stdout)
    s3 = f"127.0.0.1:{free_port()}"
    node = start_ctxd("--s3-admin-listen", s3, data_dir=data)
    return node, s3, k["access_key_id"], k["secret_access_key"]


def ctxctl(node, *args):
    r = subprocess.run([str(node.bins / "ctxctl"), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"ctxctl {' '.join(args[:2])}: {r.stderr}"
    return r.stdout


def push(node, s3, key, secret, directory, model):
    ctxctl(node, "weights", "push", str(directory), "--name", model, "--s3", s3,
           "--access-key", key, "--secret", secret, "--chunk-mib", "5", "--progress=false")


def synthetic(path):
    rng = np.random.default_rng(7)
    tensors = {
        "model.embed.weight": rng.standard_normal((1024, 1536), dtype=np.float32),  # 6 MiB
        "model.layers.0.mlp.up": rng.standard_normal((777, 1031)).astype(np.float16),
        "model.layers.0.norm": rng.standard_normal(4096),
        "positions": np.arange(-5000, 5000, dtype=np.int64),
        "bytes": rng.integers(0, 256, size=(3, 5, 7), dtype=np.uint8),
        "mask": rng.integers(0, 2, size=999).astype(bool),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 16), dtype=np.int32),
    }
    save_file(tensors, str(path), metadata={"format": "np", "note": "synthetic"})
    return tensors


@pytest.mark.parametrize("parallel", [1, 4])
def test_load_equals_safetensors(s3node, tmp_path, parallel):
    node, s3, key, secret = s3node
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    synthetic(ckpt / "model.safetensors")
    push(node, s3, key, secret, ckpt, "synthetic/tiny")
    want = load_file(str(ckpt / "model.safetensors"))
    got = load_safetensors(s3, "synthetic/tiny", "model.safetensors", access_key=key, secret=secret,
                           parallel=parallel, framework="numpy")
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape, name
        assert g.tobytes() == w.tobytes(), name

    # The same checkpoint pulled by the CLI is the same file.
    out = tmp_path / "pulled"
    ctxctl(node, "weights", "pull", "synthetic/tiny", str(out), "--s3", s3,
           "--access-key", key, "--secret", secret, "--progress=false")
    assert (out / "model.safetensors").read_bytes() == (ckpt / "model.safetensors").read_bytes()


def test_load_errors(s3node, tmp_path):
    node, s3, key, secret = s3node
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    synthetic(ckpt / "a.safetensors")
    # A file whose header claims more bytes than the file has.
    hdr = json.dumps({"t": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 4000]}}).encode()
    (ckpt / "short.safetensors").write_bytes(struct.pack("<Q", len(hdr)) + hdr + bytes(100))
    (ckpt / "huge-header.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    push(node, s3, key, secret, ckpt, "bad")
    with pytest.raises(errors.NotFound):
        load_safetensors(s3, "bad", "missing.safetensors", access_key=key, secret=secret, framework="numpy")
    with pytest.raises(errors.InvalidArgument, match="outside"):
        load_safetensors(s3, "bad", "short.safetensors", access_key=key, secret=secret, framework="numpy")
    with pytest.raises(errors.InvalidArgument, match="header length"):
        load_safetensors(s3, "bad", "huge-header.safetensors", access_key=key, secret=secret, framework="numpy")
    with pytest.raises(errors.PermissionDenied):
        load_safetensors(S3Reader(s3, key, "wrong-secret"), "bad", "a.safetensors", framework="numpy")
    with pytest.raises(errors.InvalidArgument):
        load_safetensors(s3, "bad", "a.safetensors", access_key=key, secret=secret, framework="jax")


@pytest.mark.parametrize("header,data_len,match", [
    (b"not json", 10, "not JSON"),
    (b"[1]", 10, "not a JSON object"),
    (b'{"t": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}}', 10, "dtype"),
    (b'{"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}', 10, "bad shape"),
    (b'{"t": {"dtype": "F32", "shape": [true], "data_offsets": [0, 4]}}', 10, "bad shape"),
    (b'{"t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}', 10, "outside"),
    (b'{"t": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}', 10, "outside"),
    (b'{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}', 10, "bytes for shape"),
    (b'{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},'
     b' "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}', 10, "overlap"),
])
def test_parse_header_rejects(header, data_len, match):
    with pytest.raises(errors.InvalidArgument, match=match):
        parse_header(header, data_len)


def test_parse_header_accepts_metadata_and_empty():
    h = parse_header(b'{"__metadata__": {"k": "v"}, "e": {"dtype": "I32", "shape": [0, 3], "data_offsets": [0, 0]},'
                     b' "x": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}', 4)
    assert set(h) == {"e", "x"} and h["x"]["data_offsets"] == [0, 4]
