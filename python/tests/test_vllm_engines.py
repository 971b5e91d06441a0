"""Two vLLM engines share KV through ctxtier (a real ctxd, vLLM's own scheduler).

Run by `make test-engines` (CTXTIER_ENGINES=1, vllm installed); skipped
elsewhere. See engines_fixtures.py for what runs and what stands in for the
model's forward pass.
"""

import pytest

from engines_fixtures import BLOCK, Engine, create_namespace, fake_kv, write_model_dir  # noqa: E402  (skips without vllm)

import ctxtier
from ctxtier.hashing import vllm_chain, vllm_key


@pytest.fixture
def tier(start_ctxd):
    p = start_ctxd()
    create_namespace(p.http, "vllm")
    return p


@pytest.fixture
def model_dir(tmp_path):
    return write_model_dir(tmp_path / "tiny-llama")


PROMPT_A = [(i * 37 + 11) % 30000 + 3 for i in range(3 * BLOCK + 5)]  # 3 full blocks + 5 tokens
SHARED = 2 * BLOCK + 10  # B shares 2 full blocks and 10 more tokens with A
PROMPT_B = PROMPT_A[:SHARED] + [(i * 91 + 5) % 30000 + 3 for i in range(BLOCK + 7)]


def prefill_and_save(a, rid: str, prompt) -> tuple:
    """Engine a prefills prompt in one step, runs it out and saves its 3 full
    blocks; returns the request and the blocks' KV bytes."""
    req = a.request(rid, prompt)
    a.add(req)
    so, _ = a.step()  # prefill: the whole prompt in one step
    assert so.num_scheduled_tokens[rid] == len(prompt)
    blocks = a.sched.kv_cache_manager.get_block_ids(rid)[0]
    kv = [a.block_bytes(blocks[i]) for i in range(3)]
    a.run()
    assert a.worker.flush(10)
    assert a.worker.save_stats()["saved"] == 3 and a.worker.save_stats()["failed"] == 0
    return req, kv


def load_shared(b, rid: str, prompt, want_kv):
    """Engine b's scheduler finds the full blocks it shares with A in the tier
    and its worker loads them, bit for bit."""
    req = b.request(rid, prompt)
    b.add(req)
    so, invalid = b.step()
    assert not invalid
    full_shared_blocks = SHARED // BLOCK
    (new,) = so.scheduled_new_reqs
    assert new.num_computed_tokens == full_shared_blocks * BLOCK == 32
    assert so.num_scheduled_tokens[rid] == len(prompt) - 32
    assert b.worker.stats["loaded"] == full_shared_blocks
    blocks = b.sched.kv_cache_manager.get_block_ids(rid)[0]
    for i in range(full_shared_blocks):
        assert b.block_bytes(blocks[i]) == want_kv[i], f"block {i} differs from engine A's"
    return req


