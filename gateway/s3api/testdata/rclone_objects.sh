#!/usr/bin/env bash
# rclone (Debian's package) with default settings against an object
# namespace, run by objects_test.go with ENDPOINT, ACCESS, SECRET and WORK:
# `copy` of a tree, `check` comparing sizes and MD5 hashes (rclone reads
# them from the ETags), a second `copy` that transfers nothing, a `copy`
# back, and `purge`.
set -euo pipefail
export RCLONE_CONFIG="$WORK/rclone.conf"
cat >"$RCLONE_CONFIG" <<CFG
[ctx]
type = s3
provider = Other
access_key_id = $ACCESS
secret_access_key = $SECRET
endpoint = $ENDPOINT
region = us-east-1
CFG
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$WORK/src/x/y" "$WORK/src/z"
for f in x/one x/y/two z/three "z/a b ü"; do head -c $((RANDOM * 11)) /dev/urandom >"$WORK/src/$f"; done
head -c 20971520 /dev/urandom >"$WORK/src/x/big"
: >"$WORK/src/empty"
rclone mkdir ctx:rclone-objects || fail "mkdir"
rclone copy "$WORK/src" ctx:rclone-objects/data --stats-one-line -v 2>"$WORK/copy1" || fail "copy: $(cat "$WORK/copy1")"
[[ $(grep -c "Copied (new)" "$WORK/copy1") == 6 ]] || fail "first copy: $(cat "$WORK/copy1")"
rclone check "$WORK/src" ctx:rclone-objects/data 2>"$WORK/check" || fail "check: $(cat "$WORK/check")"
grep -q "0 differences found" "$WORK/check" || fail "check: $(cat "$WORK/check")"
grep -q "6 matching files" "$WORK/check" || fail "check: $(cat "$WORK/check")"
grep -qi "hashes could not be checked\|hash.*not supported" "$WORK/check" && fail "check did not compare hashes: $(cat "$WORK/check")"
rclone copy "$WORK/src" ctx:rclone-objects/data -v 2>"$WORK/copy2" || fail "second copy"
grep -q "There was nothing to transfer" "$WORK/copy2" || fail "second copy transferred: $(cat "$WORK/copy2")"
rclone copy ctx:rclone-objects/data "$WORK/back" || fail "copy back"
diff -r "$WORK/src" "$WORK/back" || fail "copied-back tree differs"
rclone purge ctx:rclone-objects || fail "purge"
echo "rclone copy, check (MD5), second copy nothing, copy back, purge: ok"
rclone version | sed -n 1p
