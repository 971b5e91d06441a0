#!/usr/bin/env bash
# Measures the operator console (docs/benchmarks.md, "Operator console"):
#  1. the CPU the console costs ctxd with no browser open (its sampler),
#     from a 25 s CPU profile of ctxd under `ctxbench load`, next to ctxd's
#     own CPU time over the same run from /proc;
#  2. the time to serve /ui/ and /ui/api/overview with 1,000 namespaces,
#     next to a /metrics scrape of the same node (the baseline).
# Usage: scripts/console-bench.sh [load seconds, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
secs=${1:-30}
make -s build
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
np=$(port); hp=$(port); rp=$(port); pp=$(port)
dir=$(mktemp -d)
bin/ctxd --data-dir "$dir/data" --listen 127.0.0.1:$np --http-listen 127.0.0.1:$hp --peer-listen 127.0.0.1:0 --resp-listen "" \
  --s3-admin-listen "" --raft-listen 127.0.0.1:$rp --pprof-listen 127.0.0.1:$pp --dram-capacity 2GiB --log-level warn &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -fsS http://127.0.0.1:$hp/readyz >/dev/null 2>&1 && break; sleep 0.1; done
ticks() { awk '{print $14+$15}' /proc/$pid/stat; }
hz=$(getconf CLK_TCK)

echo "== console CPU under ctxbench load (${secs}s, no browser open)"
t0=$(ticks)
bin/ctxbench load --addr 127.0.0.1:$np --block-size 2MiB --clients 4 --get-ratio 1 --duration ${secs}s > "$dir/load.txt" &
lpid=$!
sleep 2
curl -fsS -o "$dir/cpu.pprof" "http://127.0.0.1:$pp/debug/pprof/profile?seconds=$((secs - 5))"
wait $lpid
t1=$(ticks)
tail -3 "$dir/load.txt"
echo "ctxd cpu seconds over the load run: $(echo "scale=2; ($t1 - $t0) / $hz" | bc)"
total=$(go tool pprof -top "$dir/cpu.pprof" 2>/dev/null | awk '/^Showing nodes/ {print $(NF-1)}' | head -1)
go tool pprof -top "$dir/cpu.pprof" 2>/dev/null | sed -n 's/^Duration: /profile duration: /p'
echo "console share (pprof -focus gateway/console, cumulative):"
go tool pprof -top -focus 'gateway/console' "$dir/cpu.pprof" 2>/dev/null | grep -E '^Showing nodes|^Active filters' || true
go tool pprof -top -cum -focus 'gateway/console' "$dir/cpu.pprof" 2>/dev/null | grep -E 'console\.' | head -5 || true

echo "== serving the console with 1,000 namespaces"
for i in $(seq 1 1000); do printf '{"name":"ns-%04d","block_tokens":16}\n' $i; done | \
  xargs -d '\n' -P 4 -I{} curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' -d '{}' http://127.0.0.1:$hp/v1/namespaces
n=$(curl -fsS http://127.0.0.1:$hp/v1/namespaces | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["namespaces"]) if isinstance(d, dict) else len(d))')
echo "namespaces: $n"
measure() { # path -> median and p95 total time (ms) of 50 GETs
  for _ in $(seq 50); do curl -fsS -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$hp$1"; done | sort -n | \
    awk -v p="$1" '{a[NR]=$1} END {printf "%-20s median %.2f ms  p95 %.2f ms  bytes %s\n", p, a[int(NR/2)]*1000, a[int(NR*0.95)]*1000, ""}'
}
curl -fsS -o /dev/null http://127.0.0.1:$hp/ui/api/overview
for p in /metrics /ui/ /ui/app.js /ui/api/overview /ui/api/series; do measure $p; done
echo "overview bytes: $(curl -fsS http://127.0.0.1:$hp/ui/api/overview | wc -c)"
