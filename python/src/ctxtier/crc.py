"""CRC-32C (Castagnoli), the checksum every ctxtier block travels with.

:func:`crc32c` uses the fastest native package installed
(``pip install ctxtier[crc32c]``), in this order:

- ``crc32c-rs`` (Python >= 3.11): picks a routine for the CPU at run time, on
  x86-64 with AVX-512 VPCLMULQDQ about 2.5x the speed of the next one (70 vs
  28 GB/s on a cache-hot 2 MiB block; docs/benchmarks.md);
- ``crc32c``: the SSE4.2 ``crc32`` instruction, three streams interleaved.

Both accept any C-contiguous buffer (bytes, bytearray, memoryview, numpy
arrays) without copying and release the GIL on large inputs. Without either
the module falls back to a table-driven pure-Python implementation, which is
correct but SLOW (a few MB/s): fine for tests and small blocks, not for
KV-cache traffic. :data:`FAST` says whether a native one is in use,
:data:`IMPL` which.
"""

from __future__ import annotations

_POLY = 0x82F63B78  # reflected Castagnoli polynomial


def _make_tables() -> list[list[int]]:
    t0 = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t0.append(c)
    tables = [t0]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(prev[i] >> 8) ^ t0[prev[i] & 0xFF] for i in range(256)])
    return tables


_T = None


def crc32c_py(data, value: int = 0) -> int:
    """Pure-Python CRC-32C of data (any bytes-like), continuing from value. Slow."""
    global _T
    if _T is None:
        _T = _make_tables()
    t0, t1, t2, t3, t4, t5, t6, t7 = _T
    mv = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
    crc = (~value) & 0xFFFFFFFF
    n = len(mv)
    i = 0
    end8 = n - (n % 8)
    # Slicing-by-8: eight table look-ups per 8 input bytes.
    while i < end8:
        lo = crc ^ (mv[i] | mv[i + 1] << 8 | mv[i + 2] << 16 | mv[i + 3] << 24)
        crc = (
            t7[lo & 0xFF]
            ^ t6[(lo >> 8) & 0xFF]
            ^ t5[(lo >> 16) & 0xFF]
            ^ t4[lo >> 24]
            ^ t3[mv[i + 4]]
            ^ t2[mv[i + 5]]
            ^ t1[mv[i + 6]]
            ^ t0[mv[i + 7]]
        )
        i += 8
    while i < n:
        crc = (crc >> 8) ^ t0[(crc ^ mv[i]) & 0xFF]
        i += 1
    return (~crc) & 0xFFFFFFFF


def _native():
    """The fastest installed native CRC-32C as (name, function(data, value)), or None."""
    try:
        import crc32c_rs

        return "crc32c-rs", crc32c_rs.crc32c
    except ImportError:
        pass
    try:  # the C package: hardware CRC where the CPU has it
        import crc32c as _c

        return "crc32c", _c.crc32c
    except ImportError:
        return None


_found = _native()
if _found is not None:
    #: which implementation crc32c is: "crc32c-rs", "crc32c" or "pure-python"
    IMPL, crc32c = _found
    FAST = True
else:  # pragma: no cover - exercised when the extra is absent
    IMPL, crc32c = "pure-python", crc32c_py
    FAST = False
del _found

__all__ = ["crc32c", "crc32c_py", "FAST", "IMPL"]
