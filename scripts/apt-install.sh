#!/usr/bin/env bash
# apt-install.sh — install one of Debian's packages quietly, for the ensure-*.sh scripts.
#
# Usage: scripts/apt-install.sh PACKAGE
#
# As root, runs apt-get update and installs PACKAGE without recommended packages, showing
# apt's output only when it fails. Not as root, fails with the command to run instead.
set -euo pipefail

pkg=${1:?usage: scripts/apt-install.sh PACKAGE}
die() { echo "apt-install: $*" >&2; exit 1; }

if [[ $(id -u) -ne 0 ]]; then
  die "$pkg is missing; install it as root: apt-get update && apt-get install -y $pkg"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "apt-install: installing Debian's $pkg package" >&2
if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$pkg"; } >"$log" 2>&1; then
  cat "$log" >&2
  die "apt-get could not install $pkg (output above)"
fi
