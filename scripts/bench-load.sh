#!/usr/bin/env bash
# Starts a throwaway ctxd and runs the issue's load benchmark against it:
#   ctxbench load --addr 127.0.0.1:7400 --block-size 2MiB --clients 4 --get-ratio 1 --duration 10s --vs-baseline
# The last line printed is ratio_vs_raw_tcp=<x> (ctxtier GB/s over a raw TCP stream in the same run).
# Extra arguments are passed to ctxbench load.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build
dir=$(mktemp -d)
bin/ctxd --data-dir "$dir" --listen 127.0.0.1:7400 --http-listen 127.0.0.1:7401 --resp-listen "" --dram-capacity 2GiB --log-level warn &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do curl -fsS http://127.0.0.1:7401/readyz >/dev/null 2>&1 && break; sleep 0.1; done
bin/ctxbench load --addr 127.0.0.1:7400 --block-size 2MiB --clients 4 --get-ratio 1 --duration 10s --vs-baseline "$@"
