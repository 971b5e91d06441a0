#!/usr/bin/env bash
# up.sh [PROJECT] [COMPOSE_FILE] — start the compose cluster: the S3 server
# first, then its bucket, then the ctxd nodes, and wait until each node
# answers /healthz. `make compose-up` runs it after building the images.
set -euo pipefail
cd "$(dirname "$0")/../.."
project=${1:-ctxtier}
file=${2:-deploy/compose/docker-compose.yml}
# COMPOSE may be two words ("docker compose"): split it on purpose.
# shellcheck disable=SC2206
compose=(${COMPOSE:-docker-compose} -p "$project" -f "$file")
: "${S3_ACCESS_KEY:=ctxtier-dev}" "${S3_SECRET_KEY:=ctxtier-dev-secret}" "${S3_BUCKET:=ctxtier}"
export S3_ACCESS_KEY S3_SECRET_KEY S3_BUCKET
export CTXTIER_PORT_PREFIX=${CTXTIER_PORT_PREFIX:-274}
P=$CTXTIER_PORT_PREFIX
# The nodes' shared cluster secret: $CTXTIER_CLUSTER_SECRET, else the one
# drawn on the first run and kept (0600, git-ignored) in cluster-data/, so
# that nodes restarted on their volumes get the same one.
secret_file=cluster-data/compose-$project.secret
if [[ -z ${CTXTIER_CLUSTER_SECRET:-} ]]; then
	if [[ ! -s $secret_file ]]; then
		mkdir -p cluster-data
		(umask 077 && head -c 32 /dev/urandom | base64 | tr -d '/+=\n' >"$secret_file")
		NEW_CLUSTER_SECRET=1
	fi
	CTXTIER_CLUSTER_SECRET=$(<"$secret_file")
fi
export CTXTIER_CLUSTER_SECRET

docker info >/dev/null 2>&1 || { echo "up.sh: no Docker engine answers (docker info failed)" >&2; exit 1; }
"${compose[@]}" up -d s3
s3() { curl -sS -m 5 -o /dev/null -w '%{http_code}' -X "$1" --aws-sigv4 "aws:amz:us-east-1:s3" \
	--user "$S3_ACCESS_KEY:$S3_SECRET_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "http://127.0.0.1:${P}70$2" || true; }
for _ in $(seq 60); do [[ $(s3 GET /) == 200 ]] && break; sleep 0.5; done
code=$(s3 PUT "/$S3_BUCKET")
[[ $code == 200 || $code == 409 ]] || { echo "up.sh: creating bucket $S3_BUCKET: status $code" >&2; exit 1; }
"${compose[@]}" up -d
for port in "${P}01" "${P}11" "${P}21"; do
	for i in $(seq 120); do
		curl -sf -m 2 -o /dev/null "http://127.0.0.1:$port/healthz" && break
		((i < 120)) || { echo "up.sh: node on 127.0.0.1:$port does not answer /healthz" >&2; "${compose[@]}" ps >&2; exit 1; }
		sleep 0.5
	done
done
echo "up.sh: cluster up; HTTP on 127.0.0.1:${P}01, :${P}11, :${P}21; S3 on 127.0.0.1:${P}70 (bucket $S3_BUCKET)"
if [[ -n ${NEW_CLUSTER_SECRET:-} ]]; then
	echo "up.sh: drew the cluster secret into $secret_file (ctxctl: CTXTIER_CLUSTER_SECRET_FILE=$secret_file)"
fi
