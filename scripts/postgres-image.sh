#!/usr/bin/env bash
# postgres-image.sh — build terdut-test/postgres:15, a PostgreSQL image for the container
# tests, from Debian's packages, with no container registry.
#
# Usage: scripts/postgres-image.sh [IMAGE]     (default $TERDUT_TEST_POSTGRES_IMAGE, else
#                                               terdut-test/postgres:15)
#
# Needs a Docker engine (DOCKER_HOST; see scripts/docker-engine.sh). Steps, each skipped
# when its result exists:
#   1. the root filesystem: debootstrap --variant=minbase --include=postgresql-15 bookworm,
#      trimmed (documentation, manuals, translations, perl, the JIT and its LLVM, apt's
#      caches), kept as a tarball in $TERDUT_IMAGE_CACHE (default /var/cache/terdut-test)
#      so that a new engine imports it again in seconds (about 2.5 minutes to make);
#   2. `docker import` of that tarball as terdut-test/postgres-rootfs:15;
#   3. `docker build` (classic builder, FROM the local image) of scripts/postgres-image/,
#      which adds the entrypoint. The image is reused when it exists and is newer than the
#      entrypoint.
# Installs debootstrap (as root, from Debian's packages) when it is missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image=${1:-${TERDUT_TEST_POSTGRES_IMAGE:-terdut-test/postgres:15}}
base=terdut-test/postgres-rootfs:15
cache=${TERDUT_IMAGE_CACHE:-/var/cache/terdut-test}
tarball=$cache/postgres-15-bookworm-rootfs.tar
mirror=${TERDUT_DEBIAN_MIRROR:-http://deb.debian.org/debian}

die() { echo "postgres-image: $*" >&2; exit 1; }
say() { echo "postgres-image: $*" >&2; }

docker version --format '{{.Server.Version}}' >/dev/null 2>&1 ||
  die "no Docker engine answers${DOCKER_HOST:+ at $DOCKER_HOST}; start one with: eval \"\$(scripts/docker-engine.sh start)\""

# The image is current when it was built from this entrypoint: the build labels it with the
# entrypoint's hash.
sum=$(cat "$here/postgres-image/docker-entrypoint.sh" "$here/postgres-image/Dockerfile" | sha256sum | cut -c1-16)
if [[ $(docker image inspect --format '{{index .Config.Labels "terdut.entrypoint"}}' "$image" 2>/dev/null) == "$sum" ]]; then
  say "reusing $image"
  exit 0
fi

make_rootfs() {
  [[ $(id -u) == 0 ]] || die "making the root filesystem needs root (debootstrap)"
  if ! command -v debootstrap >/dev/null; then
    "$here/apt-install.sh" debootstrap
  fi
  local root
  mkdir -p "$cache"
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  say "debootstrap bookworm with postgresql-15 into $root (a few minutes)"
  local log=$cache/debootstrap.log
  if ! debootstrap --variant=minbase --include=postgresql-15 bookworm "$root" "$mirror" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    die "debootstrap failed (log above, all of it in $log)"
  fi
  # The cluster Debian's package made, and everything the tests never use.
  rm -rf "$root"/var/lib/postgresql/15 "$root"/etc/postgresql/15
  chroot "$root" dpkg --purge --force-depends --force-remove-essential \
    perl perl-modules-5.36 libperl5.36 >>"$log" 2>&1 || true
  rm -rf "$root"/usr/lib/postgresql/15/lib/llvmjit* "$root"/usr/lib/postgresql/15/lib/bitcode
  chroot "$root" dpkg --purge --force-depends libllvm14 libz3-4 >>"$log" 2>&1 || true
  rm -rf "$root"/usr/share/{doc,man,info,locale,i18n,lintian,linda} \
    "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/cache/debconf/*-old \
    "$root"/var/log/* "$root"/usr/share/postgresql/15/man
  mkdir -p "$root"/var/lib/postgresql/data "$root"/docker-entrypoint-initdb.d
  chroot "$root" chown postgres:postgres /var/lib/postgresql/data
  tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$root"
  trap - EXIT
  say "root filesystem: $(du -h "$tarball" | cut -f1) in $tarball"
}

SECONDS=0
if ! docker image inspect "$base" >/dev/null 2>&1; then
  [[ -s $tarball ]] || make_rootfs
  say "importing $tarball as $base"
  docker import "$tarball" "$base" >/dev/null
fi
say "building $image"
DOCKER_BUILDKIT=0 docker build -q --label "terdut.entrypoint=$sum" --build-arg "BASE=$base" \
  -t "$image" "$here/postgres-image" >/dev/null
say "built $image in ${SECONDS}s ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}'))"
