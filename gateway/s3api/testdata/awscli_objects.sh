#!/usr/bin/env bash
# The aws cli (pinned, from .venv) with default settings against an object
# namespace, run by objects_test.go with AWS (the aws executable), ENDPOINT
# (http://127.0.0.1:PORT: path style, the cli's choice for an IP endpoint),
# ACCESS, SECRET, WORK and BIG_MIB. Checks `s3 cp` of a BIG_MIB file up and
# down (multipart at the default 8 MiB threshold), `s3 sync` twice (the
# second transfers nothing), and `s3 presign` with SigV4.
set -euo pipefail
export AWS_ACCESS_KEY_ID="$ACCESS" AWS_SECRET_ACCESS_KEY="$SECRET" AWS_DEFAULT_REGION=us-east-1
export AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_CONFIG_FILE=/dev/null AWS_CA_BUNDLE=
fail() { echo "FAIL: $*" >&2; exit 1; }
a() { "$AWS" --endpoint-url "$ENDPOINT" "$@"; }

a s3 mb s3://cli-objects >/dev/null || fail "mb"
head -c $((BIG_MIB << 20)) /dev/urandom >"$WORK/big.bin"
t0=$(date +%s.%N)
a s3 cp "$WORK/big.bin" "s3://cli-objects/models/big file.bin" >/dev/null || fail "cp up"
t1=$(date +%s.%N)
etag="$(a s3api head-object --bucket cli-objects --key "models/big file.bin" --query ETag --output text)"
parts=$(((BIG_MIB + 7) / 8))
[[ "$etag" == *"-$parts\""* ]] || fail "ETag $etag is not a $parts-part multipart ETag"
a s3 cp "s3://cli-objects/models/big file.bin" "$WORK/big.back" >/dev/null || fail "cp down"
t2=$(date +%s.%N)
cmp -s "$WORK/big.bin" "$WORK/big.back" || fail "downloaded bytes differ"
rate() { awk -v n="$BIG_MIB" -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", n / (b - a) }'; }
echo "cp $BIG_MIB MiB: up $(rate "$t0" "$t1") MiB/s ($parts parts), down $(rate "$t1" "$t2") MiB/s"

mkdir -p "$WORK/tree/a/b" "$WORK/tree/c"
for f in a/one a/b/two c/three "c/with space"; do head -c $((RANDOM * 7)) /dev/urandom >"$WORK/tree/$f"; done
: >"$WORK/tree/empty"
a s3 sync --no-progress "$WORK/tree" s3://cli-objects/tree >"$WORK/sync1" || fail "sync"
[[ $(grep -c '^upload:' "$WORK/sync1") == 5 ]] || fail "first sync: $(cat "$WORK/sync1")"
a s3 sync --no-progress "$WORK/tree" s3://cli-objects/tree >"$WORK/sync2" || fail "second sync"
[[ ! -s "$WORK/sync2" ]] || fail "second sync transferred: $(cat "$WORK/sync2")"
a s3 sync s3://cli-objects/tree "$WORK/tree.back" >/dev/null || fail "sync down"
diff -r "$WORK/tree" "$WORK/tree.back" || fail "synced tree differs"
echo "sync: 5 uploads, then nothing; down identical"

cat >"$WORK/v4.cfg" <<CFG
[default]
s3 =
    signature_version = s3v4
CFG
url="$(AWS_CONFIG_FILE="$WORK/v4.cfg" a s3 presign "s3://cli-objects/tree/c/with space" --expires-in 300)"
[[ "$url" == *X-Amz-Signature=* ]] || fail "presigned URL is not SigV4: $url"
curl -sf "$url" -o "$WORK/presigned" || fail "presigned GET"
cmp -s "$WORK/tree/c/with space" "$WORK/presigned" || fail "presigned GET returned other bytes"
echo "presign (SigV4): ok"

a s3 rm --recursive s3://cli-objects >/dev/null || fail "rm --recursive"
a s3 rb s3://cli-objects >/dev/null || fail "rb"
"$AWS" --version
