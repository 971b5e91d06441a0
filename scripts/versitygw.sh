#!/usr/bin/env bash
# versitygw.sh installs, starts and stops versitygw (Apache-2.0), the real S3
# server the S3 tier's integration tests and `ctxbench s3tier` run against.
#
#   scripts/versitygw.sh install              # build v1.8.0 once (~2.5 min), cached
#   scripts/versitygw.sh start PORT DIR       # run on 127.0.0.1:PORT over DIR; prints the pid
#   scripts/versitygw.sh stop                 # stop the server `start` started
#   scripts/versitygw.sh path                 # print the cached binary's path
#
# The binary is cached in ${CTXTIER_CACHE:-$HOME/.cache/ctxtier}/bin and
# reused. Credentials: VGW_ACCESS/VGW_SECRET (default ctxtier-test /
# ctxtier-test-secret-key). The Go tests start and stop the server
# themselves; they only need `install`.
set -euo pipefail

VERSION=v1.8.0
CACHE="${CTXTIER_CACHE:-$HOME/.cache/ctxtier}"
BIN="$CACHE/bin/versitygw-$VERSION"
PIDFILE="$CACHE/versitygw.pid"
ACCESS="${VGW_ACCESS:-ctxtier-test}"
SECRET="${VGW_SECRET:-ctxtier-test-secret-key}"

install() {
	if [ -x "$BIN" ]; then
		echo "versitygw: cached at $BIN"
		return
	fi
	mkdir -p "$CACHE/bin"
	echo "versitygw: building $VERSION (about 2.5 minutes)"
	tmp="$(mktemp -d)"
	# Static (CGO off), so the same cached binary also goes into the FROM-scratch image (deploy/docker).
	CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-trimpath go install -ldflags="-s -w" "github.com/versity/versitygw/cmd/versitygw@$VERSION"
	mv "$tmp/versitygw" "$BIN"
	rm -rf "$tmp"
	echo "versitygw: installed $BIN"
}

start() {
	local port="${1:?usage: start PORT DIR}" dir="${2:?usage: start PORT DIR}"
	[ -x "$BIN" ] || install
	mkdir -p "$dir"
	# AWS_CA_BUNDLE breaks tools built on the AWS SDK v2.
	env -u AWS_CA_BUNDLE "$BIN" --port "127.0.0.1:$port" --access "$ACCESS" --secret "$SECRET" posix "$dir" \
		>"$CACHE/versitygw.log" 2>&1 &
	echo $! >"$PIDFILE"
	for _ in $(seq 1 150); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "versitygw: listening on 127.0.0.1:$port (pid $(cat "$PIDFILE"), log $CACHE/versitygw.log)"
			return
		fi
		sleep 0.1
	done
	echo "versitygw: did not start; log:" >&2
	cat "$CACHE/versitygw.log" >&2
	stop
	exit 1
}

stop() {
	[ -f "$PIDFILE" ] || return 0
	local pid
	pid="$(cat "$PIDFILE")"
	kill "$pid" 2>/dev/null || true
	rm -f "$PIDFILE"
	echo "versitygw: stopped pid $pid"
}

case "${1:-}" in
install) install ;;
start) shift; start "$@" ;;
stop) stop ;;
path) echo "$BIN" ;;
*) echo "usage: $0 install | start PORT DIR | stop | path" >&2; exit 2 ;;
esac
