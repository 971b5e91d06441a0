#!/usr/bin/env bash
# build.sh KIND — build a FROM-scratch image around a static binary.
#
#   build.sh ctxd       image ${CTXD_IMAGE:-ctxtier/ctxd:dev} from ${CTXD_BIN:-bin/linux/ctxd}
#   build.sh versitygw  image ${S3_IMAGE:-ctxtier/versitygw:v1.8.0} from versitygw.sh's cached build
#
# No base image can be pulled, so the script lays out the whole root file
# system in a temporary build context: the binary, the host's CA bundle, an
# /etc/passwd and /etc/group naming the non-root user (ctxd, uid/gid 65532),
# an empty /data owned by that user and a sticky /tmp. It runs from the
# repository root (make does that) and refuses a dynamically linked binary,
# which could not run in an image with no libc.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=deploy/docker

die() { echo "build.sh: $*" >&2; exit 1; }

kind=${1:-}
case "$kind" in
ctxd)
	bin=${CTXD_BIN:-bin/linux/ctxd}
	tag=${CTXD_IMAGE:-ctxtier/ctxd:dev}
	dockerfile=$here/Dockerfile
	name=ctxd
	version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
	;;
versitygw)
	bin=$("$here/versitygw.sh")
	version=${VERSITYGW_VERSION:-v1.8.0}
	tag=${S3_IMAGE:-ctxtier/versitygw:$version}
	dockerfile=$here/Dockerfile.versitygw
	name=versitygw
	;;
*)
	die "usage: build.sh ctxd|versitygw"
	;;
esac

command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed)"
[[ -x "$bin" ]] || die "$bin: no such executable (for ctxd: CGO_ENABLED=0 go build -o $bin ./cmd/ctxd, or make image)"
# A static ELF has no program interpreter (PT_INTERP); readelf tells.
if command -v readelf >/dev/null; then
	if readelf -l "$bin" 2>/dev/null | grep -q 'Requesting program interpreter'; then
		die "$bin is dynamically linked; build it with CGO_ENABLED=0"
	fi
fi
certs=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
[[ -r "$certs" ]] || die "$certs: no CA bundle on this host (install ca-certificates or set CA_BUNDLE)"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/etc/ssl/certs" "$ctx/data" "$ctx/tmp"
chmod 0755 "$ctx/data"
chmod 1777 "$ctx/tmp"
cp "$certs" "$ctx/etc/ssl/certs/ca-certificates.crt"
cat >"$ctx/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
ctxd:x:65532:65532:ctxtier:/data:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
PASSWD
cat >"$ctx/etc/group" <<'GROUP'
root:x:0:
ctxd:x:65532:
nogroup:x:65534:
GROUP
chmod 0644 "$ctx/etc/passwd" "$ctx/etc/group" "$ctx/etc/ssl/certs/ca-certificates.crt"
cp "$bin" "$ctx/$name"
chmod 0755 "$ctx/$name"
cp "$dockerfile" "$ctx/Dockerfile"

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "build.sh: building $tag from $bin" >&2
# The classic builder needs no BuildKit component; only COPY is used.
DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} docker build -q \
	--build-arg "VERSION=$version" --build-arg "REVISION=$revision" --build-arg "CREATED=$created" \
	-t "$tag" "$ctx" >/dev/null
echo "build.sh: built $tag ($(docker image inspect -f '{{.Size}}' "$tag") bytes)" >&2
