#!/usr/bin/env bash
# e2e.sh — end-to-end test of the ctxd image and the compose cluster.
#
# Phase 1 (single node, docker-compose.single.yml): the image starts as a
#   non-root user, answers /healthz and /readyz, stores and serves blocks over
#   HTTP (several sizes, idempotent re-put, checksum and conflict refusals),
#   exposes /metrics, keeps its namespace catalog on the /data volume across a
#   restart; the S3 server answers signed requests.
# Phase 2 (three nodes, docker-compose.yml): the cluster forms by itself;
#   blocks put through each node are read back through every node; the leader
#   is killed and the survivors elect a new one and keep serving; the leader is
#   cut off the network (docker network disconnect) and refuses writes while
#   the majority serves; it is reconnected and catches up.
#
# Phase 2 needs the cluster flags in the image's ctxd (--bootstrap-expect and
# friends). When they are missing the phase is reported as SKIP, or fails with
# E2E_REQUIRE_CLUSTER=1. With no Docker engine the whole test prints SKIP and
# exits 0.
#
# Environment: CTXD_IMAGE, S3_IMAGE (images; built when missing), E2E_PROJECT
# (compose project prefix, default ctxtier-e2e), E2E_KEEP=1 (leave the
# containers running), E2E_REQUIRE_CLUSTER=1, E2E_PHASES ("single cluster"),
# CTXTIER_PORT_PREFIX (host ports, default 274xx), E2E_DATA_SHARDS / E2E_PARITY_SHARDS (the test namespace's redundancy,
# default 1+2: one node may be lost). Requests go only to 127.0.0.1 ports
# published by the containers, and to 127.0.0.1 inside a cut-off node's own
# network namespace (nsenter), never to a container address.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=deploy/compose

export CTXD_IMAGE=${CTXD_IMAGE:-ctxtier/ctxd:dev}
export S3_IMAGE=${S3_IMAGE:-ctxtier/versitygw:v1.8.0}
export S3_ACCESS_KEY=${S3_ACCESS_KEY:-ctxtier-dev}
export S3_SECRET_KEY=${S3_SECRET_KEY:-ctxtier-dev-secret}
export S3_BUCKET=${S3_BUCKET:-ctxtier}
PROJECT=${E2E_PROJECT:-ctxtier-e2e}
PHASES=${E2E_PHASES:-single cluster}
NS=e2e
# Host ports are CTXTIER_PORT_PREFIX (3 digits) + 2 digits, as in the compose files.
export CTXTIER_PORT_PREFIX=${CTXTIER_PORT_PREFIX:-274}
# The nodes' shared cluster secret: $CTXTIER_CLUSTER_SECRET, else a fresh one.
if [[ -z ${CTXTIER_CLUSTER_SECRET:-} ]]; then
	CTXTIER_CLUSTER_SECRET=$(head -c 32 /dev/urandom | base64 | tr -d '/+=\n')
fi
export CTXTIER_CLUSTER_SECRET
P=$CTXTIER_PORT_PREFIX
S3_URL=http://127.0.0.1:${P}70
ELECTION_TIMEOUT=${E2E_ELECTION_TIMEOUT:-30}

passed=0
declare -a active_compose=()

