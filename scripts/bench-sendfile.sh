#!/usr/bin/env bash
# Alternates throwaway ctxd processes with --sendfile=true and --sendfile=false
# and runs the issue's load benchmark against each:
#   ctxbench load --block-size 2MiB --clients 4 --get-ratio 1 --duration $DURATION --vs-baseline --json
# For each run it prints the ctxtier and raw-TCP GB/s, ratio_vs_raw_tcp, the
# server's CPU seconds (utime+stime from /proc/PID/stat, before and after the
# ctxbench run, which includes its 128 MiB preload) per GB served, and the
# load average. Usage: scripts/bench-sendfile.sh [ROUNDS [CTXBENCH-LOAD-ARGS...]]
# (default 3 rounds; extra arguments go to ctxbench load, e.g. --keys 4).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
DURATION=${DURATION:-8s}
make -s build
base=$((20000 + RANDOM % 20000))
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
pid=
dir=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; [ -n "$dir" ] && rm -rf "$dir"; pid= dir=; }
trap cleanup EXIT
printf '%-5s %-9s %8s %8s %7s %9s %s\n' round sendfile ctx_GBps raw_GBps ratio cpu_s/GB loadavg
for r in $(seq "$rounds"); do
	for mode in true false; do
		dir=$(mktemp -d)
		bin/ctxd --data-dir "$dir" --listen 127.0.0.1:$base --http-listen 127.0.0.1:$((base + 1)) --resp-listen "" \
			--raft-listen 127.0.0.1:$((base + 2)) --s3-admin-listen '' --peer-listen 127.0.0.1:$((base + 4)) \
			--dram-capacity 2GiB --log-level warn --sendfile=$mode &
		pid=$!
		for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$((base + 1))/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
		c0=$(cpu "$pid")
		out=$(bin/ctxbench load --addr 127.0.0.1:$base --block-size 2MiB --clients 4 --get-ratio 1 --duration "$DURATION" --vs-baseline --json "$@" 2>/dev/null)
		c1=$(cpu "$pid")
		load=$(cut -d' ' -f1 /proc/loadavg)
		python3 -c '
import json, sys
d = json.loads(sys.argv[1]); cpu = (int(sys.argv[2]) - int(sys.argv[3])) / int(sys.argv[4])
gb = d["gb_per_s"] * d["seconds"]
if d.get("errors"): sys.exit("errors: %s" % d.get("first_error"))
print("%-5s %-9s %8.3f %8.3f %7.3f %9.3f %s" % (sys.argv[5], sys.argv[6], d["gb_per_s"], d["raw_tcp_gb_per_s"], d["ratio_vs_raw_tcp"], cpu / gb, sys.argv[7]))
' "$(echo "$out" | grep -v '^ratio_vs_raw_tcp=')" "$c1" "$c0" "$tck" "$r" "$mode" "$load"
		cleanup
	done
done
