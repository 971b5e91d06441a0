"""CRC-32C known answers, for the C package and the pure-Python fallback."""

import os

import pytest

from ctxtier import crc

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


def test_the_c_package_is_installed_in_ci():
    # The test environment pins the C package; without it every GET would be
    # checked by the slow fallback (or, with verify=None, not by the client).
    if not crc.FAST:
        if os.environ.get("CI") == "true":
            pytest.fail("the crc32c package is missing: `make py-venv` installs it")
        pytest.skip("crc32c package not installed")
    assert crc.FAST
