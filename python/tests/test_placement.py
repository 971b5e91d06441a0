"""ctxtier.placement against the Go package's shared vectors."""

import json
from pathlib import Path

import pytest

pytest.importorskip("xxhash", reason="ctxtier.placement needs the optional xxhash package (the test extra installs it)")

from ctxtier import placement  # noqa: E402

VECTORS = Path(__file__).resolve().parents[2] / "ctxstore" / "placement" / "testdata" / "owners.json"


def _load():
    f = json.loads(VECTORS.read_text())
    members = [placement.Member(m["id"], m.get("zone", ""), m["capacity"]) for m in f["members"]]
    return members, f["keys"]


def test_vectors_have_keys():
    members, keys = _load()
    assert len(members) == 5 and len(keys) == 48
    assert any("part" in k for k in keys) and len({k["namespace"] for k in keys}) == 3


@pytest.mark.parametrize("i", range(48))
def test_key_hash_rank_pick_owner(i):
    members, keys = _load()
    k = keys[i]
    h, part = int(k["hash"], 16), k.get("part")
    assert placement.key_hash(k["namespace"], h, part) == int(k["key_hash"], 16)
    assert [m.id for m in placement.rank(k["namespace"], h, part, members)] == k["rank"]
    assert [m.id for m in placement.pick(k["namespace"], h, part, members, 2)] == k["pick2"]
    assert placement.owner(k["namespace"], h, part, members).id == k["rank"][0]


def test_edges():
    assert placement.owner("default", 1, None, []) is None
    with pytest.raises(ValueError):
        placement.pick("default", 1, None, [placement.Member("a")], 2)
