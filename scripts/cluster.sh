#!/usr/bin/env bash
# A local ctxtier cluster of real ctxd processes on 127.0.0.1, for trying
# things out (docs/cluster.md).
#
#   scripts/cluster.sh start      start nodes n1..n3 (make cluster)
#   scripts/cluster.sh status     ctxctl cluster status against n1
#   scripts/cluster.sh scale N    grow to N nodes (n4..nN join) or shrink to N
#                                 (nN..n(N+1) are drained, removed, stopped and
#                                 wiped), 3 <= N <= 9
#   scripts/cluster.sh stop       stop every node by its pid file (make cluster-stop)
#   scripts/cluster.sh clean      stop, then delete ./cluster-data
#
# Node i uses ports 74i0 (native protocol, --listen), 74i1 (HTTP API),
# 74i2 (Raft), 74i3 (node-to-node shards) and 74i4 (S3 admin); its data,
# log and pid file are in ./cluster-data/nI. The cluster secret (node
# identity) is $CTXTIER_CLUSTER_SECRET when set, else one drawn once into
# ./cluster-data/cluster.secret (ctxctl reads that file through
# CTXTIER_CLUSTER_SECRET_FILE, which this script exports), NO_BUILD=1
# to skip `go build`, CTXD_ARGS for extra ctxd flags (e.g. --dram-capacity 1GiB).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin}
DATA=${CLUSTER_DATA:-cluster-data}
HOST=127.0.0.1
ZONES=(zone-a zone-b zone-c)
SEEDS="$HOST:7411,$HOST:7421,$HOST:7431"
export CTXTIER_CLUSTER_SECRET_FILE="$DATA/cluster.secret"

die() { echo "cluster.sh: $*" >&2; exit 1; }

port() { echo $((7400 + 10 * $1 + $2)); }
http_addr() { echo "$HOST:$(port "$1" 1)"; }
pidfile() { echo "$DATA/n$1/ctxd.pid"; }

build() {
	[[ ${NO_BUILD:-} == 1 ]] && return 0
	mkdir -p "$BIN"
	go build -trimpath -o "$BIN/" ./cmd/ctxd ./cmd/ctxctl
}

# running I: true when node I's pid file names a live ctxd.
running() {
	local f pid
	f=$(pidfile "$1")
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	grep -q ctxd "/proc/$pid/cmdline" 2>/dev/null || [[ ! -d /proc ]]
}

# cluster_secret: the path of the secret file every node and ctxctl use.
cluster_secret() {
	local f="$DATA/cluster.secret" s=${CTXTIER_CLUSTER_SECRET:-${CTXTIER_CLUSTER_TOKEN:-}}
	mkdir -p "$DATA"
	if [[ -n $s ]]; then
		(umask 077 && printf '%s\n' "$s" >"$f")
	elif [[ ! -s $f ]]; then
		(umask 077 && head -c 32 /dev/urandom | base64 | tr -d '/+=\n' >"$f" && echo >>"$f")
	fi
	echo "$f"
}

# start_node I [extra ctxd flags...]
start_node() {
	local i=$1 dir log
	shift
	dir="$DATA/n$i"
	log="$dir/ctxd.log"
	if running "$i"; then
		echo "n$i already running (pid $(<"$(pidfile "$i")"))"
		return 0
	fi
	mkdir -p "$dir"
	local args=(
		--node-id "n$i"
		--listen "$HOST:$(port "$i" 0)"
		--http-listen "$(http_addr "$i")"
		--raft-listen "$HOST:$(port "$i" 2)"
		--peer-listen "$HOST:$(port "$i" 3)"
		--s3-admin-listen "$HOST:$(port "$i" 4)"
		--data-dir "$dir"
		--zone "${ZONES[$(((i - 1) % 3))]}"
		--dram-capacity 256MiB
		"$@"
	)
	# Every node needs the cluster secret: $CTXTIER_CLUSTER_SECRET (or the
	# older $CTXTIER_CLUSTER_TOKEN), else one drawn once into $DATA/cluster.secret.
	args+=(--cluster-secret-file "$(cluster_secret)")
	# shellcheck disable=SC2206 # CTXD_ARGS is split on purpose
	args+=(${CTXD_ARGS:-})
	echo "starting n$i: $BIN/ctxd ${args[*]}" >>"$log"
	if command -v setsid >/dev/null; then
		setsid "$BIN/ctxd" "${args[@]}" </dev/null >>"$log" 2>&1 &
	else
		nohup "$BIN/ctxd" "${args[@]}" </dev/null >>"$log" 2>&1 &
	fi
	echo $! >"$(pidfile "$i")"
	echo "started n$i (pid $!, http $(http_addr "$i"), log $log)"
}

# wait_ready I: until node I answers /readyz (30 s).
wait_ready() {
	local i=$1
	for _ in $(seq 300); do
		if curl -fsS "http://$(http_addr "$i")/readyz" >/dev/null 2>&1; then
			return 0
		fi
		running "$i" || die "n$i exited; see $DATA/n$i/ctxd.log"
		sleep 0.1
	done
	die "n$i not ready after 30 s; see $DATA/n$i/ctxd.log"
}

