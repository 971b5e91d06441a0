#!/usr/bin/env bash
# RESP endpoint vs a real redis-server, in the same run, alternating:
#   redis-benchmark -t set,get -d 2097152 -c 4        (2 MiB values)
#   redis-benchmark -t set,get -d 1024 -c 50 -P 16     (1 KiB values, pipelined)
# It builds ctxd, starts it (RESP on $CTXD_PORT) and redis-server
# (--save '' --appendonly no, on $REDIS_PORT), runs ROUNDS rounds of each
# size against each server in turn, and prints per-run GET/SET rates, then
# each server's CPU time per request (from /proc/PID/stat), the medians, and
# last the ratios of ctxd's median GET rate to Redis's:
#   ratio_vs_redis_get_2mib=<x>
#   ratio_vs_redis_get_1kib=<x>
# Environment: ROUNDS (3), N_2MIB (requests per 2 MiB run, 3000), N_1KIB
# (requests per 1 KiB run, 1000000), CTXD_PORT (17605), REDIS_PORT (17606).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
ROUNDS=${ROUNDS:-3}
N_2MIB=${N_2MIB:-3000}
N_1KIB=${N_1KIB:-1000000}
CTXD_PORT=${CTXD_PORT:-17605}
REDIS_PORT=${REDIS_PORT:-17606}
for tool in redis-benchmark redis-server; do
	command -v "$tool" >/dev/null || { echo "bench-resp: $tool not found (make resp-deps)" >&2; exit 1; }
done

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap '[[ -s $work/bench.err ]] && cat "$work/bench.err" >&2' ERR
go build -trimpath -o "$work/ctxd" ./cmd/ctxd

# ctxd on ports next to CTXD_PORT (only the RESP one matters here).
base=$((CTXD_PORT - 5))
"$work/ctxd" --data-dir "$work/ctxd-data" --listen "127.0.0.1:$base" --http-listen "127.0.0.1:$((base + 1))" \
	--raft-listen "127.0.0.1:$((base + 2))" --peer-listen "127.0.0.1:$((base + 4))" --s3-admin-listen "" \
	--resp-listen "127.0.0.1:$CTXD_PORT" --dram-capacity 2GiB --log-level warn ${CTXD_ARGS:-} >"$work/ctxd.log" 2>&1 &
pids+=($!)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
# ctxd answers PING before its one-node Raft has a leader; writes need one.
for _ in $(seq 200); do
	curl -fsS "http://127.0.0.1:$((base + 1))/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -fsS "http://127.0.0.1:$((base + 1))/readyz" >/dev/null || { echo "bench-resp: ctxd not ready" >&2; cat "$work/ctxd.log" >&2; exit 1; }
for port in "$CTXD_PORT" "$REDIS_PORT"; do
	for _ in $(seq 100); do
		[[ $(redis-cli -p "$port" PING 2>/dev/null) == PONG ]] && break
		sleep 0.1
	done
	[[ $(redis-cli -p "$port" PING 2>/dev/null) == PONG ]] || { echo "bench-resp: nothing answers on $port" >&2; cat "$work"/*.log >&2; exit 1; }
done

# cputicks PID: the process's user + system CPU time in clock ticks.
cputicks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# run TARGET PID PORT SIZE N ARGS...: one redis-benchmark run of N requests
# per op; appends "target size op rps" lines, and a "target size CPU us"
# line: the server's CPU time per request (SET and GET together), which the
# machine's load changes far less than the rates.
run() {
	local target=$1 pid=$2 port=$3 size=$4 n=$5
	shift 5
	local t0
	t0=$(cputicks "$pid")
	redis-benchmark -p "$port" -t set,get --csv -n "$n" "$@" 2>"$work/bench.err" | tr -d '"' | awk -F, -v t="$target" -v s="$size" \
		'$1 == "SET" || $1 == "GET" { printf "%s %s %s %s\n", t, s, $1, $2 }' | tee -a "$work/results"
	awk -v t="$target" -v s="$size" -v d="$(($(cputicks "$pid") - t0))" -v hz="$hz" -v n="$n" \
		'BEGIN { printf "%s %s CPU %.2f\n", t, s, d / hz * 1e6 / (2 * n) }' | tee -a "$work/results"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	echo "# round $r"
	run ctxd "${pids[0]}" "$CTXD_PORT" 2mib "$N_2MIB" -d 2097152 -c 4
	run redis "${pids[1]}" "$REDIS_PORT" 2mib "$N_2MIB" -d 2097152 -c 4
	run ctxd "${pids[0]}" "$CTXD_PORT" 1kib "$N_1KIB" -d 1024 -c 50 -P 16
	run redis "${pids[1]}" "$REDIS_PORT" 1kib "$N_1KIB" -d 1024 -c 50 -P 16
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"

median() { # target size op
	awk -v t="$1" -v s="$2" -v o="$3" '$1 == t && $2 == s && $3 == o { print $4 }' "$work/results" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR == 0) { print 0 } else if (NR % 2) { print v[(NR + 1) / 2] } else { print (v[NR / 2] + v[NR / 2 + 1]) / 2 } }'
}
for size in 2mib 1kib; do
	for op in SET GET; do
		echo "median_${op,,}_${size}: ctxd=$(median ctxd $size $op) redis=$(median redis $size $op) rps"
	done
done
for size in 2mib 1kib; do
	echo "median_cpu_us_per_request_${size}: ctxd=$(median ctxd $size CPU) redis=$(median redis $size CPU) (SET and GET together)"
done
ratio() { awk -v a="$(median ctxd "$1" GET)" -v b="$(median redis "$1" GET)" 'BEGIN { if (b > 0) printf "%.3f\n", a / b; else print "nan" }'; }
echo "ratio_vs_redis_get_2mib=$(ratio 2mib)"
echo "ratio_vs_redis_get_1kib=$(ratio 1kib)"
