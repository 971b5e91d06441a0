#!/usr/bin/env bash
# test-deps.sh installs, or checks, what `make test` needs beyond Go:
#
#   curl      cmd/ctxd TestAuth* (curl --aws-sigv4)            Debian: curl
#   s3cmd     gateway/s3api TestS3CLI                         Debian: s3cmd
#   ip        internal/netns, cmd/ctxd TestPartition*          Debian: iproute2
#   chromium  cmd/ctxd TestConsoleBrowser (headless)          Debian: chromium
#   rclone    gateway/s3api TestRclone*                       Debian: rclone
#   versitygw tiers/s3 TestVersity*, cmd/ctxd TestS3Tier*,    scripts/versitygw.sh install
#             cmd/ctxbench TestWeightsBench*
#   ../shared/traces  the trace replays (beside the repository; not installable)
#
# As root with apt-get (CI, the dev containers) it installs what is missing;
# otherwise it lists what is missing and how to get it, and the tests that
# need it skip (or fail, under CI=true or `make test STRICT=1`).
# The netns partition tests also need root (CAP_NET_ADMIN); without it they
# are reported here too.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
declare -A pkg=([curl]=curl [s3cmd]=s3cmd [ip]=iproute2 [chromium]=chromium [rclone]=rclone)
need_apt=()
for cmd in curl s3cmd ip chromium rclone; do
	command -v "$cmd" >/dev/null 2>&1 || need_apt+=("${pkg[$cmd]}")
done
if ((${#need_apt[@]})); then
	if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
		echo "test-deps: installing ${need_apt[*]} with apt-get"
		apt-get update -qq >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
	else
		missing+=("Debian packages ${need_apt[*]}: apt-get install ${need_apt[*]}")
	fi
fi

# versitygw is built from source by go (cached after the first time).
if ! scripts/versitygw.sh install; then
	missing+=("versitygw: scripts/versitygw.sh install failed (it needs the Go module proxy)")
fi

[[ -d ../shared/traces ]] || missing+=("shared traces: ../shared/traces beside the repository (not installable)")
[[ $(id -u) == 0 ]] || missing+=("root (CAP_NET_ADMIN) for the network-namespace partition tests")

if ((${#missing[@]})); then
	echo "test-deps: MISSING — the tests that need these will skip (fail under CI=true or STRICT=1):"
	printf '  - %s\n' "${missing[@]}"
	if [[ ${CI:-} == true || ${CTXTIER_STRICT:-0} != 0 ]]; then
		exit 1
	fi
else
	echo "test-deps: curl, s3cmd, ip, chromium, rclone, versitygw, shared traces and root all present"
fi
