"""ClusterClient against real ctxd processes: a three-node cluster, and two
single nodes behind made-up member lists (for a member that goes away)."""

import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("xxhash", reason="ClusterClient needs the optional xxhash package (the test extra installs it)")

import ctxtier  # noqa: E402
from ctxtier import placement  # noqa: E402

from conftest import CLUSTER_TOKEN_HEADER, free_port  # noqa: E402


def _metric(http: str, name: str) -> float:
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=5) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _one_copy_namespace(http: str, name: str) -> None:
    body = json.dumps({"name": name, "data_shards": 1}).encode()
    req = urllib.request.Request(f"http://{http}/v1/namespaces", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 201, r.status


def test_cluster_client_sends_each_block_to_its_owner(cluster3):
    nodes = cluster3
    _one_copy_namespace(nodes[0]["http"], "onecopy")
    pairs = [(n["native"], n["http"]) for n in nodes]
    blocks = {h: bytes([h % 251]) * (4096 + h) for h in range(1, 301)}
    with ctxtier.ClusterClient(pairs) as cc:
        owners = {h: cc.owner("onecopy", h) for h in blocks}
        assert set(owners.values()) == {"n1", "n2", "n3"}, owners
        before = sum(_metric(n["http"], "ctxtier_cluster_shard_batches_total") for n in nodes)
        assert cc.put_many("onecopy", list(blocks.items())) == [None] * len(blocks)
        forwarded = sum(_metric(n["http"], "ctxtier_cluster_shard_batches_total") for n in nodes) - before
        # Routed: no member forwarded a batch of shards to another.
        assert forwarded == 0, forwarded
        bufs = [bytearray(len(v)) for v in blocks.values()]
        assert cc.get_into("onecopy", list(blocks), bufs) == [len(v) for v in blocks.values()]
        assert [bytes(b) for b in bufs] == list(blocks.values())
        # One copy each, on the owner: each node's own tier holds exactly its blocks
        # (the same batch sent to n1 alone forwards two thirds of it).
        by_id = {n["id"]: n for n in nodes}
        for nid, n in by_id.items():
            mine = [h for h, o in owners.items() if o == nid]
            assert mine
            c = ctxtier.Client(n["native"])
            try:
                assert c.exists_many("onecopy", mine) == [True] * len(mine)
            finally:
                c.close()
        more = {h: bytes([h % 13]) * 5000 for h in range(1001, 1201)}
        c1 = ctxtier.Client(nodes[0]["native"])
        try:
            before = sum(_metric(n["http"], "ctxtier_cluster_shard_batches_total") for n in nodes)
            assert c1.put_many("onecopy", list(more.items())) == [None] * len(more)
            unrouted = sum(_metric(n["http"], "ctxtier_cluster_shard_batches_total") for n in nodes) - before
        finally:
            c1.close()
        assert unrouted >= 1, "the same batch through one node forwarded nothing: the check above cannot fail"


def _create_key(http: str, secret: str, namespaces: list) -> tuple:
    body = json.dumps({"namespaces": namespaces, "description": "test"}).encode()
    req = urllib.request.Request(f"http://{http}/v1/cluster/keys", data=body, method="POST",
                                 headers={"Content-Type": "application/json", CLUSTER_TOKEN_HEADER: secret})
    with urllib.request.urlopen(req, timeout=10) as r:
        k = json.load(r)
    return k["access_key_id"], k["secret_access_key"]


def test_cluster_client_with_an_access_key_under_auth_required(cluster3_auth):
    """--auth required: the client reads the member list with its access key
    (SigV4-signed status reads) and routes; without a key, or with a wrong
    secret, it cannot start."""
    nodes, cluster_secret = cluster3_auth
    key_id, key_secret = _create_key(nodes[1]["http"], cluster_secret, ["*"])
    pairs = [(n["native"], n["http"]) for n in nodes]
    blocks = {h: bytes([h % 251]) * (4096 + h) for h in range(1, 61)}
    deadline = time.monotonic() + 10
    while True:  # the key reaches every node's store within a second or so
        try:
            cc = ctxtier.ClusterClient(pairs, key_id, key_secret)
            break
        except (ctxtier.Unauthenticated, ctxtier.Unavailable):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    with cc:
        owners = {h: cc.owner("default", h) for h in blocks}
        assert set(owners.values()) == {"n1", "n2", "n3"}, owners
        assert cc.put_many("default", list(blocks.items())) == [None] * len(blocks)
        bufs = [bytearray(len(v)) for v in blocks.values()]
        assert cc.get_into("default", list(blocks), bufs) == [len(v) for v in blocks.values()]
        assert [bytes(b) for b in bufs] == list(blocks.values())
        cc.refresh()  # a later status read signs again
    with pytest.raises((ctxtier.Unauthenticated, ctxtier.Unavailable)) as e:
        ctxtier.ClusterClient(pairs, key_id, "not-" + key_secret).close()
    assert "401" in str(e.value) or isinstance(e.value, ctxtier.Unauthenticated), e.value
    with pytest.raises((ctxtier.Unauthenticated, ctxtier.Unavailable)):
        ctxtier.ClusterClient(pairs).close()
    # The status read alone: a signed one is answered, an unsigned one is not.
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://{nodes[0]['http']}/v1/cluster/status", timeout=5)
    assert e.value.code == 401


class _Status(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802
        if self.path != "/v1/cluster/status":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *a):
        pass


def _status_server(node_id: str, members: list):
    handler = type("H", (_Status,), {"body": json.dumps({"node_id": node_id, "members": members}).encode()})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_cluster_client_owner_goes_away(start_ctxd):
    """Two single nodes named a and b by made-up status answers (and a member
    c with no address): blocks go to their owner; once a's server is gone,
    its part of a batch goes through b instead, and nothing fails."""
    members = [{"id": "a", "capacity": 1 << 30, "state": "alive"}, {"id": "b", "capacity": 3 << 30, "state": "alive"},
               {"id": "c", "capacity": 1 << 30, "state": "alive"}, {"id": "d", "capacity": 9 << 30, "state": "dead"}]
    a, b = start_ctxd(), start_ctxd()
    sa, sb = _status_server("a", members), _status_server("b", members)
    try:
        cc = ctxtier.ClusterClient([(a.addr, f"127.0.0.1:{sa.server_port}"), (b.addr, f"127.0.0.1:{sb.server_port}")])
        try:
            alive = [placement.Member(m["id"], "", m["capacity"]) for m in members if m["state"] == "alive"]
            hs = [0x5EED0000 + i for i in range(120)]
            assert [cc.owner("default", h) for h in hs] == [placement.owner("default", h, None, alive).id for h in hs]
            assert cc.put_many("default", [(h, b"x%d" % h) for h in hs]) == [None] * len(hs)
            ca = ctxtier.Client(a.addr)
            on_a = ca.exists_many("default", hs)
            ca.close()
            assert [h for h, x in zip(hs, on_a) if x] == [h for h in hs if cc.owner("default", h) == "a"]
            a.stop()
            more = [0x7EED0000 + i for i in range(120)]
            assert any(cc.owner("default", h) == "a" for h in more)
            assert cc.put_many("default", [(h, b"y%d" % h) for h in more]) == [None] * len(more)
            cb = ctxtier.Client(b.addr)
            assert cb.exists_many("default", more) == [True] * len(more)
            cb.close()
        finally:
            cc.close()
    finally:
        sa.shutdown()
        sb.shutdown()


def test_cluster_client_member_down_at_start(start_ctxd):
    """A member whose native port answers nothing when the client starts: its
    blocks go through the member that is up; with no member up, a clear error."""
    members = [{"id": "a", "capacity": 1 << 30, "state": "alive"}, {"id": "b", "capacity": 1 << 30, "state": "alive"}]
    b = start_ctxd()
    sa, sb = _status_server("a", members), _status_server("b", members)
    try:
        dead = f"127.0.0.1:{free_port()}"
        with ctxtier.ClusterClient([(dead, f"127.0.0.1:{sa.server_port}"), (b.addr, f"127.0.0.1:{sb.server_port}")],
                                   connect_timeout=1) as cc:
            assert cc.clients[0] is None and cc.clients[1] is not None
            hs = [0x3EED0000 + i for i in range(64)]
            assert any(cc.owner("default", h) == "a" for h in hs)
            assert cc.put_many("default", [(h, b"z%d" % h) for h in hs]) == [None] * len(hs)
            bufs = [bytearray(16) for _ in hs]
            assert cc.get_into("default", hs, bufs) == [len(b"z%d" % h) for h in hs]
            assert cc.lookup("default", hs) == len(hs)
        with pytest.raises(ctxtier.Unavailable, match="no member could be dialed"):
            ctxtier.ClusterClient([(dead, f"127.0.0.1:{sa.server_port}")], connect_timeout=1)
    finally:
        sa.shutdown()
        sb.shutdown()


def test_cluster_client_bad_input(start_ctxd):
    with pytest.raises(ctxtier.InvalidArgument):
        ctxtier.ClusterClient([])
    with pytest.raises(ctxtier.InvalidArgument):
        ctxtier.ClusterClient([("127.0.0.1:1",)])
    a = start_ctxd()
    # No status endpoint answers: a clear Unavailable, no client left open.
    with pytest.raises(ctxtier.Unavailable, match="no node answered its status"):
        ctxtier.ClusterClient([(a.addr, f"127.0.0.1:{free_port()}")])
