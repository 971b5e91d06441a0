#!/usr/bin/env bash
# ctxd's CPU time per small RESP request, for comparing builds in one run:
#   scripts/bench-resp-cpu.sh CTXD_BINARY...
# For each round and each binary in turn, it starts that ctxd (one node,
# 2 GiB DRAM tier, RESP on $PORT), SETs the benchmark's key, then runs
#   redis-benchmark -t get -d 1024 -c 50 -P 16 -n N
#   redis-benchmark -t set -d 1024 -c 50 -P 16 -n N
# and reads the server's user + system CPU time from /proc/PID/stat around
# each. CPU time per request moves far less with the machine's load than a
# request rate does. It prints one line per run, then each binary's medians:
#   median <binary> get_cpu_us=<x> set_cpu_us=<y> get_rps=<z>
# Environment: ROUNDS (3), N (300000), PORT (17745; ctxd also takes the
# five ports below it).
set -euo pipefail
ROUNDS=${ROUNDS:-3}
N=${N:-300000}
PORT=${PORT:-17745}
(($# > 0)) || { echo "usage: $0 CTXD_BINARY..." >&2; exit 2; }
for tool in redis-benchmark curl; do
	command -v "$tool" >/dev/null || { echo "bench-resp-cpu: $tool not found (make resp-deps)" >&2; exit 1; }
done
work=$(mktemp -d)
pid=
cleanup() {
	[[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
hz=$(getconf CLK_TCK)
cputicks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# perreq TICKS: microseconds of CPU per request.
perreq() { awk -v d="$1" -v hz="$hz" -v n="$N" 'BEGIN { printf "%.3f", d / hz * 1e6 / n }'; }

# one BINARY: one run; appends "binary get_cpu_us set_cpu_us get_rps load".
one() {
	local bin=$1 base=$((PORT - 5))
	rm -rf "$work/data"
	"$bin" --data-dir "$work/data" --listen "127.0.0.1:$base" --http-listen "127.0.0.1:$((base + 1))" \
		--raft-listen "127.0.0.1:$((base + 2))" --peer-listen "127.0.0.1:$((base + 4))" --s3-admin-listen "" \
		--resp-listen "127.0.0.1:$PORT" --dram-capacity 2GiB --log-level warn >"$work/ctxd.log" 2>&1 &
	pid=$!
	for _ in $(seq 300); do
		curl -fsS "http://127.0.0.1:$((base + 1))/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fsS "http://127.0.0.1:$((base + 1))/readyz" >/dev/null || { echo "bench-resp-cpu: $bin not ready" >&2; cat "$work/ctxd.log" >&2; exit 1; }
	redis-benchmark -p "$PORT" -t set -d 1024 -n 1000 -q >/dev/null
	local t0 t1 s0 s1 rps
	t0=$(cputicks "$pid")
	rps=$(redis-benchmark -p "$PORT" -t get -d 1024 -c 50 -P 16 -n "$N" --csv | tr -d '"' | awk -F, '$1 == "GET" { print $2 }')
	t1=$(cputicks "$pid")
	s0=$(cputicks "$pid")
	redis-benchmark -p "$PORT" -t set -d 1024 -c 50 -P 16 -n "$N" --csv >/dev/null
	s1=$(cputicks "$pid")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	echo "$bin $(perreq $((t1 - t0))) $(perreq $((s1 - s0))) $rps $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$work/results" |
		awk '{ printf "run %s get_cpu_us=%s set_cpu_us=%s get_rps=%s load=%s\n", $1, $2, $3, $4, $5 }'
}
for r in $(seq "$ROUNDS"); do
	echo "# round $r"
	for bin in "$@"; do one "$bin"; done
done
median() { # binary column
	awk -v b="$1" -v c="$2" '$1 == b { print $c }' "$work/results" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) { print v[(NR + 1) / 2] } else { print (v[NR / 2] + v[NR / 2 + 1]) / 2 } }'
}
for bin in "$@"; do
	echo "median $bin get_cpu_us=$(median "$bin" 2) set_cpu_us=$(median "$bin" 3) get_rps=$(median "$bin" 4)"
done
