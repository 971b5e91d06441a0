"""Drives a ctxd RESP endpoint served over TLS (--tls-clients) with redis-py:
ssl=True, the server's certificate checked against the CA. Usage:
redis_py_tls.py HOST:PORT CA_FILE

Sync and asyncio, RESP2 and RESP3; a plaintext client must be refused.
Exits non-zero on the first failed check.
"""

import asyncio
import os
import sys

import redis
import redis.asyncio as aredis


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    port = int(port)
    ca = sys.argv[2]
    blob = os.urandom(256 << 10)
    for protocol in (2, 3):
        r = redis.Redis(host=host, port=port, protocol=protocol, ssl=True, ssl_ca_certs=ca, ssl_cert_reqs="required")
        key = f"tls{protocol}"
        check(r.ping() is True, "PING over TLS")
        check(r.set(key, blob) is True, "SET over TLS")
        check(r.get(key) == blob, "GET over TLS returns the bytes")
        pipe = r.pipeline(transaction=False)
        for i in range(100):
            pipe.set(f"{key}:{i}", str(i))
            pipe.get(f"{key}:{i}")
        res = pipe.execute()
        check(all(res[2 * i + 1] == str(i).encode() for i in range(100)), "pipelined SET/GET over TLS")
        check(r.delete(key, *[f"{key}:{i}" for i in range(100)]) == 101, "DEL over TLS")
        r.close()

    async def run_async():
        a = aredis.Redis(host=host, port=port, ssl=True, ssl_ca_certs=ca)
        check(await a.set("tls-async", b"v") is True, "asyncio SET over TLS")
        check(await a.get("tls-async") == b"v", "asyncio GET over TLS")
        await a.delete("tls-async")
        await a.aclose()

    asyncio.run(run_async())
    # A client that does not trust the CA is refused by its own check.
    try:
        redis.Redis(host=host, port=port, ssl=True, ssl_cert_reqs="required", socket_timeout=5).ping()
        check(False, "a TLS client without the CA accepted the server's certificate")
    except redis.ConnectionError:
        pass
    # A plaintext client gets no answer.
    try:
        redis.Redis(host=host, port=port, socket_timeout=5, retry_on_timeout=False).ping()
        check(False, "the TLS endpoint answered a plaintext PING")
    except (redis.ConnectionError, redis.TimeoutError):
        pass
    print("OK: redis-py over TLS (RESP2, RESP3, asyncio); plaintext refused")


if __name__ == "__main__":
    main()
