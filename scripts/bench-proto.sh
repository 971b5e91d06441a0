#!/usr/bin/env bash
# Runs the issue's load benchmark through each protocol against one throwaway
# ctxd (2 GiB DRAM, S3 endpoint on, an access key made with ctxctl), with the
# raw TCP baseline in the same run:
#   ctxbench load --proto P --block-size 2MiB --clients 4 --get-ratio 1 --duration $DURATION --vs-baseline --json --server-pid PID
# Rounds alternate the order of the protocols (native http s3, then s3 http
# native, ...). For each run it prints the ctxtier and raw-TCP GB/s,
# ratio_vs_raw_tcp, ctxd's CPU seconds (utime+stime from /proc/PID/stat over
# the ctxtier rounds only, not the preload) and ctxbench's own per GB served,
# and the load average.
# Usage: scripts/bench-proto.sh [ROUNDS [CTXBENCH-LOAD-ARGS...]]; BASE (the
# first of five ports, default random) and DURATION (default 6s) from the
# environment.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
DURATION=${DURATION:-6s}
base=${BASE:-$((20000 + RANDOM % 20000))}
make -s build
dir=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
keys=$(bin/ctxctl keys create --namespaces '*' --data-dir "$dir" --description bench-proto)
export CTXBENCH_S3_ACCESS_KEY=$(awk '/^access_key_id/{print $2}' <<<"$keys")
export CTXBENCH_S3_SECRET_KEY=$(awk '/^secret_access_key/{print $2}' <<<"$keys")
bin/ctxd --data-dir "$dir" --listen 127.0.0.1:$base --http-listen 127.0.0.1:$((base + 1)) --resp-listen "" \
	--raft-listen 127.0.0.1:$((base + 2)) --s3-admin-listen 127.0.0.1:$((base + 3)) --peer-listen 127.0.0.1:$((base + 4)) \
	--dram-capacity 2GiB --log-level warn &
pid=$!
for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$((base + 1))/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
printf '%-5s %-6s %8s %8s %7s %10s %10s %s\n' round proto ctx_GBps raw_GBps ratio srv_cpu/GB cli_cpu/GB loadavg
for r in $(seq "$rounds"); do
	order="native http s3"
	[ $((r % 2)) -eq 0 ] && order="s3 http native"
	for proto in $order; do
		out=$(bin/ctxbench load --proto "$proto" --addr 127.0.0.1:$base --http-url http://127.0.0.1:$((base + 1)) \
			--s3-url http://127.0.0.1:$((base + 3)) --server-pid "$pid" --block-size 2MiB --clients 4 --get-ratio 1 \
			--duration "$DURATION" --vs-baseline --json "$@" 2>/dev/null)
		load=$(cut -d' ' -f1 /proc/loadavg)
		python3 -c '
import json, sys
d = json.loads(sys.argv[1])
if d.get("errors"): sys.exit("errors: %s" % d.get("first_error"))
print("%-5s %-6s %8.3f %8.3f %7.3f %10.3f %10.3f %s" % (sys.argv[2], sys.argv[3], d["gb_per_s"], d["raw_tcp_gb_per_s"], d["ratio_vs_raw_tcp"], d["server_cpu_s_per_gb"], d["client_cpu_s_per_gb"], sys.argv[4]))
' "$(echo "$out" | grep -v '^ratio_vs_raw_tcp=')" "$r" "$proto" "$load"
	done
done
