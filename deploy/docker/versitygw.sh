#!/usr/bin/env bash
# versitygw.sh — print the path of a static versitygw binary, building it
# first if the cache lacks it. The build (`go install`, CGO off, ~2.5 min on
# two cores) goes through the Go module proxy only; the binary is cached under
# ${CTXTIER_CACHE:-~/.cache/ctxtier}/bin so later runs reuse it.
set -euo pipefail
VERSITYGW_VERSION=${VERSITYGW_VERSION:-v1.8.0}
cache=${CTXTIER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxtier}/bin
bin="$cache/versitygw-$VERSITYGW_VERSION"
if [[ -x "$bin" ]]; then
	echo "$bin"
	exit 0
fi
GO=${GO:-go}
command -v "$GO" >/dev/null || GO=/usr/local/go/bin/go
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "versitygw.sh: building versitygw $VERSITYGW_VERSION (static, takes a few minutes) into $cache" >&2
CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-trimpath \
	"$GO" install -ldflags='-s -w' "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" >&2
mv "$tmp/versitygw" "$bin"
echo "$bin"
