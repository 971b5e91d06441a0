"""Load a safetensors checkpoint from the tier straight into CPU tensors.

``ctxctl weights push DIR --name MODEL`` stores each checkpoint file as the
object ``MODEL/FILE`` of an object namespace (``weights`` by default) behind
ctxd's S3 endpoint. :func:`load_safetensors` reads one such file without
writing it to disk: a ranged GET of the 8-byte header length and the JSON
header, then, for each tensor, memory allocated with the tensor's own dtype
and shape that ranged GETs fill directly (``readinto`` on the response, no
copy of the file in between). Several ranged GETs run at once, each over a
contiguous run of tensors.

Only the standard library is needed to talk to the tier (``http.client`` and
AWS Signature V4, :mod:`ctxtier.sigv4`); the tensors are torch tensors
when torch is importable, else numpy arrays.
"""

from __future__ import annotations

import datetime
import http.client
import json
import math
import struct
import sys
import threading
import urllib.parse
from typing import Any

from . import errors, sigv4

__all__ = ["S3Reader", "load_safetensors", "parse_header", "MAX_HEADER"]

# The safetensors format caps its JSON header at 100 MB.
MAX_HEADER = 100_000_000


# safetensors dtype -> (numpy dtype name or None, torch dtype attribute, item size)
_DTYPES = {
    "F64": ("float64", "float64", 8),
    "F32": ("float32", "float32", 4),
    "F16": ("float16", "float16", 2),
    "BF16": (None, "bfloat16", 2),
    "F8_E4M3": (None, "float8_e4m3fn", 1),
    "F8_E5M2": (None, "float8_e5m2", 1),
    "I64": ("int64", "int64", 8),
    "I32": ("int32", "int32", 4),
    "I16": ("int16", "int16", 2),
    "I8": ("int8", "int8", 1),
    "U64": ("uint64", "uint64", 8),
    "U32": ("uint32", "uint32", 4),
    "U16": ("uint16", "uint16", 2),
    "U8": ("uint8", "uint8", 1),
    "BOOL": ("bool", "bool", 1),
}