# wait_voter I: until node 1's status lists nI as an alive voter (30 s).
wait_voter() {
	local i=$1
	for _ in $(seq 300); do
		if "$BIN/ctxctl" cluster status --json --addr "$(http_addr 1)" 2>/dev/null |
			tr -d ' \n' | grep -q "\"id\":\"n$i\",[^}]*\"state\":\"alive\",\"voter\":true"; then
			return 0
		fi
		sleep 0.1
	done
	die "n$i did not become a voter within 30 s; see $DATA/n$i/ctxd.log"
}

# wait_leader: until node 1 knows a leader (30 s).
wait_leader() {
	for _ in $(seq 300); do
		if curl -fsS "http://$(http_addr 1)/v1/cluster/status" 2>/dev/null | tr -d ' \n' | grep -q '"leader":{'; then
			return 0
		fi
		sleep 0.1
	done
	die "no leader after 30 s; see $DATA/n*/ctxd.log"
}

stop_node() {
	local i=$1 f pid
	f=$(pidfile "$i")
	if ! running "$i"; then
		rm -f "$f"
		return 0
	fi
	pid=$(<"$f")
	kill -TERM "$pid"
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "n$i (pid $pid) did not stop in 10 s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
	echo "stopped n$i (pid $pid)"
}

# nodes: the node numbers that have a data directory, ascending.
nodes() {
	local d
	for d in "$DATA"/n*; do
		[[ -d $d && ${d##*/n} =~ ^[0-9]+$ ]] && echo "${d##*/n}"
	done | sort -n
}

usage_hint() {
	cat <<EOT

The cluster is up: n1..n$1 on 127.0.0.1, HTTP on port 74i1 of node i.
  $BIN/ctxctl cluster status --addr $(http_addr 1)
  curl -s http://$(http_addr 1)/v1/cluster/status
  $BIN/ctxctl cluster transfer-leadership --addr $(http_addr 2)
  scripts/cluster.sh scale 5        # add n4 and n5; 'scale 3' takes them out again
Logs: $DATA/nI/ctxd.log. Stop: make cluster-stop (or scripts/cluster.sh stop);
delete the data too: scripts/cluster.sh clean.
EOT
}

cmd_start() {
	build
	local i
	for i in 1 2 3; do
		start_node "$i" --join "$SEEDS" --bootstrap-expect 3
	done
	for i in 1 2 3; do
		wait_ready "$i"
	done
	wait_leader
	"$BIN/ctxctl" cluster status --addr "$(http_addr 1)"
	usage_hint 3
}

cmd_scale() {
	local n=${1:-} i cur
	[[ $n =~ ^[0-9]+$ && $n -ge 3 && $n -le 9 ]] || die "scale: want a node count from 3 to 9, got '${n}'"
	running 1 || die "scale: n1 is not running; start the cluster first (make cluster)"
	build
	cur=3
	for i in $(nodes); do
		if ((i > cur)) && running "$i"; then cur=$i; fi
	done
	for ((i = 4; i <= n; i++)); do
		if running "$i"; then continue; fi
		start_node "$i" --join "$SEEDS"
		wait_ready "$i"
		wait_voter "$i"
		echo "n$i joined"
	done
	if ((cur > n)); then
		local leaving=()
		for ((i = cur; i > n; i--)); do
			leaving+=("n$i")
		done
		# Drain first: the leaving nodes take no new shards, and the leader
		# copies every shard they hold to the nodes placement picks now.
		# ctxctl prints progress and returns once nothing is left on them
		# (it fails if a drain stalls).
		"$BIN/ctxctl" cluster drain "${leaving[@]}" --addr "$(http_addr 1)"
		for ((i = cur; i > n; i--)); do
			# Nothing is left on the node, so removing it loses nothing.
			# Any member forwards the removal to the leader; a leader being
			# removed hands leadership over first.
			"$BIN/ctxctl" cluster remove "n$i" --addr "$(http_addr 1)"
			stop_node "$i"
			rm -rf "${DATA:?}/n$i"
		done
	fi
	"$BIN/ctxctl" cluster status --addr "$(http_addr 1)"
}

cmd_stop() {
	local i any=0
	for i in $(nodes); do
		[[ -f $(pidfile "$i") ]] || continue
		any=1
		stop_node "$i"
	done
	((any)) || echo "no cluster node is running (no pid files under $DATA)"
}

case ${1:-start} in
start) cmd_start ;;
stop) cmd_stop ;;
status) "$BIN/ctxctl" cluster status --addr "$(http_addr 1)" ;;
scale) cmd_scale "${2:-}" ;;
clean)
	cmd_stop
	rm -rf "${DATA:?}"
	echo "removed $DATA"
	;;
-h | --help | help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' ;;
*) die "unknown command '$1' (start, stop, status, scale N, clean)" ;;
esac
