#!/usr/bin/env bash
# apt-install.sh — install Debian packages quietly, for the ensure-*.sh scripts.
#
# Usage: scripts/apt-install.sh [--no-start] PACKAGE...
#
# As root, runs apt-get update and installs the packages without recommended packages, showing
# apt's output only when it fails. Not as root, fails with the command to run instead.
# --no-start: no service starts during the install: a policy-rc.d (Debian's switch, which
# invoke-rc.d and deb-systemd-invoke obey) denies every start, and is removed afterwards; one
# already there is left as it is. Packages may still enable their units: the caller disables
# them (see ensure-patroni.sh).
set -euo pipefail

no_start=0
if [[ ${1:-} == --no-start ]]; then no_start=1; shift; fi
(($#)) || { echo "usage: scripts/apt-install.sh [--no-start] PACKAGE..." >&2; exit 2; }
pkg="$*"
die() { echo "apt-install: $*" >&2; exit 1; }
# TERDUT_POLICY_RC_D moves the policy file, for the tests only.
policy=${TERDUT_POLICY_RC_D:-/usr/sbin/policy-rc.d}

if [[ $(id -u) -ne 0 ]]; then
  die "missing Debian package(s) $pkg; install as root: apt-get update && apt-get install -y --no-install-recommends $pkg"
fi
log=$(mktemp)
made_policy=
trap 'rm -f "$log" ${made_policy:+"$made_policy"}' EXIT
if ((no_start)) && [[ ! -e $policy ]]; then
  printf '#!/bin/sh\n# apt-install.sh --no-start: no service starts during this install.\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  made_policy=$policy
fi
echo "apt-install: installing Debian package(s) $pkg" >&2
if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"; } >"$log" 2>&1; then
  cat "$log" >&2
  die "apt-get could not install $pkg (output above)"
fi
