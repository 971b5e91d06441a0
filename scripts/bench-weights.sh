#!/usr/bin/env bash
# Push and pull a synthetic checkpoint file through one throwaway ctxd's S3
# endpoint with `ctxctl weights`, and, in the same run, a single-stream curl
# GET of the same object (the baseline): prints MiB/s of each and the pull's
# ratio to curl. SIZE_MIB (default 1024), PARALLEL (4), CHUNK_MIB (16).
set -euo pipefail
SIZE_MIB=${SIZE_MIB:-1024}
PARALLEL=${PARALLEL:-4}
CHUNK_MIB=${CHUNK_MIB:-16}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/bin/" ./cmd/ctxd ./cmd/ctxctl
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
s3=127.0.0.1:$(port)
mkdir -p "$work/data" "$work/ckpt"
key=$("$work/bin/ctxctl" keys create --namespaces '*' --data-dir "$work/data" --json)
ak=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["access_key_id"])' "$key")
sk=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["secret_access_key"])' "$key")
"$work/bin/ctxd" --data-dir "$work/data" --listen 127.0.0.1:0 --http-listen 127.0.0.1:$(port) --resp-listen 127.0.0.1:0 \
  --peer-listen 127.0.0.1:0 --raft-listen 127.0.0.1:$(port) --s3-admin-listen "$s3" \
  --dram-capacity $(( SIZE_MIB * 2 + 256 ))MiB --log-level warn 2>"$work/ctxd.log" &
pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://$s3/" && break; sleep 0.1; done
head -c $(( SIZE_MIB << 20 )) /dev/urandom >"$work/ckpt/model.safetensors"
now() { date +%s.%N; }
flags=(--s3 "$s3" --access-key "$ak" --secret "$sk" --parallel "$PARALLEL" --chunk-mib "$CHUNK_MIB" --progress=false)
t0=$(now); "$work/bin/ctxctl" weights push "$work/ckpt" --name bench/model "${flags[@]}" >/dev/null; t1=$(now)
"$work/bin/ctxctl" weights pull bench/model "$work/pulled" "${flags[@]}" >/dev/null; t2=$(now)
cmp "$work/ckpt/model.safetensors" "$work/pulled/model.safetensors"
curl -sSf --aws-sigv4 aws:amz:us-east-1:s3 --user "$ak:$sk" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -o /dev/null "http://$s3/weights/bench/model/model.safetensors"; t3=$(now)
python3 - "$SIZE_MIB" "$t0" "$t1" "$t2" "$t3" "$PARALLEL" "$CHUNK_MIB" <<'PY'
import sys
mib, t0, t1, t2, t3 = int(sys.argv[1]), *map(float, sys.argv[2:6])
push, pull, curl = mib / (t1 - t0), mib / (t2 - t1), mib / (t3 - t2)
print(f"size_mib={mib} parallel={sys.argv[6]} chunk_mib={sys.argv[7]} push_mib_s={push:.0f} pull_mib_s={pull:.0f} "
      f"curl_get_mib_s={curl:.0f} pull_ratio_vs_curl_get={pull / curl:.2f}")
PY
