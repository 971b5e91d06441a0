"""Drives a ctxd RESP endpoint with redis-py (sync and asyncio, RESP2 and
RESP3). Usage: redis_py_client.py HOST:PORT

ctxd must serve two databases (--resp-databases default,NS2) and run with
--auth off. Exits non-zero on the first failed check.
"""

import asyncio
import os
import sys

import redis
import redis.asyncio as aredis


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def sync_suite(host, port, protocol):
    r = redis.Redis(host=host, port=port, protocol=protocol)
    p = f"p{protocol}:"
    check(r.ping() is True, "PING")
    check(r.echo(b"hi") == b"hi", "ECHO")
    blob = os.urandom(1 << 20)
    check(r.set(p + "blob", blob) is True, "SET 1 MiB")
    check(r.get(p + "blob") == blob, "GET 1 MiB round trip")
    check(r.strlen(p + "blob") == len(blob), "STRLEN")
    check(r.getrange(p + "blob", 10, 19) == blob[10:20], "GETRANGE")
    check(r.getrange(p + "blob", -5, -1) == blob[-5:], "GETRANGE negative")
    check(r.set(p + "blob", b"new") is True and r.get(p + "blob") == b"new", "SET replaces")
    check(r.set(p + "blob", b"x", nx=True) is None, "SET NX on a present key")
    check(r.set(p + "absent", b"x", xx=True) is None, "SET XX on an absent key")
    check(r.set(p + "ttl", b"v", ex=100) and 98 <= r.ttl(p + "ttl") <= 100, "SET EX / TTL")
    check(90_000 <= r.pttl(p + "ttl") <= 100_000, "PTTL")
    check(r.persist(p + "ttl") and r.ttl(p + "ttl") == -1, "PERSIST")
    check(r.expire(p + "ttl", 50) and 48 <= r.ttl(p + "ttl") <= 50, "EXPIRE")
    check(r.set(p + "ttl", b"w", keepttl=True) and 48 <= r.ttl(p + "ttl") <= 50 and r.get(p + "ttl") == b"w", "SET KEEPTTL")
    check(r.ttl(p + "none") == -2, "TTL of an absent key")
    check(r.mset({p + "a": b"1", p + "b": b"2"}) is True, "MSET")
    check(r.mget([p + "a", p + "none", p + "b"]) == [b"1", None, b"2"], "MGET")
    check(r.exists(p + "a", p + "b", p + "none", p + "a") == 3, "EXISTS several")
    check(r.delete(p + "a", p + "none") == 1 and r.unlink(p + "b") == 1, "DEL / UNLINK")
    names = set(r.scan_iter(match=p + "*", count=3))
    check(names == {(p + "blob").encode(), (p + "ttl").encode()}, f"SCAN MATCH returned {names}")
    check(r.dbsize() >= 2, "DBSIZE")
    info = r.info()
    check(info.get("redis_version") and "total_commands_processed" in info, "INFO")
    check("db0" in r.info("keyspace"), "INFO keyspace")
    check(r.client_setname("tester") and r.client_getname() in ("tester", b"tester"), "CLIENT SETNAME/GETNAME")
    check(isinstance(r.client_id(), int), "CLIENT ID")
    check(r.execute_command("COMMAND COUNT") >= 20, "COMMAND COUNT")
    docs = r.execute_command("COMMAND DOCS", "get")
    check(docs, "COMMAND DOCS")
    try:
        r.execute_command("HSET", "h", "f", "v")
        check(False, "an unknown command succeeded")
    except redis.ResponseError as e:
        check("unknown command" in str(e), f"unknown command error: {e}")
    check(r.ping(), "the connection survives an unknown command")
    pipe = r.pipeline(transaction=False)
    for i in range(200):
        pipe.set(f"{p}pipe{i}", str(i))
        pipe.get(f"{p}pipe{i}")
    res = pipe.execute()
    check(all(res[2 * i] is True and res[2 * i + 1] == str(i).encode() for i in range(200)), "pipelined SET/GET")
    r.delete(*[f"{p}pipe{i}" for i in range(200)])
    # Database 1 is another namespace.
    r1 = redis.Redis(host=host, port=port, db=1, protocol=protocol)
    check(r1.get(p + "blob") is None, "database 1 does not see database 0's keys")
    check(r1.set(p + "blob", b"db1") and r.get(p + "blob") == b"new", "databases are separate")
    r1.delete(p + "blob")
    try:
        redis.Redis(host=host, port=port, db=99, protocol=protocol).ping()
        check(False, "SELECT 99 succeeded")
    except redis.ResponseError as e:
        check("out of range" in str(e), f"SELECT error: {e}")
    r.delete(p + "blob", p + "ttl")


async def lmcache_call_sequence(host, port):
    """The exact calls LMCache's RedisConnector (lmcache 0.5.6,
    redis_connector.py) makes through redis.asyncio: put sets kv_bytes then
    metadata; exists asks for metadata; get reads metadata, then kv_bytes."""
    pool = aredis.ConnectionPool.from_url(f"redis://{host}:{port}", max_connections=150)
    conn = aredis.Redis.from_pool(pool)
    chunks = {f"model@1@0@{i:x}@bfloat16": os.urandom(2 << 20) for i in range(6)}

    async def put(k, v):
        await conn.set(k + "kv_bytes", v)
        await conn.set(k + "metadata", len(v).to_bytes(8, "little"))

    await asyncio.gather(*(put(k, v) for k, v in chunks.items()))
    for k, v in chunks.items():
        check(bool(await conn.exists(k + "metadata")), f"exists {k}")
        meta = await conn.get(k + "metadata")
        check(int.from_bytes(meta, "little") == len(v), f"metadata {k}")
        check(await conn.get(k + "kv_bytes") == v, f"kv_bytes {k}")
    check(not await conn.exists("model@1@0@dead@bfloat16metadata"), "exists of a missing chunk")
    for k in chunks:
        await conn.delete(k + "kv_bytes", k + "metadata")
    await conn.aclose()


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    port = int(port)
    for protocol in (2, 3):
        sync_suite(host, port, protocol)
    asyncio.run(lmcache_call_sequence(host, port))
    print(f"OK: redis-py {redis.__version__} (RESP2 and RESP3) against {host}:{port}")


if __name__ == "__main__":
    main()
