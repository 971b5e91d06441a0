#!/usr/bin/env bash
# Installs what the RESP endpoint's tests and benchmark drive: Debian's
# redis-server and redis-tools (redis-cli, redis-benchmark), and the pinned
# Python clients of python/requirements-resp.txt (redis-py, LMCache) in the
# repository's .venv-resp. Idempotent: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# A venv of its own: lmcache needs numpy<=2.2.6 and brings its own torch,
# which the client and engine tests' pins in .venv (python.mk, engines.mk)
# would fight over.
VENV=${RESP_VENV:-.venv-resp}

if ! command -v redis-cli >/dev/null || ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
	echo "resp-deps: installing redis-server and redis-tools"
	if [[ $(id -u) -ne 0 ]]; then
		echo "resp-deps: need root to apt-get install redis-server redis-tools" >&2
		exit 1
	fi
	apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi

if [[ ! -x $VENV/bin/python ]]; then
	echo "resp-deps: creating $VENV"
	python3 -m venv "$VENV"
fi
# Reinstall only when a pinned requirement is not satisfied.
if ! "$VENV/bin/python" - python/requirements-resp.txt <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, want = line.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
	echo "resp-deps: pip install -r python/requirements-resp.txt (lmcache pulls torch: several GiB)"
	"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir -r python/requirements-resp.txt
fi
"$VENV/bin/python" -c 'import redis, lmcache, awscrt; print("resp-deps: redis-py", redis.__version__, ", lmcache and awscrt", awscrt.__version__, "ready in '"$VENV"'")'
