# The RESP endpoint's real clients and benchmark (docs/resp.md). Included by
# the Makefile; .ci/run runs resp-deps before make test.
.PHONY: resp-deps bench-resp

resp-deps: ## install redis-server, redis-tools (Debian) and the pinned redis-py and LMCache (python/requirements-resp.txt) into .venv
	scripts/resp-deps.sh

bench-resp: ## redis-benchmark against ctxd's RESP port and a real redis-server, alternating; prints ratio_vs_redis_get_2mib= and _1kib= last
	scripts/bench-resp.sh
