#!/usr/bin/env bash
# Starts a throwaway ctxd and runs the Python client's GET benchmark against it:
#   python -m ctxtier.bench --addr 127.0.0.1:7400 --block-size 2MiB --clients 4 --duration 10s --go-ctxbench bin/ctxbench
# It prints the Go client's figure (ctxbench load --vs-baseline) first, then the
# Python client's; the last line is ratio_vs_raw_socket=<x> (Python get_into GB/s
# over a raw Python socket receiving the same bytes from a raw Python server in
# the same run), the one before ratio_vs_raw_socket_same_server=<y> (over a raw
# Python socket reading ctxd's own GET responses).
# Extra arguments are passed to ctxtier.bench. Needs `make build py-venv`.
# BENCH_PORT (default 7400) moves all five ports: native, HTTP, Raft, S3 admin,
# peer = BENCH_PORT .. BENCH_PORT+4, every one passed explicitly. CTXD (default
# bin/ctxd) names the server binary, to compare two builds in alternation.
# The load average is printed first: on a shared machine it says how far the
# GB/s figures can be trusted.
set -euo pipefail
cd "$(dirname "$0")/.."
p=${BENCH_PORT:-7400}
dir=$(mktemp -d)
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
${CTXD:-bin/ctxd} --data-dir "$dir" --listen 127.0.0.1:$p --http-listen 127.0.0.1:$((p + 1)) \
  --raft-listen 127.0.0.1:$((p + 2)) --s3-admin-listen 127.0.0.1:$((p + 3)) --peer-listen 127.0.0.1:$((p + 4)) \
  --resp-listen "" --dram-capacity 2GiB --log-level warn &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -fsS http://127.0.0.1:$((p + 1))/readyz >/dev/null 2>&1 && break; sleep 0.1; done
if ! curl -fsS http://127.0.0.1:$((p + 1))/readyz >/dev/null 2>&1; then
  echo "bench-py.sh: ctxd is not ready on ports $p-$((p + 4)); another process may hold one (set BENCH_PORT)" >&2
  exit 1
fi
.venv/bin/python -m ctxtier.bench --addr 127.0.0.1:$p --block-size 2MiB --clients 4 --duration 10s --server-pid "$pid" --go-ctxbench bin/ctxbench "$@"
