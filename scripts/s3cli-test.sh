#!/usr/bin/env bash
# s3cli-test.sh drives a running ctxtier S3 endpoint with s3cmd (Debian's
# package): list buckets, make a bucket, put, list, get (byte-compared),
# a replacing re-put, a 50 MiB multipart put/get, delete, and remove the bucket.
#
#   S3_ENDPOINT=127.0.0.1:9000 S3_ACCESS_KEY=CTX... S3_SECRET_KEY=... scripts/s3cli-test.sh
#
# Optional: S3_BUCKET (default s3cli-<pid>; created and removed by the script);
# S3_HOST_BUCKET, s3cmd's host_bucket (default S3_ENDPOINT: path style), e.g.
# '%(bucket)s.s3.example.com:9000' for virtual-hosted requests to a ctxd
# started with --s3-domain s3.example.com.
# Installs s3cmd with apt-get when it is missing (needs root, as in CI).
set -euo pipefail

: "${S3_ENDPOINT:?set S3_ENDPOINT=host:port}"
: "${S3_ACCESS_KEY:?set S3_ACCESS_KEY}"
: "${S3_SECRET_KEY:?set S3_SECRET_KEY}"
BUCKET="${S3_BUCKET:-s3cli-$$}"

if ! command -v s3cmd >/dev/null 2>&1; then
	echo "s3cli-test: s3cmd missing; installing it with apt-get" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq s3cmd >/dev/null
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cfg="$work/s3cfg"
cat >"$cfg" <<CFG
[default]
access_key = ${S3_ACCESS_KEY}
secret_key = ${S3_SECRET_KEY}
host_base = ${S3_ENDPOINT}
host_bucket = ${S3_HOST_BUCKET:-$S3_ENDPOINT}
use_https = False
signature_v2 = False
bucket_location = us-east-1
check_ssl_certificate = False
CFG
s3() { s3cmd --config="$cfg" --no-progress "$@"; }

fail() { echo "s3cli-test: FAIL: $*" >&2; exit 1; }
pass=0
ok() { pass=$((pass + 1)); echo "s3cli-test: ok: $*"; }

# A bucket made through S3 is an object namespace: any key, PUT replaces.
key="dir/not a block ü.bin"
big=big.bin
head -c 2097152 /dev/urandom >"$work/block"
head -c 2097152 /dev/urandom >"$work/block2"
# 50 MiB: s3cmd's default 15 MiB multipart chunk makes it a 4-part upload.
head -c 52428800 /dev/urandom >"$work/big"

s3 mb "s3://$BUCKET" >/dev/null || fail "mb"
ok "mb s3://$BUCKET"
if [[ -n "${S3_HOST_BUCKET:-}" ]]; then
	want="${S3_HOST_BUCKET//%(bucket)s/$BUCKET}"
	s3 --debug ls "s3://$BUCKET" 2>"$work/debug" >/dev/null || fail "ls (debug)"
	grep -q "$want" "$work/debug" || fail "requests do not name $want: $(grep -i host "$work/debug" | head -3)"
	ok "requests are virtual-hosted ($want)"
fi
s3 ls >"$work/ls" || fail "ls"
grep -q "s3://$BUCKET" "$work/ls" || fail "ls does not show the new bucket: $(cat "$work/ls")"
ok "ls lists buckets"
s3 put "$work/block" "s3://$BUCKET/$key" >/dev/null || fail "put"
ok "put 2 MiB under an arbitrary key"
s3 put "$work/block2" "s3://$BUCKET/$key" >/dev/null || fail "replacing put"
ok "re-put with other bytes replaces"
s3 ls "s3://$BUCKET/dir/" >"$work/ls" || fail "ls bucket"
grep -q "2097152 .*s3://$BUCKET/$key" "$work/ls" || fail "ls bucket: $(cat "$work/ls")"
ok "ls bucket shows the key with its size"
s3 get --force "s3://$BUCKET/$key" "$work/back" >/dev/null || fail "get"
cmp -s "$work/block2" "$work/back" || fail "get returned other bytes"
ok "get returns the replacing bytes"
s3 put "$work/big" "s3://$BUCKET/$big" >"$work/out" 2>&1 || fail "put 50 MiB: $(cat "$work/out")"
ok "put 50 MiB (multipart, default chunk size)"
s3 get --force "s3://$BUCKET/$big" "$work/bigback" >"$work/out" 2>&1 || fail "get 50 MiB: $(cat "$work/out")"
cmp -s "$work/big" "$work/bigback" || fail "50 MiB get returned other bytes"
ok "get 50 MiB returns the same bytes"
s3 info "s3://$BUCKET/$key" >"$work/info" || fail "info"
grep -q "$(md5sum <"$work/block2" | cut -d' ' -f1)" "$work/info" || fail "info: ETag is not the MD5: $(cat "$work/info")"
ok "info shows the MD5 ETag"
if s3 rb "s3://$BUCKET" >"$work/err" 2>&1; then fail "rb of a non-empty bucket succeeded"; fi
grep -q "BucketNotEmpty" "$work/err" || fail "rb non-empty: $(cat "$work/err")"
ok "rb refused while not empty"
s3 del "s3://$BUCKET/$key" >/dev/null || fail "del"
s3 del "s3://$BUCKET/$big" >/dev/null || fail "del big"
[ -z "$(s3 ls -r "s3://$BUCKET")" ] || fail "bucket not empty after del"
ok "del removes the objects"
s3 rb "s3://$BUCKET" >/dev/null || fail "rb"
ok "rb"
echo "s3cli-test: $pass passed, 0 failed"
