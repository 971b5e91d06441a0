#!/usr/bin/env bash
# Alternates two ctxd binaries on native GETs that miss DRAM and hit NVMe:
# each round starts a throwaway ctxd per binary with a 128 MiB DRAM tier and a
# 4 GiB NVMe tier (in a temporary directory under $TMPDIR), puts a 512 MiB
# working set (256 blocks of 2 MiB, ctxbench load's pre-put, 2 s of GETs to
# settle), then measures
#   ctxbench load --block-size 2MiB --clients 4 --get-ratio 1 --keys 256 --duration 8s
# and prints GB/s, p50, the server's CPU seconds per GB (utime+stime from
# /proc/PID/stat around the measured run), the client's, and the server's
# lower-tier hit and promotion counters. Almost every GET is an NVMe hit and a
# promotion into DRAM.
# Usage: scripts/bench-nvme-get.sh OLD_CTXD NEW_CTXD [ROUNDS]   (needs make build)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 OLD_CTXD NEW_CTXD [ROUNDS]" >&2; exit 2; }
old=$1 new=$2 rounds=${3:-4}
base=$((20000 + RANDOM % 20000))
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
pid= dir=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; [ -n "$dir" ] && rm -rf "$dir"; pid= dir=; }
trap cleanup EXIT
load() { bin/ctxbench load --addr 127.0.0.1:$base --block-size 2MiB --clients 4 --get-ratio 1 --keys 256 "$@"; }
for r in $(seq "$rounds"); do
	for which in old new; do
		bin=$old
		[ "$which" = new ] && bin=$new
		dir=$(mktemp -d)
		"$bin" --data-dir "$dir" --listen 127.0.0.1:$base --http-listen 127.0.0.1:$((base + 1)) --resp-listen "" \
			--raft-listen 127.0.0.1:$((base + 2)) --s3-admin-listen '' --peer-listen 127.0.0.1:$((base + 4)) \
			--dram-capacity 128MiB --nvme-capacity 4GiB --log-level warn 2>/dev/null &
		pid=$!
		for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$((base + 1))/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
		load --duration 2s >/dev/null 2>&1
		c0=$(cpu "$pid")
		out=$(load --duration 8s --json 2>/dev/null | grep '^{')
		c1=$(cpu "$pid")
		m=$(curl -fsS "http://127.0.0.1:$((base + 1))/metrics" | awk '/^ctxtier_tiers_(promotions_total|promotions_direct_total|lower_hits_total)/ {printf "%s=%s ", $1, $2}')
		python3 -c '
import json, sys
d = json.loads(sys.argv[1]); gb = d["gb_per_s"] * d["seconds"]
print("%s %-3s %.3f GB/s errors=%d p50=%.0fus server_cpu=%.3f s/GB client_cpu=%.3f s/GB load=%s %s" % (
    sys.argv[2], sys.argv[3], d["gb_per_s"], d["errors"], d["p50_us"],
    (int(sys.argv[4]) - int(sys.argv[5])) / int(sys.argv[6]) / gb, d["client_cpu_s_per_gb"], sys.argv[7], sys.argv[8]))
' "$out" "$r" "$which" "$c1" "$c0" "$tck" "$(cut -d' ' -f1 /proc/loadavg)" "$m"
		cleanup
	done
done