def test_two_engines_share_kv_bit_exact(tier, model_dir):
    client = ctxtier.Client(tier.addr)
    a = Engine(model_dir, tier.addr, "vllm")
    b = Engine(model_dir, tier.addr, "vllm")
    try:
        req_a, a_kv = prefill_and_save(a, "a-1", PROMPT_A)

        # ctxtier's keys are vLLM's own block hashes, equal to ctxtier.hashing's.
        keys = [vllm_key(bytes(h)) for h in req_a.block_hashes[:3]]
        assert keys == vllm_chain(PROMPT_A, BLOCK, python_hash_seed="0")[:3]
        assert client.lookup("vllm", keys) == 3
        for k, want in zip(keys, a_kv):
            assert bytes(client.get("vllm", k)) == want

        # Engine B: vLLM's scheduler asks the connector, which asks ctxtier.
        req_b = load_shared(b, "b-1", PROMPT_B, a_kv)
        full_shared_blocks = SHARED // BLOCK
        # B's own new full block (index 2 differs from A's) is saved, the loaded ones are not.
        b.run()
        assert b.worker.flush(10)
        assert b.worker.save_stats()["saved"] == len(PROMPT_B) // BLOCK - full_shared_blocks
        keys_b = [vllm_key(bytes(h)) for h in req_b.block_hashes[: len(PROMPT_B) // BLOCK]]
        assert keys_b[:2] == keys[:2] and keys_b[2] != keys[2]
        assert client.lookup("vllm", keys_b) == len(keys_b)
    finally:
        a.close()
        b.close()
        client.close()


def test_failed_load_is_recomputed_never_used(tier, model_dir):
    client = ctxtier.Client(tier.addr)
    a = Engine(model_dir, tier.addr, "vllm")
    c = Engine(model_dir, tier.addr, "vllm")
    try:
        a.add(a.request("a-1", PROMPT_A))
        a.run()
        assert a.worker.flush(10)
        keys = vllm_chain(PROMPT_A, BLOCK, python_hash_seed="0")
        # Poison C's cache so that a block vLLM would use unloaded is visible.
        for t in c.kv.values():
            t.fill_(-1.0)
        c.add(c.request("c-1", PROMPT_A))

        def lose_block_1(so):
            # Between the lookup (3 blocks present) and the load, block 1 goes away.
            assert so.scheduled_new_reqs[0].num_computed_tokens == 3 * BLOCK
            client.delete("vllm", keys[1])

        so, invalid = c.step(before_load=lose_block_1)
        c_blocks = c.sched.kv_cache_manager.get_block_ids("c-1")[0]
        assert invalid == {c_blocks[1]}
        assert c.worker.stats["load_failed"] == 1
        # vLLM (policy recompute) rolls the request back to the first bad block.
        req = c.sched.requests["c-1"]
        assert req.num_computed_tokens == BLOCK
        so, invalid = c.step()
        assert not invalid
        assert so.num_scheduled_tokens["c-1"] == len(PROMPT_A) - BLOCK
        c_blocks = c.sched.kv_cache_manager.get_block_ids("c-1")[0]
        for pos in range(len(PROMPT_A)):
            blk, off = c_blocks[pos // BLOCK], pos % BLOCK
            want = fake_kv(0, 0, PROMPT_A, pos)
            assert bool((c.kv["model.layers.0.self_attn.attn"][0, blk, off] == want).all()), f"position {pos}"
        c.run()
    finally:
        a.close()
        c.close()
        client.close()


def test_unreachable_tier_is_a_miss(model_dir, tmp_path):
    from conftest import free_port

    e = Engine(model_dir, f"127.0.0.1:{free_port()}", "vllm", connect_timeout=0.5, retry_after=60)
    try:
        e.add(e.request("x-1", PROMPT_A))
        so, invalid = e.step()
        assert not invalid
        assert so.scheduled_new_reqs[0].num_computed_tokens == 0
        assert so.num_scheduled_tokens["x-1"] == len(PROMPT_A)
        e.run()
        assert e.worker.flush(10)
        st = e.worker.save_stats()
        assert st["saved"] == 0 and st["failed"] == 3
    finally:
        e.close()


def test_bad_extra_config_is_a_clear_error(model_dir):
    with pytest.raises(ValueError, match="unknown kv_connector_extra_config keys"):
        Engine(model_dir, "127.0.0.1:1", "vllm", adress="typo")
    with pytest.raises(ValueError, match="HOST:PORT"):
        Engine(model_dir, "nowhere", "vllm")
    with pytest.raises(ValueError, match="not both"):
        Engine(model_dir, "127.0.0.1:1", "vllm", nodes=[["127.0.0.1:1", "127.0.0.1:2"]])
    with pytest.raises(ValueError, match="pairs"):
        Engine(model_dir, "", "vllm", nodes=[["127.0.0.1:1"]])


def test_two_engines_share_kv_through_a_cluster(cluster3, model_dir):
    """The connector with nodes: engine A saves each block to its owner of a
    three-node cluster, engine B loads them from there, bit for bit."""
    nodes = [[n["native"], n["http"]] for n in cluster3]
    create_namespace(cluster3[0]["http"], "vllm")
    a = Engine(model_dir, "", "vllm", nodes=nodes)
    b = Engine(model_dir, "", "vllm", nodes=nodes)
    cc = ctxtier.ClusterClient(nodes)
    try:
        req_a, a_kv = prefill_and_save(a, "a-1", PROMPT_A)
        keys = [vllm_key(bytes(h)) for h in req_a.block_hashes[:3]]
        assert cc.lookup("vllm", keys, linearizable=True) == 3
        # Each block is on its owner (the connector's ClusterClient sent it there).
        by_id = {n["id"]: n for n in cluster3}
        for k, want in zip(keys, a_kv):
            owner = ctxtier.Client(by_id[cc.owner("vllm", k)]["native"])
            try:
                assert bytes(owner.get("vllm", k)) == want
            finally:
                owner.close()

        load_shared(b, "b-1", PROMPT_B, a_kv)
    finally:
        a.close()
        b.close()
        cc.close()


def test_tensor_parallel_ranks_write_their_own_parts(tier, model_dir):
    """TP=2: two worker processes (vLLM's TP group over gloo) save and load their own parts."""
    client = ctxtier.Client(tier.addr)
    keys = vllm_chain(PROMPT_A, BLOCK, python_hash_seed="0")
    a = Engine(model_dir, tier.addr, "vllm", tp=2)
    try:
        a.add(a.request("a-1", PROMPT_A))
        a_blocks = []

        def note_blocks(so):
            a_blocks.extend(so.scheduled_new_reqs[0].block_ids[0][:3])

        so, invalid = a.step(before_load=note_blocks)
        assert not invalid and len(a_blocks) == 3
        so, _ = a.step(want=a_blocks)  # the decode step; collect each rank's blocks
        ranks = a.workers.last
        assert all(r[3] for r in ranks), "a rank's saves did not finish"
        assert [r[2]["saved"] for r in ranks] == [3, 3]
        for i, k in enumerate(keys):
            assert not client.exists("vllm", k), "a whole-block key was written under TP"
            p0, p1 = bytes(client.get("vllm", k, 0)), bytes(client.get("vllm", k, 1))
            assert p0 == ranks[0][1][a_blocks[i]] and p1 == ranks[1][1][a_blocks[i]]
            assert p0 != p1
        a.run()
    finally:
        a.close()

    # A rank's part missing stops the match there, for the scheduler.
    client.delete("vllm", keys[2], 1)
    b = Engine(model_dir, tier.addr, "vllm", tp=2)
    try:
        b.add(b.request("b-1", PROMPT_A))
        b_blocks = []

        def note(so):
            assert so.scheduled_new_reqs[0].num_computed_tokens == 2 * BLOCK
            b_blocks.extend(so.scheduled_new_reqs[0].block_ids[0][:2])

        so, invalid = b.step(before_load=note)
        assert not invalid
        so, _ = b.step(want=b_blocks)
        ranks = b.workers.last
        assert [r[4]["loaded"] for r in ranks] == [2, 2]
        for i in range(2):
            assert ranks[0][1][b_blocks[i]] == bytes(client.get("vllm", keys[i], 0))
            assert ranks[1][1][b_blocks[i]] == bytes(client.get("vllm", keys[i], 1))
        b.run()
    finally:
        b.close()
        client.close()


def test_chunked_prefill_saves_each_block_once(tier, model_dir):
    """A prompt prefilled in 40-token chunks: each full block is saved once, after the step computing its last token."""
    client = ctxtier.Client(tier.addr)
    prompt = [(i * 13 + 7) % 30000 + 3 for i in range(5 * BLOCK + 3)]
    keys = vllm_chain(prompt, BLOCK, python_hash_seed="0")
    a = Engine(model_dir, tier.addr, "vllm", batch_tokens=40)
    try:
        a.add(a.request("a-1", prompt))
        present, chunks = [], []
        for _ in range(3):
            so, invalid = a.step()
            assert not invalid
            assert a.worker.flush(10)
            chunks.append(so.num_scheduled_tokens["a-1"])
            present.append(client.lookup("vllm", keys))
        assert chunks == [40, 40, 3]
        assert present == [2, 5, 5]  # 40 tokens complete 2 blocks, 80 complete 5
        assert a.worker.save_stats()["saved"] == 5
        blocks = a.sched.kv_cache_manager.get_block_ids("a-1")[0]
        for i, k in enumerate(keys):
            assert bytes(client.get("vllm", k)) == a.block_bytes(blocks[i])
        a.run()
        assert a.worker.save_stats()["saved"] == 5
    finally:
        a.close()
        client.close()
