#!/usr/bin/env bash
# apt-install.sh — install Debian packages quietly, for the ensure-*.sh scripts.
#
# Usage: scripts/apt-install.sh PACKAGE...
#
# As root, runs apt-get update and installs the packages without recommended packages, showing
# apt's output only when it fails. Not as root, fails with the command to run instead.
set -euo pipefail

(($#)) || { echo "usage: scripts/apt-install.sh PACKAGE..." >&2; exit 2; }
pkg="$*"
die() { echo "apt-install: $*" >&2; exit 1; }

if [[ $(id -u) -ne 0 ]]; then
  die "missing Debian package(s) $pkg; install as root: apt-get update && apt-get install -y --no-install-recommends $pkg"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "apt-install: installing Debian package(s) $pkg" >&2
if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"; } >"$log" 2>&1; then
  cat "$log" >&2
  die "apt-get could not install $pkg (output above)"
fi