log() { printf '%s e2e: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
ok() { passed=$((passed + 1)); log "ok: $*"; }
skip() { echo "SKIP: $*"; exit 0; }

dump() {
	if ((${#active_compose[@]})); then
		log "container state and last log lines:"
		"${active_compose[@]}" ps >&2 || true
		"${active_compose[@]}" logs --no-color --tail=40 >&2 || true
	fi
}
fail() {
	log "FAIL: $*"
	dump
	exit 1
}

teardown() {
	if ((${#active_compose[@]})); then
		if [[ ${E2E_KEEP:-0} == 1 ]]; then
			log "E2E_KEEP=1: leaving ${active_compose[*]} running"
		else
			"${active_compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
		fi
	fi
	active_compose=()
}
trap 'teardown; rm -rf "$work"' EXIT
work=$(mktemp -d)

# ---- preflight ------------------------------------------------------------

command -v docker >/dev/null || skip "e2e: docker is not installed, no Docker engine to test against"
docker info >/dev/null 2>&1 || skip "e2e: no Docker engine answers (docker info failed)"
for t in docker-compose curl jq cmp nsenter; do
	command -v "$t" >/dev/null || fail "$t is required (Debian packages: docker-compose curl jq diffutils util-linux)"
done

ensure_images() {
	if ! docker image inspect "$CTXD_IMAGE" >/dev/null 2>&1; then
		[[ $CTXD_IMAGE == ctxtier/ctxd:dev ]] || fail "image $CTXD_IMAGE not found"
		log "building $CTXD_IMAGE"
		mkdir -p bin/linux
		CGO_ENABLED=0 ${GO:-go} build -trimpath -o bin/linux/ctxd ./cmd/ctxd || fail "go build ./cmd/ctxd"
		deploy/docker/build.sh ctxd || fail "building $CTXD_IMAGE"
	fi
	if ! docker image inspect "$S3_IMAGE" >/dev/null 2>&1; then
		log "building $S3_IMAGE"
		deploy/docker/build.sh versitygw || fail "building $S3_IMAGE"
	fi
}

# ---- helpers --------------------------------------------------------------

# http_port NODE: the host port of a node's HTTP listener.
http_port() {
	case $1 in
	ctxd | ctxd-1) echo "${P}01" ;;
	ctxd-2) echo "${P}11" ;;
	ctxd-3) echo "${P}21" ;;
	*) fail "unknown node $1" ;;
	esac
}
url() { echo "http://127.0.0.1:$(http_port "$1")"; }

# until_ok SECONDS DESCRIPTION CMD...: retry CMD every 0.5 s.
until_ok() {
	local limit=$1 what=$2
	shift 2
	local deadline=$((SECONDS + limit))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || fail "$what: not true within ${limit}s"
		sleep 0.5
	done
}

ready() { [[ $(curl -sS -m 2 -o /dev/null -w '%{http_code}' "$(url "$1")/readyz") == 200 ]]; }

key() { printf '%016x' "$1"; }

# mkblock NAME SIZE: random bytes in $work/NAME.
mkblock() { head -c "$2" /dev/urandom >"$work/$1"; }

# put NODE KEY FILE [EXTRA CURL ARGS...] -> prints the HTTP status.
put() {
	local node=$1 k=$2 f=$3
	shift 3
	curl -sS -m 20 -o "$work/put.out" -w '%{http_code}' -X PUT --data-binary "@$f" "$@" \
		"$(url "$node")/v1/namespaces/$NS/blocks/$k" || true
}

# get NODE KEY OUT -> prints the HTTP status.
get() {
	curl -sS -m 20 -o "$3" -w '%{http_code}' "$(url "$1")/v1/namespaces/$NS/blocks/$2" || true
}

# must_put / must_get_same: assertions with context.
must_put() {
	local code
	code=$(put "$1" "$2" "$3")
	[[ $code == 201 ]] || fail "PUT $2 via $1: status $code: $(head -c 300 "$work/put.out")"
}
must_get_same() {
	local code
	code=$(get "$1" "$2" "$work/got")
	[[ $code == 200 ]] || fail "GET $2 via $1: status $code: $(head -c 300 "$work/got")"
	cmp -s "$3" "$work/got" || fail "GET $2 via $1: bytes differ from what was put"
}

# s3 METHOD PATH [CURL ARGS...] -> prints the HTTP status of a SigV4-signed request.
s3() {
	local m=$1 p=$2
	shift 2
	curl -sS -m 10 -o "$work/s3.out" -w '%{http_code}' -X "$m" --aws-sigv4 "aws:amz:us-east-1:s3" \
		--user "$S3_ACCESS_KEY:$S3_SECRET_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@" "$S3_URL$p" || true
}
s3_up() { [[ $(s3 GET /) == 200 ]]; }
make_bucket() {
	local code
	code=$(s3 PUT "/$1")
	[[ $code == 200 || $code == 409 ]] || fail "create bucket $1: status $code: $(cat "$work/s3.out")"
}

check_s3() {
	until_ok 30 "S3 server answers" s3_up
	make_bucket e2e-check
	mkblock s3obj 70000
	local code
	code=$(s3 PUT /e2e-check/obj --data-binary "@$work/s3obj")
	[[ $code == 200 ]] || fail "S3 PUT object: status $code"
	code=$(s3 GET /e2e-check/obj)
	[[ $code == 200 ]] || fail "S3 GET object: status $code"
	cmp -s "$work/s3obj" "$work/s3.out" || fail "S3 GET object: bytes differ"
	code=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' "$S3_URL/e2e-check/obj" || true)
	[[ $code == 403 ]] || fail "S3 unsigned GET: status $code, want 403"
	ok "S3 server: signed bucket create, put, get; unsigned request refused"
}

create_namespace() {
	local node=$1 body=$2 code
	code=$(curl -sS -m 10 -o "$work/ns.out" -w '%{http_code}' -H 'Content-Type: application/json' \
		-d "$body" "$(url "$node")/v1/namespaces" || true)
	[[ $code == 201 || $code == 200 ]] || fail "create namespace via $node: status $code: $(cat "$work/ns.out")"
}
has_namespace() { [[ $(curl -sS -m 2 -o /dev/null -w '%{http_code}' "$(url "$1")/v1/namespaces/$NS") == 200 ]]; }

# ---- phase 1: single node -------------------------------------------------

phase_single() {
	log "phase 1: single node (docker-compose.single.yml)"
	active_compose=(docker-compose -p "$PROJECT-single" -f "$HERE/docker-compose.single.yml")
	"${active_compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
	"${active_compose[@]}" up -d >&2 || fail "compose up"
	until_ok 60 "ctxd /readyz" ready ctxd
	[[ $(curl -sS -m 2 "$(url ctxd)/healthz") == ok* ]] || fail "/healthz does not say ok"
	ok "container started, /healthz and /readyz answer 200"

	local cid user
	cid=$("${active_compose[@]}" ps -q ctxd)
	user=$(docker inspect -f '{{.Config.User}}' "$cid")
	[[ $user == 65532:65532 ]] || fail "container user is '$user', want 65532:65532"
	ok "runs as non-root user $user"

	check_s3

	create_namespace ctxd "{\"name\":\"$NS\",\"block_tokens\":16}"
	local i sizes=(1 4096 65536 1048576 3000000)
	for i in "${!sizes[@]}"; do
		mkblock "b$i" "${sizes[$i]}"
		must_put ctxd "$(key $((0xe2e0 + i)))" "$work/b$i"
	done
	for i in "${!sizes[@]}"; do
		must_get_same ctxd "$(key $((0xe2e0 + i)))" "$work/b$i"
	done
	must_put ctxd "$(key 0xe2e0)" "$work/b0"
	ok "put/get ${#sizes[@]} blocks (1 B to 3 MB) through the container; re-put of identical bytes accepted"

	local code
	code=$(put ctxd "$(key 0xe2e1)" "$work/b2")
	[[ $code == 409 ]] || fail "re-put with other bytes: status $code, want 409"
	mkblock bad 4096
	code=$(put ctxd "$(key 0xbad0)" "$work/bad" -H 'X-Ctxtier-Crc32c: 00000000')
	[[ $code == 400 ]] || fail "put with a wrong checksum: status $code, want 400"
	code=$(get ctxd "$(key 0xbad0)" "$work/got")
	[[ $code == 404 ]] || fail "block refused for a wrong checksum is readable: status $code"
	ok "conflicting bytes refused (409), wrong checksum refused (400) and nothing stored"

	curl -sS -m 5 "$(url ctxd)/metrics" >"$work/metrics" || fail "GET /metrics"
	grep -q '^ctxtier_requests_total{.*proto="http"' "$work/metrics" || fail "/metrics lacks ctxtier_requests_total"
	grep -q '^ctxtier_tier_resident_bytes{.*tier="dram"' "$work/metrics" || fail "/metrics lacks ctxtier_tier_resident_bytes"
	ok "/metrics exposes request and tier metrics"

	docker restart -t 20 "$cid" >/dev/null || fail "docker restart"
	until_ok 60 "ctxd /readyz after restart" ready ctxd
	has_namespace ctxd || fail "namespace $NS lost across a restart (catalog on the /data volume)"
	ok "restart: ready again, namespace catalog kept on the /data volume"
	teardown
}

# ---- phase 2: three-node cluster ------------------------------------------

NODES=(ctxd-1 ctxd-2 ctxd-3)

# status NODE: GET /v1/cluster/status (from the host, or via nsenter when the
# node is cut off: CUTOFF_NODE / CUTOFF_PID).
CUTOFF_NODE=
CUTOFF_PID=
status() {
	if [[ $1 == "$CUTOFF_NODE" ]]; then
		nsenter -t "$CUTOFF_PID" -n curl -sS -m 3 http://127.0.0.1:7401/v1/cluster/status
	else
		curl -sS -m 3 "$(url "$1")/v1/cluster/status"
	fi
}

# leader_of NODE: the node name (ctxd-N) that NODE reports as leader, or "".
# "leader" may be an id, an address or an object with an id; node ids,
# hostnames and advertised hosts are all ctxd-N here, so the name is found
# in whichever form is used.
leader_of() {
	status "$1" 2>/dev/null |
		jq -r '.leader | if type == "object" then (.id // .node_id // .addr // "") else (. // "") end' 2>/dev/null |
		grep -o 'ctxd-[123]' | head -1 || true
}
members_of() { status "$1" 2>/dev/null | jq -r '.members | length' 2>/dev/null || echo 0; }

# agree LEADER_NOT NODES...: every node names the same leader, not LEADER_NOT,
# and that leader is one of NODES; prints it.
agreed_leader() {
	local not=$1 l first=
	shift
	for n in "$@"; do
		l=$(leader_of "$n")
		[[ -n $l && $l != "$not" ]] || return 1
		[[ -z $first || $l == "$first" ]] || return 1
		first=$l
	done
	[[ " $* " == *" $first "* ]] || return 1
	echo "$first"
}
wait_leader() {
	local not=$1 deadline=$((SECONDS + ELECTION_TIMEOUT)) l
	shift
	until l=$(agreed_leader "$not" "$@"); do
		((SECONDS < deadline)) || fail "no agreed leader among $* (excluding '${not:-none}') within ${ELECTION_TIMEOUT}s"
		sleep 0.5
	done
	echo "$l"
}
full_members() { [[ $(members_of "$1") == 3 ]]; }

cid_of() { "${active_compose[@]}" ps -q "$1"; }

# all_blocks_readable NODE: every block put so far reads back through NODE.
declare -a KEYS=()
all_blocks_readable() {
	local k
	for k in "${KEYS[@]}"; do
		must_get_same "$1" "$k" "$work/$k"
	done
}
put_new() { # put_new NODE COUNT
	local i k
	for ((i = 0; i < $2; i++)); do
		k=$(key $((0xc0000 + ${#KEYS[@]})))
		mkblock "$k" $((4096 + RANDOM * 8))
		must_put "$1" "$k" "$work/$k"
		KEYS+=("$k")
	done
}

phase_cluster() {
	# Capture first: with pipefail, grep -q closing the pipe early would
	# make docker's SIGPIPE fail the test.
	local usage
	usage=$(docker run --rm "$CTXD_IMAGE" -h 2>&1 || true)
	if ! grep -q -- '-bootstrap-expect' <<<"$usage"; then
		local why="the ctxd in $CTXD_IMAGE has no --bootstrap-expect flag (the cluster is not built in yet)"
		[[ ${E2E_REQUIRE_CLUSTER:-0} == 1 ]] && fail "$why"
		echo "SKIP: phase 2 (three-node cluster): $why"
		return 0
	fi
	log "phase 2: three-node cluster (docker-compose.yml)"
	active_compose=(docker-compose -p "$PROJECT" -f "$HERE/docker-compose.yml")
	"${active_compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
	"${active_compose[@]}" up -d s3 >&2 || fail "compose up s3"
	until_ok 30 "S3 server answers" s3_up
	make_bucket "$S3_BUCKET"
	"${active_compose[@]}" up -d "${NODES[@]}" >&2 || fail "compose up nodes"

	# 1. The cluster forms by itself.
	local n
	for n in "${NODES[@]}"; do until_ok 90 "$n /readyz" ready "$n"; done
	local leader
	leader=$(wait_leader "" "${NODES[@]}")
	for n in "${NODES[@]}"; do until_ok 30 "$n reports 3 members" full_members "$n"; done
	ok "cluster formed: leader $leader, 3 members seen by every node"

	create_namespace ctxd-1 "{\"name\":\"$NS\",\"block_tokens\":16,\"data_shards\":${E2E_DATA_SHARDS:-1},\"parity_shards\":${E2E_PARITY_SHARDS:-2}}"
	for n in "${NODES[@]}"; do until_ok 30 "namespace $NS visible on $n" has_namespace "$n"; done

	# 2. Put through each node, get through every node.
	for n in "${NODES[@]}"; do put_new "$n" 4; done
	for n in "${NODES[@]}"; do all_blocks_readable "$n"; done
	ok "${#KEYS[@]} blocks put through each node read back through every node"

	# 3. Kill the leader: blocks stay readable, a new leader serves.
	local old=$leader
	docker kill "$(cid_of "$old")" >/dev/null || fail "docker kill $old"
	local alive=()
	for n in "${NODES[@]}"; do [[ $n == "$old" ]] || alive+=("$n"); done
	leader=$(wait_leader "$old" "${alive[@]}")
	for n in "${alive[@]}"; do all_blocks_readable "$n"; done
	for n in "${alive[@]}"; do put_new "$n" 2; done
	for n in "${alive[@]}"; do all_blocks_readable "$n"; done
	ok "leader $old killed: new leader $leader; all blocks readable and writable through ${alive[*]}"

	"${active_compose[@]}" start "$old" >&2 || fail "restart $old"
	until_ok 90 "$old /readyz after restart" ready "$old"
	until_ok 30 "$old reports 3 members" full_members "$old"
	local now
	now=$(wait_leader "" "${NODES[@]}")
	[[ $now == "$leader" ]] || log "note: leadership moved from $leader to $now after $old came back"
	all_blocks_readable "$old"
	ok "$old restarted from its volume, rejoined and serves every block"

	# 4. Partition: cut the leader off; the minority refuses writes, the majority serves.
	leader=$(wait_leader "" "${NODES[@]}")
	local victim=$leader cid net
	cid=$(cid_of "$victim")
	net=$(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}' "$cid")
	CUTOFF_PID=$(docker inspect -f '{{.State.Pid}}' "$cid")
	CUTOFF_NODE=$victim
	docker network disconnect "$net" "$cid" || fail "docker network disconnect $net $victim"
	local majority=()
	for n in "${NODES[@]}"; do [[ $n == "$victim" ]] || majority+=("$n"); done
	leader=$(wait_leader "$victim" "${majority[@]}")
	for n in "${majority[@]}"; do put_new "$n" 2; done
	for n in "${majority[@]}"; do all_blocks_readable "$n"; done
	ok "partition: majority ${majority[*]} elected $leader and serves reads and writes"

	local k code refused
	k=$(key 0xdead01)
	mkblock "$k" 8192
	refused=$(nsenter -t "$CUTOFF_PID" -n curl -sS -m 15 -o "$work/put.out" -w '%{http_code}' -X PUT \
		--data-binary "@$work/$k" "http://127.0.0.1:7401/v1/namespaces/$NS/blocks/$k" || true)
	[[ $refused != 2* ]] || fail "cut-off node $victim accepted a write (status $refused)"
	[[ $(leader_of "$victim") != "$victim" ]] || fail "cut-off node $victim still claims leadership"
	code=$(get "${majority[0]}" "$k" "$work/got")
	[[ $code == 404 ]] || fail "write refused by the minority is visible on the majority (status $code)"
	ok "partition: cut-off $victim refused a write (status $refused; 000 is a timeout) and no longer claims leadership"

	# 5. Reconnect: the cut-off node catches up.
	docker network connect --alias "$victim" "$net" "$cid" || fail "docker network connect $victim"
	CUTOFF_NODE=
	until_ok 60 "$victim back with 3 members" full_members "$victim"
	now=$(wait_leader "" "${NODES[@]}")
	[[ $now == "$leader" ]] || log "note: leadership moved from $leader to $now after $victim came back"
	local deadline=$((SECONDS + 60))
	until (all_blocks_readable "$victim") >/dev/null 2>&1; do
		((SECONDS < deadline)) || all_blocks_readable "$victim"
		sleep 1
	done
	put_new "$victim" 2
	for n in "${NODES[@]}"; do all_blocks_readable "$n"; done
	ok "reconnected $victim caught up: all ${#KEYS[@]} blocks readable through it, and it takes writes again"
	teardown
}

# ---- main -----------------------------------------------------------------

ensure_images
for p in $PHASES; do
	case $p in
	single) phase_single ;;
	cluster) phase_cluster ;;
	*) fail "unknown phase $p" ;;
	esac
done
echo "e2e: $passed checks passed"
