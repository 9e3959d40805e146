#!/usr/bin/env bash
# ensure-wrk.sh — make sure wrk, the HTTP load generator of the bench's API-key figure, is
# there (bench/, `make bench`).
#
# Usage: scripts/ensure-wrk.sh
#
# Does nothing when wrk is already on PATH. Otherwise, as root, installs Debian's `wrk`
# package with apt-get (quietly; apt's output is shown only if it fails). Fails loudly, with
# a non-zero exit, when wrk is missing and cannot be installed; the bench then falls back to
# its Go load generator and says so.
set -euo pipefail

die() { echo "ensure-wrk: $*" >&2; exit 1; }

if command -v wrk >/dev/null 2>&1; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  die "wrk is missing; install it as root: apt-get update && apt-get install -y wrk"
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "ensure-wrk: installing Debian's wrk package" >&2
if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wrk; } >"$log" 2>&1; then
  cat "$log" >&2
  die "apt-get could not install wrk (output above)"
fi
command -v wrk >/dev/null 2>&1 || die "apt-get installed wrk but it is still not on PATH"
echo "ensure-wrk: $(wrk --version 2>&1 | head -n1)" >&2
