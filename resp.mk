# The RESP endpoint's real clients and benchmark (docs/resp.md). Included by
# the Makefile; make test runs resp-deps first.
.PHONY: resp-deps bench-resp

# The RESP tests drive redis-cli, redis-py and LMCache, and fail under CI=true
# without them.
test test-race: resp-deps

resp-deps: ## install redis-server, redis-tools (Debian) and the pinned redis-py and LMCache (python/requirements-resp.txt) into .venv-resp
	scripts/resp-deps.sh

bench-resp: ## redis-benchmark against ctxd's RESP port and a real redis-server, alternating; prints ratio_vs_redis_get_2mib= and _1kib= last
	scripts/bench-resp.sh
