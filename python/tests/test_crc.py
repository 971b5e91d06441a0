"""CRC-32C known answers, for every native package installed and the pure-Python fallback."""

import importlib
import os
import random
import sys

import pytest

from ctxtier import crc


def _natives():
    """Every native CRC-32C the environment has, as pytest params (missing ones are skipped)."""
    out = []
    for mod in ("crc32c_rs", "crc32c"):
        try:
            fn = importlib.import_module(mod).crc32c
        except ImportError:
            out.append(pytest.param(None, id=mod, marks=pytest.mark.skip(reason=f"{mod} not installed")))
            continue
        out.append(pytest.param(fn, id=mod))
    return out

# RFC 3720 (iSCSI) B.4 test patterns and the classic check value.
KNOWN = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


@pytest.mark.parametrize("fn", [crc.crc32c, crc.crc32c_py], ids=["default", "pure-python"])
@pytest.mark.parametrize("data,want", KNOWN)
def test_known_answers(fn, data, want):
    assert fn(data) == want


def test_incremental_and_views_agree():
    d = os.urandom(100_003)
    whole = crc.crc32c(d)
    assert crc.crc32c_py(d) == whole
    assert crc.crc32c(memoryview(d)[7:], crc.crc32c(d[:7])) == whole
    assert crc.crc32c_py(memoryview(d)[1000:], crc.crc32c_py(bytearray(d[:1000]))) == whole


@pytest.mark.parametrize("fn", _natives())
def test_native_packages_agree_with_the_reference(fn):
    # Every length up to 300 (the vector routines' head and tail paths), then
    # random lengths and offsets, continued from a random running value: the
    # way Conn.read_into sums a block piece by piece.
    rnd = random.Random(7)
    d = os.urandom(1 << 16)
    for n in range(300):
        assert fn(d[:n]) == crc.crc32c_py(d[:n]), n
    for _ in range(100):
        lo = rnd.randrange(1 << 15)
        hi = lo + rnd.randrange(1 << 15)
        seed = rnd.getrandbits(32)
        assert fn(memoryview(d)[lo:hi], seed) == crc.crc32c_py(d[lo:hi], seed), (lo, hi, seed)
    for data, want in KNOWN:
        assert fn(data) == want


@pytest.mark.parametrize("fn", _natives())
def test_native_packages_read_arrays_without_a_copy(fn):
    np = pytest.importorskip("numpy")
    a = np.frombuffer(os.urandom(4096), dtype=np.uint8).reshape(64, 64).copy()
    assert fn(a) == crc.crc32c_py(a.tobytes())
    assert fn(a.view(np.float16)) == crc.crc32c_py(a.tobytes())
    with pytest.raises((BufferError, TypeError, ValueError)):
        fn(a[:, ::2])  # not contiguous: refused, never summed over the wrong bytes


def test_the_fastest_installed_package_is_the_default():
    try:
        import crc32c_rs  # noqa: F401

        want = "crc32c-rs"
    except ImportError:
        want = "crc32c" if crc.FAST else "pure-python"
    assert crc.IMPL == want


def test_the_c_package_is_installed_in_ci():
    # The test environment pins the C package; without it every GET would be
    # checked by the slow fallback (or, with verify=None, not by the client).
    if not crc.FAST:
        if os.environ.get("CI") == "true":
            pytest.fail("the crc32c package is missing: `make py-venv` installs it")
        pytest.skip("crc32c package not installed")
    assert crc.FAST
    if sys.version_info >= (3, 11) and crc.IMPL != "crc32c-rs":
        # requirements-test.txt pins crc32c-rs there (its wheels start at 3.11)
        if os.environ.get("CI") == "true":
            pytest.fail("the crc32c-rs package is missing: `make py-venv` installs it")
        pytest.skip("crc32c-rs package not installed")
