#!/usr/bin/env bash
# Start a local ctxd and replay a trace against it with `ctxbench replay`.
#
#   scripts/replay.sh --trace ../shared/traces/conversation_trace.jsonl [ctxbench replay flags...]
#
# After the replay it prints ctxd's DRAM eviction and residency counters to stderr.
#
# Environment:
#   CTXD_BIN       ctxd binary to run (default: built from ./cmd/ctxd)
#   CTXBENCH_BIN   ctxbench binary (default: built from ./cmd/ctxbench)
#   DRAM_CAPACITY  ctxd's DRAM tier (default 4GiB)
#   NATIVE_ADDR    ctxd's native listener (default 127.0.0.1:17400)
#   HTTP_ADDR      ctxd's HTTP listener (default 127.0.0.1:17401)
#   DATA_DIR       ctxd's data directory (default: a fresh temporary one)
#   USE_ROUTER     1: route the shared-tier policy through ctxd's /v1/route
#                  (needs a ctxd that mounts the router)
set -euo pipefail
cd "$(dirname "$0")/.."

DRAM_CAPACITY=${DRAM_CAPACITY:-4GiB}
NATIVE_ADDR=${NATIVE_ADDR:-127.0.0.1:17400}
HTTP_ADDR=${HTTP_ADDR:-127.0.0.1:17401}
work=$(mktemp -d)
DATA_DIR=${DATA_DIR:-$work/data}
ctxd_pid=""
cleanup() {
	if [[ -n "$ctxd_pid" ]] && kill -0 "$ctxd_pid" 2>/dev/null; then
		kill -INT "$ctxd_pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$ctxd_pid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$ctxd_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

if [[ -z "${CTXD_BIN:-}" ]]; then
	if [[ ! -d cmd/ctxd ]]; then
		echo "replay.sh: cmd/ctxd is not in this tree; set CTXD_BIN to a ctxd binary" >&2
		exit 1
	fi
	CTXD_BIN=$work/ctxd
	go build -o "$CTXD_BIN" ./cmd/ctxd
fi
if [[ -z "${CTXBENCH_BIN:-}" ]]; then
	CTXBENCH_BIN=$work/ctxbench
	go build -o "$CTXBENCH_BIN" ./cmd/ctxbench
fi

if curl -fsS "http://$HTTP_ADDR/readyz" >/dev/null 2>&1; then
	echo "replay.sh: something already answers on $HTTP_ADDR; stop it or set HTTP_ADDR" >&2
	exit 1
fi
mkdir -p "$DATA_DIR"
"$CTXD_BIN" --listen "$NATIVE_ADDR" --http-listen "$HTTP_ADDR" --resp-listen "" --data-dir "$DATA_DIR" \
	--dram-capacity "$DRAM_CAPACITY" --log-level warn >"$work/ctxd.log" 2>&1 &
ctxd_pid=$!

for _ in $(seq 150); do
	if curl -fsS "http://$HTTP_ADDR/readyz" >/dev/null 2>&1; then break; fi
	if ! kill -0 "$ctxd_pid" 2>/dev/null; then
		echo "replay.sh: ctxd exited:" >&2
		cat "$work/ctxd.log" >&2
		exit 1
	fi
	sleep 0.1
done
if ! curl -fsS "http://$HTTP_ADDR/readyz" >/dev/null || ! kill -0 "$ctxd_pid" 2>/dev/null; then
	echo "replay.sh: ctxd not ready" >&2
	cat "$work/ctxd.log" >&2
	exit 1
fi

extra=()
if [[ "${USE_ROUTER:-0}" == 1 ]]; then
	extra+=(--router-url "http://$HTTP_ADDR/v1/route")
fi
echo "replay.sh: ctxd $CTXD_BIN on $HTTP_ADDR, DRAM $DRAM_CAPACITY" >&2
"$CTXBENCH_BIN" replay --tier-url "http://$HTTP_ADDR" "${extra[@]}" "$@"
# What the DRAM tier evicted during the replay (0 when the trace's blocks fit).
echo "replay.sh: ctxd's tier counters after the replay:" >&2
curl -fsS "http://$HTTP_ADDR/metrics" | grep -E '^ctxtier_tier_(evictions_total|evicted_bytes_total|resident_bytes)' >&2 || true