class S3Reader:
    """Ranged GETs of objects in one object namespace of a ctxd S3 endpoint.

    ``endpoint`` is ``host:port``; requests are signed with AWS Signature V4
    (``UNSIGNED-PAYLOAD``) for ``region`` with an S3 key of the tier
    (``ctxctl keys create``). One HTTP connection per thread.
    """

    def __init__(self, endpoint: str, access_key: str, secret: str, namespace: str = "weights",
                 region: str = "us-east-1", timeout: float = 60.0):
        if not endpoint or not namespace:
            raise errors.InvalidArgument("endpoint and namespace are required")
        self.endpoint, self.access_key, self.secret = endpoint, access_key, secret
        self.namespace, self.region, self.timeout = namespace, region, timeout
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            host, _, port = self.endpoint.rpartition(":")
            c = http.client.HTTPConnection(host, int(port), timeout=self.timeout)
            self._local.conn = c
        return c

    def close(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None

    def _path(self, key: str) -> str:
        segs = [self.namespace] + key.split("/")
        return "/" + "/".join(urllib.parse.quote(s, safe="-_.~") for s in segs)

    def sign(self, method: str, path: str, now: datetime.datetime | None = None) -> dict[str, str]:
        """Headers (Host, X-Amz-Date, X-Amz-Content-Sha256, Authorization) of a SigV4-signed request."""
        return sigv4.sign(method, self.endpoint, path, self.access_key, self.secret, region=self.region, now=now)

    def _get(self, key: str, start: int, end: int) -> http.client.HTTPResponse:
        """Send GET of bytes start..end (inclusive) and return the 206 response, body unread."""
        path = self._path(key)
        headers = self.sign("GET", path)
        headers["Range"] = f"bytes={start}-{end}"
        for attempt in (0, 1):  # a kept-alive connection the server closed is retried once
            c = self._conn()
            try:
                c.request("GET", path, headers=headers)
                resp = c.getresponse()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt:
                    raise
        if resp.status != 206:
            body = resp.read(64 << 10)
            self.close()
            msg = f"GET {self.namespace}/{key} bytes {start}-{end}: HTTP {resp.status}: {body[:300]!r}"
            if resp.status == 404:
                raise errors.NotFound(msg)
            if resp.status == 416:
                raise errors.InvalidArgument(msg)
            if resp.status in (401, 403):
                raise errors.PermissionDenied(msg)
            raise errors.Internal(msg)
        return resp

    def read_range(self, key: str, start: int, n: int) -> tuple[bytes, int]:
        """Bytes start..start+n-1 and the object's total size (from Content-Range)."""
        resp = self._get(key, start, start + n - 1)
        b = resp.read()
        total = _total_from_content_range(resp.getheader("Content-Range", ""))
        if len(b) != n:
            raise errors.MalformedFrame(f"{key}: short range read: {len(b)} of {n} bytes")
        return b, total

    def read_into(self, key: str, start: int, targets: list[memoryview]) -> None:
        """Fill each buffer of targets, in order, from one ranged GET starting at start."""
        total = sum(t.nbytes for t in targets)
        if total == 0:
            return
        resp = self._get(key, start, start + total - 1)
        try:
            for t in targets:
                got = 0
                while got < t.nbytes:
                    n = resp.readinto(t[got:])
                    if not n:
                        raise errors.MalformedFrame(f"{key}: body ended {total} bytes early")
                    got += n
            if resp.read(1):
                raise errors.MalformedFrame(f"{key}: longer body than the range asked for")
        except BaseException:
            self.close()
            raise


def _total_from_content_range(v: str) -> int:
    # "bytes 0-7/12345"
    try:
        return int(v.rsplit("/", 1)[1])
    except (IndexError, ValueError):
        raise errors.MalformedFrame(f"bad Content-Range {v!r}") from None


def parse_header(raw: bytes, data_len: int) -> dict[str, dict[str, Any]]:
    """Check a safetensors JSON header against the data region's length.

    Returns the tensors (``__metadata__`` dropped), each with ``dtype``,
    ``shape`` and ``data_offsets`` relative to the data region. Raises
    InvalidArgument for any entry that is not well formed, overlaps another,
    or lies outside the data.
    """
    try:
        h = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.InvalidArgument(f"safetensors header is not JSON: {e}") from None
    if not isinstance(h, dict):
        raise errors.InvalidArgument("safetensors header is not a JSON object")
    out = {}
    spans = []
    for name, t in h.items():
        if name == "__metadata__":
            continue
        if not isinstance(t, dict) or t.get("dtype") not in _DTYPES:
            raise errors.InvalidArgument(f"tensor {name!r}: unknown or missing dtype")
        shape, offs = t.get("shape"), t.get("data_offsets")
        if (not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
                or not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise errors.InvalidArgument(f"tensor {name!r}: bad shape or data_offsets")
        b, e = offs
        if not 0 <= b <= e <= data_len:
            raise errors.InvalidArgument(f"tensor {name!r}: data_offsets {offs} outside the {data_len}-byte data")
        if e - b != math.prod(shape) * _DTYPES[t["dtype"]][2]:
            raise errors.InvalidArgument(f"tensor {name!r}: {e - b} bytes for shape {shape} of {t['dtype']}")
        spans.append((b, e, name))
        out[name] = {"dtype": t["dtype"], "shape": shape, "data_offsets": [b, e]}
    spans.sort()
    for (_, e1, n1), (b2, _, n2) in zip(spans, spans[1:]):
        if b2 < e1:
            raise errors.InvalidArgument(f"tensors {n1!r} and {n2!r} overlap")
    return out


def _alloc(dtype: str, shape: list[int], use_torch: bool):
    """An uninitialised tensor (or array) and a writable byte view of its memory."""
    np_name, torch_name, size = _DTYPES[dtype]
    nbytes = math.prod(shape) * size
    if use_torch:
        import torch

        raw = torch.empty(nbytes, dtype=torch.uint8)
        t = raw.view(getattr(torch, torch_name)).reshape(shape)
        return t, memoryview(raw.numpy()).cast("B")
    import numpy as np

    if np_name is None:
        raise errors.InvalidArgument(f"dtype {dtype} needs torch (numpy has no such type)")
    a = np.empty(shape, dtype=np.dtype(np_name).newbyteorder("<"))
    return a, memoryview(a.reshape(-1).view(np.uint8)).cast("B")


def load_safetensors(endpoint_or_client: str | S3Reader, model: str, file: str, *, access_key: str = "",
                     secret: str = "", namespace: str = "weights", parallel: int = 4,
                     framework: str = "auto") -> dict[str, Any]:
    """Stream ``MODEL/FILE`` (a safetensors file) from the tier into CPU tensors.

    ``endpoint_or_client`` is an :class:`S3Reader` or a ``host:port`` S3
    endpoint (then ``access_key``/``secret``/``namespace`` apply).
    ``framework`` is ``"torch"``, ``"numpy"`` or ``"auto"`` (torch when
    importable). Returns ``{name: tensor}`` like ``safetensors`` ``load_file``.
    """
    if sys.byteorder != "little":
        raise errors.InvalidArgument("safetensors data is little-endian; this host is not")
    if parallel < 1:
        raise errors.InvalidArgument("parallel must be at least 1")
    if framework == "auto":
        try:
            import torch  # noqa: F401

            framework = "torch"
        except ImportError:
            framework = "numpy"
    if framework not in ("torch", "numpy"):
        raise errors.InvalidArgument(f"framework {framework!r}: want torch, numpy or auto")
    own = not isinstance(endpoint_or_client, S3Reader)
    reader = S3Reader(endpoint_or_client, access_key, secret, namespace) if own else endpoint_or_client
    key = f"{model}/{file}"
    try:
        lenb, size = reader.read_range(key, 0, 8)
        (hlen,) = struct.unpack("<Q", lenb)
        if hlen > MAX_HEADER or 8 + hlen > size:
            raise errors.InvalidArgument(f"{key}: header length {hlen} does not fit a {size}-byte file (limit {MAX_HEADER})")
        raw, _ = reader.read_range(key, 8, hlen) if hlen else (b"", size)
        base = 8 + hlen
        meta = parse_header(raw, size - base)
        out, jobs = {}, []
        for name, t in sorted(meta.items(), key=lambda kv: kv[1]["data_offsets"][0]):
            tensor, view = _alloc(t["dtype"], t["shape"], framework == "torch")
            out[name] = tensor
            if view.nbytes:
                jobs.append((t["data_offsets"][0], view))
        _fill(reader, key, base, jobs, parallel)
        return out
    finally:
        if own:
            reader.close()


def _fill(reader: S3Reader, key: str, base: int, jobs: list[tuple[int, memoryview]], parallel: int) -> None:
    """Fill the views with ranged GETs: up to parallel threads, each over a run
    of tensors contiguous in the file (a gap between tensors ends a run)."""
    total = sum(v.nbytes for _, v in jobs)
    share = max(1, -(-total // parallel))
    runs, cur, cur_bytes, end = [], [], 0, None
    for off, v in jobs:
        if cur and (off != end or cur_bytes >= share):
            runs.append(cur)
            cur, cur_bytes = [], 0
        cur.append((off, v))
        cur_bytes += v.nbytes
        end = off + v.nbytes
    if cur:
        runs.append(cur)
    failures: list[BaseException] = []
    lock = threading.Lock()
    it = iter(runs)

    def worker() -> None:
        try:
            while True:
                with lock:
                    run = next(it, None)
                    if run is None or failures:
                        return
                reader.read_into(key, base + run[0][0], [v for _, v in run])
        except BaseException as e:  # reported to the caller below
            with lock:
                failures.append(e)
        finally:
            reader.close()

    if len(runs) <= 1 or parallel == 1:
        for run in runs:
            reader.read_into(key, base + run[0][0], [v for _, v in run])
        return
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(parallel, len(runs)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
