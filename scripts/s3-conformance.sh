#!/usr/bin/env bash
# s3-conformance.sh runs versitygw's S3 conformance suite (`versitygw test`,
# Apache-2.0, built from the Go module by scripts/versitygw.sh) against a real
# single-node ctxd, and writes a per-operation passed/failed summary.
#
#   scripts/s3-conformance.sh [SUITE]     # SUITE: full-flow (default) or one test name
#   scripts/s3-conformance.sh --gate FILE # each test named in FILE must pass (exit 1 otherwise)
#
# In --gate mode each test runs as its own `versitygw test NAME`, and a test
# that fails can leave its bucket behind, which makes later tests that reuse
# the name fail too: read the first failure.
# Environment: OUT (default ./s3-conformance-out) receives suite.log (the
# suite's own output), summary.md (per operation) and ctxd.log; HOST_STYLE=1
# runs the suite with virtual-hosted-style requests (ctxd --s3-domain
# localhost, endpoint http://localhost:PORT): it needs BUCKET.localhost to
# resolve to loopback (systemd-resolved or nss-myhostname do; plain glibc and
# Go's own resolver do not). The script exits 0
# when the suite ran, whatever it found: the failures are the report (except
# with --gate).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

GATE=""
if [[ "${1:-}" == --gate ]]; then
	GATE="${2:?usage: --gate FILE}"
	GATE="$(cd "$(dirname "$GATE")" && pwd)/$(basename "$GATE")"
	mapfile -t SUITES < <(grep -v '^#' "$GATE" | grep -v '^$')
	SUITE="gate ($(basename "$GATE"), ${#SUITES[@]} tests)"
else
	SUITE="${1:-full-flow}"
	SUITES=("$SUITE")
fi
OUT="${OUT:-$PWD/s3-conformance-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

scripts/versitygw.sh install >/dev/null
VGW="$(scripts/versitygw.sh path)"
BIN="$(mktemp -d)"
DATA="$(mktemp -d)"
cleanup() {
	if [[ -n "${CTXD_PID:-}" ]]; then kill "$CTXD_PID" 2>/dev/null || true; wait "$CTXD_PID" 2>/dev/null || true; fi
	rm -rf "$BIN" "$DATA"
}
trap cleanup EXIT
go build -trimpath -o "$BIN/" ./cmd/ctxd ./cmd/ctxctl

# Free loopback ports: bind :0 and read back what the kernel gave.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
S3PORT=$(port)
keys="$("$BIN/ctxctl" keys create --namespaces '*' --description conformance --data-dir "$DATA" 2>/dev/null)"
ID="$(awk '/^access_key_id/{print $2}' <<<"$keys")"
SECRET="$(awk '/^secret_access_key/{print $2}' <<<"$keys")"

domain_args=()
host_args=()
endpoint="http://127.0.0.1:$S3PORT"
if [[ "${HOST_STYLE:-0}" == 1 ]]; then
	domain_args=(--s3-domain localhost)
	host_args=(--host-style)
	endpoint="http://localhost:$S3PORT"
fi
"$BIN/ctxd" --data-dir "$DATA" --listen "127.0.0.1:$(port)" --http-listen "127.0.0.1:$(port)" --resp-listen "" \
	--raft-listen "127.0.0.1:$(port)" --peer-listen "127.0.0.1:$(port)" --s3-admin-listen "127.0.0.1:$S3PORT" \
	--dram-capacity 1GiB --log-level warn "${domain_args[@]}" >"$OUT/ctxd.log" 2>&1 &
CTXD_PID=$!
for _ in $(seq 1 100); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$S3PORT") 2>/dev/null; then break; fi
	sleep 0.1
done

echo "s3-conformance: versitygw test $SUITE against ctxd at $endpoint"
start=$(date +%s)
# Some tests run ./versitygw (its IAM admin commands) from the working
# directory: give them the binary, so they fail for ctxd's reasons (no IAM
# API), not for a missing file.
ln -s "$VGW" "$DATA/versitygw"
cd "$DATA"
# AWS_CA_BUNDLE breaks tools built on the AWS SDK v2.
: >"$OUT/suite.log"
for t in "${SUITES[@]}"; do
	env -u AWS_CA_BUNDLE "$VGW" test --access "$ID" --secret "$SECRET" --endpoint "$endpoint" \
		"${host_args[@]}" "$t" >>"$OUT/suite.log" 2>&1 || true
done
elapsed=$(($(date +%s) - start))

# Per operation: a test named Op_case counts for Op. Each failure is put in
# the first class its line matches: a key that is not a block name (object
# namespaces: not built yet), a 501 NotImplemented, versitygw's own IAM admin
# API (which ctxd does not serve), or "other" (read suite.log).
sed 's/\x1b\[[0-9;]*m//g' "$OUT/suite.log" | awk -v secs="$elapsed" -v suite="$SUITE" '
	/^(PASS|FAIL|SKIP) / {
		st=$1; name=$2; sub(/:$/, "", name); op=name; sub(/_.*/, "", op)
		if (!(op in seen)) { seen[op]=1; ops[++k]=op }
		c[op, st]++; tot[st]++
		if (st == "FAIL") {
			cls = "other"
			if ($0 ~ /is not a block name/) cls = "keys"
			else if ($0 ~ /NotImplemented|StatusCode: 501|instead got 501/) cls = "n501"
			else if ($0 ~ /exit status 1/ || name ~ /^IAM/) cls = "iam"
			f[op, cls]++; ftot[cls]++
			if (cls == "other") others[op] = others[op] (others[op] == "" ? "" : ", ") name
		}
	}
	END {
		printf "versitygw test %s: %d passed, %d failed, %d skipped (%d s)\n\n", suite, tot["PASS"], tot["FAIL"], tot["SKIP"], secs
		printf "failures: %d non-block keys, %d not implemented (501), %d IAM admin API, %d other\n\n", ftot["keys"], ftot["n501"], ftot["iam"], ftot["other"]
		print "| operation | passed | failed | of which: non-block key | 501 | IAM API | other |"
		print "| --- | --- | --- | --- | --- | --- | --- |"
		for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (ops[j] < ops[i]) { t = ops[i]; ops[i] = ops[j]; ops[j] = t }
		for (i = 1; i <= k; i++) {
			o = ops[i]
			printf "| %s | %d | %d | %d | %d | %d | %d |\n", o, c[o, "PASS"], c[o, "FAIL"], f[o, "keys"], f[o, "n501"], f[o, "iam"], f[o, "other"]
		}
		print ""
		for (i = 1; i <= k; i++) { o = ops[i]; if (others[o] != "") printf "- %s, other failures: %s\n", o, others[o] }
	}' >"$OUT/summary.md"
head -1 "$OUT/summary.md"
echo "s3-conformance: summary in $OUT/summary.md, suite output in $OUT/suite.log"
if [[ -n "$GATE" ]]; then
	missing=0
	sed 's/\x1b\[[0-9;]*m//g' "$OUT/suite.log" >"$OUT/suite.txt"
	for t in "${SUITES[@]}"; do
		if ! grep -qx "PASS $t" "$OUT/suite.txt"; then
			echo "s3-conformance: gate: $t did not pass:" >&2
			grep "^FAIL $t" "$OUT/suite.txt" >&2 || true
			missing=$((missing + 1))
		fi
	done
	if ((missing > 0)); then
		echo "s3-conformance: gate: $missing of ${#SUITES[@]} tests failed" >&2
		exit 1
	fi
	echo "s3-conformance: gate: all ${#SUITES[@]} tests passed"
fi
