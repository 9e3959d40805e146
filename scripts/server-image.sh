#!/usr/bin/env bash
# server-image.sh — build terdut-server's image from the Dockerfile (`make image`).
#
# Usage: scripts/server-image.sh [IMAGE]     (default terdut-server:dev)
#
# TERDUT_IMAGE_OFFLINE says where the Dockerfile's bases come from:
#   0     the registry: the Dockerfile as it is (golang builder, distroless static).
#   1     this machine: bases made here from Debian's packages, no registry at all.
#   auto  (default) 0 when the engine already holds both default bases, else 1. Only the
#         engine is asked; nothing is pulled to find out.
# The offline build uses the same Dockerfile with build arguments and the classic builder:
#   BUILDER_IMAGE=terdut-build/shell:1   busybox (Debian's busybox-static), for the RUN lines;
#   RUNTIME_IMAGE=terdut-build/static:2  /etc/passwd with nonroot (65532), CA certificates
#                                        (Debian's ca-certificates as the package ships them,
#                                        never this host's local CAs), time zones, /tmp; no shell
#                                        (:1 held the host's merged store);
#   PREBUILT=1 and a context holding a terdut-server built here with CGO_ENABLED=0 and the
#   Dockerfile's flags.
# Both bases are imported once and reused. Needs a Docker engine (scripts/docker-engine.sh).
#
# scripts/server-image.sh --runtime-root DIR lays the runtime base's files out in DIR and
# stops, with no engine: what the image's root holds, for a test to read.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
image=${1:-terdut-server:dev}
mode=${TERDUT_IMAGE_OFFLINE:-auto}
builder=terdut-build/shell:1
runtime=terdut-build/static:2

die() { echo "server-image: $*" >&2; exit 1; }
say() { echo "server-image: $*" >&2; }

# runtime_root DIR: the runtime base's files: Debian's CA certificates as the package ships
# them, time zones, the nonroot user, /tmp; no shell. The CA bundle is the package's own
# certificates, never the build host's merged store (/etc/ssl/certs/ca-certificates.crt),
# which also holds whatever CAs this machine trusts locally (a proxy's, a company's): those
# must not become trusted by every install of the image.
runtime_root() {
  local root=$1 certs
  dpkg -s ca-certificates >/dev/null 2>&1 || "$repo/scripts/apt-install.sh" ca-certificates
  [[ -d /usr/share/zoneinfo ]] || "$repo/scripts/apt-install.sh" tzdata
  certs=$(dpkg -L ca-certificates | grep -E '^/usr/share/ca-certificates/mozilla/[^/]+\.crt$' | LC_ALL=C sort)
  [[ -n $certs ]] || die "the ca-certificates package lists no certificate under /usr/share/ca-certificates/mozilla"
  if dpkg --verify ca-certificates 2>/dev/null | grep -q '/usr/share/ca-certificates/mozilla/'; then
    die "the ca-certificates package's certificates were changed on this machine (dpkg --verify ca-certificates): reinstall it"
  fi
  mkdir -p "$root"/etc/ssl/certs "$root"/usr/share "$root"/tmp "$root"/home/nonroot "$root"/root
  while IFS= read -r f; do cat "$f"; done <<<"$certs" >"$root/etc/ssl/certs/ca-certificates.crt"
  cp -a /usr/share/zoneinfo "$root/usr/share/"
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$root/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'nonroot:x:65532:' >"$root/etc/group"
  echo 'hosts: files dns' >"$root/etc/nsswitch.conf"
  chmod 1777 "$root/tmp"
  chmod 700 "$root/root"
}

if [[ ${1:-} == --runtime-root ]]; then
  [[ -n ${2:-} ]] || die "usage: scripts/server-image.sh --runtime-root DIR"
  runtime_root "$2"
  exit 0
fi

docker version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
  die "no Docker engine answers${DOCKER_HOST:+ at $DOCKER_HOST}; start one with: eval \"\$(scripts/docker-engine.sh start)\""

default_arg() { sed -n "s/^ARG $1=//p" "$repo/Dockerfile"; }
if [[ $mode == auto ]]; then
  mode=1
  if docker image inspect "$(default_arg BUILDER_IMAGE)" "$(default_arg RUNTIME_IMAGE)" >/dev/null 2>&1; then
    mode=0
  fi
fi

SECONDS=0
if [[ $mode == 0 ]]; then
  say "building $image from the Dockerfile's own bases"
  docker build -t "$image" "$repo"
  say "built $image in ${SECONDS}s"
  exit 0
fi
[[ $mode == 1 ]] || die "TERDUT_IMAGE_OFFLINE must be 0, 1 or auto, not $mode"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# import NAME DIR: make image NAME from the files in DIR, owned by root unless set.
import() { tar -C "$2" --numeric-owner --owner=0 --group=0 -cf - . | docker import - "$1" >/dev/null; }

if ! docker image inspect "$builder" >/dev/null 2>&1; then
  [[ -x /bin/busybox ]] && /bin/busybox --list >/dev/null 2>&1 && ldd /bin/busybox 2>&1 | grep -q 'not a dynamic' ||
    "$repo/scripts/apt-install.sh" busybox-static
  root=$work/shell
  mkdir -p "$root/bin" "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for cmd in sh cp ln mkdir test \[; do ln -s busybox "$root/bin/$cmd"; done
  import "$builder" "$root"
  say "made $builder (busybox) in ${SECONDS}s"
fi

if ! docker image inspect "$runtime" >/dev/null 2>&1; then
  root=$work/static
  runtime_root "$root"
  tar -C "$root" --numeric-owner --owner=0 --group=0 --exclude=./home/nonroot -cf "$work/static.tar" .
  tar -C "$root" --numeric-owner --owner=65532 --group=65532 -rf "$work/static.tar" ./home/nonroot
  docker import "$work/static.tar" "$runtime" >/dev/null
  say "made $runtime (CA certificates, time zones, nonroot) in ${SECONDS}s"
fi

say "building terdut-server (CGO_ENABLED=0)"
ctx=$work/context
mkdir -p "$ctx"
cp "$repo/go.mod" "$repo/go.sum" "$ctx/"
# The version and revision the binary reports (terdut-server --version, terdut_build_info).
version=$(git -C "$repo" describe --tags --always --dirty 2>/dev/null || echo devel)
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
(cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=$version -X main.revision=$revision" \
  -o "$ctx/terdut-server" ./cmd/terdut-server)
say "building $image from $builder and $runtime"
DOCKER_BUILDKIT=0 docker build -q -f "$repo/Dockerfile" --build-arg "BUILDER_IMAGE=$builder" \
  --build-arg "RUNTIME_IMAGE=$runtime" --build-arg PREBUILT=1 -t "$image" "$ctx" >/dev/null
say "built $image in ${SECONDS}s ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1/1e6}'))"
