#!/usr/bin/env bash
# Installs the pinned vLLM engine set (python/requirements-engines.txt) into
# the repository's .venv/ for `make test-engines`, bounded in disk:
#   - it first checks the free space where the venv and pip's temporary files
#     live, and stops with a clear message (exit 3) when the set cannot fit,
#     instead of failing half-way with "No space left on device";
#   - it installs with --no-cache-dir (pip's cache would hold a second copy of
#     every wheel) and in three groups (the CUDA runtime libraries, torch, the
#     rest), so that at most one group's wheels wait on disk at a time.
# Usage: scripts/engines-venv.sh VENV REQUIREMENTS STAMP
# Exit: 0 installed (or already installed: STAMP exists), 3 not enough disk,
# anything else: pip's failure.
# CTXTIER_ENGINES_NEED_GIB overrides the free space asked for (default 8:
# about 6.2 GiB installed; 6.6 GiB at the peak of a fresh install, measured).
set -euo pipefail

venv=${1:?usage: engines-venv.sh VENV REQUIREMENTS STAMP}
reqs=${2:?usage: engines-venv.sh VENV REQUIREMENTS STAMP}
stamp=${3:?usage: engines-venv.sh VENV REQUIREMENTS STAMP}
need_gib=${CTXTIER_ENGINES_NEED_GIB:-8}

if [ -e "$stamp" ]; then
	exit 0
fi

# free_gib DIR prints the GiB free on DIR's filesystem (rounded down).
free_gib() {
	df -Pk "$1" | awk 'NR==2 { printf "%d\n", $4 / 1048576 }'
}

tmp=${TMPDIR:-/tmp}
for dir in "$venv" "$tmp"; do
	have=$(free_gib "$dir")
	if [ "$have" -lt "$need_gib" ]; then
		echo "engines: only $have GiB free on $dir's filesystem; the pinned vllm/torch set needs about $need_gib GiB" >&2
		echo "engines: ($reqs, installed with --no-cache-dir; see docs/engines.md). Free some space and rerun." >&2
		exit 3
	fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grep -v -e '^#' -e '^[[:space:]]*$' "$reqs" >"$work/all"
grep -i -E '^(nvidia|cuda)-' "$work/all" >"$work/1-cuda" || true
grep -i -E '^torch==' "$work/all" >"$work/2-torch" || true
grep -v -i -E '^(nvidia|cuda)-|^torch==' "$work/all" >"$work/3-rest" || true

for group in "$work/1-cuda" "$work/2-torch" "$work/3-rest"; do
	[ -s "$group" ] || continue
	echo "engines: installing $(wc -l <"$group") pinned packages (${group##*/[0-9]-}) into $venv"
	"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir --no-deps -r "$group"
done

rm -f "$venv"/.ctxtier-engines-*
touch "$stamp"
