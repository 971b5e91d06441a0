#!/usr/bin/env bash
# The aws cli (pinned, from .venv) against ctxtier's S3 endpoint, run by
# awscli_test.go with AWS (the aws executable), VHOST_ENDPOINT
# (http://localhost:PORT, server domain "localhost"), TLS_ENDPOINT, CA_BUNDLE,
# ACCESS, SECRET, WORK and PYHOOKS (sitecustomize mapping *.localhost to
# loopback). Default settings except addressing_style (virtual) and, for
# presign, signature_version s3v4.
set -euo pipefail
export AWS_ACCESS_KEY_ID="$ACCESS" AWS_SECRET_ACCESS_KEY="$SECRET" AWS_DEFAULT_REGION=us-east-1
export AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_CA_BUNDLE= PYTHONPATH="$PYHOOKS"
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$WORK/vhost.cfg" <<CFG
[default]
s3 =
    addressing_style = virtual
CFG
cat >"$WORK/presign.cfg" <<CFG
[default]
s3 =
    addressing_style = virtual
    signature_version = s3v4
CFG
vaws() { AWS_CONFIG_FILE="$WORK/vhost.cfg" "$AWS" --endpoint-url "$VHOST_ENDPOINT" "$@"; }

# Virtual-hosted: mb, cp up (5 MiB: below the 8 MiB multipart threshold), ls, cp down, presign, rm, rb.
head -c 5242880 /dev/urandom >"$WORK/up.bin"
key=00000000000c0001
vaws --debug s3 mb s3://cli-vhost 2>"$WORK/debug.log" >/dev/null || fail "mb: $(tail -5 "$WORK/debug.log")"
grep -q "cli-vhost.localhost" "$WORK/debug.log" || fail "mb was not virtual-hosted"
vaws s3 cp "$WORK/up.bin" "s3://cli-vhost/$key" >/dev/null || fail "cp up"
vaws s3 ls "s3://cli-vhost" | grep -q "5242880 $key" || fail "ls: $(vaws s3 ls s3://cli-vhost)"
vaws s3 cp "s3://cli-vhost/$key" "$WORK/down.bin" >/dev/null || fail "cp down"
cmp -s "$WORK/up.bin" "$WORK/down.bin" || fail "downloaded bytes differ"
url="$(AWS_CONFIG_FILE="$WORK/presign.cfg" "$AWS" --endpoint-url "$VHOST_ENDPOINT" s3 presign "s3://cli-vhost/$key" --expires-in 300)"
[[ "$url" == http://cli-vhost.localhost:*X-Amz-Signature=* ]] || fail "presigned URL is not virtual-hosted SigV4: $url"
"$PYTHON" -c 'import sys, urllib.request; sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1]).read())' "$url" >"$WORK/presigned.bin" ||
	fail "presigned GET"
cmp -s "$WORK/up.bin" "$WORK/presigned.bin" || fail "presigned GET returned other bytes"
vaws s3 rm "s3://cli-vhost/$key" >/dev/null || fail "rm"
vaws s3 rb s3://cli-vhost >/dev/null || fail "rb"
echo "virtual-hosted: mb, cp, ls, cp, presign (SigV4), rm, rb ok"

# HTTPS: the cli's default trailing checksum (path style: the endpoint is an IP).
AWS_CONFIG_FILE=/dev/null "$AWS" --endpoint-url "$TLS_ENDPOINT" --ca-bundle "$CA_BUNDLE" s3 cp "$WORK/up.bin" "s3://team-a/00000000000c0002" >/dev/null ||
	fail "cp over https"
AWS_CONFIG_FILE=/dev/null "$AWS" --endpoint-url "$TLS_ENDPOINT" --ca-bundle "$CA_BUNDLE" s3 cp "s3://team-a/00000000000c0002" "$WORK/tls.bin" >/dev/null ||
	fail "cp down over https"
cmp -s "$WORK/up.bin" "$WORK/tls.bin" || fail "https round trip differs"
echo "https: cp up and down ok"
"$AWS" --version
